#!/bin/sh
# install_test.sh CMAKE LOCK_BUILD_DIR CONSUMER_C CC PKG_CONFIG SAN_FLAGS VERSION
# Installs libdlock into a fresh temporary prefix and checks what a user of
# the installed library sees: files, pkg-config metadata, shared and static
# linking, and an export list of dlock_* names only.
set -eu
cmake_bin=$1 lock_build=$2 consumer=$3 cc=$4 pkgconfig=$5 san=$6 version=$7

prefix=$(mktemp -d "${TMPDIR:-/tmp}/dlock-install.XXXXXX")
work=$(mktemp -d "${TMPDIR:-/tmp}/dlock-consumer.XXXXXX")
trap 'rm -rf "$prefix" "$work"' EXIT INT TERM

fail() { echo "install test: FAIL: $*" >&2; exit 1; }

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
[ -f "$libdir/cmake/dlock/dlockTargets.cmake" ] || fail "CMake export file not installed"

# Shared: the compile line comes from pkg-config alone.
# shellcheck disable=SC2046,SC2086
"$cc" -std=c17 -Wall -Wextra -Werror $san -o "$work/consumer" "$consumer" \
    $("$pkgconfig" --cflags --libs dlock) || fail "shared consumer does not build"
LD_LIBRARY_PATH=$libdir "$work/consumer" >"$work/shared.out" 2>&1 ||
    { cat "$work/shared.out" >&2; fail "shared consumer failed"; }
grep -q "consumer ok" "$work/shared.out" || fail "shared consumer output"
LD_LIBRARY_PATH=$libdir ldd "$work/consumer" | grep -q "$libdir/libdlock.so" ||
    fail "shared consumer is not using the installed libdlock.so"

# Static: libdlock.a plus the private dependencies pkg-config --static lists.
# shellcheck disable=SC2046,SC2086
"$cc" -std=c17 -Wall -Wextra -Werror $san -o "$work/consumer_static" "$consumer" \
    $("$pkgconfig" --cflags dlock) "$libdir/libdlock.a" \
    $("$pkgconfig" --static --libs dlock | sed 's/-ldlock\b//') ||
    fail "static consumer does not build"
if readelf -d "$work/consumer_static" | grep -q 'libdlock\.so'; then
    fail "static consumer still needs libdlock.so"
fi
"$work/consumer_static" >"$work/static.out" 2>&1 ||
    { cat "$work/static.out" >&2; fail "static consumer failed"; }
grep -q "consumer ok" "$work/static.out" || fail "static consumer output"

# Hidden visibility: only the public API is exported (plus the linker's own
# section-boundary symbols).
bad=$(nm -D --defined-only "$libdir/libdlock.so" | awk '{print $NF}' |
      grep -v -E '^(dlock_[a-z0-9_]+|_init|_fini|_edata|_end|__bss_start)$' || true)
[ -z "$bad" ] || fail "unexpected exported symbols: $bad"
nm -D --defined-only "$libdir/libdlock.so" | awk '{print $NF}' | grep -q '^dlock_acquire$' ||
    fail "dlock_acquire not exported"

echo "install test: OK (prefix $prefix)"
