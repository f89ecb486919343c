#!/usr/bin/env bash
# many-coupons.sh - a sale of many coupons on SQLite: redlock against
# atomic-sql, each at its defaults, with the claims spread uniformly over 1,
# 10 and 100 coupons (coupon-loadtest --coupons N). It runs R rounds,
# interleaved, each row on a fresh SQLite file and a fresh pair of
# coupon-servers over the same 3 redis-server masters (flushed between
# rows). Per coupon count: atomic-sql, then redlock (N coupons of --stock
# each, every request a real claim by a distinct user). The load:
# coupon-loadtest --threads 2 --connections 64 --duration 4 --coupons N,
# audited per coupon against the servers and the database. Prints a line
# per row, then a table of medians (claims/s per coupon count, and redlock /
# atomic-sql), and per coupon count the stages of a claim (from the
# servers' coupon_claim_stage_seconds_total, summed over the rounds):
# microseconds per claim run and per pass. `uptime` before and after.
# Each row also prints its lock rounds per claim: the Lua scripts the
# masters ran during the load (the calls of EVALSHA, EVAL and FCALL in
# INFO commandstats, after minus before, summed over the masters) divided
# by the number of masters (a round asks every master) and by the claims
# answered; acquire and release are a round each.
#
# usage: bench/many-coupons.sh [--rounds R] [--duration S] [--stock N]
#                              [--counts "1 10 100"] [--connections C]
#                              [--threads T] [--redlock-opts "OPTS"]
#                              [--atomic-opts "OPTS"] [--try "OPTS"]
#                              [--base-bin DIR] [--redis-nodes N] [--zipf S]
#                              [--route rr|coupon] [--json FILE]
# --counts: the coupon counts, each 1..100. --redlock-opts / --atomic-opts:
# extra coupon-server options for that strategy's rows. --try: one more row
# per count and round, redlock with OPTS ("redlock+"). --base-bin: two more
# rows per count and round, atomic-sql and redlock run by the coupon-server
# in DIR ("base-atomic", "base-redlock": another build, e.g. main's, as the
# baseline of the same interleaved run). --redis-nodes: the Redis masters
# (default 3; 1 = a single instance, no Redlock quorum). --zipf S: the
# claims drawn Zipf-distributed over the coupons instead of uniformly (the
# k-th coupon with weight 1/k^S: coupon-loadtest --zipf S), as real sales
# are skewed; every count of --counts then uses it. --route coupon: each
# claim goes to the server a hash of its coupon id picks (coupon-loadtest
# --route coupon, as HAProxy's balance url_param coupon_id), instead of
# round robin (rr, the default): one server keeps a coupon's claims.
# --json FILE: also append one JSON line per row to FILE (bench, round,
# coupons, row, route, per_s, p99_ms, issued, answered, rounds_per_claim,
# verdict, exit), for
# bench/glance.sh.
# Environment: BUILD_DIR (default build/), DLOCK_REDIS_SERVER.
# Exit status: 0 iff every row said NO OVERSELL (else 1, naming the row on
# stderr); 2 on usage or start-up errors, with the reason on stderr.
set -Eeuo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=bench/lib/sale_bench.sh
. "$here/lib/sale_bench.sh"
sale_bench_init many-coupons
# shellcheck disable=SC2034  # read by scripts/lib/sale.sh
threads=2
own_server_bin="$server_bin"
rounds=3 duration=4 claim_stock=10000000 counts="1 10 100" redlock_opts="" atomic_opts="" try_opts=""
base_bin="" zipf="" route=rr

