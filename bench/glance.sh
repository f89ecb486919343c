#!/usr/bin/env bash
# glance.sh - the at-a-glance table of docs/benchmarks.md, from one pass on
# one tree. It runs the end-to-end benches one after the other (never two
# at a time) and records the load before and after each. It prints the
# table in markdown (what | command | result) under a line that names the
# date, the machine and the range of the load. The steps:
#   bench/hot-coupon.sh                  the hot coupon on SQLite
#   bench/db-compare.sh                  R runs with --pg-synchronous-commit
#                                        off, each followed by one with on
#   bench/peers.sh                       1 node 8 workers uncontended and
#                                        3 masters 64 workers contended
#   bench/many-coupons.sh                1, 10 and 100 coupons
#   bench/run-bench.sh --matrix -        dlock-bench: raw hiredis then
#                                        libdlock on 1, 3 and 5 nodes,
#                                        and 3 nodes contended
# Each script writes its runs as JSON lines (--json; dlock-bench prints its
# own), and the table is computed from those. A ratio is taken within one
# round (the two rows ran one after the other on the same nodes and load).
# A figure is the median of the rounds, the ratios' too.
#
# usage: bench/glance.sh [--rounds R] [--quick] [--logs DIR]
# --rounds R: rounds of every bench (default 3; about 11 minutes; 1 with
#   --quick).
# --quick: 1 s runs and small sales (about a minute): checks that every
#   step runs and the table fills in; its figures are not ones to quote.
# --logs DIR: keep every step's output and JSON lines in DIR (created if
#   missing); without it they go to a temp dir that is removed at exit.
# The PostgreSQL rows need its server binaries (apt-get install postgresql,
# or DLOCK_PG_BINDIR), the peers' rows bench/peers/node_modules (run
# bench/peers.sh --setup once); without them those rows say "not run" and
# why, and the other steps run.
# Environment: BUILD_DIR (default build/), DLOCK_REDIS_SERVER,
# DLOCK_PG_BINDIR, DLOCK_NODE (as the scripts it runs read them).
# Exit status: 0 when every step that ran exited 0; 1 when one did not (its
# row says FAILED, and the end of its output goes to stderr); 2 on usage
# errors.
set -Eeuo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
# shellcheck source=scripts/lib/err.sh
. "$root/scripts/lib/err.sh"
err_trap glance
die() { echo "glance: $*" >&2; exit 2; }
# shellcheck source=bench/lib/measure.sh
. "$here/lib/measure.sh"

rounds="" quick=0 logs=""
while [ $# -gt 0 ]; do
  case "$1" in
    -h|--help) sed -n '2,/^set -Eeuo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    --quick) quick=1; shift; continue ;;
    --rounds|--logs) [ $# -ge 2 ] || die "$1 needs a value (--help)" ;;
    *) die "unknown option $1 (--help)" ;;
  esac
  case "$1" in
    --rounds) need_int "$1" "$2" 1 100; rounds="$2" ;;
    --logs) logs="$2" ;;
  esac
  shift 2
done
[ -n "$rounds" ] || { [ "$quick" = 1 ] && rounds=1; } || rounds=3
bench_bin="${BUILD_DIR:-$root/build}/bin/dlock-bench"
[ -x "$bench_bin" ] || die "build first: no $bench_bin"

if [ -n "$logs" ]; then
  mkdir -p -- "$logs" || die "--logs: cannot create $logs"
  logs="$(cd "$logs" && pwd)"
else
  logs="$(mktemp -d "${TMPDIR:-/tmp}/glance.XXXXXX")" || die "cannot create a temp dir"
  # shellcheck disable=SC2064  # the path is fixed now
  trap "rm -rf -- '$logs'" EXIT
fi

