#!/usr/bin/env bash
# run-bench.sh - start throwaway redis-server nodes on free loopback ports, run a dlock-bench matrix, stop them by PID.
#
# usage: bench/run-bench.sh [--bench PATH] [--redis-server PATH] [--matrix FILE|-] [--no-flush]
#
# Each matrix line is "NODES dlock-bench-arguments-without---ports", e.g.
#     3 --mode contended --workers 8 --duration 5
# Blank lines and lines starting with # are skipped. Without --matrix the
# default matrix (the one in docs/benchmarks.md) runs. Every run's JSON line goes to stdout; a
# "# nodes=N args" line before it goes to stderr. Nodes have no
# persistence and live in their own temp dirs, removed at exit.
# Exit status: 0 if every run exited 0, else 1; 2 on usage or start-up errors.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
bench="${DLOCK_BENCH_BIN:-$here/../build/bin/dlock-bench}"
redis_server="${DLOCK_REDIS_SERVER:-redis-server}"
matrix=""
flush=1

default_matrix() {
    cat <<'EOF'
1 --mode raw --workers 1 --duration 5
1 --mode uncontended --workers 1 --duration 5
1 --mode raw --workers 8 --duration 5
1 --mode uncontended --workers 8 --duration 5
1 --mode raw --workers 64 --duration 5
1 --mode uncontended --workers 64 --duration 5
3 --mode uncontended --workers 8 --duration 5
3 --mode uncontended --workers 64 --duration 5
3 --mode contended --workers 8 --duration 5
3 --mode contended --workers 64 --duration 5
5 --mode uncontended --workers 8 --duration 5
5 --mode uncontended --workers 64 --duration 5
5 --mode contended --workers 8 --duration 5
5 --mode contended --workers 64 --duration 5
EOF
}

die() { echo "run-bench.sh: $*" >&2; exit 2; }

while [ $# -gt 0 ]; do
    case "$1" in
        --bench) [ $# -ge 2 ] || die "--bench needs a path"; bench="$2"; shift 2 ;;
        --redis-server) [ $# -ge 2 ] || die "--redis-server needs a path"; redis_server="$2"; shift 2 ;;
        --matrix) [ $# -ge 2 ] || die "--matrix needs a file or -"; matrix="$2"; shift 2 ;;
        --no-flush) flush=0; shift ;;
        -h|--help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) die "unknown argument '$1' (see --help)" ;;
    esac
done
[ -x "$bench" ] || die "dlock-bench not found at $bench (build it, or pass --bench)"
command -v "$redis_server" >/dev/null 2>&1 || die "redis-server not found ($redis_server)"

if [ -z "$matrix" ]; then
    lines="$(default_matrix)"
elif [ "$matrix" = "-" ]; then
    lines="$(cat)"
else
    [ -r "$matrix" ] || die "cannot read matrix file $matrix"
    lines="$(cat "$matrix")"
fi

# Validate every line before starting anything, and find how many nodes we need.
max_nodes=0
while read -r n _; do
    case "$n" in ''|'#'*) continue ;; esac
    if ! [[ "$n" =~ ^[0-9]+$ ]] || [ "$n" -lt 1 ] || [ "$n" -gt 16 ]; then
        die "bad node count '$n' in matrix"
    fi
    if [ "$n" -gt "$max_nodes" ]; then max_nodes="$n"; fi
done <<<"$lines"
[ "$max_nodes" -gt 0 ] || die "empty matrix"

pids=()
ports=()
dirs=()

# shellcheck disable=SC2317  # called through the EXIT trap
cleanup() {
    local i pid
    for i in "${!pids[@]}"; do
        pid="${pids[$i]}"
        # By PID only: never touch a redis-server this script did not start.
        kill -TERM "$pid" 2>/dev/null || true
        for _ in $(seq 50); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        kill -KILL "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    for d in "${dirs[@]}"; do
        rm -rf -- "$d"
    done
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# One inline command over bash's /dev/tcp (no redis-cli needed); prints the
# first reply line. Bounded by read -t.
resp() {
    local port="$1" cmd="$2" line=""
    exec 3<>"/dev/tcp/127.0.0.1/$port" || return 1
    printf '%s\r\n' "$cmd" >&3
    IFS= read -r -t 2 line <&3 || true
    exec 3>&- 3<&-
    printf '%s' "${line%$'\r'}"
}

port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

start_node() {
    local dir port pid ok
    dir="$(mktemp -d "${TMPDIR:-/tmp}/dlock-bench-redis.XXXXXX")"
    dirs+=("$dir")
    for _ in $(seq 30); do
        port=$(( 20000 + RANDOM % 40000 ))
        if port_in_use "$port"; then continue; fi
        "$redis_server" --port "$port" --bind 127.0.0.1 --save "" --appendonly no \
            --dir "$dir" --logfile "$dir/redis.log" --daemonize no >/dev/null 2>&1 &
        pid=$!
        ok=0
        for _ in $(seq 50); do
            kill -0 "$pid" 2>/dev/null || break
            if [ "$(resp "$port" PING 2>/dev/null)" = "+PONG" ]; then ok=1; break; fi
            sleep 0.1
        done
        if [ "$ok" = 1 ]; then
            pids+=("$pid")
            ports+=("$port")
            return 0
        fi
        # Lost a race for the port (or the server failed): stop it and try another port.
        kill -KILL "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    die "could not start redis-server (see $dir/redis.log)"
}

for _ in $(seq "$max_nodes"); do
    start_node
done
echo "# redis nodes on 127.0.0.1: ${ports[*]}" >&2

status=0
while read -r n args; do
    case "$n" in ''|'#'*) continue ;; esac
    if [ "$flush" = 1 ]; then
        # Each run starts from empty nodes: no leftover locks or fence counters.
        for p in "${ports[@]:0:$n}"; do
            [ "$(resp "$p" FLUSHALL)" = "+OK" ] || { echo "run-bench.sh: FLUSHALL failed on $p" >&2; status=1; }
        done
    fi
    csv="$(IFS=,; echo "${ports[*]:0:$n}")"
    echo "# nodes=$n $args" >&2
    # shellcheck disable=SC2086  # args is a list of flags by design
    if ! "$bench" --ports "$csv" $args </dev/null; then
        status=1
    fi
done <<<"$lines"
exit "$status"
