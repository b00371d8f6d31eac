#!/bin/bash
# tests/slurm-nodes.sh: a two-node Slurm on one machine, for
# tests/test-slurm-nodes.c and examples/slurm.  Run it from a network
# namespace of its own (the test unshares one; by hand: `unshare -n`): that
# namespace is the cluster's network, where slurmctld, sandstepd and the
# Slurm commands run.  Each node is a namespace of the same machine:
#
#   this namespace: bridge sst0, 10.231.40.1/24: slurmctld, sandstepd, srun
#     |-- veth -- PREFIX-node1: 10.231.40.11, hostname node1, slurmd -N node1
#     '-- veth -- PREFIX-node2: 10.231.40.12, hostname node2, slurmd -N node2
#
# A node is its own network, UTS, PID and mount namespace: killing its pid
# (the unshare that holds it) kills slurmd and every step on it at once, as a
# node that dies does.  In its mount namespace DIR/local (the plugin's job
# records, its slurmd's pid file) and STATE (SANDSTEP_STATE_DIR of its jobs:
# local sandboxes) are its own (DIR/nodes/NAME/...); only sandstepd is shared.
# No namespace has a route anywhere but 10.231.40.0/24.  munged is shared
# (a socket in DIR/munge).
#
#   slurm-nodes.sh start DIR PLUGIN SANDSTEP   prints the slurm.conf path when both nodes are idle;
#                                              DIR/sandstepd.url: the daemon's URL, DIR/sandstepd.token its token
#   slurm-nodes.sh stop DIR                    stops what start started, by the pids it recorded, and
#                                              deletes the node namespaces
#   slurm-nodes.sh sweep                       deletes node namespaces of test processes that are gone
#
# Environment: SANDSTEPD (the daemon), SANDSTEP_STATE_DIR (STATE), and
# SANDSTEP_TEST_NETNS_PREFIX=sandstep-test-<pid> (the namespaces' prefix).
# Needs root, iproute2, util-linux and what tests/slurm-node.sh needs.
set -euo pipefail

die () { echo "slurm-nodes.sh: $*" >&2; exit 1; }
# shellcheck source=tests/slurm-common.sh
. "$(dirname "$0")/slurm-common.sh"

NODES="node1 node2"
# How much slower than a plain host's this one runs (scripts/test, tests/sandstep-test-utils.h): the waits below
# stretch by it (an emulated CPU starts slurmctld and two slurmd in more than 30 s).
scale=${SANDSTEP_TEST_TIME_SCALE:-1}
scale=${scale%%.*}
case $scale in '' | *[!0-9]* | 0) scale=1 ;; esac
NET=10.231.40

node_addr () { echo "$NET.1${1#node}"; }

check_prefix () {
  case ${SANDSTEP_TEST_NETNS_PREFIX:-} in
    sandstep-test-[0-9]*) ;;
    *) die "SANDSTEP_TEST_NETNS_PREFIX must be sandstep-test-<pid>, got '${SANDSTEP_TEST_NETNS_PREFIX:-}'" ;;
  esac
}