# The sizes of each step: the scripts' own for a pass to quote, the
# smallest they take for --quick.
hot_args=(--rounds "$rounds") db_args=() peers_args=(--rounds "$rounds" --duration 4)
many_args=(--rounds "$rounds") run_s=3
if [ "$quick" = 1 ]; then
  hot_args+=(--duration 1 --stock 1000)
  db_args=(--requests 200 --stock 100 --connections 16)
  peers_args=(--rounds 1 --duration 1)
  many_args+=(--duration 1 --stock 1000)
  run_s=1
fi
peer_rows="1:8:uncontended,3:64:contended"

# What a step needs that may be missing: '' when it can run, else why not.
pg_missing() {
  if [ -n "${DLOCK_PG_BINDIR:-}" ]; then
    [ -x "$DLOCK_PG_BINDIR/postgres" ] && return 0
  elif compgen -G '/usr/lib/postgresql/*/bin/postgres' >/dev/null; then
    return 0
  fi
  echo "not run: no PostgreSQL server binaries (apt-get install postgresql, or set DLOCK_PG_BINDIR)"
}
peers_missing() {
  command -v "${DLOCK_NODE:-node}" >/dev/null 2>&1 && [ -d "$here/peers/node_modules" ] && return 0
  echo "not run: no node or no bench/peers/node_modules (bench/peers.sh --setup installs them)"
}

load1() { local l _; read -r l _ </proc/loadavg; echo "$l"; }

declare -A status=()
loads=() load_notes=() failed=()
# Runs one step, its output into $logs/NAME.out, with the load before and
# after it; status[NAME] = its exit status.
step() { # name command...
  local name="$1" st=0 l0 l1
  shift
  l0="$(load1)"
  echo "glance: $name (load $l0): $*" >&2
  { echo "load before: $(uptime)"; echo "\$ $*"; } >>"$logs/$name.out"
  "$@" >>"$logs/$name.out" 2>&1 </dev/null || st=$?
  l1="$(load1)"
  echo "load after: $(uptime)" >>"$logs/$name.out"
  loads+=("$l0" "$l1")
  load_notes+=("$name $l0-$l1")
  status["$name"]="$st"
  if [ "$st" != 0 ]; then
    failed+=("$name")
    echo "glance: $name exited $st; the end of its output:" >&2
    tail -n 15 "$logs/$name.out" | sed 's/^/  /' >&2
  fi
}

started="$(date -u '+%Y-%m-%d %H:%M')"

step hot-coupon "$here/hot-coupon.sh" "${hot_args[@]}" --json "$logs/hot-coupon.jsonl"

pg_why="$(pg_missing)"
if [ -z "$pg_why" ]; then
  for ((r = 1; r <= rounds; r++)); do
    for sync in off on; do
      step "db-compare-$sync-$r" "$here/db-compare.sh" --pg-synchronous-commit "$sync" "${db_args[@]}" \
        --json "$logs/db-compare.jsonl"
    done
  done
fi

peers_why="$(peers_missing)"
if [ -z "$peers_why" ]; then
  step peers "$here/peers.sh" "${peers_args[@]}" --rows "$peer_rows" --json "$logs/peers.jsonl"
fi

step many-coupons "$here/many-coupons.sh" "${many_args[@]}" --json "$logs/many-coupons.jsonl"

# dlock-bench: raw hiredis then libdlock on the same nodes, round by round.
matrix=""
for ((r = 1; r <= rounds; r++)); do
  for n in 1 3 5; do
    matrix+="$n --mode raw --workers 8 --duration $run_s"$'\n'
    matrix+="$n --mode uncontended --workers 8 --duration $run_s"$'\n'
  done
  matrix+="3 --mode contended --workers 8 --duration $run_s"$'\n'
  matrix+="3 --mode contended --workers 64 --duration $run_s"$'\n'
done
printf '%s' "$matrix" >"$logs/matrix"
# shellcheck disable=SC2016  # expanded by that bash, from its arguments
step dlock-bench bash -c '"$1" --bench "$2" --matrix "$3" >"$4"' run-bench "$here/run-bench.sh" "$bench_bin" \
  "$logs/matrix" "$logs/dlock-bench.jsonl"
