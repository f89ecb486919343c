#!/usr/bin/env bash
# peers.sh - libdlock against its peers, side by side: dlock-bench (libdlock
# at its defaults) and the Node drivers of bench/peers/ (node-redlock and
# redis-semaphore, the same flags, loops and JSON line) on the same
# throwaway redis-server nodes. For each row, R rounds; in each round every
# client runs once, in an order that rotates by one each round, with the
# row's nodes flushed before each run. Prints a line per run, then markdown
# tables:
#   - the medians (ops/s, acquire p50 / p99 of the successful acquisitions,
#     per-worker successes min-max, acquisitions given up);
#   - the worst round's violations;
#   - the CPU per success of the client process (dlock-bench: this shell's
#     `times`; the Node driver: its own cpu_s, over its measured loops) and
#     of the row's redis-servers (/proc);
#   - libdlock against the best peer of each row: the ratio of the ops/s
#     medians, with each round's ratio to that round's best peer; its
#     acquire p99 against that peer's; its per-worker max/min;
#   - for each uncontended row, Redis INFO commandstats per client: calls
#     per success and microseconds per call, summed over the rounds and the
#     row's nodes (CONFIG RESETSTAT before each run, so the warm-up's few
#     calls count too).
# `uptime` is printed before and after.
#
# usage: bench/peers.sh [--rounds R] [--duration S] [--rows LIST] [--clients LIST]
#                       [--bench PATH] [--setup] [--json FILE]
# --rounds: runs of each client per row (default 3). --duration: seconds per
# run (default 4). --rows: NODES:WORKERS:MODE[,...] (default
# 1:8:uncontended,3:64:contended,1:64:contended,3:8:uncontended).
# --clients: from libdlock, node-redlock, redis-semaphore (the default, all
# three) and none: the peer driver with no lock at all, whose contended
# runs must report violations (what the check catches). --bench: the
# dlock-bench binary (default $BUILD_DIR/bin/dlock-bench). --setup: first
# run scripts/setup.sh's peers set (packages, the build, npm ci in
# bench/peers). --json FILE: also append each run's JSON line to FILE,
# dlock-bench's or the driver's, with bench, round, row and client put in
# front (a run that printed none: those and its exit), for bench/glance.sh.
# Environment: BUILD_DIR (default build/), DLOCK_REDIS_SERVER, DLOCK_NODE
# (the node binary, default node).
# Exit status: 0 iff every run exited 0 and reported violations 0; 1 when
# one did not (each named on stderr, with its stderr); 2 on usage or
# start-up errors (no bench/peers/node_modules: run with --setup).
set -Eeuo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
# shellcheck source=scripts/lib/err.sh
. "$root/scripts/lib/err.sh"
err_trap peers.sh
# INFO's reply is counted in bytes; C keeps bash's ${#line} in bytes too.
export LC_ALL=C

die() { echo "peers.sh: $*" >&2; exit 2; }

# shellcheck source=bench/lib/measure.sh
. "$here/lib/measure.sh"

rounds=3 duration=4 setup=0
rows_csv="1:8:uncontended,3:64:contended,1:64:contended,3:8:uncontended"
clients_csv="libdlock,node-redlock,redis-semaphore"
bench="" json_out=""
while [ $# -gt 0 ]; do
  case "$1" in
    -h|--help) sed -n '2,/^set -Eeuo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    --setup) setup=1; shift; continue ;;
    --rounds|--duration|--rows|--clients|--bench|--json) [ $# -ge 2 ] || die "$1 needs a value (--help)" ;;
    *) die "unknown option $1 (--help)" ;;
  esac
  case "$1" in
    --rounds) need_int "$1" "$2" 1 100; rounds="$2" ;;
    --duration) need_int "$1" "$2" 1 3600; duration="$2" ;;
    --rows) rows_csv="$2" ;;
    --clients) clients_csv="$2" ;;
    --bench) bench="$2" ;;
    --json) json_out="$2" ;;
  esac
  shift 2
done

