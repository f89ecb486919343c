# scripts/setup.sh - shared set-up, sourced by scripts/test and scripts/demo.
#
# 1. Checks every Debian package the build and the tests need; installs the
#    missing ones with apt-get when running as root, otherwise prints the
#    exact apt-get line and exits 2.
# 2. Configures (once) and builds with CMake into $BUILD_DIR (default build/);
#    a second run installs nothing and rebuilds only what changed.
#
# Environment: BUILD_DIR (default build), DLOCK_SANITIZE (''|address|thread),
# SETUP_EXTRA_PACKAGES (optional packages: installed if possible, never fatal),
# SETUP_QUIET=1 (less output).

DLOCK_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${BUILD_DIR:-$DLOCK_ROOT/build}"
case "$BUILD_DIR" in /*) ;; *) BUILD_DIR="$DLOCK_ROOT/$BUILD_DIR" ;; esac

# libpq-dev: the PostgreSQL store (--db postgresql://...); postgresql: the
# server the db_pg_* and app_*_pg suites start on their own (initdb as
# an unprivileged user; they skip, saying so, where it is absent).
SETUP_PACKAGES=(redis-server libhiredis-dev libsqlite3-dev libmicrohttpd-dev libjansson-dev
                uuid-dev libcriterion-dev libcurl4-openssl-dev cmake pkg-config make gcc
                curl sqlite3 libpq-dev postgresql)

setup_log() { [ "${SETUP_QUIET:-0}" = 1 ] || printf '[setup] %s\n' "$*" >&2; }

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

setup_apt_install() {
  # -o Dpkg::Lock::Timeout: wait for another apt run instead of failing at once.
  DEBIAN_FRONTEND=noninteractive apt-get -o Dpkg::Lock::Timeout=300 install -y -q --no-install-recommends "$@"
}

setup_packages() {
  local missing
  mapfile -t missing < <(setup_missing_packages "${SETUP_PACKAGES[@]}")
  if [ "${#missing[@]}" -gt 0 ]; then
    if [ "$(id -u)" != 0 ]; then
      echo "missing packages; run as root:  apt-get install -y ${missing[*]}" >&2
      exit 2
    fi
    setup_log "installing: ${missing[*]}"
    if ! { apt-get -o Dpkg::Lock::Timeout=300 update -q >&2 && setup_apt_install "${missing[@]}" >&2; }; then
      echo "apt-get install failed for: ${missing[*]}" >&2
      exit 2
    fi
  fi
  if [ -n "${SETUP_EXTRA_PACKAGES:-}" ]; then
    local extra
    # shellcheck disable=SC2086
    mapfile -t extra < <(setup_missing_packages $SETUP_EXTRA_PACKAGES)
    if [ "${#extra[@]}" -gt 0 ] && [ "$(id -u)" = 0 ]; then
      setup_log "installing optional: ${extra[*]}"
      { apt-get -o Dpkg::Lock::Timeout=300 update -q >&2 && setup_apt_install "${extra[@]}" >&2; } ||
        setup_log "optional packages not installed (${extra[*]}); the tests that need them will say so"
    fi
  fi
}

setup_build() {
  local jobs
  jobs="$(nproc 2>/dev/null || echo 2)"
  if [ ! -f "$BUILD_DIR/CMakeCache.txt" ]; then
    setup_log "configuring into $(basename "$BUILD_DIR")/"
    cmake -S "$DLOCK_ROOT" -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
          -DDLOCK_SANITIZE="${DLOCK_SANITIZE:-}" -DDLOCK_WERROR=ON >&2 || { echo "cmake configure failed" >&2; exit 2; }
  fi
  setup_log "building"
  cmake --build "$BUILD_DIR" -j "$jobs" >&2 || { echo "build failed" >&2; exit 2; }
}

setup_packages
# SETUP_NO_BUILD=1: packages only (scripts/fuzz and scripts/memcheck build their own way).
[ "${SETUP_NO_BUILD:-0}" = 1 ] || setup_build
