# scripts/deps.sh: sourced by scripts/test and scripts/demo.
# Installs with apt-get whatever of sandstep's build and test dependencies is missing.

SANDSTEP_PACKAGES=(
  gcc make meson ninja-build pkg-config
  musl-tools  # musl-gcc: the two programs every command starts, sandstep and sandstep-init (meson.build)
  libglib2.0-dev libjson-glib-dev libsoup-3.0-dev libseccomp-dev
  iproute2 util-linux passwd procps
  passt  # pasta: the user-mode network stack of a network=open sandbox
  nftables  # nft: as root, the host-side rule that keeps a network=open sandbox from the host's own addresses
  curl openssl glib-networking  # test-network: HTTPS through the egress proxy (client, test certificate, GIO TLS)
  libzstd-dev  # zstd image layers (hooks/image/sandstep-image-zstd.c; without it they are refused)
  docker-registry skopeo umoci busybox-static  # test-image, examples/image (test-plugin): a loopback registry, images built and pushed
)
# Not a Debian package, so not installed here: moto_server (pip install
# 'moto[server]', 5.2.1 was used), the loopback S3 server of bench/run's s3://
# row and, beside s3rver from npm (sandstep_ensure_s3rver), of
# tests/test-s3.c.  Without it those skip, saying why.

# Whether this process is root or may become root with sudo (apt-get update and install need it).
sandstep_can_be_root () {
  [ "$(id -u)" -eq 0 ] || command -v sudo >/dev/null 2>&1
}

# apt-get ARGS as root: directly, or through sudo for another user.
sandstep_apt_get () {
  local sudo=()
  [ "$(id -u)" -eq 0 ] || sudo=(sudo)
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get "$@"
}

sandstep_ensure_packages () {
  local missing=() pkg
  for pkg in "${SANDSTEP_PACKAGES[@]}" "$@"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || missing+=("$pkg")
  done
  [ ${#missing[@]} -eq 0 ] && return 0

  if ! sandstep_can_be_root; then
    echo "sandstep: these packages are missing and installing them needs root: ${missing[*]}" >&2
    echo "sandstep: run as root, or install them with: apt-get install ${missing[*]}" >&2
    return 1
  fi
  # One line on the terminal; apt's own output goes to a log that a failure names.
  local log
  log=$(mktemp "${TMPDIR:-/tmp}/sandstep-apt.XXXXXX.log")
  echo "sandstep: installing ${missing[*]} (apt-get's output: $log)" >&2
  if ! { sandstep_apt_get update -q &&
         sandstep_apt_get install -y -q --no-install-recommends "${missing[@]}"; } >"$log" 2>&1; then
    echo "sandstep: apt-get could not install ${missing[*]}; its output is in $log:" >&2
    tail -n 5 "$log" | sed 's/^/  /' >&2
    return 1
  fi
}

# The Slurm SPANK front-end (plugin/slurm) and its suite (tests/test-slurm.c,
# examples/slurm): Slurm's headers to build against, and a single-node Slurm
# (slurmctld, slurmd, srun, munge) that the tests start and stop themselves.
# Debian's postinst does not start the daemons where policy-rc.d forbids it
# (containers); elsewhere stop the packaged services if they are not wanted.
SANDSTEP_SLURM_PACKAGES=(libslurm-dev slurmctld slurmd slurm-client munge)

sandstep_ensure_slurm () {
  sandstep_ensure_packages "${SANDSTEP_SLURM_PACKAGES[@]}"
}

# The npm packages that tests/test-mcp.c and tests/test-mcp-modern.c drive the
# MCP server with (tests/mcp/package.json): the official client SDKs
# (@modelcontextprotocol/sdk 1.x for 2025-11-25, @modelcontextprotocol/client
# 2.x for 2026-07-28), the official conformance suite
# (@modelcontextprotocol/conformance) and glob, whose globSync stands in for
# the fs.globSync that Debian 12's node 18 (18.20.4) and node 20 lack
# (tests/mcp/globsync-shim.mjs, which also gives node 18 the global File).
# Installed into tests/mcp/node_modules from tests/mcp/package-lock.json when
# one is missing.  node and npm come from Debian's nodejs and npm packages
# when they are absent.  A failure returns 1, saying why; under
# SANDSTEP_TESTS_REQUIRE_NODE=1 the tests that need them then fail.
sandstep_ensure_mcp_client () {
  sandstep_ensure_npm_packages "$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/tests/mcp"
}

# The S3 server of tests/test-s3.c where moto_server is not installed:
# s3rver (tests/s3/package.json), installed into tests/s3/node_modules from
# tests/s3/package-lock.json.  It runs on Debian 12's node.
sandstep_ensure_s3rver () {
  sandstep_ensure_npm_packages "$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/tests/s3"
}

# The official E2B SDKs (npm "e2b" and "@e2b/code-interpreter", tests/e2b/package.json) that
# tests/test-e2b.c drives against sandstepd's E2B API, installed into tests/e2b/node_modules from
# tests/e2b/package-lock.json.  e2b 2.19.4: the newest whose engines say node >= 20
# (this SDK reads E2B_API_URL and E2B_SANDBOX_URL only from 2.5; every such
# release wants node 20 or later, so Debian 12's node 18 is not enough).
sandstep_ensure_e2b_sdk () {
  local dir
  dir="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/tests/e2b"
  sandstep_ensure_npm_packages "$dir" || return 1
  # The SDK releases that take a server's URL (2.5 on) need node 20; Debian 12's is 18.  Where the host's node
  # is older, node 20's binary comes from the npm registry (node-linux-ARCH), into tests/e2b/runtime, which
  # tests/test-e2b.c runs the SDK with.
  local major arch
  major=$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)
  [ "$major" -ge 20 ] && return 0
  case $(uname -m) in
    x86_64) arch=x64 ;;
    aarch64) arch=arm64 ;;
    *) echo "sandstep: no node 20 for $(uname -m) from npm; the e2b SDK needs node 20 or later" >&2; return 1 ;;
  esac
  [ -x "$dir/runtime/node_modules/node-linux-$arch/bin/node" ] && return 0
  local log
  log=$(mktemp "${TMPDIR:-/tmp}/sandstep-npm.XXXXXX.log")
  echo "sandstep: installing node 20 for the e2b SDK into $dir/runtime (npm's output: $log)" >&2
  if ! npm install --no-audit --no-fund --loglevel=error --no-save --prefix "$dir/runtime" \
       "node-linux-$arch@20.20.2" >"$log" 2>&1; then
    echo "sandstep: npm could not install node-linux-$arch@20.20.2; its output is in $log:" >&2
    tail -n 5 "$log" | sed 's/^/  /' >&2
    return 1
  fi
}