IFS=, read -r -a rows <<<"$rows_csv"
IFS=, read -r -a clients <<<"$clients_csv"
[ "${#rows[@]}" -gt 0 ] || die "--rows: empty list"
[ "${#clients[@]}" -gt 0 ] || die "--clients: empty list"
max_nodes=0 peers_needed=0
for r in "${rows[@]}"; do
  [[ "$r" =~ ^([0-9]+):([0-9]+):(uncontended|contended)$ ]] ||
    die "--rows: '$r' is not NODES:WORKERS:uncontended|contended"
  n="${BASH_REMATCH[1]}" w="${BASH_REMATCH[2]}"
  need_int "nodes in $r" "$n" 1 16
  need_int "workers in $r" "$w" 1 1024
  [ "$n" -le "$max_nodes" ] || max_nodes="$n"
done
for c in "${clients[@]}"; do
  case "$c" in
    libdlock) ;;
    node-redlock|redis-semaphore|none) peers_needed=1 ;;
    *) die "--clients: unknown client '$c' (libdlock, node-redlock, redis-semaphore, none)" ;;
  esac
done
[ "$(printf '%s\n' "${clients[@]}" | sort | uniq -d)" = "" ] || die "--clients: a client given twice"

if [ "$setup" = 1 ]; then
  # shellcheck source=scripts/setup.sh
  SETUP_SET=peers source "$root/scripts/setup.sh"
fi
bench="${bench:-${BUILD_DIR:-$root/build}/bin/dlock-bench}"
node_bin="${DLOCK_NODE:-node}"
redis_server="${DLOCK_REDIS_SERVER:-redis-server}"
[ -x "$bench" ] || die "dlock-bench not found at $bench (build it, pass --bench, or run with --setup)"
command -v "$redis_server" >/dev/null 2>&1 || die "redis-server not found ($redis_server)"
if [ "$peers_needed" = 1 ]; then
  command -v "$node_bin" >/dev/null 2>&1 || die "node not found ($node_bin): run bench/peers.sh --setup"
  [ -d "$here/peers/node_modules" ] ||
    die "the peer drivers' packages are not installed (no bench/peers/node_modules): run bench/peers.sh --setup"
fi

pids=() ports=() dirs=()
# shellcheck source=bench/lib/redis_nodes.sh
. "$here/lib/redis_nodes.sh"
work="$(mktemp -d "${TMPDIR:-/tmp}/dlock-peers.XXXXXX")" || die "cannot create a temp dir"
dirs+=("$work")
# shellcheck disable=SC2317  # called through the EXIT trap
cleanup() {
  local pid d
  for pid in "${pids[@]}"; do stop_pid "$pid"; done
  for d in "${dirs[@]}"; do rm -rf -- "$d"; done
}
trap cleanup EXIT
trap 'exit 130' INT TERM

echo "temp dir $work"
for _ in $(seq "$max_nodes"); do
  start_redis_node peers
  pids+=("$node_pid")
  ports+=("$node_port")
  echo "redis-server pid $node_pid on 127.0.0.1:$node_port"
done

