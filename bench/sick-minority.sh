#!/usr/bin/env bash
# sick-minority.sh - what a sick minority of Redis masters costs libdlock.
# Runs dlock-bench (uncontended, or --mode contended: every worker on one
# key) against fresh redis-servers on free loopback ports. They are healthy,
# or one of three and two of five masters are paused (SIGSTOP), tarpitted
# (a socket that listens and never accepts), killed or slowed (kept busy by
# a Lua loop). Then it counts the lock keys left on every node once the
# paused ones resumed (there must be none).
#
# usage: bench/sick-minority.sh [--bench PATH] [--redis-server PATH]
#                               [--duration S] [--workers "8 1"] [--fault-after S]
#                               [--only SCENARIO] [--mode uncontended|contended]
#
# Paused, killed and slowed nodes fall sick --fault-after seconds (default
# 0.3) into the run, after every worker connected and cached the scripts; the
# tarpit is sick from the start (it only ever accepts in the kernel). A slowed
# node runs a 150 ms busy script, rests 50 ms, and again until the run ends:
# while busy it answers later than dlock-bench's 100 ms command timeout. The sick node
# is never ports[0] (dlock-bench keeps its counter there). A paused node is
# resumed after its run, the keys are counted 1 s later. One line per run
# to stdout: scenario, workers, ops/s, acquire p50/p99/max (ms), stray lock
# keys, then the JSON of dlock-bench. Processes are stopped by PID.
# Needs python3 for the tarpit and redis-cli for the slowed rows (each row is
# skipped with a message without).
set -Eeuo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# A failure says why on stderr: the file, line and command (scripts/lib/err.sh).
# shellcheck source=../scripts/lib/err.sh
source "$here/../scripts/lib/err.sh"
err_trap sick-minority.sh
bench="${DLOCK_BENCH_BIN:-$here/../build/bin/dlock-bench}"
redis_server="${DLOCK_REDIS_SERVER:-redis-server}"
duration=5
workers_list="8 1"
fault_after=0.3
only=""
mode=uncontended

die() { echo "sick-minority.sh: $*" >&2; exit 2; }

while [ $# -gt 0 ]; do
    case "$1" in
        --bench) [ $# -ge 2 ] || die "--bench needs a path"; bench="$2"; shift 2 ;;
        --redis-server) [ $# -ge 2 ] || die "--redis-server needs a path"; redis_server="$2"; shift 2 ;;
        --duration) [ $# -ge 2 ] || die "--duration needs seconds"; duration="$2"; shift 2 ;;
        --workers) [ $# -ge 2 ] || die "--workers needs a list"; workers_list="$2"; shift 2 ;;
        --fault-after) [ $# -ge 2 ] || die "--fault-after needs seconds"; fault_after="$2"; shift 2 ;;
        --only) [ $# -ge 2 ] || die "--only needs a scenario name"; only="$2"; shift 2 ;;
        --mode) [ $# -ge 2 ] || die "--mode needs uncontended or contended"
            case "$2" in uncontended | contended) mode="$2" ;; *) die "--mode: '$2' is not uncontended or contended" ;; esac
            shift 2 ;;
        -h|--help) sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) die "unknown argument '$1' (see --help)" ;;
    esac
done
[ -x "$bench" ] || die "dlock-bench not found at $bench (build it, or pass --bench)"
command -v "$redis_server" >/dev/null 2>&1 || die "redis-server not found ($redis_server)"

dirs=()
ports=()  # the nodes of the current scenario
npids=()  # their PIDs ("" for a tarpit's place)
spids=()  # every process of the current scenario (nodes and tarpit), stopped by PID

# shellcheck source=bench/lib/redis_nodes.sh
source "$(dirname "$0")/lib/redis_nodes.sh"

# shellcheck disable=SC2317  # called through the EXIT trap
cleanup() {
    local pid d
    for pid in "${spids[@]}"; do stop_pid "$pid"; done
    for d in "${dirs[@]}"; do rm -rf -- "$d"; done
}
trap cleanup EXIT
trap 'exit 130' INT TERM

start_node() {
    start_redis_node sick
    spids+=("$node_pid"); ports+=("$node_port"); npids+=("$node_pid")
}

# A listener that never accepts: the kernel completes handshakes into its
# queue (a connect "succeeds"), nothing is ever read or answered.
start_tarpit() {
    local fifo dir pid port=""
    dir="$(mktemp -d "${TMPDIR:-/tmp}/dlock-sick-tarpit.XXXXXX")"
    dirs+=("$dir")
    fifo="$dir/port"
    mkfifo "$fifo"
    python3 -c 'import socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(8)
print(s.getsockname()[1], flush=True)
while True: time.sleep(3600)' >"$fifo" &
    pid=$!
    spids+=("$pid")
    read -r -t 5 port <"$fifo" || die "tarpit did not start"
    ports+=("$port"); npids+=("")
}

