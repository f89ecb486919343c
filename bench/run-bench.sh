#!/usr/bin/env bash
# run-bench.sh - start throwaway redis-server nodes on free loopback ports, run a dlock-bench matrix, stop them by PID.
#
# usage: bench/run-bench.sh [--bench PATH] [--redis-server PATH] [--matrix FILE|-] [--no-flush]
#
# Each matrix line is "NODES dlock-bench-arguments-without---ports", e.g.
#     3 --mode contended --workers 8 --duration 5
# Blank lines and lines starting with # are skipped. Without --matrix the
# built-in matrix runs (14 runs of 5 s: raw and uncontended on 1 node with 1,
# 8 and 64 workers; uncontended and contended on 3 and 5 nodes with 8 and
# 64). Every run's JSON line goes to stdout; a
# "# nodes=N args" line before it goes to stderr. Nodes have no
# persistence and live in their own temp dirs, removed at exit.
# Exit status: 0 if every run exited 0, else 1; 2 on usage or start-up errors.
set -Eeuo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# A failure says why on stderr: the file, line and command (scripts/lib/err.sh).
# shellcheck source=../scripts/lib/err.sh
source "$here/../scripts/lib/err.sh"
err_trap run-bench.sh
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
        -h|--help) sed -n '2,/^set -Eeuo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
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

# shellcheck source=bench/lib/redis_nodes.sh
source "$(dirname "$0")/lib/redis_nodes.sh"

# shellcheck disable=SC2317  # called through the EXIT trap
cleanup() {
    local pid d
    for pid in "${pids[@]}"; do stop_pid "$pid"; done
    for d in "${dirs[@]}"; do rm -rf -- "$d"; done
}
trap cleanup EXIT
trap 'exit 130' INT TERM

start_node() {
    start_redis_node bench
    pids+=("$node_pid")
    ports+=("$node_port")
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
        echo "run-bench.sh: dlock-bench failed: nodes=$n $args" >&2
        status=1
    fi
done <<<"$lines"
exit "$status"
