# scripts/setup.sh - shared set-up, sourced by scripts/test, scripts/demo
# (and trial, chaos, hosts, fuzz, memcheck).
#
# 1. Checks the Debian packages of the calling command's set (SETUP_SET) and
#    installs the missing ones with apt-get when running as root, one line
#    each saying what it is for; otherwise prints them and the exact apt-get
#    line and exits 2. A package's service is neither started (a policy-rc.d
#    forbids it during the install) nor left enabled at boot: the demo and
#    the tests start their own redis-server and postgres processes.
# 2. Configures (once) and builds with CMake into $BUILD_DIR (default build/);
#    a second run installs nothing and rebuilds only what changed. The output
#    goes to $BUILD_DIR/setup.log, and its tail is shown only on failure.
#
# Sets (the calling script picks one):
#   build  compilers and libraries: what `cmake --build` needs
#   demo   build + redis-server, curl and openssl (the sale, and --tls's
#          certificates; no Criterion, no
#          PostgreSQL server, no browser); the build leaves the tests out
#   chaos  demo + sqlite3 (its foreign write lock)
#   hosts  demo + postgresql (the sale across hosts keeps its coupons there)
#   test   demo + libcriterion-dev, postgresql, sqlite3, spin (the model
#          checks, tests/model); and promtool,
#          unpacked from the prometheus package into $BUILD_DIR/tools (not
#          installed, so no prometheus service), named in DLOCK_PROMTOOL
#   peers  demo + nodejs (and npm when node came without it), then `npm ci`
#          in bench/peers: the peer drivers of bench/peers.sh at the exact
#          versions of its package-lock.json (needs the npm registry)
#
# Environment: SETUP_SET (default build), BUILD_DIR (default build),
# DLOCK_SANITIZE (''|address|thread), SETUP_EXTRA_PACKAGES (optional
# packages: installed if possible, never fatal), SETUP_NO_BUILD=1 (packages
# only), SETUP_QUIET=1 (less output).
# shellcheck shell=bash

