# bench/lib/redis_nodes.sh - the redis-server processes the dlock-bench
# scripts start (run-bench.sh, peers.sh, sick-minority.sh). Sourced; the
# caller defines die, $redis_server and the array dirs (temp dirs, removed
# by its cleanup). Processes are started, watched and stopped by PID
# through scripts/lib/proc.sh (proc_alive, stop_pid, port_in_use).
# shellcheck shell=bash

# shellcheck source=scripts/lib/proc.sh
. "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib/proc.sh"

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

# Starts a redis-server (no persistence) on a free loopback port and waits
# for its PONG; sets node_pid and node_port. tag names its temp dir.
start_redis_node() {
    local tag="$1" dir port pid ok
    dir="$(mktemp -d "${TMPDIR:-/tmp}/dlock-$tag-redis.XXXXXX")"
    dirs+=("$dir")
    for _ in $(seq 30); do
        port=$(( 20000 + RANDOM % 40000 ))
        if port_in_use "$port"; then continue; fi
        "$redis_server" --port "$port" --bind 127.0.0.1 --save "" --appendonly no \
            --dir "$dir" --logfile "$dir/redis.log" --daemonize no >/dev/null 2>&1 &
        pid=$!
        ok=0
        for _ in $(seq 50); do
            proc_alive "$pid" || break
            if [ "$(resp "$port" PING 2>/dev/null)" = "+PONG" ]; then ok=1; break; fi
            sleep 0.1
        done
        if [ "$ok" = 1 ]; then
            node_pid="$pid" node_port="$port"
            return 0
        fi
        # Lost a race for the port (or the server failed): stop it and try another port.
        kill -KILL "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    die "could not start redis-server (see $dir/redis.log)"
}
