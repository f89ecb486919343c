#!/usr/bin/env bash
# run-bench.sh - start throwaway redis-server nodes on free loopback ports, run a dlock-bench matrix, stop them by PID.
#
# usage: bench/run-bench.sh [--bench PATH] [--redis-server PATH] [--matrix FILE|-] [--no-flush]
#                           [--rounds R] [--ratios]
#
# Each matrix line is "NODES dlock-bench-arguments-without---ports", e.g.
#     3 --mode contended --workers 8 --duration 5
# Blank lines and lines starting with # are skipped. Without --matrix the
# built-in matrix runs (14 runs of 5 s: raw and uncontended on 1 node with 1,
# 8 and 64 workers; uncontended and contended on 3 and 5 nodes with 8 and
# 64). Every run's JSON line goes to stdout; a
# "# nodes=N args" line before it goes to stderr. Nodes have no
# persistence and live in their own temp dirs, removed at exit.
#
# A line with --tls among its arguments (this script's word, not
# dlock-bench's) runs over TLS: then every node also listens on a TLS port,
# with a throwaway CA and certificates (openssl) naming 127.0.0.1, client
# certificates required, and such a line gets the TLS ports with
# --tls-ca/--tls-cert/--tls-key; the other lines keep the plaintext ports of
# the same servers. A TLS line also gets --counter-port, node 1's plaintext
# port: dlock-bench's own counter connection (contended mode) is plain
# hiredis, so only the lock traffic is encrypted.
#
# --rounds R runs the whole matrix R times, line after line (interleaved),
# then prints to stderr, per line, the median ops/s and acquire p99 of the
# rounds with each round's ops/s; --ratios adds, for each second line, its
# ops/s over the line before it: each round's ratio, their median, and the
# ratio of the medians. The load average (1 minute) is printed before and after.
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
rounds=1
show_ratios=0

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
        --rounds) [ $# -ge 2 ] || die "--rounds needs a count"; rounds="$2"; shift 2 ;;
        --ratios) show_ratios=1; shift ;;
        -h|--help) sed -n '2,/^set -Eeuo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) die "unknown argument '$1' (see --help)" ;;
    esac
done
if ! [[ "$rounds" =~ ^[0-9]+$ ]] || [ "$rounds" -lt 1 ] || [ "$rounds" -gt 100 ]; then
    die "--rounds: '$rounds' is not an integer in 1..100"
fi
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
want_tls=0
n_lines=0
while read -r n rest; do
    case "$n" in ''|'#'*) continue ;; esac
    n_lines=$((n_lines + 1))
    case " $rest " in *" --tls "*) want_tls=1 ;; esac
    if ! [[ "$n" =~ ^[0-9]+$ ]] || [ "$n" -lt 1 ] || [ "$n" -gt 16 ]; then
        die "bad node count '$n' in matrix"
    fi
    if [ "$n" -gt "$max_nodes" ]; then max_nodes="$n"; fi
done <<<"$lines"
[ "$max_nodes" -gt 0 ] || die "empty matrix"

pids=()
ports=()
tls_ports=()
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
    tls_ports+=("${node_tls_port:-}")
}

# shellcheck source=bench/lib/measure.sh
source "$(dirname "$0")/lib/measure.sh"

if [ "$want_tls" = 1 ]; then
    tls_dir="$(mktemp -d "${TMPDIR:-/tmp}/dlock-bench-tls.XXXXXX")"
    dirs+=("$tls_dir")
    make_tls_certs "$tls_dir"
fi
for _ in $(seq "$max_nodes"); do
    start_node
done
echo "# redis nodes on 127.0.0.1: ${ports[*]}" >&2
if [ "$want_tls" = 1 ]; then
    echo "# their TLS ports (client certificates required): ${tls_ports[*]}" >&2
fi
load_avg() { cut -d' ' -f1 /proc/loadavg; }
echo "# load average (1 min) at the start: $(load_avg)" >&2

# Each line's JSON ops/s and acquire p99 per round, for the summary.
declare -a line_args line_ops line_p99
status=0
for ((round = 1; round <= rounds; round++)); do
    [ "$rounds" = 1 ] || echo "# round $round of $rounds" >&2
    i=0
    while read -r n args; do
        case "$n" in ''|'#'*) continue ;; esac
        if [ "$flush" = 1 ]; then
            # Each run starts from empty nodes: no leftover locks or fence counters.
            for p in "${ports[@]:0:$n}"; do
                [ "$(resp "$p" FLUSHALL)" = "+OK" ] || { echo "run-bench.sh: FLUSHALL failed on $p" >&2; status=1; }
            done
        fi
        run_args=" $args "
        use=("${ports[@]:0:$n}")
        extra=()
        case "$run_args" in
            *" --tls "*)
                run_args="${run_args/ --tls / }"
                use=("${tls_ports[@]:0:$n}")
                extra=(--tls-ca "$tls_dir/ca.crt" --tls-cert "$tls_dir/client.crt"
                       --tls-key "$tls_dir/client.key" --counter-port "${ports[0]}") ;;
        esac
        csv="$(IFS=,; echo "${use[*]}")"
        echo "# nodes=$n $args" >&2
        line_args[i]="$n $args"
        # shellcheck disable=SC2086  # args is a list of flags by design
        if out="$("$bench" --ports "$csv" $run_args "${extra[@]}" </dev/null)"; then
            :
        else
            echo "run-bench.sh: dlock-bench failed: nodes=$n $args" >&2
            status=1
        fi
        [ -z "$out" ] || printf '%s\n' "$out"
        line_ops[i]+=" $(jget "$out" ops_per_s)"
        line_p99[i]+=" $(jget "$out" acq_p99_ms)"
        i=$((i + 1))
    done <<<"$lines"
done
echo "# load average (1 min) at the end: $(load_avg)" >&2

if [ "$rounds" -gt 1 ]; then
    echo "# medians of $rounds interleaved rounds:" >&2
    for ((i = 0; i < n_lines; i++)); do
        # shellcheck disable=SC2086  # a list of numbers
        echo "# ${line_args[i]}: ops/s $(median ${line_ops[i]}) (rounds$(printf ' %s' ${line_ops[i]})), acq_p99_ms $(median ${line_p99[i]})" >&2
        if [ "$show_ratios" = 1 ] && [ $((i % 2)) = 1 ]; then
            # shellcheck disable=SC2086
            rr="$(ratios "${line_ops[i]}" "${line_ops[i - 1]}")"
            # shellcheck disable=SC2086
            echo "#   over the line before: rounds $rr (median $(median ${rr//,/ })x); the medians' ratio $(ratio "$(median ${line_ops[i]})" "$(median ${line_ops[i - 1]})" x)" >&2
        fi
    done
fi
exit "$status"