DLOCK_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${BUILD_DIR:-$DLOCK_ROOT/build}"
case "$BUILD_DIR" in /*) ;; *) BUILD_DIR="$DLOCK_ROOT/$BUILD_DIR" ;; esac
SETUP_SET="${SETUP_SET:-build}"
SETUP_LOG="$BUILD_DIR/setup.log"

# package|what it is for: the line printed before it is installed.
SETUP_WHY=(
  "cmake|configures the build"
  "make|runs the build"
  "gcc|compiles the C sources"
  "pkg-config|finds the libraries below for CMake"
  "libhiredis-dev|libdlock's Redis client library (hiredis)"
  "libssl-dev|TLS: OpenSSL, for the bundled hiredis 1.2.0 that libdlock builds where the system's hiredis has no TLS"
  "openssl|the TLS suites and ./scripts/demo --tls make their CA and certificates with it"
  "libsqlite3-dev|the coupon store on SQLite"
  "libpq-dev|the coupon store on PostgreSQL (the client library only)"
  "libmicrohttpd-dev|coupon-server's HTTP server library"
  "libjansson-dev|JSON in coupon-server, coupon-loadtest and dlockctl"
  "uuid-dev|the random lock tokens (libuuid)"
  "libcurl4-openssl-dev|the HTTP client of the tests and coupon-loadtest's checks"
  "redis-server|the redis-server binary: the demo and the tests start their own nodes (its service stays off)"
  "curl|the demo creates its coupon over HTTP"
  "sqlite3|scripts/chaos holds SQLite's write lock from a foreign process"
  "postgresql|the PostgreSQL server binaries: the *_pg suites and scripts/hosts start their own postgres (its service stays off)"
  "libcriterion-dev|the test framework of every suite"
  "libuv1-dev|libuv: the event-loop client's suite (lock_async, lock_tsan_async) and examples/async_uv.c"
  "libevent-dev|libevent: examples/async_event.c (the event-loop client on libevent)"
  "iproute2|network namespaces for scripts/hosts (loadtest_hosts)"
  "haproxy|the proxy scripts/hosts puts in front of the coupon-servers (its service stays off)"
  "chromium|headless browser for app_page, which renders the page and runs its script (746 MB)"
  "gnuplot-nox|the chart of scripts/chaos --chart"
  "valgrind|scripts/memcheck"
  "clang|scripts/fuzz builds the harnesses with libFuzzer"
  "libclang-rt-14-dev|libFuzzer's runtime for scripts/fuzz"
  "nodejs|runs bench/peers.sh's peer drivers (node-redlock, redis-semaphore)"
  "npm|installs the peer drivers' packages (npm ci in bench/peers)"
)

setup_log() { [ "${SETUP_QUIET:-0}" = 1 ] || printf '[setup] %s\n' "$*" >&2; }

setup_fail() { # message: the log's tail, then exit 2
  echo "[setup] $1; the last lines of $SETUP_LOG:" >&2
  tail -n 40 "$SETUP_LOG" >&2 2>/dev/null || true
  exit 2
}

setup_why() { # package -> what it is for
  local e
  for e in "${SETUP_WHY[@]}"; do
    [ "${e%%|*}" = "$1" ] && { printf '%s' "${e#*|}"; return; }
  done
  printf 'asked for by the calling script'
}

setup_set_packages() { # set -> its packages, one a line
  local build=(cmake make gcc pkg-config libhiredis-dev libssl-dev libsqlite3-dev libpq-dev
               libmicrohttpd-dev libjansson-dev uuid-dev libcurl4-openssl-dev)
  local demo=("${build[@]}" redis-server curl openssl)
  case "$1" in
    build) printf '%s\n' "${build[@]}" ;;
    demo) printf '%s\n' "${demo[@]}" ;;
    chaos) printf '%s\n' "${demo[@]}" sqlite3 ;;
    hosts) printf '%s\n' "${demo[@]}" postgresql haproxy ;;
    test) printf '%s\n' "${demo[@]}" libcriterion-dev postgresql sqlite3 spin libuv1-dev libevent-dev ;;
    peers) printf '%s\n' "${demo[@]}" nodejs ;;
    *) echo "setup.sh: unknown SETUP_SET '$1' (build, demo, chaos, hosts, test or peers)" >&2; exit 2 ;;
  esac
}

setup_missing_packages() {
  local p missing=()
  for p in "$@"; do
    # "install ok installed" is the only state in which the package is usable.
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
      missing+=("$p")
    fi
  done
  # Nothing at all when none is missing: printf with no arguments would still
  # print one empty line, which mapfile reads as one (empty) missing package.
  [ "${#missing[@]}" -eq 0 ] || printf '%s\n' "${missing[@]}"
}

# Symlinks that enable a unit at boot, one a line.
setup_enabled_units() {
  find /etc/systemd/system -path '*.wants/*' 2>/dev/null | sort
}

# apt-get install of the packages, run in a subshell: a policy-rc.d (when
# none is there already) forbids starting any service meanwhile, and every
# unit the install enabled at boot is disabled again, saying so.
setup_apt_install() {
  (
    set -e
    local policy=/usr/sbin/policy-rc.d before after link unit
    if [ ! -e "$policy" ]; then
      # 101 = "action forbidden" for invoke-rc.d and deb-systemd-invoke.
      printf '#!/bin/sh\nexit 101\n' >"$policy"
      chmod 755 "$policy"
      trap 'rm -f "$policy"' EXIT
    fi
    before="$(setup_enabled_units)"
    # -o Dpkg::Lock::Timeout: wait for another apt run instead of failing at once.
    DEBIAN_FRONTEND=noninteractive apt-get -o Dpkg::Lock::Timeout=300 install -y -q \
      --no-install-recommends "$@" >>"$SETUP_LOG" 2>&1
    after="$(setup_enabled_units)"
    while IFS= read -r link; do
      [ -n "$link" ] || continue
      unit="$(basename "$link")"
      if systemctl disable --quiet "$unit" >>"$SETUP_LOG" 2>&1 ||
         deb-systemd-helper disable "$unit" >>"$SETUP_LOG" 2>&1; then
        rm -f "$link"
        setup_log "disabled $unit (enabled by its package): nothing runs at boot"
      else
        echo "[setup] could not disable $unit; run: systemctl disable $unit" >&2
      fi
    done < <(comm -13 <(printf '%s\n' "$before") <(printf '%s\n' "$after"))
  )
}

setup_apt_update_once() {
  [ "${setup_updated:-0}" = 1 ] && return 0
  apt-get -o Dpkg::Lock::Timeout=300 update -q >>"$SETUP_LOG" 2>&1 || return 1
  setup_updated=1
}

setup_packages() {
  local missing extra p
  # shellcheck disable=SC2046  # one word per package, none has a space
  mapfile -t missing < <(setup_missing_packages $(setup_set_packages "$SETUP_SET"))
  if [ "${#missing[@]}" -gt 0 ]; then
    if [ "$(id -u)" != 0 ]; then
      echo "missing packages for this command:" >&2
      for p in "${missing[@]}"; do echo "  $p: $(setup_why "$p")" >&2; done
      echo "run as root:  apt-get install -y --no-install-recommends ${missing[*]}" >&2
      exit 2
    fi
    for p in "${missing[@]}"; do setup_log "installing $p: $(setup_why "$p")"; done
    { setup_apt_update_once && setup_apt_install "${missing[@]}"; } ||
      setup_fail "apt-get install failed for: ${missing[*]}"
  fi
  if [ -n "${SETUP_EXTRA_PACKAGES:-}" ]; then
    # shellcheck disable=SC2086
    mapfile -t extra < <(setup_missing_packages $SETUP_EXTRA_PACKAGES)
    if [ "${#extra[@]}" -gt 0 ] && [ "$(id -u)" = 0 ]; then
      for p in "${extra[@]}"; do setup_log "installing $p (optional): $(setup_why "$p")"; done
      { setup_apt_update_once && setup_apt_install "${extra[@]}"; } ||
        setup_log "optional packages not installed (${extra[*]}; see $SETUP_LOG); what needs them will say so"
    elif [ "${#extra[@]}" -gt 0 ]; then
      setup_log "optional packages missing (not root, not installed): ${extra[*]}; what needs them will say so"
    fi
  fi
}

# promtool for app_ops: the prometheus package's file, unpacked into the
# build dir (apt-get download + dpkg-deb -x): no prometheus user, unit or
# service. Exports DLOCK_PROMTOOL; without it app_ops skips that one test.
setup_promtool() {
  local dir="$BUILD_DIR/tools/prometheus" deb
  if command -v promtool >/dev/null 2>&1; then
    DLOCK_PROMTOOL="$(command -v promtool)"
  elif [ -x "$dir/usr/bin/promtool" ]; then
    DLOCK_PROMTOOL="$dir/usr/bin/promtool"
  else
    setup_log "fetching promtool into $(basename "$BUILD_DIR")/tools: checks /metrics in app_ops (the prometheus package unpacked, not installed: no service)"
    mkdir -p "$BUILD_DIR/tools"
    if ! apt-cache show prometheus >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
      setup_apt_update_once || true
    fi
    rm -f "$BUILD_DIR/tools"/prometheus_*.deb
    # As root apt-get download warns that _apt cannot write here; it still downloads.
    if (cd "$BUILD_DIR/tools" && apt-get download -q prometheus) >>"$SETUP_LOG" 2>&1 &&
       deb="$(ls "$BUILD_DIR/tools"/prometheus_*.deb 2>/dev/null | head -n 1)" && [ -n "$deb" ] &&
       dpkg-deb -x "$deb" "$dir" >>"$SETUP_LOG" 2>&1 && [ -x "$dir/usr/bin/promtool" ]; then
      DLOCK_PROMTOOL="$dir/usr/bin/promtool"
    else
      setup_log "promtool not fetched (see $SETUP_LOG): app_ops will skip its promtool test"
    fi
    rm -f "$BUILD_DIR/tools"/prometheus_*.deb
  fi
  [ -z "${DLOCK_PROMTOOL:-}" ] || export DLOCK_PROMTOOL
}

# The peers set: npm (checked by command, not by package: NodeSource's
# nodejs carries its own npm, which Debian's npm package would conflict
# with), then the drivers' packages from bench/peers/package-lock.json.
setup_peers() {
  local dir="$DLOCK_ROOT/bench/peers" registry
  if ! command -v npm >/dev/null 2>&1; then
    if [ "$(id -u)" != 0 ]; then
      echo "missing for this command: npm: $(setup_why npm)" >&2
      echo "run as root:  apt-get install -y --no-install-recommends npm" >&2
      exit 2
    fi
    setup_log "installing npm: $(setup_why npm)"
    { setup_apt_update_once && setup_apt_install npm; } || setup_fail "apt-get install failed for: npm"
  fi
  setup_log "npm ci in bench/peers: $(setup_why npm)"
  # Bounded fetches: npm's own default waits minutes for a registry that
  # does not answer. --prefer-offline: what the cache holds is not fetched again.
  if ! (cd "$dir" && npm ci --no-audit --no-fund --prefer-offline --fetch-timeout=30000 \
          --fetch-retries=1) >>"$SETUP_LOG" 2>&1; then
    registry="$(cd "$dir" && npm config get registry 2>/dev/null || echo 'the npm registry')"
    if ! (cd "$dir" && timeout 30 npm ping) >>"$SETUP_LOG" 2>&1; then
      setup_fail "npm ci in bench/peers failed: $registry is unreachable (the peer drivers' packages come from it; set npm's registry or a proxy, or copy bench/peers/node_modules from a machine that has them)"
    fi
    setup_fail "npm ci in bench/peers failed"
  fi
}

setup_build() {
  local jobs testing=OFF
  jobs="$(nproc 2>/dev/null || echo 2)"
  [ "$SETUP_SET" = test ] && testing=ON
  if [ ! -f "$BUILD_DIR/CMakeCache.txt" ]; then
    echo "[setup] configuring"
    cmake -S "$DLOCK_ROOT" -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
          -DBUILD_TESTING="$testing" \
          -DDLOCK_SANITIZE="${DLOCK_SANITIZE:-}" -DDLOCK_WERROR=ON >&2 || { echo "cmake configure failed" >&2; exit 2; }
  elif [ "$testing" = ON ] && grep -q '^BUILD_TESTING:BOOL=OFF$' "$BUILD_DIR/CMakeCache.txt"; then
    # Configured by the demo without the tests: add them.
    echo "[setup] adding the tests"
    cmake -B "$BUILD_DIR" -DBUILD_TESTING=ON >&2 || { echo "cmake configure failed" >&2; exit 2; }
  fi
  echo "[setup] building"
  cmake --build "$BUILD_DIR" -j "$jobs" >&2 || { echo "build failed" >&2; exit 2; }
}

setup_set_packages "$SETUP_SET" >/dev/null # an unknown set: its message and exit 2, here
mkdir -p "$BUILD_DIR" || { echo "[setup] cannot create $BUILD_DIR" >&2; exit 2; }
: >"$SETUP_LOG" || { echo "[setup] cannot write $SETUP_LOG" >&2; exit 2; }
setup_packages
if [ "$SETUP_SET" = test ]; then setup_promtool; fi
if [ "$SETUP_SET" = peers ]; then setup_peers; fi
# SETUP_NO_BUILD=1: packages only (scripts/fuzz and scripts/memcheck build their own way).
if [ "${SETUP_NO_BUILD:-0}" != 1 ]; then
  setup_log "building into $(basename "$BUILD_DIR")/ (output in $SETUP_LOG)"
  # Everything the configure and the build print goes to the log; on a
  # failure its tail says why. A subshell, so that its exit 2 comes back here.
  ( setup_build ) >>"$SETUP_LOG" 2>&1 || setup_fail "the build failed"
fi
