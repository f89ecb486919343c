#!/usr/bin/env bash
# hot-coupon.sh - the hot coupon on SQLite: redlock against atomic-sql, each
# at its defaults, against the HTTP ceiling of the same run. For R rounds,
# interleaved, each row on a fresh SQLite file and a fresh pair of
# coupon-servers over the same 3 redis-server masters (flushed between
# rows): the ceiling (a coupon of stock 0: every claim takes the sold-out
# fast path, the most a server answers through the same HTTP path), then
# atomic-sql, then redlock (a coupon of --stock, every request a real claim
# by a distinct user). The load: coupon-loadtest --threads 2 --connections
# 64 --duration 4, audited against the servers and the database. Prints a
# line per row, then one table of medians with the ratios (redlock /
# atomic-sql, each / ceiling), and the stages of a claim (from the servers'
# coupon_claim_stage_seconds_total, summed over the rounds): microseconds per
# claim run and per pass (a batch's lock, read, commit and release pass once
# per batch), and the CPU per answer of the servers and of the masters (from
# /proc). `uptime` is printed before and after.
#
# usage: bench/hot-coupon.sh [--rounds R] [--duration S] [--stock N]
#                            [--connections C] [--threads T]
#                            [--redlock-opts "OPTS"] [--atomic-opts "OPTS"]
#                            [--try "OPTS"]
# --threads: the load tester's threads (default 2). --redlock-opts /
# --atomic-opts: extra coupon-server options for that strategy's rows (e.g.
# "--lock-batch 64"). --try: one more row per round, redlock with OPTS
# ("redlock+"), interleaved with the rest, to judge a setting against the
# defaults in the same run.
# Environment: BUILD_DIR (default build/), DLOCK_REDIS_SERVER.
# Exit status: 0 iff every row said NO OVERSELL (else 1, naming the row on
# stderr); 2 on usage or start-up errors, with the reason on stderr.
set -Eeuo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
# shellcheck source=../scripts/lib/err.sh
. "$root/scripts/lib/err.sh"
err_trap hot-coupon
bin_dir="${BUILD_DIR:-$root/build}/bin"
server_bin="$bin_dir/coupon-server"
loadtest_bin="$bin_dir/coupon-loadtest"
redis_bin="${DLOCK_REDIS_SERVER:-$(command -v redis-server || true)}"

die() { echo "hot-coupon: $*" >&2; exit 2; }
say() { [ "${quiet:-1}" = 1 ] || echo "hot-coupon: $*" >&2; }

# The variables scripts/lib/sale.sh reads (its header lists them).
# shellcheck disable=SC2034  # read by scripts/lib/sale.sh
{
  instances=2 redis_nodes=3 stock=0 per_user_limit=1 connections=64 threads=2 requests=""
  users="" load_rate="" work_us=0 lock_batch="" server_threads="" lock_wait="" base_port=""
  rounds=3 duration=4 claim_stock=10000000 redlock_opts="" atomic_opts="" try_opts=""
  redis_pids=() server_pids=() redis_addrs=() server_urls=() redis_ports=()
}

# shellcheck source=lib/measure.sh
. "$here/lib/measure.sh"

while [ $# -gt 0 ]; do
  case "$1" in
    -h|--help) sed -n '2,/^set -Eeuo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    --rounds|--duration|--stock|--connections|--threads|--redlock-opts|--atomic-opts|--try)
      [ $# -ge 2 ] || die "$1 needs a value (--help)" ;;
    *) die "unknown option $1 (--help)" ;;
  esac
  case "$1" in
    --rounds) need_int "$1" "$2" 1 100; rounds="$2" ;;
    --duration) need_int "$1" "$2" 1 3600; duration="$2" ;;
    --stock) need_int "$1" "$2" 1 1000000000; claim_stock="$2" ;;
    --connections) need_int "$1" "$2" 1 10000; connections="$2" ;;
    --threads) need_int "$1" "$2" 1 4096; threads="$2" ;;
    --redlock-opts) redlock_opts="$2" ;;
    --atomic-opts) atomic_opts="$2" ;;
    --try) try_opts="$2" ;;
  esac
  shift 2
