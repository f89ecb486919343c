# scripts/lib/sale.sh - the processes of a sale on this machine, for
# scripts/demo, trial, chaos, hosts, bundles and the sale benches of bench/.
# They are redis-server nodes and coupon-server instances on probed
# loopback ports, the coupon, the load. Every process is started in its own session and
# stopped by its PID (cleanup, scripts/lib/proc.sh), never by name.
#
# The caller sets: die, say, work (a temp dir), redis_bin, server_bin,
# loadtest_bin, instances, redis_nodes, stock, per_user_limit, connections,
# threads (coupon-loadtest worker threads, '' = min(connections, cores)),
# requests, users, load_rate (the user's --rate: '' = closed loop), work_us,
# lock_batch, server_threads, lock_wait, base_port; and the arrays
# redis_pids server_pids redis_addrs server_urls. These are the run's
# settings, the same for every row of a table: a caller never writes a
# row's result into one of them (a measured rate left in the old 'rate'
# made every later row run open loop at the speed of the row before).
# shellcheck shell=bash

# proc_alive, stop_pid, spawn and port_in_use: scripts/lib/proc.sh.
# shellcheck source=scripts/lib/proc.sh
. "$(dirname "${BASH_SOURCE[0]}")/proc.sh"

stop_servers() {
  local pid
  for pid in "${server_pids[@]}"; do stop_pid "$pid"; done
  server_pids=() server_urls=()
}

# shellcheck disable=SC2317  # invoked by the EXIT trap
cleanup() {
  local pid
  # Only what this script started, by PID; never by name.
  stop_servers
  for pid in "${redis_pids[@]}"; do stop_pid "$pid"; done
  redis_pids=()
  rm -rf -- "$work"
}

next_port=0
pick_port() { # index -> a port nobody listens on
  local p
  if [ -n "$base_port" ]; then
    p=$((base_port + $1))
    port_in_use "$p" && die "port $p is in use (--base-port $base_port)"
    echo "$p"
    return
  fi
  # Below the kernel's ephemeral range (32768+), so outgoing connections rarely take it.
  for ((next_port = 0; next_port < 50; next_port++)); do
    p=$((20000 + RANDOM % 12000))
    port_in_use "$p" || { echo "$p"; return; }
  done
  die "no free loopback port found after 50 probes"
}

redis_ping() { # port -> 0 when the node answers +PONG
  local reply
  reply="$( (exec 3<>"/dev/tcp/127.0.0.1/$1" && printf 'PING\r\n' >&3 && read -r -t 1 line <&3 &&
    printf '%s' "$line") 2>/dev/null || true)"
  [[ "$reply" == +PONG* ]]
}

# Empties every node (FLUSHALL): a row of a table must not inherit the lock
# keys and fence counters of the row before (its coupon has the same id).
flush_redis() {
  local port reply
  for port in "${redis_ports[@]}"; do
    reply="$( (exec 3<>"/dev/tcp/127.0.0.1/$port" && printf 'FLUSHALL\r\n' >&3 && read -r -t 5 line <&3 &&
      printf '%s' "$line") 2>/dev/null || true)"
    [[ "$reply" == +OK* ]] || die "FLUSHALL on redis-server 127.0.0.1:$port failed: '${reply%$'\r'}'"
  done
}

# TLS (scripts/demo --tls): a CA, a certificate for 127.0.0.1 signed by it
# for the masters, and one for the servers as clients, made by openssl in
# DIR; sets tls_dir, which start_redis and start_server then use.
make_tls() { # dir
  local d="$1"
  command -v openssl >/dev/null || die "openssl not found (apt-get install openssl)"
  mkdir -p "$d"
  # EC keys: made in milliseconds, where RSA takes a noticeable while.
  (
    set -e
    cd "$d"
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout ca.key \
      -out ca.crt -days 2 -subj /CN=coupon-demo-ca
    printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' >san.ext
    for who in redis client; do
      openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$who.key" \
        -out "$who.csr" -subj "/CN=coupon-demo-$who"
      openssl x509 -req -in "$who.csr" -CA ca.crt -CAkey ca.key -CAcreateserial \
        -out "$who.crt" -days 2 -extfile san.ext
    done
  ) >"$d/openssl.log" 2>&1 || die "making the TLS certificates failed: $(tail -n 2 "$d/openssl.log")"
  tls_dir="$d"
  say "TLS: CA and certificates in $d; the masters listen on TLS ports only"
}

