#!/bin/sh
# standalone_test.sh CMAKE CTEST LOCK_SRC CONSUMER_C CC PKG_CONFIG REDIS_SERVER WERROR SUITES [LAUNCHER]
# libdlock taken alone: `cmake -S lock` must configure,
# build, install and (with Criterion) test with only a C compiler, CMake,
# pkg-config and hiredis. Every other package of the project is hidden.
# PKG_CONFIG_LIBDIR names a directory holding copies of hiredis.pc (and, for
# the second build, criterion.pc with the modules it requires) and nothing
# else. So a pkg_check_modules of sqlite3, libpq, libmicrohttpd, jansson,
# uuid or libcurl anywhere in lock/ fails the configure.
#   1. hiredis only: configure (the suites are skipped, saying why), build,
#      install into a temporary prefix; the header, both libraries, dlock.pc
#      and the CMake package are there; a consumer built with pkg-config
#      alone locks on a real redis-server.
#   1b. hiredis and jansson: dlockctl is built and installed beside the
#      library (and pings that server); step 1 said it was skipped.
#   2. hiredis and Criterion: the lock_* suites (SUITES, comma-separated:
#      the ones the whole project registers) are all built and registered,
#      and lock_ownership runs and passes.
set -eu
cmake_bin=$1 ctest_bin=$2 lock_src=$3 consumer=$4 cc=$5 pkgconfig=$6 redis_server=$7
werror=$8 suites=$9 launcher=${10:-}