done
if [ ! -x "$server_bin" ] || [ ! -x "$loadtest_bin" ]; then die "build first: no $server_bin or $loadtest_bin"; fi
[ -n "$redis_bin" ] || die "redis-server not found (apt-get install redis-server, or set DLOCK_REDIS_SERVER)"
command -v curl >/dev/null || die "curl not found (apt-get install curl)"

# shellcheck source=../scripts/lib/sale.sh
. "$root/scripts/lib/sale.sh"

work="$(mktemp -d "${TMPDIR:-/tmp}/hot-coupon.XXXXXX")" || die "cannot create a temp dir"
trap cleanup EXIT
for ((i = 0; i < redis_nodes; i++)); do start_redis "$i"; done
make_token

STAGES=(http_in claim_queue local_queue lock read work commit release resume reply)
declare -A stage_s=() stage_n=() tput=() cpu_srv=() cpu_redis=() answers=()
hz="$(getconf CLK_TCK 2>/dev/null || echo 100)"

# One row: fresh database, fresh servers, the load; prints its line and
# appends its answers/s to tput[kind].
row() { # round kind strategy stock [server options...]
  local round="$1" kind="$2" strat="$3" db report log st=0 t p99 issued verdict id
  local extra=("${@:5}")
  # shellcheck disable=SC2034  # create_coupon (scripts/lib/sale.sh) reads it
  stock="$4"
  db="$work/$kind-$round.db"
  flush_redis
  start_servers "$strat" "$db" "${extra[@]}" 2>>"$work/servers.log"
  id="$(create_coupon hot)" || exit 2
  report="$work/report-$kind-$round.txt" log="$work/load-$kind-$round.log"
  local srv0 redis0
  srv0="$(cpu_ticks "${server_pids[@]}")" redis0="$(cpu_ticks "${redis_pids[@]}")"
  "$loadtest_bin" --url "$(IFS=,; echo "${server_urls[*]}")" --coupon "$id" --threads "$threads" \
    --connections "$connections" --duration "$duration" --db "$db" >"$report" 2>"$log" || st=$?
  # CPU over the load (and the audit's reads): the servers' and the masters'.
  cpu_srv["$kind"]=$(( ${cpu_srv["$kind"]:-0} + $(cpu_ticks "${server_pids[@]}") - srv0 ))
  cpu_redis["$kind"]=$(( ${cpu_redis["$kind"]:-0} + $(cpu_ticks "${redis_pids[@]}") - redis0 ))
  scrape_stages "$kind"
  stop_servers
  rm -f -- "$db" "$db-wal" "$db-shm"
  t="$(sed -n 's/.*throughput \([0-9.]*\) req\/s.*/\1/p' "$report" | head -n 1)"
  p99="$(sed -n 's/.*p99 \([0-9.]*\).*/\1/p' "$report" | head -n 1)"
  issued="$(sed -n 's/^  issued: \([0-9]*\) of \([0-9]*\).*/\1/p' "$report" | head -n 1)"
  verdict="$(sed -n 's/^verdict: //p' "$report" | head -n 1)"
  printf '%-6s %-11s %12s %9s %10s  %s\n' "$round" "$kind" "${t:-?}" "${p99:-?}" "${issued:-?}" "${verdict:-exit $st}"
  tput["$kind"]="${tput["$kind"]:-} ${t:-0}"
  answers["$kind"]=$(( ${answers["$kind"]:-0} + $(sed -n 's/^requests: *\([0-9]*\) answered.*/\1/p' "$report" | head -n 1) ))
  if [ "$st" != 0 ] || [ "${verdict:-}" != "NO OVERSELL" ]; then
    rc=1
    echo "hot-coupon: round $round $kind: coupon-loadtest exit $st (${verdict:-no verdict}); its last lines:" >&2
    tail -n 5 "$log" "$report" >&2 2>/dev/null || true
  fi
}