while [ $# -gt 0 ]; do
  case "$1" in
    -h|--help) usage ;;
    --rounds|--duration|--stock|--counts|--connections|--threads|--redlock-opts|--atomic-opts|--try|--base-bin|--redis-nodes|--zipf|--route|--json)
      need_value "$1" $# ;;
    *) die "unknown option $1 (--help)" ;;
  esac
  case "$1" in
    --rounds) need_int "$1" "$2" 1 100; rounds="$2" ;;
    --duration) need_int "$1" "$2" 1 3600; duration="$2" ;;
    --stock) need_int "$1" "$2" 1 1000000000; claim_stock="$2" ;;
    --counts) counts="$2" ;;
    --connections) need_int "$1" "$2" 1 10000; connections="$2" ;;
    --threads) need_int "$1" "$2" 1 4096; threads="$2" ;;
    --redlock-opts) redlock_opts="$2" ;;
    --atomic-opts) atomic_opts="$2" ;;
    --try) try_opts="$2" ;;
    --base-bin) base_bin="$2" ;;
    --redis-nodes) need_int "$1" "$2" 1 5; redis_nodes="$2" ;;
    --zipf) [[ "$2" =~ ^[0-9]+(\.[0-9]+)?$ ]] && awk -v s="$2" 'BEGIN { exit !(s > 0 && s <= 10) }' ||
              die "--zipf: '$2' is not a number in (0, 10]"
            zipf="$2" ;;
    --route) [ "$2" = rr ] || [ "$2" = coupon ] || die "--route: '$2' is not rr or coupon"
             route="$2" ;;
    --json) json_out="$2" ;;
  esac
  shift 2
done
# shellcheck disable=SC2206  # word splitting is the point: the list of counts
count_list=($counts)
[ "${#count_list[@]}" -gt 0 ] || die "--counts: no coupon count given"
for n in "${count_list[@]}"; do need_int "--counts" "$n" 1 100; done
if [ -n "$base_bin" ] && [ ! -x "$base_bin/coupon-server" ]; then die "--base-bin: no $base_bin/coupon-server"; fi
sale_bench_start

STAGES=(http_in claim_queue local_queue lock read work commit release resume reply)
declare -A stage_s=() stage_n=() tput=() cpu_srv=() cpu_redis=() cpu_load=() answers=() rpc=()
hz="$(getconf CLK_TCK 2>/dev/null || echo 100)"

# One row: fresh database, fresh servers, N coupons, the load; prints its
# line and appends its claims/s to tput[count:kind].
row() { # round count kind strategy server-binary [server options...]
  local round="$1" count="$2" kind="$3" strat="$4" db report log st=0 first="" id c
  local extra=("${@:6}")
  server_bin="$5"
  # shellcheck disable=SC2034  # create_coupon (scripts/lib/sale.sh) reads it
  stock="$claim_stock"
  db="$work/$kind-$count-$round.db"
  flush_redis
  start_servers "$strat" "$db" "${extra[@]}"
  for ((c = 0; c < count; c++)); do
    id="$(create_coupon "sale-$c")" || exit 2
    [ -n "$first" ] || first="$id"
    # A fresh file numbers its coupons 1, 2, ...: the range below is exactly ours.
    [ "$id" = $((first + c)) ] || die "coupon ids not consecutive ($first, then $id)"
  done
  report="$work/report-$kind-$count-$round.txt" log="$work/load-$kind-$count-$round.log"
  local srv0 redis0 load0 key="$count:$kind" scripts0 scripts1 rounds
  srv0="$(cpu_ticks "${server_pids[@]}")" redis0="$(cpu_ticks "${redis_pids[@]}")"
  # Apart: die in $(...) ends only the subshell.
  scripts0="$(script_calls)" || exit 2
  # The load tester's CPU: its children's times, read by `times` after it exits.
  times >"$work/times"
  load0="$(sed -n 2p "$work/times")"
  "$loadtest_bin" --url "$(IFS=,; echo "${server_urls[*]}")" --coupon "$first" --coupons "$count" \
    ${zipf:+--zipf "$zipf"} --route "$route" --threads "$threads" --connections "$connections" \
    --duration "$duration" --db "$db" >"$report" 2>"$log" || st=$?
  scripts1="$(script_calls)" || exit 2
  cpu_srv["$key"]=$(( ${cpu_srv["$key"]:-0} + $(cpu_ticks "${server_pids[@]}") - srv0 ))
  cpu_redis["$key"]=$(( ${cpu_redis["$key"]:-0} + $(cpu_ticks "${redis_pids[@]}") - redis0 ))
  times >"$work/times" # in this shell: a $(times) subshell would report its own children
  cpu_load["$key"]="$(awk -v a="${cpu_load["$key"]:-0}" -v b="$load0" -v c="$(sed -n 2p "$work/times")" 'function s(t, m, x) {
      # "XmY.YYYs XmY.YYYs" (user, system) -> seconds
      n = split(t, p, " "); x = 0; for (i = 1; i <= n; i++) { split(p[i], q, "m"); x += q[1] * 60 + q[2] } return x }
    BEGIN { printf "%.3f", a + s(c) - s(b) }')"
  scrape_stages "$count:$kind"
  stop_servers
  rm -f -- "$db" "$db-wal" "$db-shm"
  loadtest_figures "$report"
  rounds="$(awk -v d="$((scripts1 - scripts0))" -v m="$redis_nodes" -v a="${lt_answered:-0}" \
    'BEGIN { if (a > 0) printf "%.2f", d / m / a; else print "-" }')"
  printf '%-6s %7s %-13s %10s %9s %9s %12s  %s\n' "$round" "$count" "$kind" "${lt_rate:-?}" "${lt_p99:-?}" \
    "${lt_issued:-?}" "$rounds" "${lt_verdict:-exit $st}"
  local rounds_json="$rounds"
  [ "$rounds" != - ] || rounds_json=null
  json_row round "$round" coupons "$count" row "$kind" route "$route" per_s "${lt_rate:-null}" \
    p99_ms "${lt_p99:-null}" issued "${lt_issued:-null}" answered "${lt_answered:-0}" \
    rounds_per_claim "$rounds_json" verdict "$lt_verdict" exit "$st"
  tput["$count:$kind"]="${tput["$count:$kind"]:-} ${lt_rate:-0}"
  [ "$rounds" = - ] || rpc["$count:$kind"]="${rpc["$count:$kind"]:-} $rounds"
  answers["$key"]=$(( ${answers["$key"]:-0} + ${lt_answered:-0} ))
  if [ "$st" != 0 ] || [ "$lt_verdict" != "NO OVERSELL" ]; then
    rc=1
    echo "many-coupons: round $round, $count coupons, $kind: coupon-loadtest exit $st (${lt_verdict:-no verdict}); its last lines:" >&2
    tail -n 5 "$log" "$report" >&2 2>/dev/null || true
  fi
}