work=$(mktemp -d "${TMPDIR:-/tmp}/dlock-standalone.XXXXXX")
redis_pid=
cleanup() {
    if [ -n "$redis_pid" ]; then
        kill "$redis_pid" 2>/dev/null || true
        wait "$redis_pid" 2>/dev/null || true
    fi
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

fail() { echo "standalone test: FAIL: $*" >&2; exit 1; }
# show LOG: a step's output, on failure only.
show() { cat "$1" >&2; }

# copy_pc DIR MODULE: MODULE's .pc file and, recursively, those of every
# module it requires (pkg-config checks Requires.private too), from the
# system's pkg-config path into DIR.
copy_pc() {
    [ -f "$1/$2.pc" ] && return 0
    src=$("$pkgconfig" --variable=pcfiledir "$2") || fail "pkg-config cannot find $2 on this machine"
    cp "$src/$2.pc" "$1/" || fail "cannot copy $src/$2.pc"
    for dep in $("$pkgconfig" --print-requires --print-requires-private "$2" | awk '{print $1}'); do
        copy_pc "$1" "$dep"
    done
}

launcher_arg=
[ -z "$launcher" ] || launcher_arg=-DCMAKE_C_COMPILER_LAUNCHER=$launcher

# configure NAME PCDIR: lock/ alone, with only PCDIR's modules visible.
configure() {
    env -u PKG_CONFIG_PATH PKG_CONFIG_LIBDIR="$2" \
        "$cmake_bin" -S "$lock_src" -B "$work/$1" -DCMAKE_C_COMPILER="$cc" $launcher_arg \
        -DDLOCK_WERROR="$werror" -DCMAKE_INSTALL_PREFIX="$work/$1-prefix" \
        >"$work/$1-configure.log" 2>&1 ||
        { show "$work/$1-configure.log"; fail "$1: cmake -S lock does not configure"; }
}

build() {
    "$cmake_bin" --build "$work/$1" -j 2 >"$work/$1-build.log" 2>&1 ||
        { show "$work/$1-build.log"; fail "$1: cmake --build does not build"; }
}

# --- 1. hiredis only --------------------------------------------------------
only_hiredis=$work/pc-hiredis
mkdir -p "$only_hiredis"
copy_pc "$only_hiredis" hiredis
# OpenSSL too: the bundled hiredis (the choice where the system's has no
# TLS) is built with TLS, and libdlock's dlock.pc then requires it.
copy_pc "$only_hiredis" libssl
copy_pc "$only_hiredis" libcrypto
# The hiding works: the project's other packages are invisible here.
for m in sqlite3 libpq libmicrohttpd jansson uuid libcurl criterion; do
    if PKG_CONFIG_LIBDIR=$only_hiredis "$pkgconfig" --exists "$m"; then
        fail "$m is still visible with PKG_CONFIG_LIBDIR=$only_hiredis"
    fi
done

configure alone "$only_hiredis"
grep -q "lock_\* suites need Criterion" "$work/alone-configure.log" ||
    { show "$work/alone-configure.log"; fail "alone: no word that the suites were skipped"; }
build alone
"$cmake_bin" --install "$work/alone" >"$work/alone-install.log" 2>&1 ||
    { show "$work/alone-install.log"; fail "alone: cmake --install"; }

prefix=$work/alone-prefix
pc=$(find "$prefix" -name dlock.pc -path '*/pkgconfig/*' | head -n 1)
[ -n "$pc" ] || fail "dlock.pc not installed"
libdir=$(cd "$(dirname "$pc")/.." && pwd)
[ -f "$prefix/include/dlock.h" ] || fail "dlock.h not installed"
[ -e "$libdir/libdlock.so" ] || fail "libdlock.so not installed"
[ -f "$libdir/libdlock.a" ] || fail "libdlock.a not installed"
for f in dlockConfig.cmake dlockConfigVersion.cmake dlockTargets.cmake; do
    [ -f "$libdir/cmake/dlock/$f" ] || fail "CMake package file $f not installed"
done

# The consumer's compile line from pkg-config alone, with hiredis the only
# other module it can see (dlock.pc requires it privately).
flags=$(PKG_CONFIG_LIBDIR=$only_hiredis:$(dirname "$pc") "$pkgconfig" --cflags --libs dlock) ||
    fail "pkg-config cannot read the installed dlock.pc"
# shellcheck disable=SC2086
"$cc" -std=c17 -Wall -Wextra -Werror -o "$work/consumer" "$consumer" $flags -Wl,-rpath,"$libdir" \
    >"$work/consumer-build.log" 2>&1 ||
    { show "$work/consumer-build.log"; fail "the consumer does not build against the installed libdlock"; }

# A real redis-server on a unix socket in our own dir (as install_test.sh).
sock=$work/redis.sock
"$redis_server" --port 0 --unixsocket "$sock" --dir "$work" --save '' --appendonly no \
    >"$work/redis.log" 2>&1 &
redis_pid=$!
i=0
while [ ! -S "$sock" ]; do
    i=$((i + 1))
    [ "$i" -le 50 ] || { show "$work/redis.log"; fail "redis-server did not start"; }
    kill -0 "$redis_pid" 2>/dev/null || { show "$work/redis.log"; fail "redis-server exited"; }
    sleep 0.1
done
env -u LD_LIBRARY_PATH "$work/consumer" "unix:$sock" >"$work/consumer.out" 2>&1 ||
    { show "$work/consumer.out"; fail "the consumer failed"; }
grep -q "consumer ok" "$work/consumer.out" || fail "consumer output: $(cat "$work/consumer.out")"

# --- 1b. hiredis and jansson: dlockctl beside the library ------------------
grep -q "dlockctl needs jansson" "$work/alone-configure.log" ||
    { show "$work/alone-configure.log"; fail "alone: no word that dlockctl was skipped without jansson"; }
with_jansson=$work/pc-jansson
mkdir -p "$with_jansson"
copy_pc "$with_jansson" hiredis
copy_pc "$with_jansson" libssl
copy_pc "$with_jansson" libcrypto
copy_pc "$with_jansson" jansson
configure ctl "$with_jansson"
build ctl
"$cmake_bin" --install "$work/ctl" >"$work/ctl-install.log" 2>&1 ||
    { show "$work/ctl-install.log"; fail "ctl: cmake --install"; }
[ -x "$work/ctl-prefix/bin/dlockctl" ] || fail "dlockctl not installed by cmake -S lock with jansson"
"$work/ctl-prefix/bin/dlockctl" --redis "unix:$sock" ping >"$work/ctl-ping.log" 2>&1 ||
    { show "$work/ctl-ping.log"; fail "the installed dlockctl cannot ping the server"; }

# --- 2. hiredis and Criterion: the lock_* suites --------------------------
with_criterion=$work/pc-criterion
mkdir -p "$with_criterion"
copy_pc "$with_criterion" hiredis
copy_pc "$with_criterion" libssl
copy_pc "$with_criterion" libcrypto
copy_pc "$with_criterion" criterion
# The event-loop client's suite (lock_async) runs on libuv, a test-only need.
copy_pc "$with_criterion" libuv
configure suites "$with_criterion"
build suites
registered=$(cd "$work/suites" && "$ctest_bin" -N | awk '$1 == "Test" {print $3}')
old_ifs=$IFS
IFS=,
for s in $suites; do
    printf '%s\n' "$registered" | grep -qx "$s" || fail "suite $s not registered in lock/ built alone"
done
IFS=$old_ifs
"$ctest_bin" --test-dir "$work/suites" -R '^lock_ownership$' --no-tests=error --output-on-failure \
    >"$work/suites-run.log" 2>&1 ||
    { show "$work/suites-run.log"; fail "lock_ownership fails in lock/ built alone"; }
grep -q "0 tests failed out of 1$" "$work/suites-run.log" || fail "lock_ownership did not run"

echo "standalone test: OK (lock/ alone with only hiredis: configured, built, installed, consumer locked;" \
     "with jansson: dlockctl installed and pinged;" \
     "with Criterion: $(printf '%s\n' "$registered" | grep -c '^lock_') lock_* suites built, lock_ownership passed)"
