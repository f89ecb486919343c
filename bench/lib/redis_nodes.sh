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
# for its PONG; sets node_pid and node_port. tag names its temp dir. With
# node_tls_dir set (make_tls_certs), the server also listens for TLS on a
# second free port, node_tls_port, with client certificates required.
start_redis_node() {
    local tag="$1" dir port pid ok tls_port tls_args=()
    dir="$(mktemp -d "${TMPDIR:-/tmp}/dlock-$tag-redis.XXXXXX")"
    dirs+=("$dir")
    for _ in $(seq 30); do
        port=$(( 20000 + RANDOM % 40000 ))
        if port_in_use "$port"; then continue; fi
        tls_args=()
        if [ -n "${node_tls_dir:-}" ]; then
            tls_port=$(( 20000 + RANDOM % 40000 ))
            if [ "$tls_port" = "$port" ] || port_in_use "$tls_port"; then continue; fi
            tls_args=(--tls-port "$tls_port" --tls-cert-file "$node_tls_dir/redis.crt"
                      --tls-key-file "$node_tls_dir/redis.key" --tls-ca-cert-file "$node_tls_dir/ca.crt"
                      --tls-auth-clients yes)
        fi
        "$redis_server" --port "$port" "${tls_args[@]}" --bind 127.0.0.1 --save "" --appendonly no \
            --dir "$dir" --logfile "$dir/redis.log" --daemonize no >/dev/null 2>&1 &
        pid=$!
        ok=0
        for _ in $(seq 50); do
            proc_alive "$pid" || break
            if [ "$(resp "$port" PING 2>/dev/null)" = "+PONG" ]; then ok=1; break; fi
            sleep 0.1
        done
        if [ "$ok" = 1 ]; then
            node_pid="$pid" node_port="$port" node_tls_port="${tls_port:-}"
            return 0
        fi
        # Lost a race for the port (or the server failed): stop it and try another port.
        kill -KILL "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    die "could not start redis-server (see $dir/redis.log)"
}

# A CA, and a certificate signed by it for the servers and one for the
# clients, both naming IP 127.0.0.1 (libdlock checks the address's host),
# made by openssl in DIR (EC keys: milliseconds, where RSA takes a while);
# sets node_tls_dir for start_redis_node.
make_tls_certs() { # dir
    local d="$1" who
    command -v openssl >/dev/null 2>&1 || die "openssl not found (Debian: apt-get install openssl)"
    (
        set -e
        cd "$d"
        openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout ca.key \
            -out ca.crt -days 2 -subj /CN=dlock-bench-ca
        printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' >san.ext
        for who in redis client; do
            openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$who.key" \
                -out "$who.csr" -subj "/CN=dlock-bench-$who"
            openssl x509 -req -in "$who.csr" -CA ca.crt -CAkey ca.key -CAcreateserial \
                -out "$who.crt" -days 2 -extfile san.ext
        done
    ) >"$d/openssl.log" 2>&1 || die "making the TLS certificates failed: $(tail -n 2 "$d/openssl.log")"
    node_tls_dir="$d"
}
