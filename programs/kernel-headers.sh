#!/bin/sh
# kernel-headers.sh DIR MULTIARCH STAMP: the include directory the lean programs see the system's kernel headers
# (linux-libc-dev) through, and only those: musl brings none, and the rest of /usr/include is glibc's.
set -e
dir=$1 multiarch=$2 stamp=$3
mkdir -p "$dir"
ln -sfn /usr/include/linux "$dir/linux"
ln -sfn "/usr/include/$multiarch/asm" "$dir/asm"
ln -sfn /usr/include/asm-generic "$dir/asm-generic"
: >"$stamp"