finished="$(date -u '+%H:%M')"

# ---- the table, from the JSON lines ----

# shellcheck disable=SC2086  # the lists of numbers split into words on purpose
med() { median $1; }                                   # "n1 n2 ..." -> the median
x2() { awk -v v="$1" 'BEGIN { if (v ~ /^-?[0-9]/) printf "%.2fx", v; else print "-" }'; }
vals() { jsel "$@" | tr '\n' ' '; }                    # jsel's values on one line
failed_cell() { echo "FAILED: exit ${status[$1]} (its output: $1.out in the logs)"; }

hot_cell() {
  local jf="$logs/hot-coupon.jsonl" rl at ce rs
  [ "${status[hot-coupon]}" = 0 ] || { failed_cell hot-coupon; return; }
  rl="$(vals "$jf" per_s '"row":"redlock"')" at="$(vals "$jf" per_s '"row":"atomic-sql"')"
  ce="$(vals "$jf" per_s '"row":"ceiling"')" rs="$(ratios "$rl" "$at")"
  echo "\`redlock\` $(grouped "$(med "$rl")") vs \`atomic-sql\` $(grouped "$(med "$at")") answers/s:" \
    "**$(x2 "$(med "${rs//,/}")")** (rounds $rs); ceiling $(grouped "$(med "$ce")")," \
    "so $(ratio "$(med "$rl")" "$(med "$ce")" x) and $(ratio "$(med "$at")" "$(med "$ce")" x) of it"
}

db_cell() { # off|on
  local jf="$logs/db-compare.jsonl" s="\"pg_synchronous_commit\":\"$1\"" pr pa sr r1 r2 r
  for ((r = 1; r <= rounds; r++)); do
    [ "${status[db-compare-$1-$r]}" = 0 ] || { failed_cell "db-compare-$1-$r"; return; }
  done
  pr="$(vals "$jf" per_s "$s" '"store":"postgresql"' '"strategy":"redlock"')"
  pa="$(vals "$jf" per_s "$s" '"store":"postgresql"' '"strategy":"atomic-sql"')"
  sr="$(vals "$jf" per_s "$s" '"store":"sqlite"' '"strategy":"redlock"')"
  r1="$(ratios "$pr" "$pa")" r2="$(ratios "$pr" "$sr")"
  echo "PG \`redlock\` $(grouped "$(med "$pr")") vs PG \`atomic-sql\` $(grouped "$(med "$pa")") claims/s:" \
    "**$(x2 "$(med "${r1//,/}")")** (rounds $r1); PG \`redlock\` / SQLite \`redlock\`" \
    "**$(x2 "$(med "${r2//,/}")")** (rounds $r2)"
}

peers_cell() { # row (NODES:WORKERS:MODE)
  local jf="$logs/peers.jsonl" row="\"row\":\"$1\"" lib best="" best_ops=-1 c m r top o per="" lp bp
  [ "${status[peers]}" = 0 ] || { failed_cell peers; return; }
  lib="$(vals "$jf" ops_per_s "$row" '"client":"libdlock"')"
  for c in node-redlock redis-semaphore; do
    m="$(med "$(vals "$jf" ops_per_s "$row" "\"client\":\"$c\"")")"
    if awk -v a="$m" -v b="$best_ops" 'BEGIN { exit !(a > b) }'; then best="$c" best_ops="$m"; fi
  done
  # Each round against that round's best peer, as bench/peers.sh does.
  for ((r = 1; r <= rounds; r++)); do
    top=""
    for c in node-redlock redis-semaphore; do
      o="$(vals "$jf" ops_per_s "$row" "\"round\":$r," "\"client\":\"$c\"")"
      o="${o% }"
      [ -n "$o" ] || continue
      if [ -z "$top" ] || awk -v a="$o" -v b="$top" 'BEGIN { exit !(a > b) }'; then top="$o"; fi
    done
    o="$(vals "$jf" ops_per_s "$row" "\"round\":$r," '"client":"libdlock"')"
    per+="${per:+ }$(ratio "${o% }" "$top")"
  done
  lp="$(med "$(vals "$jf" acq_p99_ms "$row" '"client":"libdlock"')")"
  bp="$(med "$(vals "$jf" acq_p99_ms "$row" "\"client\":\"$best\"")")"
  echo "libdlock $(grouped "$(med "$lib")") vs $best $(grouped "$best_ops") ops/s: **$(x2 "$(med "$per")")**" \
    "(rounds ${per// /, }); acquire p99 $lp vs $bp ms ($(ratio "$lp" "$bp" x)); per worker" \
    "$(spread "$jf" "$row" libdlock) ($best $(spread "$jf" "$row" "$best"))"
}