start () {
  local dir=$1 plugin=$2 sandstep=$3
  local state=${SANDSTEP_STATE_DIR:?SANDSTEP_STATE_DIR must name the jobs\' state directory}
  local sandstepd=${SANDSTEPD:?SANDSTEPD must name the sandstepd program}
  [ "$(id -u)" -eq 0 ] || die "a Slurm node needs root (slurmd starts jobs as their users); run the tests as root"
  check_prefix
  local prog
  for prog in munged slurmctld slurmd srun sinfo ip nsenter unshare; do
    command -v "$prog" >/dev/null 2>&1 ||
      die "'$prog' is not installed; install Debian's slurmctld, slurmd, slurm-client, munge, iproute2 and util-linux (scripts/deps.sh: sandstep_ensure_slurm)"
  done
  [ -f "$plugin" ] || die "no SPANK plugin at '$plugin'; build it (meson needs /usr/include/slurm/spank.h: libslurm-dev)"
  # The cluster's addresses must be this namespace's alone: never the machine's own.
  [ "$(readlink /proc/self/ns/net)" != "$(readlink /proc/1/ns/net)" ] ||
    die "run me in a network namespace of my own (unshare -n), not the machine's"

  mkdir -p "$dir"/{etc,state,spool,log,run,local,munge,sandstepd} "$state"
  chmod 0755 "$dir" "$dir/local"
  slurm_start_munged "$dir"

  # The network: a bridge here, one veth pair to each node.
  ip link set lo up
  ip link add sst0 type bridge
  ip addr add "$NET.1/24" dev sst0
  ip link set sst0 up
  local name ns
  for name in $NODES; do
    ns=$SANDSTEP_TEST_NETNS_PREFIX-$name
    ip netns add "$ns"
    echo "$ns" >> "$dir/run/netns"
    ip -n "$ns" link set lo up
    ip link add "v-$name" type veth peer name eth0 netns "$ns"
    ip link set "v-$name" master sst0 up
    ip -n "$ns" addr add "$(node_addr "$name")/24" dev eth0
    ip -n "$ns" link set eth0 up
  done

  # sandstepd where every node reaches it.
  umask 077
  head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$dir/sandstepd.token"
  umask 022
  "$sandstepd" --listen="$NET.1:0" --token-file="$dir/sandstepd.token" --state-dir="$dir/sandstepd/state" \
    </dev/null >"$dir/sandstepd/out" 2>"$dir/log/sandstepd.log" &
  echo $! > "$dir/run/sandstepd.pid"

  local cpus mem
  cpus=$(nproc)
  mem=$(awk '/MemTotal/ { print int($2 / 1024 / 4) }' /proc/meminfo)
  {
    cat <<EOF
ClusterName=sandstep-nodes
SlurmctldHost=$(hostname -s)($NET.1)
SlurmctldPort=6817
SlurmdPort=6818
SlurmdPidFile=$dir/local/slurmd.pid
SlurmdLogFile=$dir/log/slurmd-%n.log
# A node that stops answering is down after 10s, not 300s.
SlurmdTimeout=10
MessageTimeout=5
$(slurm_common_conf "$dir" "$dir/etc/plugstack.conf")
EOF
    for name in $NODES; do
      echo "NodeName=$name NodeAddr=$(node_addr "$name") NodeHostname=$name CPUs=$cpus RealMemory=$mem State=UNKNOWN"
    done
    echo "PartitionName=debug Nodes=node[1-2] Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4"
  } > "$dir/etc/slurm.conf"
  echo "optional $plugin sandstep=$sandstep rundir=$dir/local/spank" > "$dir/etc/plugstack.conf"
  # shellcheck disable=SC2086 # the node names
  slurm_cgroup_conf "$dir" $NODES

  export SLURM_CONF=$dir/etc/slurm.conf
  slurmctld -D -i </dev/null >"$dir/log/slurmctld.out" 2>&1 &
  echo $! > "$dir/run/slurmctld.pid"
  for name in $NODES; do
    mkdir -p "$dir/nodes/$name/local" "$dir/nodes/$name/state"
    chmod 0755 "$dir/nodes/$name" "$dir/nodes/$name/local"
    # --kill-child: the node's PID namespace dies with the unshare whose pid is recorded.
    # shellcheck disable=SC2016 # the node's shell expands them
    nsenter --net="/run/netns/$SANDSTEP_TEST_NETNS_PREFIX-$name" \
      unshare --uts --mount --pid --fork --kill-child --mount-proc /bin/sh -c '
        hostname "$1" &&
        mount --bind "$2/nodes/$1/local" "$2/local" &&
        mount --bind "$2/nodes/$1/state" "$3" &&
        exec slurmd -D -N "$1"' sh "$name" "$dir" "$state" \
      </dev/null >"$dir/log/slurmd-$name.out" 2>&1 &
    echo $! > "$dir/run/node-$name.pid"
  done

  local url=
  for _ in $(seq $((100 * scale))); do
    url=$(sed -n 's/^sandstepd: listening on //p' "$dir/sandstepd/out")
    [ -n "$url" ] && break
    sleep 0.05
  done
  [ -n "$url" ] || die "sandstepd did not start; its log: $dir/log/sandstepd.log"
  echo "$url" > "$dir/sandstepd.url"

  local deadline=$((SECONDS + 30 * scale))
  while [ $SECONDS -lt $deadline ]; do
    if [ "$(timeout 5 sinfo -h -N -o '%t' 2>/dev/null | grep -c '^idle')" = 2 ]; then
      echo "$SLURM_CONF"
      return 0
    fi
    sleep 0.1
  done
  slurm_explain_start "$dir"
  die "the nodes did not become idle in $((30 * scale))s; logs: $dir/log/slurmctld.log, $dir/log/slurmd-node*.log"
}

stop () {
  local dir=$1 name ns
  for name in $NODES; do
    slurm_stop_pid "$dir/run/node-$name.pid"
  done
  for name in slurmctld sandstepd munged; do
    slurm_stop_pid "$dir/run/$name.pid"
  done
  if [ -f "$dir/run/netns" ]; then
    while read -r ns; do
      ip netns delete "$ns" 2>/dev/null || true
    done < "$dir/run/netns"
    rm -f "$dir/run/netns"
  fi
  slurm_remove_cgroups "$dir"
}

sweep () {
  local ns pid
  for ns in $(ip netns list 2>/dev/null | sed -n 's/^\(sandstep-test-[0-9]*-node[0-9]\).*/\1/p'); do
    pid=${ns#sandstep-test-}
    pid=${pid%-node?}
    [ -d "/proc/$pid" ] || ip netns delete "$ns" 2>/dev/null || true
  done
}

case "${1:-}" in
  start) [ $# -eq 4 ] || die "usage: slurm-nodes.sh start DIR PLUGIN SANDSTEP"; start "$2" "$3" "$4" ;;
  stop) [ $# -eq 2 ] || die "usage: slurm-nodes.sh stop DIR"; stop "$2" ;;
  sweep) sweep ;;
  *) die "usage: slurm-nodes.sh start DIR PLUGIN SANDSTEP | stop DIR | sweep" ;;
esac
