#!/usr/bin/env python3
"""bench/first-commands.py: a fork's first command against a provisioned sandbox's, in turns.

    bench/first-commands.py SANDSTEP STATE_DIR RUNS

Makes a sandbox holding 10,000 files in STATE_DIR, forks it once (the freeze), then, RUNS times, provisions a
sandbox and times its first command, and forks the base and times the fork's first command.  The sandbox made
before each is destroyed first, as a DAG destroys what it made.  Turns, not one command's rounds then the other's:
what the host does in between (its inode allocator after deletes, write-back) weighs on both alike.  Prints one
JSON object: the medians in ms.
"""
import json
import os
import statistics
import subprocess
import sys
import time

sandstep, state_dir, runs = sys.argv[1], sys.argv[2], int(sys.argv[3])
env = dict(os.environ, SANDSTEP_STATE_DIR=state_dir, SANDSTEP_RUN="bench-first", SANDSTEP_DAG="bench")


def sandstep_out(*args):
    return subprocess.run([sandstep, *args], env=env, check=True, capture_output=True, text=True).stdout.strip()


base = sandstep_out("provision", "--holder=bench/first-base", "--lifetime=1h")
sandstep_out("run", f"--handle={base}", "--", "mkdir -p data && cd data && seq 10000 | xargs touch")
sandstep_out("fork", f"--handle={base}", "--holder=bench/first-freeze")
subprocess.run(["sync"], check=True)
times = {"provisioned": [], "fork": []}
last = {}
try:
    for i in range(runs):
        for kind in times:
            if kind in last:
                sandstep_out("destroy", f"--handle={last.pop(kind)}")
            if kind == "provisioned":
                last[kind] = sandstep_out("provision", f"--holder=bench/first-p{i}")
            else:
                last[kind] = sandstep_out("fork", f"--handle={base}", f"--holder=bench/first-f{i}")
            t0 = time.perf_counter()
            sandstep_out("run", f"--handle={last[kind]}", "--", "/bin/true")
            times[kind].append((time.perf_counter() - t0) * 1000)
finally:
    subprocess.run([sandstep, "gc", "--run=bench-first"], env=env, capture_output=True)
print(json.dumps({kind: statistics.median(t) for kind, t in times.items()}))
