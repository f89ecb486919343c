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
429|Too Many Requests|1011|too many requests from this client address (refused by the proxy)
408|Request Timeout|1001|request not received in time (refused by the proxy)
500|Internal Server Error|1500|internal error in the proxy
502|Bad Gateway|1006|service unavailable: a server gave no valid answer
503|Service Unavailable|1006|service unavailable: no server is up
504|Gateway Timeout|1006|service unavailable: the server did not answer in time
ROWS
}

# haproxy.cfg for a front on bind (ADDR:PORT) to the servers (ADDR:PORT ...),
# with its error files under dir/errors; prints the file's path.
# HAPROXY_CLAIM_ROUTE picks the claim route's balance: coupon (the default,
# one server per coupon) or leastconn (scripts/hosts says why it needs it).
haproxy_config() { # dir bind server...
  local dir="$1" bind="$2" i=0 s claim_balance
  shift 2
  case "${HAPROXY_CLAIM_ROUTE:-coupon}" in
    coupon) claim_balance=$'balance url_param coupon_id check_post\n    hash-type consistent' ;;
    leastconn) claim_balance="balance leastconn" ;;
    *) echo "haproxy_config: HAPROXY_CLAIM_ROUTE '$HAPROXY_CLAIM_ROUTE' is not coupon or leastconn" >&2; return 1 ;;
  esac
  haproxy_errorfiles "$dir/errors" || return 1
  {
    cat <<CFG
global
    maxconn 4096
    # What a client that reads nothing can make the proxy queue in the
    # kernel for it: 16 KB (one page), not the megabyte Linux grows a
    # socket's buffer to, so it gets about one answer rendered, not 80.
    tune.sndbuf.client 16384
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
    for s in 400 403 408 429 500 502 503 504; do echo "    errorfile $s $dir/errors/$s.http"; done
    cat <<CFG

frontend coupon
    bind $bind
    # Per client address, where it is known (here, not behind): an IPv4
    # address whole, an IPv6 client by its /64 (one host owns a whole /64).
    # One address holds at most 256 of the 4096 connections (16 addresses to
    # fill them) and sends at most 100000 requests in 10 s; past that its
    # new connections are closed and its requests get 429 (the errorfile).
    stick-table type ipv6 size 100k expire 60s store conn_cur,http_req_rate(10s)
    tcp-request connection track-sc0 src,ipmask(32,64)
    tcp-request connection reject if { sc0_conn_cur gt 256 }
    http-request deny deny_status 429 if { sc0_http_req_rate gt 100000 }
    # A control byte in a header (NUL, \x01, DEL; not HTAB): HAProxy 2.6
    # forwards them, and libmicrohttpd ends a value at a NUL, so the two
    # would read one header two ways. CR and LF its parser refuses itself.
    http-request deny deny_status 400 if { req.hdrs -m reg '[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]' }
    # A claim goes to the server its coupon hashes to (coupon_claims); the
    # rest take no lock and keep leastconn (coupon_servers).
    use_backend coupon_claims if { path /api/v1/coupon/add }
    default_backend coupon_servers

backend coupon_servers
    # The server with the fewest requests in flight: one that turns slow
    # (cut from its database, a master late) gathers the requests it holds
    # and the others get the rest, before its health checks take it out.
    balance leastconn
    # Server connections are kept alive and shared (a client's first
    # request always gets one of its own; HAProxy's default). At most
    # pool-max-conn of them are idle per server, closed after
    # pool-purge-delay when not needed. So idle clients hold no server
    # connection (with http-reuse never each held one: 300 from one address
    # took both servers down). A shared connection stays with a client until
    # it has read its answer, so clients that read nothing pin one each (576
    # held about 300 of each server's 2048). option http-server-close avoids
    # that at 0.7x the claims/s, but lost answers in the rehearsal under
    # load (docs/deployment.md). So it is not used until that is explained.
    http-reuse safe
    option httpchk GET /healthz
    http-check expect status 200
    # At most 100 requests on a server at once (more wait in the proxy's
    # queue, timeout queue) and 64 idle connections. The servers exempt the
    # proxy's address (--trusted-proxy) from their per-address cap, so
    # neither clients nor health checks are refused by a server for coming
    # from the proxy.
    default-server inter 1s fall 2 rise 2 check maxconn 100 pool-max-conn 64 pool-purge-delay 1s
CFG
    for s in "$@"; do
      i=$((i + 1))
      echo "    server s$i $s"
    done
    cat <<CFG

backend coupon_claims
    # Affinity: every claim of a coupon reaches one server, which then keeps
    # the coupon's lock between its claims instead of a lock round each.
    # coupon_id is hashed from the query string, or from a urlencoded POST
    # body, which the servers also read (HAProxy 2.6 reads the body with or
    # without check_post; it is written for older versions); no coupon_id:
    # round robin (the server answers 400). Consistent hashing: a server that goes
    # down hands on only its own coupons, and gets them back when it is up.
    $claim_balance
    http-reuse safe
    # The same servers, up or down as coupon_servers' health checks say
    # (track): one set of checks per server. maxconn counts per backend, so
    # a server may hold 100 claims and 100 other requests at once.
    default-server maxconn 100 pool-max-conn 64 pool-purge-delay 1s
CFG
    i=0
    for s in "$@"; do
      i=$((i + 1))
      echo "    server s$i $s track coupon_servers/s$i"
    done
  } >"$dir/haproxy.cfg" || return 1
  echo "$dir/haproxy.cfg"
}
