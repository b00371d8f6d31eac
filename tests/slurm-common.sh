# shellcheck shell=bash
# tests/slurm-common.sh: what tests/slurm-node.sh (one node) and
# tests/slurm-nodes.sh (several) share, sourced by both: munged with a key
# and socket of its own, the slurm.conf lines that do not depend on where the
# daemons listen, and stopping a recorded pid.

# Starts munged with its key and socket under DIR/munge (pid in DIR/run/munged.pid) and waits for its socket.
slurm_start_munged () {
  local dir=$1
  mkdir -p "$dir/munge" "$dir/run"
  # munged insists on a key and socket directory of its own user's, not group or world writable.
  chown munge:munge "$dir/munge"
  chmod 0755 "$dir/munge"  # other users reach the socket; only munge writes here
  dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 status=none
  chown munge:munge "$dir/munge/munge.key"
  chmod 0400 "$dir/munge/munge.key"
  runuser -u munge -- munged --foreground --force \
    --socket="$dir/munge/munge.socket" --key-file="$dir/munge/munge.key" \
    --pid-file="$dir/munge/munged.pid" --seed-file="$dir/munge/munge.seed" \
    --log-file="$dir/munge/munged.log" </dev/null >/dev/null 2>&1 &
  echo $! > "$dir/run/munged.pid"
  # munged must answer before the daemons start: they authenticate at once.
  for _ in $(seq 100); do
    [ -S "$dir/munge/munge.socket" ] && return 0
    sleep 0.05
  done
  die "munged did not start; its log: $dir/munge/munged.log"
}

# The slurm.conf lines every test cluster under DIR has: root daemons, munge
# through DIR's socket, state under DIR, PLUGSTACK, no accounting, a scheduler
# that looks every second.
slurm_common_conf () {
  local dir=$1 plugstack=$2
  cat <<CONF
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge/munge.socket
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool/%n
SlurmctldPidFile=$dir/run/slurmctld.pid.slurm
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdDebug=debug
PlugStackConfig=$plugstack
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerParameters=sched_interval=1
ReturnToService=2
KillWait=5
InactiveLimit=0
MinJobAge=300
CONF
}

# Writes DIR/etc/cgroup.conf for a test cluster whose nodes are named NAME..., and records in DIR/run/cgroups the
# cgroups its slurmd will make, for slurm_remove_cgroups.  On cgroup v2 slurmd otherwise asks systemd over D-Bus
# for a scope for its steps: it names a process there by its pid, which systemd cannot see for a node in a PID
# namespace of its own (slurmd gave up and the nodes of tests/slurm-nodes.sh never came up on a stock Debian 12),
# and the scope keeps a "slurmstepd infinity" process of its own that outlives the test.  With IgnoreSystemd the
# slurmd makes that cgroup itself.  cgroup v1 ignores it.
slurm_cgroup_conf () {
  local dir=$1 name scope
  shift
  echo "IgnoreSystemd=yes" > "$dir/etc/cgroup.conf"
  for name in "$@"; do
    # Debian's Slurm is built for several slurmd on one host: a scope per node name.
    scope=/sys/fs/cgroup/system.slice/${name}_slurmstepd.scope
    [ -e "$scope" ] || echo "$scope" >> "$dir/run/cgroups"
  done
}

# Removes the cgroups slurm_cgroup_conf recorded, once the daemons are gone: deepest first, and one that still
# holds a process stays.
slurm_remove_cgroups () {
  local dir=$1 cg
  [ -f "$dir/run/cgroups" ] || return 0
  while read -r cg; do
    [ -d "$cg" ] && find "$cg" -depth -type d -exec rmdir {} + 2>/dev/null || true
  done < "$dir/run/cgroups"
  rm -f "$dir/run/cgroups"
}

# Says on stderr why a cluster under DIR did not come up: the nodes' states and reasons as slurmctld sees them, and
# the last lines of each daemon's log (the test's directory may be gone by the time anyone reads its report).
slurm_explain_start () {
  local dir=$1 log
  echo "slurm: sinfo -N: $(timeout 5 sinfo -h -N -o '%N %t %E' 2>&1 | tr '\n' ';')" >&2
  for log in "$dir"/log/*.log "$dir"/log/*.out; do
    [ -s "$log" ] || continue
    echo "slurm: the last lines of $log:" >&2
    tail -n 20 "$log" | sed 's/^/  | /' >&2
  done
}

# Stops the process whose pid FILE holds (TERM, then KILL after 10s), and removes FILE.
slurm_stop_pid () {
  local file=$1 pid
  [ -f "$file" ] || return 0
  pid=$(cat "$file")
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 100); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -KILL "$pid" 2>/dev/null || true
  rm -f "$file"
}
