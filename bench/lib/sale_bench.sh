# bench/lib/sale_bench.sh - the preamble and the rig that the benches of a
# sale share (hot-coupon.sh, many-coupons.sh, db-compare.sh):
#   - the error trap, die and say, the binaries;
#   - the settings scripts/lib/sale.sh reads;
#   - the option helpers (usage, need_value, need_int);
#   - the rig itself: a temp dir, the Redis masters, the admin token,
#     everything stopped by PID at exit;
#   - the figures of a coupon-loadtest report, and the --json lines.
#
# The script sources this file, calls sale_bench_init NAME, sets its own
# defaults and parses its options, then calls sale_bench_start. A script
# with more to stop at exit (db-compare.sh's postgres) defines
# sale_bench_on_exit, which runs once the coupon-servers are stopped and
# before the Redis masters are and the temp dir is removed.
# shellcheck shell=bash

_sale_bench_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# shellcheck source=scripts/lib/err.sh
. "$_sale_bench_root/scripts/lib/err.sh"
# shellcheck source=bench/lib/measure.sh
. "$_sale_bench_root/bench/lib/measure.sh"
# shellcheck source=scripts/lib/sale.sh
. "$_sale_bench_root/scripts/lib/sale.sh"

die() { echo "$bench_name: $*" >&2; exit 2; }
say() { [ "${quiet:-1}" = 1 ] || echo "$bench_name: $*" >&2; }

# The header comment of the script (from line 2 to `set -Eeuo pipefail`).
usage() {
  sed -n '2,/^set -Eeuo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'
  exit 0
}

need_value() { # option argc: the option has a value after it
  [ "$2" -ge 2 ] || die "$1 needs a value (--help)"
}

# Names the script (its messages' prefix and its ERR trap), finds the
# binaries and sets the settings every row shares; the script overrides
# what differs (stock, connections, threads, requests) after this.
sale_bench_init() { # name
  bench_name="$1"
  err_trap "$1"
  bin_dir="${BUILD_DIR:-$_sale_bench_root/build}/bin"
  server_bin="$bin_dir/coupon-server"
  loadtest_bin="$bin_dir/coupon-loadtest"
  redis_bin="${DLOCK_REDIS_SERVER:-$(command -v redis-server || true)}"
  json_out=""
  # The variables scripts/lib/sale.sh reads (its header lists them).
  # shellcheck disable=SC2034  # read by scripts/lib/sale.sh
  {
    instances=2 redis_nodes=3 stock=0 per_user_limit=1 connections=64 threads="" requests=""
    users="" load_rate="" work_us=0 lock_batch="" server_threads="" lock_wait="" base_port=""
    redis_pids=() server_pids=() redis_addrs=() server_urls=() redis_ports=()
  }
}

# shellcheck disable=SC2317  # invoked by the EXIT trap
_sale_bench_exit() {
  stop_servers
  if declare -F sale_bench_on_exit >/dev/null; then sale_bench_on_exit; fi
  cleanup
}

# Checks the binaries, makes the temp dir ($work), sets the EXIT trap,
# starts $redis_nodes masters and makes the admin token.
sale_bench_start() {
  local i
  [ -x "$server_bin" ] && [ -x "$loadtest_bin" ] || die "build first: no $server_bin or $loadtest_bin"
  [ -n "$redis_bin" ] || die "redis-server not found (apt-get install redis-server, or set DLOCK_REDIS_SERVER)"
  command -v curl >/dev/null || die "curl not found (apt-get install curl)"
  if [ -n "$json_out" ]; then : >>"$json_out" || die "--json: cannot write $json_out"; fi
  work="$(mktemp -d "${TMPDIR:-/tmp}/$bench_name.XXXXXX")" || die "cannot create a temp dir"
  trap _sale_bench_exit EXIT
  for ((i = 0; i < redis_nodes; i++)); do start_redis "$i"; done
  make_token
}

# The figures of a coupon-loadtest report, one coupon or several (--coupons):
# lt_rate (answers/s), lt_p99 (ms), lt_issued and lt_total (the audit's; the
# total is '' for several coupons), lt_answered, lt_verdict ('' when the
# report has none: the tester failed).
loadtest_figures() { # report file
  local f="$1"
  lt_rate="$(sed -n 's/.*throughput \([0-9.]*\) req\/s.*/\1/p; s/^requests: .*: \([0-9.]*\) req\/s.*/\1/p' "$f" | head -n 1)"
  lt_p99="$(sed -n 's/.*p99 \([0-9.]*\).*/\1/p' "$f" | head -n 1)"
  lt_issued="$(sed -n 's/^  issued: \([0-9]*\) of [0-9]*.*/\1/p; s/^issued: *\([0-9]*\) units.*/\1/p' "$f" | head -n 1)"
  lt_total="$(sed -n 's/^  issued: [0-9]* of \([0-9]*\).*/\1/p' "$f" | head -n 1)"
  lt_answered="$(sed -n 's/^requests: *\([0-9]*\) answered.*/\1/p' "$f" | head -n 1)"
  lt_verdict="$(sed -n 's/^verdict: *//p' "$f" | head -n 1)"
}

# Appends one flat JSON line (json_line's key value pairs) to the --json
# file, when one was given; "bench" is the script's name.
json_row() { # key value ...
  [ -n "$json_out" ] || return 0
  json_line bench "$bench_name" "$@" >>"$json_out"
}