# INFO commandstats of one node: "command calls usec" lines. The reply is
# one bulk string, read line by line until its byte count is consumed.
commandstats() { # port
  local head line len got=0
  exec 3<>"/dev/tcp/127.0.0.1/$1" || return 1
  printf 'INFO commandstats\r\n' >&3
  IFS= read -r -t 5 head <&3 || { exec 3>&- 3<&-; return 1; }
  head="${head%$'\r'}"
  [[ "$head" =~ ^\$([0-9]+)$ ]] || { exec 3>&- 3<&-; echo "peers.sh: INFO: '$head'" >&2; return 1; }
  len="${BASH_REMATCH[1]}"
  while [ "$got" -lt "$len" ] && IFS= read -r -t 5 line <&3; do
    got=$((got + ${#line} + 1))
    line="${line%$'\r'}"
    if [[ "$line" =~ ^cmdstat_([^:]+):calls=([0-9]+),usec=([0-9]+), ]]; then
      echo "${BASH_REMATCH[1]} ${BASH_REMATCH[2]} ${BASH_REMATCH[3]}"
    fi
  done
  exec 3>&- 3<&-
}

# The CPU this shell's finished children used so far (user + sys), in
# microseconds, into the variable named $1: the clients run as children, so
# the difference over one run is that client's CPU, process start-up
# included. `times` runs in this shell (in a $(...) it would see the
# subshell's children only).
children_cpu_us() { # variable name
  times >"$work/times"
  printf -v "$1" '%s' "$(awk 'NR == 2 { t = 0; for (i = 1; i <= 2; i++) { split($i, a, /[ms]/); t += a[1] * 60 + a[2] }
                               printf "%.0f", t * 1e6 }' "$work/times")"
}

# CPU used so far by the processes (utime + stime), in microseconds.
proc_cpu_us() { # pids...
  local pid stat sum=0 f hz
  hz="$(getconf CLK_TCK 2>/dev/null || echo 100)"
  for pid in "$@"; do
    stat="$(cat "/proc/$pid/stat")" || die "cannot read /proc/$pid/stat"
    # After the command (which may hold spaces): utime is field 14, stime 15.
    read -r -a f <<<"${stat##*) }"
    sum=$((sum + f[11] + f[12]))
  done
  echo $((sum * 1000000 / hz))
}

declare -A ops=() p50=() p99=() pwmin=() pwmax=() fails=() ccpu=() rcpu=() viol=() succ=() calls=() usec=() cmds=()
status=0

run_one() { # round row client
  local round="$1" row="$2" client="$3" n w mode csv out err st=0 line p k
  IFS=: read -r n w mode <<<"$row"
  csv="$(IFS=,; echo "${ports[*]:0:$n}")"
  # Each run starts from empty nodes (no leftover lock, fence or counter)
  # and, where commandstats are read, from zeroed counters.
  for p in "${ports[@]:0:$n}"; do
    [ "$(resp "$p" FLUSHALL)" = "+OK" ] || die "FLUSHALL failed on port $p"
    if [ "$mode" = uncontended ]; then
      [ "$(resp "$p" 'CONFIG RESETSTAT')" = "+OK" ] || die "CONFIG RESETSTAT failed on port $p"
    fi
  done
  out="$work/out" err="$work/err"
  local args=(--ports "$csv" --workers "$w" --duration "$duration" --mode "$mode")
  local c0 r0 c1 r1
  children_cpu_us c0
  r0="$(proc_cpu_us "${pids[@]:0:$n}")"
  # timeout: a backstop only; both drivers bound their own waits.
  if [ "$client" = libdlock ]; then
    timeout $((duration * 3 + 120)) "$bench" "${args[@]}" >"$out" 2>"$err" </dev/null || st=$?
  else
    timeout $((duration * 3 + 120)) "$node_bin" "$here/peers/driver.js" --client "$client" "${args[@]}" \
      >"$out" 2>"$err" </dev/null || st=$?
  fi
  children_cpu_us c1
  r1="$(proc_cpu_us "${pids[@]:0:$n}")"
  line="$(grep -m 1 '^{' "$out" || true)"
  if [ -n "$json_out" ]; then
    local tag
    tag="$(json_line bench peers round "$round" row "$row" client "$client" exit "$st")"
    if [ -n "$line" ]; then echo "${tag%\}},${line#\{}"; else echo "$tag"; fi >>"$json_out"
  fi
  k="$row|$client"
  local v o
  v="$(jget "$line" violations)" o="$(jget "$line" ops_per_s)"
  if [ "$st" != 0 ] || [ -z "$line" ] || [ "$v" != 0 ]; then
    echo "peers.sh: $client, $n node(s), $w workers, $mode, round $round: exit $st, violations ${v:-?}" >&2
    sed 's/^/  /' "$err" >&2
    status=1
  fi
  printf '%-5s %-5s %-7s %-11s  %-15s %10s %10s %10s\n' "$round" "$n" "$w" "$mode" "$client" "${o:-?}" \
    "$(jget "$line" acq_p99_ms)" "${v:-?}"
  [ -n "$line" ] || return 0
  ops["$k"]+=" $o"
  ops["$k|$round"]="$o"
  p50["$k"]+=" $(jget "$line" acq_p50_ms)"
  p99["$k"]+=" $(jget "$line" acq_p99_ms)"
  pwmin["$k"]+=" $(jget "$line" per_worker_min)"
  pwmax["$k"]+=" $(jget "$line" per_worker_max)"
  fails["$k"]+=" $(jget "$line" acquire_failures)"
  local s1
  s1="$(jget "$line" successes)"
  if [ "$s1" -gt 0 ]; then
    # The Node driver's own figure leaves out Node's start-up (tenths of a
    # second of CPU); dlock-bench's start-up is a few ms, counted in `times`.
    local drv
    drv="$(jget "$line" cpu_s)"
    if [ -n "$drv" ]; then
      ccpu["$k"]+=" $(awk -v c="$drv" -v s="$s1" 'BEGIN { printf "%.0f", c * 1e6 / s }')"
    else
      ccpu["$k"]+=" $(( (c1 - c0) / s1 ))"
    fi
    rcpu["$k"]+=" $(awk -v a="$((r1 - r0))" -v s="$s1" 'BEGIN { printf "%.1f", a / s }')"
  fi
  # The worst round: one violation anywhere is the finding.
  viol["$k"]=$(( ${viol[$k]:-0} > v ? ${viol[$k]:-0} : v ))
  succ["$k"]=$(( ${succ[$k]:-0} + $(jget "$line" successes) ))
  if [ "$mode" = uncontended ]; then
    local cmd c u stats
    for p in "${ports[@]:0:$n}"; do
      stats="$(commandstats "$p")" || die "INFO commandstats failed on port $p"
      while read -r cmd c u; do
        [ -n "$cmd" ] || continue
        calls["$k|$cmd"]=$(( ${calls[$k|$cmd]:-0} + c ))
        usec["$k|$cmd"]=$(( ${usec[$k|$cmd]:-0} + u ))
        case " ${cmds[$k]:-} " in *" $cmd "*) ;; *) cmds["$k"]+=" $cmd" ;; esac
      done <<<"$stats"
    done
  fi
}

