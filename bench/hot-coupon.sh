#!/usr/bin/env bash
# hot-coupon.sh - the hot coupon on SQLite: redlock against atomic-sql, each
# at its defaults, against the HTTP ceiling of the same run. It runs R
# rounds, interleaved, each row on a fresh SQLite file and a fresh pair of
# coupon-servers over the same 3 redis-server masters (flushed between
# rows). The rows:
#   - the ceiling: a coupon of stock 0, so every claim takes the sold-out
#     fast path (the most a server answers through the same HTTP path);
#   - atomic-sql;
#   - redlock: a coupon of --stock, every request a real claim by a
#     distinct user.
# The load: coupon-loadtest --threads 2 --connections 64 --duration 4,
# audited against the servers and the database. Prints a line per row,
# then one table of medians with the ratios (redlock / atomic-sql, each /
# ceiling). Then the stages of a claim (from the servers'
# coupon_claim_stage_seconds_total, summed over the rounds): microseconds
# per claim run and per pass (a batch's lock, read, commit and release pass
# once per batch). Then the CPU per answer of the servers and of the
# masters (from /proc). `uptime` is printed before and after.
#
# usage: bench/hot-coupon.sh [--rounds R] [--duration S] [--stock N]
#                            [--connections C] [--threads T]
#                            [--redlock-opts "OPTS"] [--atomic-opts "OPTS"]
#                            [--try "OPTS"] [--json FILE]
# --threads: the load tester's threads (default 2). --redlock-opts /
# --atomic-opts: extra coupon-server options for that strategy's rows (e.g.
# "--lock-batch 64"). --try: one more row per round, redlock with OPTS
# ("redlock+"), interleaved with the rest, to judge a setting against the
# defaults in the same run.
# --json FILE: also append one JSON line per row to FILE (bench, round,
# row, per_s, p99_ms, issued, answered, verdict, exit), for bench/glance.sh.
# Environment: BUILD_DIR (default build/), DLOCK_REDIS_SERVER.
# Exit status: 0 iff every row said NO OVERSELL (else 1, naming the row on
# stderr); 2 on usage or start-up errors, with the reason on stderr.
set -Eeuo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=bench/lib/sale_bench.sh
. "$here/lib/sale_bench.sh"
sale_bench_init hot-coupon
# shellcheck disable=SC2034  # read by scripts/lib/sale.sh
threads=2
rounds=3 duration=4 claim_stock=10000000 redlock_opts="" atomic_opts="" try_opts=""

while [ $# -gt 0 ]; do
  case "$1" in
    -h|--help) usage ;;
    --rounds|--duration|--stock|--connections|--threads|--redlock-opts|--atomic-opts|--try|--json)
      need_value "$1" $# ;;
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
    --json) json_out="$2" ;;
  esac
  shift 2
done
sale_bench_start

STAGES=(http_in claim_queue local_queue lock read work commit release resume reply)
declare -A stage_s=() stage_n=() tput=() cpu_srv=() cpu_redis=() answers=()
hz="$(getconf CLK_TCK 2>/dev/null || echo 100)"

# One row: fresh database, fresh servers, the load; prints its line and
# appends its answers/s to tput[kind].
row() { # round kind strategy stock [server options...]
  local round="$1" kind="$2" strat="$3" db report log st=0 id
  local extra=("${@:5}")
  # shellcheck disable=SC2034  # create_coupon (scripts/lib/sale.sh) reads it
  stock="$4"
  db="$work/$kind-$round.db"
  flush_redis
  start_servers "$strat" "$db" "${extra[@]}"
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
  loadtest_figures "$report"
  printf '%-6s %-11s %12s %9s %10s  %s\n' "$round" "$kind" "${lt_rate:-?}" "${lt_p99:-?}" "${lt_issued:-?}" \
    "${lt_verdict:-exit $st}"
  json_row round "$round" row "$kind" per_s "${lt_rate:-null}" p99_ms "${lt_p99:-null}" issued "${lt_issued:-null}" \
    answered "${lt_answered:-0}" verdict "$lt_verdict" exit "$st"
  tput["$kind"]="${tput["$kind"]:-} ${lt_rate:-0}"
  answers["$kind"]=$(( ${answers["$kind"]:-0} + ${lt_answered:-0} ))
  if [ "$st" != 0 ] || [ "$lt_verdict" != "NO OVERSELL" ]; then
    rc=1
    echo "hot-coupon: round $round $kind: coupon-loadtest exit $st (${lt_verdict:-no verdict}); its last lines:" >&2
    tail -n 5 "$log" "$report" >&2 2>/dev/null || true
  fi
}

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
  c="$(printf '%.1f' "$c")" a="$(printf '%.1f' "$a")" l="$(printf '%.1f' "$l")"
}
echo
echo "medians of $rounds interleaved rounds (answers/s):"
printf '  %-11s %12s  %s\n' ceiling "$c" "1.00x ceiling"
printf '  %-11s %12s  %s of ceiling\n' atomic-sql "$a" "$(ratio "$a" "$c" x)"
printf '  %-11s %12s  %s of ceiling, %s of atomic-sql\n' redlock "$l" "$(ratio "$l" "$c" x)" "$(ratio "$l" "$a" x)"
if [ -n "$try_opts" ]; then
  # shellcheck disable=SC2086
  p="$(printf '%.1f' "$(median ${tput[redlock+]})")"
  printf '  %-11s %12s  %s of ceiling, %s of atomic-sql, %s of redlock\n' redlock+ "$p" "$(ratio "$p" "$c" x)" \
    "$(ratio "$p" "$a" x)" "$(ratio "$p" "$l" x)"
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