# Keeps the node on port $1 busy: a script that spins on TIME for 150 ms
# (no writes, so Redis 7 runs it; the server answers nothing meanwhile),
# then 50 ms of rest, until this loop is stopped by its PID.
busy_script="local t=redis.call('TIME') local e=t[1]*1000000+t[2]+150000
repeat t=redis.call('TIME') until t[1]*1000000+t[2]>=e return 1"
slow_loop() {
    while :; do
        redis-cli -p "$1" EVAL "$busy_script" 0 >/dev/null 2>&1 || true
        sleep 0.05
    done
}

stop_scenario() {
    local pid
    for pid in "${spids[@]}"; do stop_pid "$pid"; done
    ports=(); npids=(); spids=()
}

# Lock keys (bench:lock*, not the :fence counters) on every live node.
stray_keys() {
    local total=0 i n
    for i in "${!ports[@]}"; do
        [ -n "${npids[$i]}" ] || continue
        proc_alive "${npids[$i]}" || continue  # a killed node may linger as a zombie
        n="$(redis-cli -p "${ports[$i]}" --scan --pattern 'bench:lock*' 2>/dev/null | grep -vc ':fence$' || true)"
        total=$(( total + n ))
    done
    echo "$total"
}

field() { sed -n "s/.*\"$1\":\([^,}]*\).*/\1/p"; }

# run SCENARIO NODES WORKERS FAULT SICK...: FAULT is none|pause|kill|tarpit|slow,
# SICK the indexes of the sick nodes (never 0).
run() {
    local name="$1" n="$2" w="$3" fault="$4"; shift 4
    local sick=("$@") i bpid out csv keys lpids=()
    if [ -n "$only" ] && [ "$only" != "$name" ]; then return 0; fi
    if [ "$fault" = tarpit ] && ! command -v python3 >/dev/null 2>&1; then
        echo "# $name: skipped (python3 not found, needed for the tarpit)" >&2
        return 0
    fi
    if [ "$fault" = slow ] && ! command -v redis-cli >/dev/null 2>&1; then
        echo "# $name: skipped (redis-cli not found, needed for the busy loop)" >&2
        return 0
    fi
    for i in $(seq 0 $(( n - 1 ))); do
        if [ "$fault" = tarpit ] && printf '%s\n' "${sick[@]}" | grep -qx "$i"; then
            start_tarpit
        else
            start_node
        fi
    done
    csv="$(IFS=,; echo "${ports[*]}")"
    out="$(mktemp "${TMPDIR:-/tmp}/dlock-sick-out.XXXXXX")"
    "$bench" --ports "$csv" --workers "$w" --duration "$duration" --mode "$mode" \
        </dev/null >"$out" &
    bpid=$!
    if [ "$fault" = pause ] || [ "$fault" = kill ]; then
        sleep "$fault_after"
        for i in "${sick[@]}"; do
            if [ "$fault" = pause ]; then kill -STOP "${npids[$i]}"; else kill -KILL "${npids[$i]}"; fi
        done
    fi
    if [ "$fault" = slow ]; then
        sleep "$fault_after"
        for i in "${sick[@]}"; do
            slow_loop "${ports[$i]}" &
            lpids+=("$!"); spids+=("$!")
        done
    fi
    wait "$bpid" || echo "# $name: dlock-bench exited non-zero" >&2
    if [ "$fault" = pause ]; then
        for i in "${sick[@]}"; do kill -CONT "${npids[$i]}"; done
    fi
    # A script already running ends by itself within 150 ms, before the count.
    for i in "${lpids[@]}"; do stop_pid "$i"; done
    sleep 1
    keys="$(stray_keys)"
    printf '%-12s workers=%-2s ops/s=%-9s p50=%-7s p99=%-8s max=%-8s stray_keys=%s %s\n' \
        "$name" "$w" "$(field ops_per_s <"$out")" "$(field acq_p50_ms <"$out")" \
        "$(field acq_p99_ms <"$out")" "$(field acq_max_ms <"$out")" "$keys" "$(cat "$out")"
    rm -f -- "$out"
    stop_scenario
}

for w in $workers_list; do
    run healthy-3 3 "$w" none
    run paused-1of3 3 "$w" pause 2
    run tarpit-1of3 3 "$w" tarpit 2
    run killed-1of3 3 "$w" kill 2
    run slowed-1of3 3 "$w" slow 2
    run healthy-5 5 "$w" none
    run paused-2of5 5 "$w" pause 3 4
    run tarpit-2of5 5 "$w" tarpit 3 4
    run killed-2of5 5 "$w" kill 3 4
    run slowed-2of5 5 "$w" slow 3 4
done