echo "load before: $(uptime)"
echo "redis-server: $("$redis_server" --version | head -n 1); node: $("$node_bin" --version 2>/dev/null || echo none)"
echo "rows: ${rows[*]}; clients: ${clients[*]}; $rounds round(s) of $duration s"
echo
printf '%-5s %-5s %-7s %-11s  %-15s %10s %10s %10s\n' round nodes workers mode client ops/s 'p99 ms' violations
for row in "${rows[@]}"; do
  for ((r = 1; r <= rounds; r++)); do
    # Rotate the order each round, so no client always runs first after the flush.
    for ((i = 0; i < ${#clients[@]}; i++)); do
      run_one "$r" "$row" "${clients[$(( (i + r - 1) % ${#clients[@]} ))]}"
    done
  done
done

echo
echo "Medians of $rounds round(s), $duration s each:"
echo
echo "| nodes | workers | mode | client | ops/s | acq p50 ms | acq p99 ms | per-worker min-max | acquire failures | client CPU us/op | redis CPU us/op | violations |"
echo "| ---: | ---: | --- | --- | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: |"
for row in "${rows[@]}"; do
  IFS=: read -r n w mode <<<"$row"
  for c in "${clients[@]}"; do
    k="$row|$c"
    [ -n "${ops[$k]:-}" ] || { echo "| $n | $w | $mode | $c | - | - | - | - | - | - | - | no run |"; continue; }
    # shellcheck disable=SC2086  # the lists are space-separated numbers
    printf '| %s | %s | %s | %s | %.0f | %s | %s | %s-%s | %s | %s | %s | %s |\n' "$n" "$w" "$mode" "$c" \
      "$(median ${ops[$k]})" "$(median ${p50[$k]})" "$(median ${p99[$k]})" "$(median ${pwmin[$k]})" \
      "$(median ${pwmax[$k]})" "$(median ${fails[$k]})" "$(median ${ccpu[$k]:-null})" "$(median ${rcpu[$k]:-null})" \
      "${viol[$k]}"
  done
done

peer_list=()
for c in "${clients[@]}"; do
  case "$c" in node-redlock|redis-semaphore) peer_list+=("$c") ;; esac
done
if [ -n "${ops[${rows[0]}|libdlock]+x}" ] && [ "${#peer_list[@]}" -gt 0 ]; then
  echo
  echo "libdlock against the best peer of each row (the peer with the higher median ops/s):"
  echo
  echo "| nodes | workers | mode | best peer | ops/s libdlock / peer (each round's) | acq p99 libdlock / peer | per-worker max/min, libdlock |"
  echo "| ---: | ---: | --- | --- | --- | ---: | ---: |"
  for row in "${rows[@]}"; do
    IFS=: read -r n w mode <<<"$row"
    [ -n "${ops[$row|libdlock]:-}" ] || continue
    best="" best_ops=-1
    for c in "${peer_list[@]}"; do
      [ -n "${ops[$row|$c]:-}" ] || continue
      # shellcheck disable=SC2086
      m="$(median ${ops[$row|$c]})"
      if awk -v a="$m" -v b="$best_ops" 'BEGIN { exit !(a > b) }'; then best="$c" best_ops="$m"; fi
    done
    [ -n "$best" ] || continue
    # Within each round, libdlock against that round's best peer.
    per_round=()
    for ((r = 1; r <= rounds; r++)); do
      top=""
      for c in "${peer_list[@]}"; do
        o="${ops[$row|$c|$r]:-}"
        [ -n "$o" ] || continue
        if [ -z "$top" ] || awk -v a="$o" -v b="$top" 'BEGIN { exit !(a > b) }'; then top="$o"; fi
      done
      l="${ops[$row|libdlock|$r]:-}"
      [ -n "$top" ] && [ -n "$l" ] && per_round+=("$(ratio "$l" "$top")")
    done
    # shellcheck disable=SC2086
    {
      rounds_list="$(IFS=,; echo "${per_round[*]:-?}")"
      rounds_list="${rounds_list//,/, }"
      ops_ratio="$(ratio "$(median ${ops[$row|libdlock]})" "$best_ops")"
      p99r="$(awk -v a="$(median ${p99[$row|libdlock]})" -v b="$(median ${p99[$row|$best]})" \
        'BEGIN { if (a != "null" && b != "null" && b > 0) printf "%.3f", a / b; else print "-" }')"
      spread="$(awk -v a="$(median ${pwmax[$row|libdlock]})" -v b="$(median ${pwmin[$row|libdlock]})" \
        'BEGIN { if (b > 0) printf "%.2f", a / b; else print "inf" }')"
    }
    echo "| $n | $w | $mode | $best | $ops_ratio ($rounds_list) | $p99r | $spread |"
  done
fi

for row in "${rows[@]}"; do
  IFS=: read -r n w mode <<<"$row"
  [ "$mode" = uncontended ] || continue
  echo
  echo "INFO commandstats, $n node(s), $w workers, uncontended (summed over the rounds and the row's nodes):"
  echo
  echo "| client | command | calls per success | usec per call |"
  echo "| --- | --- | ---: | ---: |"
  for c in "${clients[@]}"; do
    k="$row|$c"
    s="${succ[$k]:-0}"
    [ "$s" -gt 0 ] || continue
    rare=""
    # shellcheck disable=SC2086  # a space-separated list of names
    for cmd in $(printf '%s\n' ${cmds[$k]:-} | sort); do
      # Below 0.01 per success: the set-up's own calls (connect checks,
      # script loads, the warm-up), named on one line instead.
      if [ $(( calls[$k|$cmd] * 100 )) -lt "$s" ]; then rare+=" $cmd"; continue; fi
      awk -v c="$c" -v m="$cmd" -v n="${calls[$k|$cmd]}" -v u="${usec[$k|$cmd]}" -v s="$s" \
        'BEGIN { printf "| %s | %s | %.3f | %.2f |\n", c, m, n / s, u / n }'
    done
    [ -z "$rare" ] || echo "| $c | (under 0.01 per success:$rare) | | |"
  done
done

echo
echo "load after: $(uptime)"
exit "$status"