spread() { # file row client -> the medians of its per-worker successes, "min-max"
  echo "$(med "$(vals "$1" per_worker_min "$2" "\"client\":\"$3\"")")-$(med "$(vals "$1" per_worker_max "$2" \
    "\"client\":\"$3\"")")"
}

many_cell() {
  local jf="$logs/many-coupons.jsonl" n rl at rs counts="" rls="" ats="" heads="" rounds_text=""
  [ "${status[many-coupons]}" = 0 ] || { failed_cell many-coupons; return; }
  for n in $(vals "$jf" coupons '"row":"redlock"' | tr ' ' '\n' | awk 'NF && !seen[$1]++'); do
    rl="$(vals "$jf" per_s "\"coupons\":$n," '"row":"redlock"')"
    at="$(vals "$jf" per_s "\"coupons\":$n," '"row":"atomic-sql"')"
    rs="$(ratios "$rl" "$at")"
    counts+="${counts:+ / }$n" rls+="${rls:+ / }$(grouped "$(med "$rl")")" ats+="${ats:+ / }$(grouped "$(med "$at")")"
    heads+="${heads:+ / }$(x2 "$(med "${rs//,/}")")" rounds_text+="${rounds_text:+; }$n: $rs"
  done
  echo "$counts coupons: \`redlock\` $rls claims/s against \`atomic-sql\` $ats: **$heads** (rounds $rounds_text)"
}

# dlock-bench: libdlock against raw hiredis on N nodes, 8 workers.
bench_cell() { # nodes
  local jf="$logs/dlock-bench.jsonl" sel=("\"redis_nodes\":$1," '"workers":8,') lib raw rs
  [ "${status[dlock-bench]}" = 0 ] || { failed_cell dlock-bench; return; }
  lib="$(vals "$jf" ops_per_s '"mode":"uncontended"' "${sel[@]}")" raw="$(vals "$jf" ops_per_s '"mode":"raw"' "${sel[@]}")"
  rs="$(ratios "$lib" "$raw")"
  echo "libdlock $(grouped "$(med "$lib")") vs raw hiredis $(grouped "$(med "$raw")") ops/s:" \
    "**$(x2 "$(med "${rs//,/}")")** (rounds $rs); acquire p99 $(med "$(vals "$jf" acq_p99_ms '"mode":"uncontended"' \
    "${sel[@]}")") ms; $(printf '%.2f' "$(med "$(vals "$jf" lock_rt_per_success '"mode":"uncontended"' \
    "${sel[@]}")")") round trips per acquire + release"
}

contended_cell() {
  local jf="$logs/dlock-bench.jsonl" w ops="" p99="" v worst=0
  [ "${status[dlock-bench]}" = 0 ] || { failed_cell dlock-bench; return; }
  for w in 8 64; do
    ops+="${ops:+ / }$(grouped "$(med "$(vals "$jf" ops_per_s '"mode":"contended"' '"redis_nodes":3,' "\"workers\":$w,")")")"
    p99+="${p99:+ / }$(med "$(vals "$jf" acq_p99_ms '"mode":"contended"' '"redis_nodes":3,' "\"workers\":$w,")")"
  done
  for v in $(vals "$jf" violations '"mode":"contended"'); do [ "$v" -le "$worst" ] || worst="$v"; done
  echo "$ops ops/s, acquire p99 $p99 ms; violations $worst in every run (counter = successes)"
}