# shellcheck disable=SC2206  # word splitting is the point: the extra options
rl_extra=($redlock_opts) at_extra=($atomic_opts) try_extra=($try_opts)
kinds=(atomic-sql redlock)
[ -z "$try_opts" ] || kinds+=(redlock+)
[ -z "$base_bin" ] || kinds+=(base-atomic base-redlock)
dist="uniform"
[ -z "$zipf" ] || dist="Zipf $zipf"
echo "load before: $(uptime)"
echo "many coupons on SQLite: $instances coupon-servers, $redis_nodes redis masters, coupon-loadtest --threads $threads --connections $connections --duration $duration --coupons N ($dist) --route $route; stock $claim_stock per coupon, a distinct user per claim"
echo "rounds/claim = (EVALSHA + EVAL + FCALL calls on the masters during the load, summed) / $redis_nodes masters / claims answered"
[ -z "$redlock_opts$atomic_opts" ] || echo "extra options: redlock '$redlock_opts', atomic-sql '$atomic_opts'"
[ -z "$try_opts" ] || echo "redlock+: redlock $redlock_opts $try_opts"
[ -z "$base_bin" ] || echo "base-*: the coupon-server of $base_bin"
rc=0
printf '%-6s %7s %-13s %10s %9s %9s %12s  %s\n' round coupons row claims/s "p99 ms" issued rounds/claim verdict
for ((r = 1; r <= rounds; r++)); do
  for n in "${count_list[@]}"; do
    row "$r" "$n" atomic-sql atomic-sql "$own_server_bin" "${at_extra[@]}"
    row "$r" "$n" redlock redlock "$own_server_bin" "${rl_extra[@]}"
    [ -z "$try_opts" ] || row "$r" "$n" redlock+ redlock "$own_server_bin" "${rl_extra[@]}" "${try_extra[@]}"
    if [ -n "$base_bin" ]; then
      row "$r" "$n" base-atomic atomic-sql "$base_bin/coupon-server" "${at_extra[@]}"
      row "$r" "$n" base-redlock redlock "$base_bin/coupon-server" "${rl_extra[@]}"
    fi
  done
