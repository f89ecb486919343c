#!/usr/bin/env bash
# db-compare.sh - the hot coupon on SQLite and on PostgreSQL, side by side.
# For each store and each strategy (redlock, atomic-sql): 3 redis-server
# masters, 2 coupon-servers, a coupon of stock 100000. The load is 20000
# claims from 64 connections on min(64, cores) load-tester threads with no
# business step (--work-us 0), audited by coupon-loadtest (servers and
# database). Prints one table: claims/s, p99,
# issued, verdict. Every process is started here and stopped by its PID.
#
# usage: bench/db-compare.sh [--requests R] [--stock S] [--connections C] [--threads T]
#                            [--strategies a,b] [--stores sqlite,postgresql]
#                            [--pg-synchronous-commit on|off] [--stages] [--json FILE]
# --connections: the load tester's connections (default 64); --threads: its
# worker threads (default min(C, cores)).
# --pg-synchronous-commit off: PostgreSQL acknowledges a commit before its
# WAL reaches the disk (the closest to SQLite's WAL + synchronous=NORMAL,
# which does not fsync each commit either); default on (fsync per commit).
# --stages: under each row, where its claims' time went, from the servers'
# coupon_claim_stage_seconds_total summed over both (microseconds per claim
# answered; a batch's lock, read, commit and release count once per batch),
# and the sold-out fast path's store round trips (coupon_stock_peeks_total).
# --json FILE: also append one JSON line per row to FILE (bench,
# pg_synchronous_commit, store, strategy, per_s, p99_ms, issued, total,
# verdict, exit), for bench/glance.sh.
# Environment: BUILD_DIR (default build/), DLOCK_REDIS_SERVER, DLOCK_PG_BINDIR
# (default: the highest /usr/lib/postgresql/*/bin), DLOCK_PG_USER (the user
# postgres runs as when this runs as root; default nobody).
# Exit status: 0 iff every row said NO OVERSELL (else 1, naming the row on
# stderr); 2 on usage or start-up errors, with the reason on stderr.
set -Eeuo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=bench/lib/sale_bench.sh
. "$here/lib/sale_bench.sh"
sale_bench_init db-compare
# The same for every row (scripts/lib/sale.sh reads them); threads '' =
# min(connections, cores), and no load_rate: a closed loop.
# shellcheck disable=SC2034  # read by scripts/lib/sale.sh
stock=100000 requests=20000
strategies="redlock,atomic-sql" stores="sqlite,postgresql" pg_sync=on stages=0

while [ $# -gt 0 ]; do
  case "$1" in
    -h|--help) usage ;;
    --stages) stages=1; shift; continue ;;
    --requests|--stock|--connections|--threads|--strategies|--stores|--pg-synchronous-commit|--json)
      need_value "$1" $# ;;
    *) die "unknown option $1 (--help)" ;;
  esac
  case "$1" in
    --requests) need_int "$1" "$2" 1 1000000000; requests="$2" ;;
    --stock) need_int "$1" "$2" 0 1000000000; stock="$2" ;;
    --connections) need_int "$1" "$2" 1 10000; connections="$2" ;;
    --threads) need_int "$1" "$2" 1 4096; threads="$2" ;;
    --strategies) strategies="$2" ;;
    --stores) stores="$2" ;;
    --pg-synchronous-commit)
      case "$2" in on|off) pg_sync="$2" ;; *) die "--pg-synchronous-commit: '$2' is not on or off" ;; esac ;;
    --json) json_out="$2" ;;
  esac
  shift 2
done
IFS=, read -r -a strategy_list <<<"$strategies"
IFS=, read -r -a store_list <<<"$stores"
for s in "${strategy_list[@]}"; do
  case "$s" in redlock|atomic-sql|none) ;; *) die "--strategies: '$s' is not redlock, atomic-sql or none" ;; esac
done
for s in "${store_list[@]}"; do
  case "$s" in sqlite|postgresql) ;; *) die "--stores: '$s' is not sqlite or postgresql" ;; esac
done

pg_pid="" pg_port=""
# shellcheck disable=SC2317  # run at exit only (sale_bench_on_exit)
stop_pg() {
  [ -n "$pg_pid" ] || return 0
  # SIGINT: PostgreSQL's fast shutdown; bounded, then SIGKILL, by PID only.
  kill -INT "$pg_pid" 2>/dev/null || true
  local i
  for ((i = 0; i < 200; i++)); do proc_alive "$pg_pid" || break; sleep 0.05; done
  if proc_alive "$pg_pid"; then kill -KILL "$pg_pid" 2>/dev/null || true; fi
  wait "$pg_pid" 2>/dev/null || true
  pg_pid=""
}
# shellcheck disable=SC2317  # run by the EXIT trap (bench/lib/sale_bench.sh)
sale_bench_on_exit() { stop_pg; }

pg_bindir() {
  if [ -n "${DLOCK_PG_BINDIR:-}" ]; then echo "$DLOCK_PG_BINDIR"; return; fi
  local d
  d="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)"
  [ -n "$d" ] || die "no PostgreSQL server binaries (apt-get install postgresql)"
  echo "$d"
}