# PING over TLS with redis-cli (Debian's speaks TLS), the demo's client
# certificate shown: 0 when the node answers PONG.
redis_ping_tls() { # port
  [[ "$(timeout 2 redis-cli --tls --cacert "$tls_dir/ca.crt" --cert "$tls_dir/client.crt" \
    --key "$tls_dir/client.key" -h 127.0.0.1 -p "$1" PING 2>/dev/null)" == PONG* ]]
}

start_redis() { # index [extra redis-server options...]; its port in redis_ports[index]
  local i="$1" dir="$work/redis$1" port pid attempt t
  local extra=("${@:2}") listen ping=redis_ping
  mkdir -p "$dir"
  # A probed port can be taken between the probe and the bind: retry on another.
  for ((attempt = 0; attempt < 5; attempt++)); do
    port="$(pick_port "$i")" || exit 2
    listen=(--port "$port")
    if [ -n "${tls_dir:-}" ]; then
      # TLS only: no plaintext port at all, clients must show a certificate.
      listen=(--port 0 --tls-port "$port" --tls-cert-file "$tls_dir/redis.crt"
              --tls-key-file "$tls_dir/redis.key" --tls-ca-cert-file "$tls_dir/ca.crt"
              --tls-auth-clients yes)
      ping=redis_ping_tls
    fi
    spawn "$redis_bin" "${listen[@]}" --bind 127.0.0.1 --dir "$dir" --save "" --appendonly no \
      --daemonize no --logfile "$dir/redis.log" "${extra[@]}" >/dev/null 2>&1
    pid=$!
    redis_pids+=("$pid")
    for ((t = 0; t < 100; t++)); do
      if "$ping" "$port"; then
        redis_addrs+=("127.0.0.1:$port")
        redis_ports[i]="$port"
        say "redis-server node $((i + 1)) pid $pid on 127.0.0.1:$port"
        return 0
      fi
      proc_alive "$pid" || break
      sleep 0.05
    done
    stop_pid "$pid"
    unset 'redis_pids[${#redis_pids[@]}-1]'
    if grep -q "Address already in use" "$dir/redis.log" 2>/dev/null && [ -z "$base_port" ]; then
      continue
    fi
    grep -q "Address already in use" "$dir/redis.log" 2>/dev/null &&
      die "redis-server node $((i + 1)): port $port is in use"
    die "redis-server node $((i + 1)) did not start on port $port: $(tail -n 1 "$dir/redis.log" 2>/dev/null || echo 'no log')"
  done
  die "redis-server node $((i + 1)): every probed port was taken"
}