runs="$rounds runs" nrounds="$rounds rounds"
[ "$rounds" != 1 ] || runs="1 run" nrounds="1 round"
cmd_hot="bench/hot-coupon.sh ${hot_args[*]}"
cmd_db="bench/db-compare.sh --pg-synchronous-commit off${db_args[*]:+ ${db_args[*]}}"
cmd_peers="bench/peers.sh ${peers_args[*]} --rows $peer_rows"
cmd_many="bench/many-coupons.sh ${many_args[*]}"
lo="$(printf '%s\n' "${loads[@]}" | sort -g | head -n 1)" hi="$(printf '%s\n' "${loads[@]}" | sort -g | tail -n 1)"
model="$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)"
redis_v="$("${DLOCK_REDIS_SERVER:-redis-server}" --version 2>/dev/null | sed -n 's/.* v=\([^ ]*\).*/\1/p')"
title="bench/glance.sh"
[ "$quick" = 1 ] && title+=" --quick"
if { [ "$quick" = 1 ] && [ "$rounds" != 1 ]; } || { [ "$quick" = 0 ] && [ "$rounds" != 3 ]; }; then
  title+=" --rounds $rounds"
fi

echo
echo "One pass of \`$title\` on $started-$finished UTC: $(nproc) cores (${model:-unknown}), Linux $(uname -r)," \
  "Redis ${redis_v:-?}; load average $lo-$hi (1 minute, before and after each step). A ratio is taken" \
  "within each round and its median given, the rounds' own in brackets; a rate is the median of the rounds."
echo
echo "| what | command | result |"
echo "| --- | --- | --- |"
echo "| hot coupon on SQLite, each strategy at its defaults | \`$cmd_hot\` | $(hot_cell) |"
if [ -z "$pg_why" ]; then
  echo "| PostgreSQL, \`synchronous_commit\` off | \`$cmd_db\`, $runs alternating with \`on\` | $(db_cell off) |"
  echo "| PostgreSQL, \`synchronous_commit\` on | the same, \`--pg-synchronous-commit on\` | $(db_cell on) |"
else
  echo "| PostgreSQL, \`synchronous_commit\` off and on | \`$cmd_db\` | $pg_why |"
fi
if [ -z "$peers_why" ]; then
  echo "| 64 workers on one key, 3 masters, against the best peer | \`$cmd_peers\` | $(peers_cell 3:64:contended) |"
  echo "| uncontended, 1 node, 8 workers, against the best peer | the same run | $(peers_cell 1:8:uncontended) |"
else
  echo "| libdlock against node-redlock and redis-semaphore | \`$cmd_peers\` | $peers_why |"
fi
echo "| a many-coupon sale, SQLite | \`$cmd_many\` | $(many_cell) |"
cmd_bench="\`bench/run-bench.sh --matrix -\`, $nrounds of $run_s s runs: raw then uncontended on 1, 3 and 5"
cmd_bench+=" nodes, 8 workers; contended on 3 nodes, 8 and 64 workers"
echo "| \`dlock-bench\` uncontended, 1 node, 8 workers | $cmd_bench | $(bench_cell 1) |"
echo "| Redlock uncontended, 3 nodes, 8 workers | the same run | $(bench_cell 3) |"
echo "| Redlock uncontended, 5 nodes, 8 workers | the same run | $(bench_cell 5) |"
echo "| Redlock contended, 3 nodes, 8 / 64 workers | the same run | $(contended_cell) |"
echo
echo "Load per step (1 minute, before-after): $(printf '%s\n' "${load_notes[@]}" | paste -sd ';' | sed 's/;/; /g')."
[ "${#failed[@]}" = 0 ] || { echo "glance: failed: ${failed[*]}" >&2; exit 1; }
exit 0
