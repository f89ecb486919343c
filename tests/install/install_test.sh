#!/bin/sh
# install_test.sh CMAKE LOCK_BUILD_DIR CONSUMER_C CC PKG_CONFIG SAN_FLAGS VERSION REDIS_SERVER FIND_PACKAGE_DIR [TOP_BUILD_DIR]
# Installs libdlock into a fresh temporary prefix and checks what a user of
# the installed library sees: files, pkg-config metadata, and an export
# list of dlock_* names only. A consumer is built both ways (pkg-config,
# shared and static; find_package(dlock CONFIG), shared and static). Each
# runs against a real redis-server (acquire, taken, release, larger fence),
# found through its rpath without LD_LIBRARY_PATH. With TOP_BUILD_DIR (a build
# that has dlockctl), the whole project is installed too: the installed
# dlockctl must run and reach the same redis-server, and coupon-server and
# coupon-loadtest must run from bin/.
set -eu
cmake_bin=$1 lock_build=$2 consumer=$3 cc=$4 pkgconfig=$5 san=$6 version=$7
redis_server=$8 fp_project=$9 top_build=${10:-}

prefix=$(mktemp -d "${TMPDIR:-/tmp}/dlock-install.XXXXXX")
work=$(mktemp -d "${TMPDIR:-/tmp}/dlock-consumer.XXXXXX")
redis_pid=
cleanup() {
    if [ -n "$redis_pid" ]; then
        kill "$redis_pid" 2>/dev/null || true
        wait "$redis_pid" 2>/dev/null || true
    fi
    rm -rf "$prefix" "$work"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

fail() { echo "install test: FAIL: $*" >&2; exit 1; }

# A real redis-server on a unix socket in our own dir: no port to pick, no
# clash with other tests, and removed with the dir.
sock=$work/redis.sock
"$redis_server" --port 0 --unixsocket "$sock" --dir "$work" --save '' --appendonly no \
    >"$work/redis.log" 2>&1 &
redis_pid=$!
# Redis creates the socket once it accepts connections; bounded wait (5 s).
i=0
while [ ! -S "$sock" ]; do
    i=$((i + 1))
    [ "$i" -le 50 ] || { cat "$work/redis.log" >&2; fail "redis-server did not start"; }
    kill -0 "$redis_pid" 2>/dev/null || { cat "$work/redis.log" >&2; fail "redis-server exited"; }
    sleep 0.1
done
addr=unix:$sock

# loads_installed BINARY: the libdlock.so the loader picks for BINARY (with
# no LD_LIBRARY_PATH) is the one in this prefix. Paths are compared after
# resolving links and "..": pkg-config's libdir is "<pc dir>/../..".
loads_installed() {
    so=$(env -u LD_LIBRARY_PATH ldd "$1" | awk '$1 ~ /^libdlock\.so/ {print $3}')
    [ -n "$so" ] && [ -e "$so" ] &&
        [ "$(cd "$(dirname "$so")" && pwd -P)" = "$(cd "$libdir" && pwd -P)" ]
}

# run_consumer NAME BINARY: runs it with no LD_LIBRARY_PATH, so the loader
# finds libdlock.so by the binary's rpath or not at all.
run_consumer() {
    env -u LD_LIBRARY_PATH "$2" "$addr" >"$work/$1.out" 2>&1 ||
        { cat "$work/$1.out" >&2; fail "$1 consumer failed"; }
    grep -q "consumer ok" "$work/$1.out" || fail "$1 consumer output"
}

# Only the lock/ install script: the test must not depend on other parts
# of the tree having been built.
"$cmake_bin" --install "$lock_build" --prefix "$prefix" >"$work/install.log" 2>&1 ||
    { cat "$work/install.log" >&2; fail "cmake --install"; }

pc=$(find "$prefix" -name dlock.pc -path '*/pkgconfig/*' | head -n 1)
[ -n "$pc" ] || fail "dlock.pc not installed"
PKG_CONFIG_PATH=$(dirname "$pc")
export PKG_CONFIG_PATH

got=$("$pkgconfig" --modversion dlock) || fail "pkg-config cannot read dlock.pc"
[ "$got" = "$version" ] || fail "pkg-config version $got, header says $version"
libdir=$("$pkgconfig" --variable=libdir dlock)
incdir=$("$pkgconfig" --variable=includedir dlock)
# The .pc file is relocatable: its paths must point into this prefix.
case "$libdir" in "$prefix"/*) ;; *) fail "libdir $libdir is outside $prefix" ;; esac
[ -f "$incdir/dlock.h" ] || fail "dlock.h not in $incdir"
[ -f "$libdir/libdlock.a" ] || fail "libdlock.a not in $libdir"
[ -e "$libdir/libdlock.so" ] || fail "libdlock.so not in $libdir"
for f in dlockTargets.cmake dlockConfig.cmake dlockConfigVersion.cmake; do
    [ -f "$libdir/cmake/dlock/$f" ] || fail "CMake package file $f not installed"
done

# 1. pkg-config, shared: the compile line comes from pkg-config alone, plus
# an rpath because this prefix is not one the loader searches.
# shellcheck disable=SC2046,SC2086
"$cc" -std=c17 -Wall -Wextra -Werror $san -o "$work/pc_shared" "$consumer" \
    $("$pkgconfig" --cflags --libs dlock) -Wl,-rpath,"$libdir" ||
    fail "pkg-config shared consumer does not build"
loads_installed "$work/pc_shared" ||
    fail "pkg-config shared consumer does not load the installed libdlock.so by its rpath"
run_consumer pc_shared "$work/pc_shared"

# 1b. Each example's own build line (the "cc ..." of its head), run as
# written on a copy of it: it must build against this prefix, found through
# PKG_CONFIG_PATH alone, and load this prefix's libdlock.so by its rpath. A
# sanitized library needs its runtime on the line, which the examples'
# plain lines do not give: skipped there, saying so.
if [ -n "$san" ]; then
    echo "install test: the examples' build lines are checked in the plain build only (this one is sanitized)"
else
    examples=$(cd "$(dirname "$consumer")/../../examples" && pwd -P)
    mkdir -p "$work/examples"
    for ex in "$examples"/*.c; do
        name=$(basename "$ex" .c)
        line=$(sed -n 's/^ \*   \(cc .*\)$/\1/p' "$ex" | head -n 1)
        [ -n "$line" ] || fail "$name.c gives no build line in its head"
        cp "$ex" "$work/examples/" || fail "cannot copy $name.c"
        (cd "$work/examples" && sh -c "$line") >"$work/examples/$name.log" 2>&1 ||
            { cat "$work/examples/$name.log" >&2; fail "$name.c's build line does not build: $line"; }
        loads_installed "$work/examples/$name" ||
            fail "$name, built by its own line, does not load the installed libdlock.so by its rpath"
    done
fi

# 2. pkg-config, static: libdlock.a plus the private dependencies
# pkg-config --static lists.
# shellcheck disable=SC2046,SC2086
"$cc" -std=c17 -Wall -Wextra -Werror $san -o "$work/pc_static" "$consumer" \
    $("$pkgconfig" --cflags dlock) "$libdir/libdlock.a" \
    $("$pkgconfig" --static --libs dlock | sed 's/-ldlock\b//') ||
    fail "pkg-config static consumer does not build"
if readelf -d "$work/pc_static" | grep -q 'libdlock\.so'; then
    fail "static consumer still needs libdlock.so"
fi
run_consumer pc_static "$work/pc_static"

# 3. find_package(dlock CONFIG): a separate CMake project that names only
# dlock::dlock / dlock::dlock_static. CMake gives a build-tree binary the
# rpath of the imported library it links.
"$cmake_bin" -S "$fp_project" -B "$work/fp" -DCMAKE_PREFIX_PATH="$prefix" \
    -DCONSUMER_SOURCE="$consumer" -DCMAKE_C_COMPILER="$cc" \
    -DCMAKE_C_FLAGS="$san" -DCMAKE_EXE_LINKER_FLAGS="$san" >"$work/fp-configure.log" 2>&1 ||
    { cat "$work/fp-configure.log" >&2; fail "find_package(dlock CONFIG) project does not configure"; }
"$cmake_bin" --build "$work/fp" >"$work/fp-build.log" 2>&1 ||
    { cat "$work/fp-build.log" >&2; fail "find_package(dlock CONFIG) consumers do not build"; }
loads_installed "$work/fp/consumer_shared" ||
    fail "find_package shared consumer does not load the installed libdlock.so by its rpath"
if readelf -d "$work/fp/consumer_static" | grep -q 'libdlock\.so'; then
    fail "find_package static consumer still needs libdlock.so"
fi
run_consumer fp_shared "$work/fp/consumer_shared"
run_consumer fp_static "$work/fp/consumer_static"

# A version the package does not satisfy is refused by dlockConfigVersion.cmake.
major=${version%%.*}
mkdir -p "$work/fp_next"
cat >"$work/fp_next/CMakeLists.txt" <<EOT
cmake_minimum_required(VERSION 3.18)
project(dlock_next LANGUAGES C)
find_package(dlock $((major + 1)).0 CONFIG REQUIRED)
EOT
if "$cmake_bin" -S "$work/fp_next" -B "$work/fp_next/build" -DCMAKE_PREFIX_PATH="$prefix" \
    >"$work/fp-next.log" 2>&1; then
    fail "find_package(dlock $((major + 1)).0) accepted version $version"
fi

# 4. A program with a hiredis of its own (the system's) beside libdlock,
# shared and static, using both on the same server: libdlock's hiredis
# (bundled and renamed, or the system's itself) must not clash with it.
if "$pkgconfig" --exists hiredis; then
    both=$(dirname "$consumer")/both_hiredis.c
    # shellcheck disable=SC2046,SC2086
    "$cc" -std=c17 -Wall -Wextra -Werror $san -o "$work/both_shared" "$both" \
        $("$pkgconfig" --cflags --libs dlock hiredis) -Wl,-rpath,"$libdir" ||
        fail "a program linking hiredis beside libdlock.so does not build"
    # shellcheck disable=SC2046,SC2086
    "$cc" -std=c17 -Wall -Wextra -Werror $san -o "$work/both_static" "$both" \
        $("$pkgconfig" --cflags dlock hiredis) "$libdir/libdlock.a" \
        $("$pkgconfig" --static --libs dlock hiredis | sed 's/-ldlock\b//') ||
        fail "a program linking hiredis beside libdlock.a does not build (a symbol clash?)"
    for kind in shared static; do
        env -u LD_LIBRARY_PATH "$work/both_$kind" "$sock" >"$work/both_$kind.out" 2>&1 ||
            { cat "$work/both_$kind.out" >&2; fail "hiredis beside libdlock ($kind) failed"; }
        grep -q "both ok" "$work/both_$kind.out" || fail "hiredis beside libdlock ($kind): output"
    done
else
    echo "install test: no system hiredis (pkg-config hiredis): the hiredis-beside-libdlock check is skipped"
fi

# libdlock.a defines no name outside dlock_* / dlock__*: a bundled
# hiredis's names are renamed, so none can clash with a program's own. An
# ASan build adds an ODR indicator (__odr_asan.<name>) per global; it is
# the sanitizer's, and carries the renamed name.
bad=$(nm -g --defined-only "$libdir/libdlock.a" | awk 'NF == 3 {print $3}' |
      grep -v -e '^dlock_' -e '^__odr_asan\.dlock_' || true)
[ -z "$bad" ] || fail "libdlock.a defines names outside dlock_*: $(echo $bad | head -c 300)"

# Hidden visibility: only the public API is exported (plus the linker's own
# section-boundary symbols).
bad=$(nm -D --defined-only "$libdir/libdlock.so" | awk '{print $NF}' |
      grep -v -E '^(dlock_[a-z0-9_]+|_init|_fini|_edata|_end|__bss_start)$' || true)
[ -z "$bad" ] || fail "unexpected exported symbols: $bad"
nm -D --defined-only "$libdir/libdlock.so" | awk '{print $NF}' | grep -q '^dlock_acquire$' ||
    fail "dlock_acquire not exported"

# The whole project's install: dlockctl lands in bin/ and runs from there
# (it links libdlock statically, so it needs no rpath).
if [ -n "$top_build" ]; then
    full=$work/full
    "$cmake_bin" --install "$top_build" --prefix "$full" >"$work/install-full.log" 2>&1 ||
        { cat "$work/install-full.log" >&2; fail "cmake --install of the project"; }
    [ -x "$full/bin/dlockctl" ] || fail "dlockctl not installed into bin/"
    "$full/bin/dlockctl" --version | grep -q "dlockctl $version" || fail "installed dlockctl --version"
    env -u LD_LIBRARY_PATH "$full/bin/dlockctl" --redis "$addr" ping >"$work/ctl.out" 2>&1 ||
        { cat "$work/ctl.out" >&2; fail "installed dlockctl ping"; }
    grep -q "1/1 nodes up, quorum 1: ok" "$work/ctl.out" || fail "installed dlockctl ping output"
    # The two programs of the demo land there too. coupon-server links the
    # shared libdlock: its rpath ($ORIGIN/../lib) must find this prefix's.
    for prog in coupon-server coupon-loadtest; do
        [ -x "$full/bin/$prog" ] || fail "$prog not installed into bin/"
        env -u LD_LIBRARY_PATH "$full/bin/$prog" --version >"$work/$prog.out" 2>&1 ||
            { cat "$work/$prog.out" >&2; fail "installed $prog --version"; }
        grep -q "$prog $version" "$work/$prog.out" || fail "installed $prog --version: $(cat "$work/$prog.out")"
    done
    libdir=$(dirname "$(find "$full" -name libdlock.so | head -n 1)")
    loads_installed "$full/bin/coupon-server" ||
        fail "installed coupon-server does not load the installed libdlock.so by its rpath"
fi

echo "install test: OK (pkg-config and find_package, shared and static, each locked on a real redis-server)"
