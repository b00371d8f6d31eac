#!/bin/sh
# netns-hosts.sh up PREFIX | down PREFIX | sweep
#
# Three test "hosts" for tests/test-remote.c, as network namespaces of this
# machine: PREFIX-a, PREFIX-b and PREFIX-c.  B is the sandbox server; A and C
# each reach it over their own veth pair, created inside the namespaces (no
# interface ever appears in the machine's own namespace), with addresses in
# 10.231.x.0/24 that exist only there.  No namespace has a route anywhere
# else, so no packet can leave the machine.
#
#   A  10.231.1.1 --- 10.231.1.2  B  10.231.2.2 --- 10.231.2.1  C
#
# C reaches B's 10.231.1.2 too (a route via 10.231.2.2, B's own address: no
# forwarding), so a handle naming http://10.231.1.2:PORT works from A and C.
#
# PREFIX must be "sandstep-test-<pid>": `sweep` deletes the namespaces of
# test processes that no longer exist.  Needs root and iproute2.
set -eu

cmd=${1:-}
prefix=${2:-}

die () {
  echo "netns-hosts.sh: $*" >&2
  exit 1
}

check_prefix () {
  case $prefix in
    sandstep-test-[0-9]*) ;;
    *) die "PREFIX must be sandstep-test-<pid>, got '$prefix'" ;;
  esac
}

down () {
  for host in a b c; do
    ip netns delete "$prefix-$host" 2>/dev/null || true
  done
}

case $cmd in
  up)
    check_prefix
    command -v ip >/dev/null 2>&1 || die "iproute2's 'ip' is missing"
    down
    trap 'down' EXIT
    for host in a b c; do
      ip netns add "$prefix-$host"
      ip -n "$prefix-$host" link set lo up
    done
    ip -n "$prefix-a" link add to-b type veth peer name to-a netns "$prefix-b"
    ip -n "$prefix-c" link add to-b type veth peer name to-c netns "$prefix-b"
    ip -n "$prefix-a" addr add 10.231.1.1/24 dev to-b
    ip -n "$prefix-b" addr add 10.231.1.2/24 dev to-a
    ip -n "$prefix-b" addr add 10.231.2.2/24 dev to-c
    ip -n "$prefix-c" addr add 10.231.2.1/24 dev to-b
    ip -n "$prefix-a" link set to-b up
    ip -n "$prefix-b" link set to-a up
    ip -n "$prefix-b" link set to-c up
    ip -n "$prefix-c" link set to-b up
    ip -n "$prefix-c" route add 10.231.1.0/24 via 10.231.2.2
    trap - EXIT
    ;;
  down)
    check_prefix
    down
    ;;
  sweep)
    for ns in $(ip netns list 2>/dev/null | sed -n 's/^\(sandstep-test-[0-9]*-[abc]\).*/\1/p'); do
      pid=${ns#sandstep-test-}
      pid=${pid%-?}
      [ -d "/proc/$pid" ] || ip netns delete "$ns" 2>/dev/null || true
    done
    ;;
  *)
    die "usage: netns-hosts.sh up PREFIX | down PREFIX | sweep"
    ;;
esac