start_pg() {
  local bindir as=() port t
  bindir="$(pg_bindir)"
  mkdir -p "$work/pg"
  # initdb and postgres refuse to run as root: run them as an unprivileged user.
  if [ "$(id -u)" = 0 ]; then
    chmod 711 "$work"  # mktemp -d is 0700: the user must reach pg/ inside it
    chown "${DLOCK_PG_USER:-nobody}" "$work/pg"
    # setpriv changes user and execs in place (runuser forks and waits), so
    # $! below is postgres itself and stop_pg's signals reach it.
    local user="${DLOCK_PG_USER:-nobody}"
    as=(setpriv --reuid="$user" --regid="$(id -g "$user")" --clear-groups --)
  fi
  "${as[@]}" "$bindir/initdb" -D "$work/pg/data" -U postgres --auth=trust -N -E UTF8 --no-locale \
    >"$work/initdb.log" 2>&1 || die "initdb failed: $(tail -n 3 "$work/initdb.log")"
  port="$(pick_port 90)"
  # fsync stays on: the numbers are those of a database that keeps its commits.
  spawn "${as[@]}" "$bindir/postgres" -D "$work/pg/data" -k "$work/pg" -p "$port" -h 127.0.0.1 \
    -c max_connections=200 -c synchronous_commit="$pg_sync" >"$work/postgres.log" 2>&1
  pg_pid=$!
  for ((t = 0; t < 400; t++)); do
    "$bindir/pg_isready" -q -h 127.0.0.1 -p "$port" -U postgres && break
    proc_alive "$pg_pid" || die "postgres did not start: $(tail -n 3 "$work/postgres.log")"
    sleep 0.05
  done
  "$bindir/pg_isready" -q -h 127.0.0.1 -p "$port" -U postgres || die "postgres not ready on port $port"
  pg_port="$port"
}

fresh_db() { # store strategy -> the --db value, a fresh database each run
  if [ "$1" = sqlite ]; then
    echo "$work/$2.db"
  else
    "$(pg_bindir)/createdb" -h 127.0.0.1 -p "$pg_port" -U postgres "c_${2//-/_}" || die "createdb failed"
    echo "postgresql://postgres@127.0.0.1:$pg_port/c_${2//-/_}"
  fi
}

sale_bench_start
case ",$stores," in *,postgresql,*) start_pg ;; esac

# The servers' stage times per claim answered and their stock peeks, as one
# line (a build without the stock view shows its peeks as "-").
stage_line() {
  local u all=""
  for u in "${server_urls[@]}"; do
    all+="$(curl -s --max-time 5 "$u/metrics" || true)"$'\n'
  done
  awk '
    /^coupon_claims_total[{]/ { claims += $2 }
    /^coupon_claim_stage_seconds_total[{]/ {
      match($0, /stage="[a-z_]+"/); s = substr($0, RSTART + 7, RLENGTH - 8)
      if (!(s in sec)) order[++n] = s
      sec[s] += $2
    }
    /^coupon_stock_peeks_total[{]/ {
      match($0, /result="[a-z]+"/); r = substr($0, RSTART + 8, RLENGTH - 9); peeks[r] += $2
    }
    END {
      printf "  us per claim (%d claims):", claims
      for (i = 1; i <= n; i++) printf " %s %.0f", order[i], claims ? sec[order[i]] * 1e6 / claims : 0
      if ("issued" in peeks)
        printf "; stock peeks issued %d saved %d coalesced %d\n", peeks["issued"], peeks["saved"], peeks["coalesced"]
      else
        printf "; stock peeks -\n"
    }' <<<"$all"
}

# One row: fresh database, fresh servers, the load; prints the table's line.
# Its values are local: nothing one row measures reaches the next.
db_row() { # store strategy
  local store="$1" strat="$2" db id report log st=0
  db="$(fresh_db "$store" "$strat")" || exit 2
  start_servers "$strat" "$db"
  id="$(create_coupon hot)" || exit 2
  report="$work/report-$store-$strat.txt" log="$work/load-$store-$strat.log"
  # The tester's progress lines go to a log, shown when the row fails.
  run_load "$id" "$db" "$report" 2>"$log" || st=$?
  local stage_text=""
  [ "$stages" = 0 ] || stage_text="$(stage_line)"
  stop_servers
  loadtest_figures "$report"
  printf '%-11s %-11s %10s %9s %12s  %s\n' "$store" "$strat" "${lt_rate:-?}" "${lt_p99:-?}" \
    "${lt_issued:-?}/${lt_total:-?}" "${lt_verdict:-exit $st}"
  json_row pg_synchronous_commit "$pg_sync" store "$store" strategy "$strat" per_s "${lt_rate:-null}" \
    p99_ms "${lt_p99:-null}" issued "${lt_issued:-null}" total "${lt_total:-null}" verdict "$lt_verdict" exit "$st"
  [ -z "$stage_text" ] || echo "$stage_text"
  if [ "$st" != 0 ]; then
    rc=1
    echo "db-compare: $store $strat: coupon-loadtest exit $st (${lt_verdict:-no verdict}); its last lines:" >&2
    tail -n 5 "$log" "$report" >&2 2>/dev/null || true
  fi
}

rc=0
printf '%-11s %-11s %10s %9s %12s  %s\n' store strategy claims/s "p99 ms" issued/stock verdict
for store in "${store_list[@]}"; do
  for strat in "${strategy_list[@]}"; do
    db_row "$store" "$strat"
  done
done
exit "$rc"
