#!/usr/bin/env bash
# db-compare.sh - the hot coupon on SQLite and on PostgreSQL, side by side:
# for each store and each strategy (redlock, atomic-sql), 3 redis-server
# masters, 2 coupon-servers, a coupon of stock 100000, 20000 claims from 64
# connections on min(64, cores) load-tester threads with no business step
# (--work-us 0), audited by
# coupon-loadtest (servers and database). Prints one table: claims/s, p99,
# issued, verdict. Every process is started here and stopped by its PID.
#
# usage: bench/db-compare.sh [--requests R] [--stock S] [--connections C] [--threads T]
#                            [--strategies a,b] [--stores sqlite,postgresql]
#                            [--pg-synchronous-commit on|off] [--stages]
# --connections: the load tester's connections (default 64); --threads: its
# worker threads (default min(C, cores)).
# --pg-synchronous-commit off: PostgreSQL acknowledges a commit before its
# WAL reaches the disk (the closest to SQLite's WAL + synchronous=NORMAL,
# which does not fsync each commit either); default on (fsync per commit).
# --stages: under each row, where its claims' time went, from the servers'
# coupon_claim_stage_seconds_total summed over both (microseconds per claim
# answered; a batch's lock, read, commit and release count once per batch),
# and the sold-out fast path's store round trips (coupon_stock_peeks_total).
# Environment: BUILD_DIR (default build/), DLOCK_REDIS_SERVER, DLOCK_PG_BINDIR
# (default: the highest /usr/lib/postgresql/*/bin), DLOCK_PG_USER (the user
# postgres runs as when this runs as root; default nobody).
# Exit status: 0 iff every row said NO OVERSELL (else 1, naming the row on
# stderr); 2 on usage or start-up errors, with the reason on stderr.
set -Eeuo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
# shellcheck source=../scripts/lib/err.sh
. "$root/scripts/lib/err.sh"
err_trap db-compare
bin_dir="${BUILD_DIR:-$root/build}/bin"
server_bin="$bin_dir/coupon-server"
loadtest_bin="$bin_dir/coupon-loadtest"
redis_bin="${DLOCK_REDIS_SERVER:-$(command -v redis-server || true)}"

die() { echo "db-compare: $*" >&2; exit 2; }
say() { [ "${quiet:-1}" = 1 ] || echo "db-compare: $*" >&2; }

# The variables scripts/lib/sale.sh reads (its header lists them); the same
# for every row. load_rate '' = closed loop.
instances=2 redis_nodes=3 stock=100000 per_user_limit=1 connections=64 threads="" requests=20000
users="" load_rate="" work_us=0 lock_batch="" server_threads="" lock_wait="" base_port=""
strategies="redlock,atomic-sql" stores="sqlite,postgresql" pg_sync=on stages=0
redis_pids=() server_pids=() redis_addrs=() server_urls=() redis_ports=()

# shellcheck source=lib/measure.sh
. "$here/lib/measure.sh"

while [ $# -gt 0 ]; do
  case "$1" in
    -h|--help) sed -n '2,26p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    --stages) stages=1; shift; continue ;;
    --requests|--stock|--connections|--threads|--strategies|--stores|--pg-synchronous-commit)
      [ $# -ge 2 ] || die "$1 needs a value (--help)" ;;
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
[ -x "$server_bin" ] && [ -x "$loadtest_bin" ] || die "build first: no $server_bin or $loadtest_bin"
[ -n "$redis_bin" ] || die "redis-server not found (apt-get install redis-server, or set DLOCK_REDIS_SERVER)"
command -v curl >/dev/null || die "curl not found (apt-get install curl)"

# shellcheck source=../scripts/lib/sale.sh
. "$root/scripts/lib/sale.sh"

work="$(mktemp -d "${TMPDIR:-/tmp}/db-compare.XXXXXX")" || die "cannot create a temp dir"
pg_pid="" pg_url=""

stop_pg() {
  [ -n "$pg_pid" ] || return 0
  # SIGINT: PostgreSQL's fast shutdown; bounded, then SIGKILL, by PID only.
  kill -INT "$pg_pid" 2>/dev/null || true
  local i
  for ((i = 0; i < 200; i++)); do proc_alive "$pg_pid" || break; sleep 0.05; done
  proc_alive "$pg_pid" && kill -KILL "$pg_pid" 2>/dev/null
  wait "$pg_pid" 2>/dev/null || true
  pg_pid=""
}
# shellcheck disable=SC2317  # invoked by the EXIT trap
on_exit() { stop_servers; local p; for p in "${redis_pids[@]}"; do stop_pid "$p"; done; stop_pg; rm -rf -- "$work"; }
trap on_exit EXIT

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

case ",$stores," in *,postgresql,*) start_pg ;; esac
for ((i = 0; i < redis_nodes; i++)); do start_redis "$i"; done
make_token

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
  local store="$1" strat="$2" db id report log st=0 tput p99 issued verdict
  db="$(fresh_db "$store" "$strat")" || exit 2
  start_servers "$strat" "$db" 2>>"$work/servers.log"
  id="$(create_coupon hot)" || exit 2
  report="$work/report-$store-$strat.txt" log="$work/load-$store-$strat.log"
  # The tester's progress lines go to a log, shown when the row fails.
  run_load "$id" "$db" "$report" 2>"$log" || st=$?
  local stage_text=""
  [ "$stages" = 0 ] || stage_text="$(stage_line)"
  stop_servers
  tput="$(sed -n 's/.*throughput \([0-9.]*\) req\/s.*/\1/p' "$report" | head -n 1)"
  p99="$(sed -n 's/.*p99 \([0-9.]*\).*/\1/p' "$report" | head -n 1)"
  issued="$(sed -n 's/^  issued: \([0-9]*\) of \([0-9]*\).*/\1\/\2/p' "$report" | head -n 1)"
  verdict="$(sed -n 's/^verdict: //p' "$report" | head -n 1)"
  printf '%-11s %-11s %10s %9s %12s  %s\n' "$store" "$strat" "${tput:-?}" "${p99:-?}" "${issued:-?}" \
    "${verdict:-exit $st}"
  [ -z "$stage_text" ] || echo "$stage_text"
  if [ "$st" != 0 ]; then
    rc=1
    echo "db-compare: $store $strat: coupon-loadtest exit $st (${verdict:-no verdict}); its last lines:" >&2
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
