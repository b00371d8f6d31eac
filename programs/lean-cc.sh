#!/bin/sh
# lean-cc.sh DEPFILE OUTPUT CC [ARGS...]: builds a static, library-free program
# with CC (musl-gcc) from ARGS (flags and sources), and writes DEPFILE, every
# header it read, for ninja.  One gcc call cannot write a depfile for several
# sources, so the dependencies are listed first, then the program is built.
set -e
depfile=$1 output=$2
shift 2
"$@" -MM -MT "$output" >"$depfile"
exec "$@" -o "$output"
