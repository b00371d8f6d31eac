#!/bin/sh
# with-sandstepd.sh SANDSTEPD PROGRAM [ARGS...]
#
# Runs PROGRAM against a fresh sandstepd: the daemon listens on 127.0.0.1 at
# a free port (port 0), with its own token file and state directory, and
# PROGRAM runs with SANDSTEP_BACKEND and SANDSTEP_TOKEN_FILE set, so every
# `sandstep` it starts goes through the daemon.  The daemon is stopped by its
# pid (TERM, then KILL) and its directory removed however PROGRAM ends; the
# exit status is PROGRAM's.  Before the daemon stops, every sandbox PROGRAM
# left on it is destroyed through it with $SANDSTEP (the suites' own
# teardown destroys a case's; this catches what a crashed suite left), so no
# sandbox's supervisor outlives the daemon.  tests/meson.build runs test-helper this way
# (test-helper-remote): the local behaviour suite a second time, remotely.
set -u
daemon=$1
shift
dir=$(mktemp -d "${TMPDIR:-/tmp}/sandstepd-test.XXXXXX") || exit 99
pid=
url=
# Destroys, through the daemon, what is left in its state directory.
destroy_leftovers () {
  [ -n "$url" ] && [ -n "${SANDSTEP:-}" ] && [ -d "$dir/state/sandboxes" ] || return 0
  n=0
  for box in "$dir"/state/sandboxes/sandstep-*; do
    [ -d "$box" ] || continue
    owner=$(sed -n 's/^  "owner" : "\(.*\)",$/\1/p' "$box/record.json" 2>/dev/null)
    "$SANDSTEP" destroy --handle="$url/${box##*/}" --owner="${owner:-unknown}" >/dev/null 2>&1 ||
      echo "# with-sandstepd.sh: could not destroy ${box##*/} (owner '$owner') through sandstepd" >&2
    n=$((n + 1))
  done
  [ $n -eq 0 ] || echo "# with-sandstepd.sh: destroyed the $n sandboxes left on sandstepd" >&2
}
cleanup () {
  destroy_leftovers
  if [ -n "$pid" ]; then
    kill -TERM "$pid" 2>/dev/null
    i=0
    while kill -0 "$pid" 2>/dev/null && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
    kill -KILL "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
  fi
  if [ -s "$dir/log" ] && [ "${status:-1}" -ne 0 ]; then
    echo "# sandstepd log:" >&2
    sed 's/^/# /' "$dir/log" >&2
  fi
  rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

umask 077
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$dir/token"
"$daemon" --listen=127.0.0.1:0 --token-file="$dir/token" --state-dir="$dir/state" >"$dir/out" 2>"$dir/log" &
pid=$!
i=0
while [ $i -lt 100 ]; do
  url=$(sed -n 's/^sandstepd: listening on //p' "$dir/out" 2>/dev/null)
  [ -n "$url" ] && break
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.05
  i=$((i + 1))
done
if [ -z "$url" ]; then
  echo "Bail out! sandstepd did not start" 
  cat "$dir/log" >&2
  status=99
  exit 99
fi
SANDSTEP_BACKEND=$url
SANDSTEP_TOKEN_FILE=$dir/token
# For the suites' teardown, which checks that the daemon's state holds nothing of a finished case.
SANDSTEP_TEST_DAEMON_STATE=$dir/state
export SANDSTEP_BACKEND SANDSTEP_TOKEN_FILE SANDSTEP_TEST_DAEMON_STATE
"$@"
status=$?
exit $status