# Debian's apparmor_parser for tests/test-install.c's profile case, where the host has none (AppArmor off, or a
# minimal install): the apparmor package is unpacked into tests/apparmor/root, not installed, because installing
# it would load every packaged profile at the next boot on a host whose kernel runs AppArmor.
sandstep_ensure_apparmor_parser () {
  local dest
  dest="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/tests/apparmor"
  # Where tests/test-install.c looks first.
  command -v apparmor_parser >/dev/null 2>&1 && return 0
  [ -x /usr/sbin/apparmor_parser ] && return 0
  [ -x "$dest/root/sbin/apparmor_parser" ] && return 0
  command -v apt-get >/dev/null 2>&1 || { echo "sandstep: no apt-get to fetch Debian's apparmor package" >&2; return 1; }
  local tmp log
  tmp=$(mktemp -d "${TMPDIR:-/tmp}/sandstep-apparmor.XXXXXX")
  log="$tmp/apt.log"
  echo "sandstep: unpacking Debian's apparmor package into $dest/root (apt-get's output: $log)" >&2
  # apt-get download writes as its _apt user where it can; a 0700 mktemp only root reads is fine (apt warns).
  # A fresh machine has no package lists yet: fetch them (as root) and try once more.
  if ! { (cd "$tmp" && apt-get download -q apparmor) ||
         { sandstep_can_be_root && sandstep_apt_get update -q && (cd "$tmp" && apt-get download -q apparmor); }; } \
       >"$log" 2>&1; then
    echo "sandstep: apt-get could not download the apparmor package; its output is in $log:" >&2
    tail -n 5 "$log" | sed 's/^/  /' >&2
    return 1
  fi
  rm -rf "$dest/root.new" && mkdir -p "$dest" &&
    dpkg-deb -x "$tmp"/apparmor_*.deb "$dest/root.new" &&
    rm -rf "$dest/root" && mv "$dest/root.new" "$dest/root" &&
    rm -rf "$tmp"
}

# npm ci in DIR when a package of DIR/package.json is missing from DIR/node_modules.
sandstep_ensure_npm_packages () {
  local dir=$1
  if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
    sandstep_ensure_packages nodejs npm || return 1
  fi
  local pkg missing=()
  for pkg in $(node -e 'for (const d of Object.keys(require(process.argv[1]).dependencies)) console.log(d)' \
                 "$dir/package.json"); do
    [ -f "$dir/node_modules/$pkg/package.json" ] || missing+=("$pkg")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  local log
  log=$(mktemp "${TMPDIR:-/tmp}/sandstep-npm.XXXXXX.log")
  echo "sandstep: installing ${missing[*]} into $dir/node_modules (npm's output: $log)" >&2
  if ! (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error) >"$log" 2>&1; then
    echo "sandstep: npm could not install ${missing[*]}; its output is in $log:" >&2
    tail -n 5 "$log" | sed 's/^/  /' >&2
    return 1
  fi
}

sandstep_build () {
  local builddir=$1
  if [ -f "$builddir/build.ninja" ]; then
    meson setup --reconfigure "$builddir" >/dev/null
  else
    meson setup "$builddir" >/dev/null
  fi
  ninja -C "$builddir" >/dev/null
}