median() { # numbers... -> the median (the mean of the middle two for an even count)
  printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print 0;
    else if (NR % 2) printf "%.1f\n", v[(NR + 1) / 2]; else printf "%.1f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2fx", a / b; else print "-" }'; }

# shellcheck disable=SC2206  # word splitting is the point: the extra options
rl_extra=($redlock_opts) at_extra=($atomic_opts) try_extra=($try_opts)
kinds=(ceiling atomic-sql redlock)
[ -z "$try_opts" ] || kinds+=(redlock+)
echo "load before: $(uptime)"
echo "hot coupon on SQLite: $instances coupon-servers, $redis_nodes redis masters, coupon-loadtest --threads $threads --connections $connections --duration $duration; claim rows: stock $claim_stock, a distinct user per claim"
[ -z "$redlock_opts$atomic_opts" ] || echo "extra options: redlock '$redlock_opts', atomic-sql '$atomic_opts'"
[ -z "$try_opts" ] || echo "redlock+: redlock $redlock_opts $try_opts"
rc=0
printf '%-6s %-11s %12s %9s %10s  %s\n' round row answers/s "p99 ms" issued verdict
for ((r = 1; r <= rounds; r++)); do
  # The ceiling: atomic-sql's servers answering a sold-out coupon from the peek.
  row "$r" ceiling atomic-sql 0
  row "$r" atomic-sql atomic-sql "$claim_stock" "${at_extra[@]}"
  row "$r" redlock redlock "$claim_stock" "${rl_extra[@]}"
  [ -z "$try_opts" ] || row "$r" redlock+ redlock "$claim_stock" "${rl_extra[@]}" "${try_extra[@]}"
done
echo "load after: $(uptime)"

# shellcheck disable=SC2086  # the lists of numbers split into words on purpose
{
  c="$(median ${tput[ceiling]})" a="$(median ${tput[atomic-sql]})" l="$(median ${tput[redlock]})"
}
echo
echo "medians of $rounds interleaved rounds (answers/s):"
printf '  %-11s %12s  %s\n' ceiling "$c" "1.00x ceiling"
printf '  %-11s %12s  %s of ceiling\n' atomic-sql "$a" "$(ratio "$a" "$c")"
printf '  %-11s %12s  %s of ceiling, %s of atomic-sql\n' redlock "$l" "$(ratio "$l" "$c")" "$(ratio "$l" "$a")"
if [ -n "$try_opts" ]; then
  # shellcheck disable=SC2086
  p="$(median ${tput[redlock+]})"
  printf '  %-11s %12s  %s of ceiling, %s of atomic-sql, %s of redlock\n' redlock+ "$p" "$(ratio "$p" "$c")" \
    "$(ratio "$p" "$a")" "$(ratio "$p" "$l")"
fi

echo
echo "where a claim's time goes (all rounds; us per claim run / us per pass, passes; claims run = claim_queue passes):"
line="$(printf '  %-12s' stage)"
for k in "${kinds[@]}"; do line+="$(printf ' %22s' "$k")"; done
echo "$line"
for s in "${STAGES[@]}"; do
  line="$(printf '  %-12s' "$s")"
  for k in "${kinds[@]}"; do
    sec="${stage_s["$k:$s"]:-0}" n="${stage_n["$k:$s"]:-0}" cl="${stage_n["$k:claim_queue"]:-0}"
    line+="$(awk -v s="$sec" -v n="$n" -v c="$cl" 'BEGIN { printf " %7.1f /%7.1f %7d", (c ? s * 1e6 / c : 0), (n ? s * 1e6 / n : 0), n }')"
  done
  echo "$line"
done
echo
echo "CPU per answer (all rounds; the servers' and the masters' user + system time over the answers):"
for k in "${kinds[@]}"; do
  awk -v k="$k" -v s="${cpu_srv[$k]:-0}" -v r="${cpu_redis[$k]:-0}" -v n="${answers[$k]:-0}" -v hz="$hz" \
    'BEGIN { if (n > 0) printf "  %-11s servers %6.1f us, redis %6.1f us\n", k, s * 1e6 / hz / n, r * 1e6 / hz / n }'
done
exit "$rc"
