#!/usr/bin/env bash
# registry.sh: a loopback registry holding a Python image, for examples/image.
#
#   ./registry.sh start DIR    # prints REGISTRY=127.0.0.1:PORT
#   ./registry.sh stop DIR
#
# start runs Debian's docker-registry on 127.0.0.1 (a free port, or $PORT),
# its storage and log in DIR, and pushes example/python:3 to it: an OCI
# image made with umoci from this host's python3, its standard library and
# the libraries it links, over busybox-static as /bin/sh (what the sandbox
# runs commands with), pushed with skopeo.  stop kills the registry by the pid
# start wrote to DIR/registry.pid, and removes what start made there.
# Needs: apt-get install docker-registry umoci skopeo busybox-static python3
set -euo pipefail

usage () { echo "usage: $0 start|stop DIR" >&2; exit 2; }
[ $# -eq 2 ] || usage
action=$1 dir=$2

case $action in
  stop)
    if [ -f "$dir/registry.pid" ]; then
      pid=$(cat "$dir/registry.pid")
      kill "$pid" 2>/dev/null || true
      # Until it has gone (or is a zombie its new parent has yet to reap), at most 5 s.
      for _ in $(seq 50); do
        state=$(awk '{ print $3 }' "/proc/$pid/stat" 2>/dev/null) || break
        [ -z "$state" ] || [ "$state" = Z ] && break
        sleep 0.1
      done
    fi
    # Only what start made, so that a wrong DIR loses nothing else.
    rm -rf "$dir/storage" "$dir/layout" "$dir/bundle"
    rm -f "$dir/registry.yml" "$dir/registry.log" "$dir/registry.pid"
    rmdir "$dir" 2>/dev/null || true
    exit 0 ;;
  start) ;;
  *) usage ;;
esac

for tool in docker-registry umoci skopeo /bin/busybox "${PYTHON:-/usr/bin/python3}"; do
  command -v "$tool" >/dev/null || {
    echo "$0: '$tool' is missing; apt-get install docker-registry umoci skopeo busybox-static python3" >&2
    exit 1
  }
done
[ -e "$dir/registry.pid" ] && { echo "$0: '$dir' has a registry already; run '$0 stop $dir' first" >&2; exit 1; }
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)

# Debian's interpreter (not a pyenv or venv shim earlier in PATH); $PYTHON for another.
python=$(readlink -f "${PYTHON:-/usr/bin/python3}")      # /usr/bin/python3.11
version=$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
stdlib=/usr/lib/python$version
port=${PORT:-$("$python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')}

# The registry first: its pid in DIR/registry.pid before anything can fail.
cat > "$dir/registry.yml" <<YML
version: 0.1
log:
  level: error
storage:
  filesystem:
    rootdirectory: $dir/storage
http:
  addr: 127.0.0.1:$port
YML
docker-registry serve "$dir/registry.yml" > "$dir/registry.log" 2>&1 &
echo $! > "$dir/registry.pid"
# A start that fails stops the registry it started (its log stays in DIR).
trap '[ $? -eq 0 ] || kill "$(cat "$dir/registry.pid")" 2>/dev/null' EXIT
up=0
for _ in $(seq 100); do
  if "$python" -c 'import socket, sys; socket.create_connection(("127.0.0.1", int(sys.argv[1])), 1)' "$port" 2>/dev/null
  then up=1; break; fi
  sleep 0.1
done
[ $up = 1 ] || { echo "$0: docker-registry did not answer on 127.0.0.1:$port; see $dir/registry.log" >&2; exit 1; }

# The image, two layers (as test-image.c builds busybox: init, new, unpack, copy in, repack).
layout=$dir/layout bundle=$dir/bundle
rm -rf "$layout" "$bundle"
umoci init --layout "$layout"
umoci new --image "$layout:t"
umoci config --image "$layout:t" --config.env "PATH=/usr/local/bin:/usr/bin:/bin" \
  --config.cmd python3 --author sandstep-example-image

# Layer 1: busybox-static as /bin/sh and the tools, and the C libraries python3 and its modules link.
umoci unpack --rootless --image "$layout:t" "$bundle" >/dev/null
root=$bundle/rootfs
mkdir -p "$root/bin" "$root/usr/bin" "$root/usr/lib" "$root/usr/lib64" "$root/etc"
ln -s usr/lib "$root/lib"
ln -s usr/lib64 "$root/lib64"
cp /bin/busybox "$root/bin/busybox"
for applet in $(/bin/busybox --list); do
  [ -e "$root/bin/$applet" ] || ln -s busybox "$root/bin/$applet"
done
# /lib is /usr/lib here as on Debian: each library at its /usr path.
for lib in $(ldd "$python" "$stdlib"/lib-dynload/*.so 2>/dev/null | awk '/=> \// { print $3 } /^\t\// { print $1 }' | sort -u); do
  case $lib in /lib*) dest=$root/usr$lib ;; *) dest=$root$lib ;; esac
  mkdir -p "$(dirname "$dest")"
  cp -L "$lib" "$dest"
done
umoci repack --image "$layout:t" "$bundle"
rm -rf "$bundle"

# Layer 2: the interpreter and its standard library (less its own tests and the GUI parts).
umoci unpack --rootless --image "$layout:t" "$bundle" >/dev/null
root=$bundle/rootfs
cp "$python" "$root/usr/bin/python$version"
ln -s "python$version" "$root/usr/bin/python3"
tar -C / --exclude="${stdlib#/}/test" --exclude=idlelib --exclude=tkinter --exclude=turtledemo \
  --exclude=__pycache__ -cf - "${stdlib#/}" | tar -C "$root" -xf -
[ -d "/etc/python$version" ] && cp -a "/etc/python$version" "$root/etc/"
umoci repack --image "$layout:t" "$bundle"
rm -rf "$bundle"

skopeo copy --quiet --dest-tls-verify=false "oci:$layout:t" "docker://127.0.0.1:$port/example/python:3"
rm -rf "$layout"
echo "REGISTRY=127.0.0.1:$port"
