#!/bin/bash
# tests/slurm-node.sh: a single-node Slurm of its own, for tests/test-slurm.c
# and examples/slurm.  Everything lives under DIR: munged with its own key and
# socket, slurmctld and slurmd on two free loopback ports, their state, spool,
# logs and pid files, and a plugstack.conf that loads the sandstep SPANK plugin.
#
#   slurm-node.sh start DIR PLUGIN SANDSTEP   prints the slurm.conf path when the node is idle
#   slurm-node.sh stop DIR                    stops what start started, by the pids it recorded
#
# Needs root (slurmd runs jobs as their users), and Debian's slurmctld, slurmd,
# slurm-client and munge (scripts/deps.sh: sandstep_ensure_slurm).
set -euo pipefail

die () { echo "slurm-node.sh: $*" >&2; exit 1; }
# shellcheck source=tests/slurm-common.sh
. "$(dirname "$0")/slurm-common.sh"

# A TCP port nothing listens on (ss, from iproute2), in a range the kernel
# does not hand out for outgoing connections (ip_local_port_range starts at 32768).
free_port () {
  local port
  while :; do
    port=$((20000 + RANDOM % 12000))
    ss -Htln "sport = :$port" | grep -q . || { echo "$port"; return; }
  done
}

start () {
  local dir=$1 plugin=$2 sandstep=$3
  [ "$(id -u)" -eq 0 ] || die "a Slurm node needs root (slurmd starts jobs as their users); run the tests as root"
  local prog
  for prog in munged slurmctld slurmd srun sinfo; do
    command -v "$prog" >/dev/null 2>&1 ||
      die "'$prog' is not installed; install Debian's slurmctld, slurmd, slurm-client and munge (scripts/deps.sh: sandstep_ensure_slurm)"
  done
  [ -f "$plugin" ] || die "no SPANK plugin at '$plugin'; build it (meson needs /usr/include/slurm/spank.h: libslurm-dev)"

  mkdir -p "$dir"/{etc,state,spool,log,run,munge,spank}
  chmod 0755 "$dir"
  slurm_start_munged "$dir"

  local ctld_port node_port cpus mem
  ctld_port=$(free_port)
  node_port=$(free_port)
  while [ "$node_port" = "$ctld_port" ]; do node_port=$(free_port); done
  cpus=$(nproc)
  mem=$(awk '/MemTotal/ { print int($2 / 1024 / 2) }' /proc/meminfo)

  cat > "$dir/etc/slurm.conf" <<EOF
ClusterName=sandstep-test
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$node_port
SlurmdPidFile=$dir/run/slurmd.pid.slurm
SlurmdLogFile=$dir/log/slurmd.log
$(slurm_common_conf "$dir" "$dir/etc/plugstack.conf")
NodeName=node1 NodeAddr=127.0.0.1 NodeHostname=localhost CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=debug Nodes=node1 Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4
EOF
  echo "optional $plugin sandstep=$sandstep rundir=$dir/spank" > "$dir/etc/plugstack.conf"
  slurm_cgroup_conf "$dir" node1

  export SLURM_CONF=$dir/etc/slurm.conf
  slurmctld -D -i </dev/null >"$dir/log/slurmctld.out" 2>&1 &
  echo $! > "$dir/run/slurmctld.pid"
  slurmd -D -N node1 </dev/null >"$dir/log/slurmd.out" 2>&1 &
  echo $! > "$dir/run/slurmd.pid"

  for _ in $(seq 300); do
    if sinfo -h -N -o '%t' 2>/dev/null | grep -q '^idle'; then
      echo "$SLURM_CONF"
      return 0
    fi
    sleep 0.1
  done
  slurm_explain_start "$dir"
  die "the node did not become idle in 30s; logs: $dir/log/slurmctld.log, $dir/log/slurmd.log"
}

stop () {
  local dir=$1 name
  # slurmd first, so that no step is started while slurmctld goes.
  for name in slurmd slurmctld munged; do
    slurm_stop_pid "$dir/run/$name.pid"
  done
  slurm_remove_cgroups "$dir"
}

case "${1:-}" in
  start) [ $# -eq 4 ] || die "usage: slurm-node.sh start DIR PLUGIN SANDSTEP"; start "$2" "$3" "$4" ;;
  stop) [ $# -eq 2 ] || die "usage: slurm-node.sh stop DIR"; stop "$2" ;;
  *) die "usage: slurm-node.sh start DIR PLUGIN SANDSTEP | stop DIR" ;;
esac