done
echo "load after: $(uptime)"

# A table of medians: TITLE, then a header of the coupon counts and a line
# per row kind of the median of map["count:kind"] over the rounds in FMT
# ("-" where no round gave one). Usage: median_table TITLE MAP FMT.
median_table() {
  local -n map="$2"
  local k n m line

  echo
  echo "$1"
  line="$(printf '  %-13s' coupons)"
  for n in "${count_list[@]}"; do line+="$(printf ' %10s' "$n")"; done
  echo "$line"
  for k in "${kinds[@]}"; do
    line="$(printf '  %-13s' "$k")"
    for n in "${count_list[@]}"; do
      # shellcheck disable=SC2086  # the list of numbers splits into words on purpose
      m="$(median ${map["$n:$k"]:-})"
      if [ "$m" = null ]; then line+="$(printf ' %10s' -)"; else line+="$(printf " $3" "$m")"; fi
    done
    echo "$line"
  done
}

median_table "medians of $rounds interleaved rounds (claims/s):" tput '%10.0f'
for k in "${kinds[@]}"; do
  [ "$k" != atomic-sql ] || continue
  base=atomic-sql
  [ "$k" != base-redlock ] || base="base-atomic"
  [ "$k" != base-atomic ] || continue
  line="$(printf '  %-13s' "$k/$base")"
  # shellcheck disable=SC2086
  for n in "${count_list[@]}"; do
    line+="$(printf ' %10s' "$(ratio "$(median ${tput["$n:$k"]})" "$(median ${tput["$n:$base"]})" x)")"
  done
  echo "$line"
done
if [ -n "$base_bin" ]; then
  for k in atomic-sql redlock; do
    line="$(printf '  %-13s' "$k/base")"
    # shellcheck disable=SC2086
    for n in "${count_list[@]}"; do
      line+="$(printf ' %10s' "$(ratio "$(median ${tput["$n:$k"]})" "$(median ${tput["$n:base-${k%-sql}"]})" x)")"
    done
    echo "$line"
  done
fi

median_table "medians of $rounds rounds (lock rounds per claim, route $route):" rpc '%10.2f'
for n in "${count_list[@]}"; do
  echo
  echo "where a claim's time goes, $n coupon(s) (all rounds; us per claim run / us per pass, passes):"
  line="$(printf '  %-12s' stage)"
  for k in "${kinds[@]}"; do line+="$(printf ' %24s' "$k")"; done
  echo "$line"
  for s in "${STAGES[@]}"; do
    line="$(printf '  %-12s' "$s")"
    for k in "${kinds[@]}"; do
      sec="${stage_s["$n:$k:$s"]:-0}" cnt="${stage_n["$n:$k:$s"]:-0}" cl="${stage_n["$n:$k:claim_queue"]:-0}"
      line+="$(awk -v s="$sec" -v n="$cnt" -v c="$cl" 'BEGIN { printf " %7.1f /%7.1f %8d", (c ? s * 1e6 / c : 0), (n ? s * 1e6 / n : 0), n }')"
    done
    echo "$line"
  done
  line="$(printf '  %-12s' 'lock retries')"
  for k in "${kinds[@]}"; do
    line+="$(awk -v r="${stage_n["$n:$k:retries"]:-0}" -v p="${stage_n["$n:$k:lock"]:-0}" 'BEGIN { printf " %15.2f /acquire", (p ? r / p : 0) }')"
  done
  echo "$line"
  echo "  CPU per answer (user + system over the answers): servers / redis masters / load tester, us"
  for k in "${kinds[@]}"; do
    key="$n:$k"
    awk -v k="$k" -v s="${cpu_srv[$key]:-0}" -v r="${cpu_redis[$key]:-0}" -v l="${cpu_load[$key]:-0}" \
      -v a="${answers[$key]:-0}" -v hz="$hz" 'BEGIN { if (a > 0)
        printf "    %-13s %7.1f / %7.1f / %7.1f\n", k, s * 1e6 / hz / a, r * 1e6 / hz / a, l * 1e6 / a }'
  done
done
exit "$rc"
