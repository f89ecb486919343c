# scripts/lib/haproxy.sh - HAProxy in front of the coupon-servers: the configuration scripts/hosts runs, written from one place so
# that docs/deployment.md ("HAProxy in front") can show it as it is. Each
# setting says what it defends against there.
# shellcheck shell=bash

# The contract's JSON envelope for the answers HAProxy makes itself (a
# client's malformed or slow request, no server up, a server too slow): one
# raw HTTP answer per status, as HAProxy's errorfile wants it.
haproxy_errorfiles() { # dir
  local dir="$1" st reason code msg
  mkdir -p "$dir" || return 1
  while IFS='|' read -r st reason code msg; do
    printf 'HTTP/1.1 %s %s\r\nContent-Type: application/json\r\nCache-Control: no-store\r\nConnection: close\r\nContent-Length: %s\r\n\r\n%s' \
      "$st" "$reason" "$((${#code} + ${#msg} + 30))" "{\"code\":$code,\"msg\":\"$msg\",\"data\":null}" >"$dir/$st.http" || return 1
  done <<'ROWS'
400|Bad Request|1001|malformed request (refused by the proxy)
403|Forbidden|1007|forbidden (refused by the proxy)
408|Request Timeout|1001|request not received in time (refused by the proxy)
500|Internal Server Error|1500|internal error in the proxy
502|Bad Gateway|1006|service unavailable: a server gave no valid answer
503|Service Unavailable|1006|service unavailable: no server is up
504|Gateway Timeout|1006|service unavailable: the server did not answer in time
ROWS
}

# haproxy.cfg for a front on bind (ADDR:PORT) to the servers (ADDR:PORT ...),
# with its error files under dir/errors; prints the file's path.
haproxy_config() { # dir bind server...
  local dir="$1" bind="$2" i=0 s
  shift 2
  haproxy_errorfiles "$dir/errors" || return 1
  {
    cat <<CFG
global
    maxconn 4096
    log stderr format raw local0 info

defaults
    mode http
    log global
    option httplog
    option http-buffer-request
    option forwardfor
    timeout connect 2s
    timeout client 30s
    timeout server 15s
    timeout http-request 5s
    timeout http-keep-alive 4s
    timeout queue 5s
    retries 2
    option redispatch
CFG
    for s in 400 403 408 500 502 503 504; do echo "    errorfile $s $dir/errors/$s.http"; done
    cat <<CFG

frontend coupon
    bind $bind
    default_backend coupon_servers

backend coupon_servers
    balance roundrobin
    option prefer-last-server
    # One server connection per client connection: a coupon-server connection
    # serves one request at a time, so HAProxy's default reuse (idle server
    # connections shared across clients) queued claims behind each other while
    # a master was cut (phase a: 74-206 claims/s against 850-1068 without reuse).
    http-reuse never
    option httpchk GET /healthz
    http-check expect status 200
    # maxconn 100 per server, below the servers' --max-connections-per-ip
    # (128): every proxied connection is the proxy's address to a server;
    # past it HAProxy queues (timeout queue), the servers never refuse it.
    default-server inter 1s fall 2 rise 2 check maxconn 100
CFG
    for s in "$@"; do
      i=$((i + 1))
      echo "    server s$i $s"
    done
  } >"$dir/haproxy.cfg" || return 1
  echo "$dir/haproxy.cfg"
}