make_token() { # -> $token, the admin token of this run's servers
  token="$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"
  [ ${#token} -eq 32 ] || die "cannot read /dev/urandom for the admin token"
}

start_server() { # strategy db [extra coupon-server options...]: one more instance
  local strat="$1" db="$2" i="${#server_pids[@]}" pid out log url t listen redis_csv
  local extra=("${@:3}")
  redis_csv="$(IFS=,; echo "${redis_addrs[*]}")"
  out="$work/server-$strat-$i.out" log="$work/server-$strat-$i.log"
  listen="127.0.0.1:0"
  if [ -n "$base_port" ]; then
    listen="$(pick_port $((redis_nodes + i)))" || exit 2
    listen="127.0.0.1:$listen"
  fi
  local args=(--listen "$listen" --db "$db" --redis "$redis_csv" --strategy "$strat")
  # The load tester is one client on one address that holds every
  # connection of the run (--connections, up to 1024): the per-address cap,
  # there for clients on the internet, would refuse it its own load.
  args+=(--max-connections-per-ip 0)
  if [ -n "${tls_dir:-}" ]; then
    args+=(--redis-tls-ca "$tls_dir/ca.crt" --redis-tls-cert "$tls_dir/client.crt"
           --redis-tls-key "$tls_dir/client.key")
  fi
  # The same business step for every strategy: only the lock around it
  # differs (extra may override it, later options win).
  args+=(--work-us "$work_us")
  [ -n "$lock_batch" ] && args+=(--lock-batch "$lock_batch")
  args+=("${extra[@]}")
  [ -n "$server_threads" ] && args+=(--threads "$server_threads")
  [ -n "$lock_wait" ] && args+=(--lock-wait "$lock_wait")
  # Redirected by this shell before the fork, so the poll below never
  # races the child to a missing file.
  # The token through the environment, not argv: ps shows argv to every user.
  COUPON_ADMIN_TOKEN="$token" spawn "$server_bin" "${args[@]}" >"$out" 2>"$log"
  pid=$!
  server_pids+=("$pid")
  url=""
  # One at a time: the first creates the schema in the shared file, the
  # next ones open it; two creating it at once would race.
  for ((t = 0; t < 200; t++)); do
    url="$(sed -n 's/^listening on \(http:\/\/[^[:space:]]*\).*/\1/p' "$out" | head -n 1)"
    [ -n "$url" ] && break
    proc_alive "$pid" || break
    sleep 0.05
  done
  if [ -z "$url" ]; then
    die "coupon-server $((i + 1)) ($strat) did not start: $(tail -n 1 "$log" 2>/dev/null || echo 'no output')"
  fi
  server_urls+=("$url")
  say "coupon-server $((i + 1)) pid $pid at $url (strategy $strat)"
}

start_servers() { # strategy db [extra coupon-server options...]: $instances of them
  local i
  for ((i = 0; i < instances; i++)); do start_server "$@"; done
}

create_coupon() { # name -> prints the id
  local resp status body id
  resp="$(curl -sS -m 10 --noproxy '*' -X POST \
    -H "Authorization: Bearer $token" -H 'Content-Type: application/json' \
    -d "{\"name\":\"$1\",\"stock\":$stock,\"per_user_limit\":$per_user_limit}" \
    -w '\n%{http_code}' "${server_urls[0]}/api/v1/admin/coupon" 2>&1)" ||
    die "cannot create the coupon on ${server_urls[0]}: ${resp##*$'\n'}"
  status="${resp##*$'\n'}" body="${resp%$'\n'*}"
  [ "$status" = 201 ] || die "creating the coupon failed: HTTP $status $body"
  id="$(printf '%s' "$body" | sed -n 's/.*"coupon_id"[[:space:]]*:[[:space:]]*\([0-9][0-9]*\).*/\1/p')"
  [ -n "$id" ] || die "no coupon_id in the reply: $body"
  echo "$id"
}

# Runs the load on the current servers; $1 = coupon id, $2 = db, $3 = report
# file ('' = straight to stdout). Returns the loadtest's exit status.
run_load() {
  local id="$1" db="$2" report="$3" st urls
  urls="$(IFS=,; echo "${server_urls[*]}")"
  # C connections on min(C, cores) threads unless told: 64 threads each
  # blocking on one connection spend the 2 cores on context switches the
  # servers need (the tester then reached ~65 % of wrk's rate; multiplexed, ~100 %).
  local lt_threads="$threads" cores
  if [ -z "$lt_threads" ]; then
    cores="$(nproc 2>/dev/null || echo 2)"
    lt_threads="$connections"
    [ "$lt_threads" -le "$cores" ] || lt_threads="$cores"
  fi
  say "coupon $id: stock $stock, per-user limit $per_user_limit; $requests claims over $connections connections on $lt_threads threads"
  local args=(--url "$urls" --coupon "$id" --threads "$lt_threads" --connections "$connections"
    --requests "$requests" --db "$db")
  [ -n "$users" ] && args+=(--users "$users")
  [ -n "${load_rate:-}" ] && args+=(--rate "$load_rate")
  st=0
  if [ -n "$report" ]; then
    "$loadtest_bin" "${args[@]}" >"$report" || st=$?
  else
    "$loadtest_bin" "${args[@]}" || st=$?
  fi
  return "$st"
}
