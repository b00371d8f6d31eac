#!/bin/sh
# run-fuzzer.sh FUZZER CORPUS WORKDIR SECONDS: one bounded libFuzzer run for the 'fuzz' suite.
#
# The kept corpus is read, never written: what the run finds goes to
# WORKDIR/corpus, a crash's input to WORKDIR/artifacts (named in the log); a
# crash, a leak or a timeout fails the test.
set -eu
fuzzer=$1 corpus=$2 work=$3 seconds=$4
rm -rf "$work"
mkdir -p "$work/corpus" "$work/artifacts"
exec "$fuzzer" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
  -artifact_prefix="$work/artifacts/" "$work/corpus" "$corpus"
