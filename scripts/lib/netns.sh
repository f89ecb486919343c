# scripts/lib/netns.sh - separate "hosts" on one machine for scripts/hosts:
# one network namespace per host, a bridge namespace holding one Linux bridge
# per network, and a veth pair from each host interface to its bridge.
# Addresses stay inside 127.0.0.0/8, so nothing here can reach or be reached
# from a real network. A partition is `ip link set <port> down` on the
# host's bridge port: packets to and from that interface are lost, exactly
# as on a pulled cable. Everything is named "$ns_prefix-..." and removed by
# netns_cleanup (ip netns del: its veths and bridges go with it).
#
# The caller sets: die, say, ns_prefix (unique, e.g. dl$$), and calls
# netns_check first.
# shellcheck shell=bash

: "${ns_prefix:?the caller sets ns_prefix}"
ns_made=() # every namespace created, for netns_cleanup

# One line and exit 2 where namespaces cannot be made (not root, no
# CAP_NET_ADMIN, no iproute2, a kernel or container that refuses).
netns_check() {
  local why
  command -v ip >/dev/null || { echo "hosts: network namespaces unavailable: no 'ip' command (apt-get install iproute2)"; exit 2; }
  [ "$(id -u)" = 0 ] || { echo "hosts: network namespaces unavailable: needs root (CAP_NET_ADMIN)"; exit 2; }
  if ! why="$(ip netns add "$ns_prefix-probe" 2>&1)"; then
    echo "hosts: network namespaces unavailable: ip netns add failed: ${why//$'\n'/ }"
    exit 2
  fi
  ns_made+=("$ns_prefix-probe")
  # A bridge and a veth pair too: some sandboxes allow the namespace only.
  if ! why="$(ip -n "$ns_prefix-probe" link add probe0 type bridge 2>&1 &&
    ip -n "$ns_prefix-probe" link add probe1 type veth peer name probe2 2>&1)"; then
    netns_cleanup
    echo "hosts: network namespaces unavailable: cannot create a bridge or a veth pair: ${why//$'\n'/ }"
    exit 2
  fi
  netns_cleanup
}

# shellcheck disable=SC2317  # invoked from the EXIT trap
netns_cleanup() {
  local ns
  for ns in "${ns_made[@]}"; do ip netns del "$ns" 2>/dev/null || true; done
  ns_made=()
}

# A host: its namespace, loopback reduced to 127.0.0.1/32 (by default lo
# holds 127.0.0.0/8, which would make every 127.10.x.y address local to
# this host), and 127/8 routable on its interfaces (route_localnet).
netns_host() { # name
  local ns="$ns_prefix-$1"
  ip netns add "$ns" || die "ip netns add $ns failed"
  ns_made+=("$ns")
  ip -n "$ns" link set lo up &&
    ip -n "$ns" addr del 127.0.0.1/8 dev lo &&
    ip -n "$ns" addr add 127.0.0.1/32 dev lo &&
    ip netns exec "$ns" sysctl -qw net.ipv4.conf.all.route_localnet=1 net.ipv4.conf.default.route_localnet=1 ||
    die "cannot set up the loopback of $ns"
}

# The bridge namespace with one bridge per network.
netns_bridges() { # network names...
  local ns="$ns_prefix-br" net
  ip netns add "$ns" || die "ip netns add $ns failed"
  ns_made+=("$ns")
  for net in "$@"; do
    ip -n "$ns" link add "br-$net" type bridge &&
      ip -n "$ns" link set "br-$net" up || die "cannot create bridge br-$net in $ns"
  done
}

# Joins host to network net with address addr (/24): its interface is
# "$net"0 in the host, its bridge port "$host-$net" in the bridge namespace.
netns_join() { # host net addr
  local ns="$ns_prefix-$1" br="$ns_prefix-br" port="$1-$2" ifc="${2}0"
  ip -n "$br" link add "$port" type veth peer name "$ifc" netns "$ns" &&
    ip -n "$br" link set "$port" master "br-$2" &&
    ip -n "$br" link set "$port" up &&
    ip netns exec "$ns" sysctl -qw "net.ipv4.conf.$ifc.route_localnet=1" &&
    ip -n "$ns" addr add "$3/24" dev "$ifc" &&
    ip -n "$ns" link set "$ifc" up || die "cannot join $1 to network $2 as $3"
}

# The partition: the host's port on the bridge of net goes down (its
# packets are dropped both ways) or comes back.
netns_cut() { ip -n "$ns_prefix-br" link set "$1-$2" down || die "cannot cut $1 from network $2"; }
netns_mend() { ip -n "$ns_prefix-br" link set "$1-$2" up || die "cannot reconnect $1 to network $2"; }

# Runs a command on a host (in its namespace); exec's, so $! is the command's PID.
on_host() { # host command...
  local ns="$ns_prefix-$1"
  shift
  ip netns exec "$ns" "$@"
}

# spawn (lib/sale.sh: own session, in the background) on a host; $! is the command's PID.
spawn_on() { # host command...
  local ns="$ns_prefix-$1"
  shift
  spawn ip netns exec "$ns" "$@"
}

# 0 when something on host answers TCP at addr:port within 1 s.
host_tcp_open() { # host addr port
  on_host "$1" timeout 1 bash -c "exec 3<>/dev/tcp/$2/$3" 2>/dev/null
}
