#!/usr/bin/env bash
# tls_tunnel.sh - the TLS recipe of docs/libdlock.md, run for real: Debian
# 12's hiredis 0.14 has no TLS (libdlock refuses rediss://), so a local
# stunnel in client mode carries the plain connection to a redis-server that
# speaks only TLS (--port 0 --tls-port), verifying its certificate. The
# example take_a_lock must take and release a lock through the tunnel, and
# must fail when pointed at the TLS port directly (the tunnel does the work).
# Exit 0 pass, 1 fail, 77 skip (no stunnel or openssl). Every process
# started here is stopped by its PID; the temp dir is removed.
# usage: tls_tunnel.sh REDIS_SERVER TAKE_A_LOCK
set -euo pipefail
redis_server=$1 take_a_lock=$2
stunnel_bin="$(command -v stunnel4 || command -v stunnel || true)"
if [ -z "$stunnel_bin" ] || ! command -v openssl >/dev/null; then
  echo "tls_tunnel: skipped: stunnel4 and openssl are needed (scripts/setup.sh's test set installs them)"
  exit 77
fi
dir="$(mktemp -d)"
pids=()
cleanup() {
  local p
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$dir"
}
trap cleanup EXIT
fail() { echo "tls_tunnel: FAIL: $*" >&2; exit 1; }

# Bounded wait until something listens on 127.0.0.1:$1.
listening() {
  local i
  for i in $(seq 1 100); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then return 0; fi
    sleep 0.05
  done
  return 1
}

openssl req -x509 -newkey rsa:2048 -nodes -keyout "$dir/key.pem" -out "$dir/cert.pem" -days 1 \
  -subj /CN=127.0.0.1 -addext "subjectAltName=IP:127.0.0.1" 2>"$dir/openssl.log" ||
  fail "openssl: $(cat "$dir/openssl.log")"

# A free port: the kernel picks one for a moment; a clash is retried (bounded).
tls_port="" plain_port=""
for try in 1 2 3 4 5; do
  port=$((20000 + RANDOM % 20000))
  "$redis_server" --port 0 --tls-port "$port" --tls-cert-file "$dir/cert.pem" \
    --tls-key-file "$dir/key.pem" --tls-ca-cert-file "$dir/cert.pem" --tls-auth-clients no \
    --save '' --appendonly no --dir "$dir" --logfile "$dir/redis.log" &
  pid=$!
  if listening "$port" && kill -0 "$pid" 2>/dev/null; then pids+=("$pid"); tls_port=$port; break; fi
  kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true
done
[ -n "$tls_port" ] || fail "redis-server with --tls-port did not start: $(tail -n 3 "$dir/redis.log" 2>/dev/null)"

for try in 1 2 3 4 5; do
  port=$((20000 + RANDOM % 20000))
  cat >"$dir/stunnel.conf" <<CONF
foreground = yes
pid =
[redis]
client = yes
accept = 127.0.0.1:$port
connect = 127.0.0.1:$tls_port
verifyChain = yes
CAfile = $dir/cert.pem
checkIP = 127.0.0.1
CONF
  "$stunnel_bin" "$dir/stunnel.conf" >"$dir/stunnel.log" 2>&1 &
  pid=$!
  if listening "$port" && kill -0 "$pid" 2>/dev/null; then pids+=("$pid"); plain_port=$port; break; fi
  kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true
done
[ -n "$plain_port" ] || fail "stunnel did not start: $(tail -n 3 "$dir/stunnel.log")"

out="$("$take_a_lock" "redis://127.0.0.1:$plain_port" 2>&1)" || fail "through the tunnel: $out"
echo "through stunnel to a TLS-only redis-server: $out"
case "$out" in *"holding report:daily"*) ;; *) fail "no lock in: $out" ;; esac
if out="$(timeout 20 "$take_a_lock" "redis://127.0.0.1:$tls_port" 2>&1)"; then
  fail "plain text to the TLS port succeeded: $out"
fi
echo "plain text to the TLS port refused, as it must be: $out"
