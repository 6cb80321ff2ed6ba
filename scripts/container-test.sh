#!/usr/bin/env bash
# Builds the container image with podman from a local Debian base and tests it end to end (as root, Debian 12):
#  1. a bookworm minbase from debootstrap (cached in /var/cache/code-exec-mcp/) imported as the base image, and a
#     JDK image made of that base plus the host's JDK 25 at /opt/java/openjdk: no registry is needed;
#  2. `podman build` of the Dockerfile with those two as BASE_IMAGE and JDK_IMAGE (the host's ~/.m2 mounted as
#     Maven's cache); prints the build time and the image size;
#  3. the image run with a published port and an API key, driven by e2e/container/container.test.js (the official
#     MCP TypeScript SDK): python, nodejs, typescript and go runs, uid 65534, no network, REST upload and download,
#     the console, limits; the HEALTHCHECK; refusal to start without a key; SANDBOX=gvisor (gvisor.test.js);
#  4. compose.yaml through docker-compose against `podman system service` on a unix socket: up, a check, down -v;
#  5. compose.cluster.yaml the same way: a gateway and two workers (e2e/container/cluster.test.js: runs on both
#     workers, a shared workspace, a session pinned to one worker, a worker's SIGTERM drain and its rejoining),
#     workers unpublished; a worker refuses to listen beyond loopback without WORKER_TOKEN.
# Everything it starts (containers, the podman service, temporary files) is removed on exit. A second run reuses
# the cached base, the JDK image and podman's layer cache.
# Usage: scripts/container-test.sh        Env: KEEP_IMAGE=false removes the built image at the end;
#   CLUSTER_ONLY=true builds the image and runs step 5 only; CONTAINER_TEST_IMAGE names the image to build and test
#   (default localhost/code-exec-mcp:test; its build stage is tagged NAME-build).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
[ "$(id -u)" = 0 ] || { echo "container-test.sh: run as root" >&2; exit 1; }
NODE=${NODE:-/usr/bin/node}
JDK_DIR=${JAVA_HOME:-/usr/lib/jvm/temurin-25-jdk-amd64}
CACHE=/var/cache/code-exec-mcp
IMAGE=${CONTAINER_TEST_IMAGE:-localhost/code-exec-mcp:test}
log() { echo "container-test: $*" >&2; }
T0=$(date +%s)

# ---- tools: podman & friends are installed by install-deps.sh --test; install them here too when run alone ----
if ! command -v podman >/dev/null || ! command -v docker-compose >/dev/null || ! command -v debootstrap >/dev/null \
   || ! command -v runc >/dev/null || [ ! -x /usr/lib/cni/dnsname ]; then
  ./scripts/install-deps.sh --test
fi
if [ ! -d e2e/node_modules/@modelcontextprotocol/sdk ]; then
  (cd e2e && npm ci --no-fund --no-audit --loglevel=error)
fi

TMP=$(mktemp -d /tmp/code-exec-container.XXXXXX)
CTR=code-exec-ctest-$$
PROJECT=codeexecctest$$
CLUSTER_PROJECT=codeexecccluster$$
SERVICE_PID=
cleanup() {
  local rc=$?
  set +e
  podman rm -f -v -t 0 "$CTR" >/dev/null 2>&1
  if [ -n "$SERVICE_PID" ]; then
    (cd "$TMP/compose" 2>/dev/null && docker-compose -p "$PROJECT" down -v -t 1 >/dev/null 2>&1)
    (cd "$TMP/cluster" 2>/dev/null && docker-compose -p "$CLUSTER_PROJECT" -f compose.cluster.yaml down -v -t 1 >/dev/null 2>&1)
    kill "$SERVICE_PID" 2>/dev/null; wait "$SERVICE_PID" 2>/dev/null
  fi
  podman volume rm -f "$CTR-data" >/dev/null 2>&1
  [ "${KEEP_IMAGE:-true}" = true ] || podman rmi -f "$IMAGE" "$IMAGE-build" >/dev/null 2>&1
  rm -rf "$TMP"
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---- podman settings this kernel needs (hybrid cgroup v1): runc, cgroupfs, a file events log, ulimits ----
cat > "$TMP/containers.conf" <<'EOF'
[containers]
default_ulimits = ["nofile=20000:20000", "nproc=32768:32768"]
[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
EOF
export CONTAINERS_CONF=$TMP/containers.conf

# ---- base image: debootstrap once, keep the tarball ----
mkdir -p "$CACHE"
BASE_TAR=$CACHE/bookworm-minbase.tar
BASE_IMAGE=localhost/code-exec-base:bookworm
if [ ! -s "$BASE_TAR" ]; then
  mirror=$(awk '/^URIs:/{print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
  [ -n "$mirror" ] || mirror=$(awk '/^deb /{print $2; exit}' /etc/apt/sources.list 2>/dev/null || true)
  [ -n "$mirror" ] || mirror=http://deb.debian.org/debian
  log "debootstrap bookworm minbase from $mirror"
  rootfs=$TMP/rootfs
  debootstrap --variant=minbase bookworm "$rootfs" "$mirror" >"$TMP/debootstrap.log" 2>&1 \
    || { tail -20 "$TMP/debootstrap.log" >&2; exit 1; }
  rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
  tar -C "$rootfs" -cf "$BASE_TAR.part" . && mv "$BASE_TAR.part" "$BASE_TAR"
  rm -rf "$rootfs"
  podman rmi -f "$BASE_IMAGE" >/dev/null 2>&1 || true
fi
if ! podman image exists "$BASE_IMAGE"; then
  t=$(date +%s)
  log "importing $BASE_TAR as $BASE_IMAGE"
  podman import -q "$BASE_TAR" "$BASE_IMAGE" >/dev/null
  log "imported in $(( $(date +%s) - t ))s"
fi

# ---- JDK image: the base plus the host's JDK where the Temurin images have theirs ----
jdk_version=$(sed -n 's/^JAVA_RUNTIME_VERSION="\(.*\)"/\1/p' "$JDK_DIR/release" | tr '+' '_')
[ -n "$jdk_version" ] || { log "no JDK at $JDK_DIR (set JAVA_HOME)"; exit 1; }
JDK_IMAGE=localhost/code-exec-jdk:$jdk_version
if ! podman image exists "$JDK_IMAGE"; then
  log "making $JDK_IMAGE from $JDK_DIR"
  tar -cf - --transform "s,^$(basename "$JDK_DIR"),opt/java/openjdk," -C "$(dirname "$JDK_DIR")" "$(basename "$JDK_DIR")" \
    | podman import -q --change "ENV JAVA_HOME=/opt/java/openjdk" - "$JDK_IMAGE.tmp" >/dev/null
  # On the base, so the JDK image runs its own java (checked here) like the public Temurin image does.
  # Debian's JDK packages link lib/security/cacerts to the system's Java trust store: copy the file it points to.
  cp "$(readlink -f "$JDK_DIR/lib/security/cacerts")" "$TMP/cacerts"
  cat > "$TMP/Containerfile.jdk" <<EOF
FROM $BASE_IMAGE
COPY --from=$JDK_IMAGE.tmp /opt/java/openjdk /opt/java/openjdk
COPY cacerts /opt/java/openjdk/lib/security/cacerts
ENV JAVA_HOME=/opt/java/openjdk PATH=/opt/java/openjdk/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
RUN java -version
EOF
  podman build -f "$TMP/Containerfile.jdk" -t "$JDK_IMAGE" "$TMP" >"$TMP/jdk-build.log" 2>&1 \
    || { tail -20 "$TMP/jdk-build.log" >&2; exit 1; }
  podman rmi -f "$JDK_IMAGE.tmp" >/dev/null
  # JDK images of an earlier host JDK are not needed any more.
  for old in $(podman images --format '{{.Repository}}:{{.Tag}}' localhost/code-exec-jdk); do
    [ "$old" = "$JDK_IMAGE" ] || podman rmi "$old" >/dev/null 2>&1 || true
  done
fi

# ---- build ----
mkdir -p "$HOME/.m2"
build_ca=()
if [ -n "${NODE_EXTRA_CA_CERTS:-}" ] && [ -f "$NODE_EXTRA_CA_CERTS" ]; then
  # A TLS-intercepting proxy between this machine and npm: the build's npm needs its CA as well.
  build_ca=(-v "$NODE_EXTRA_CA_CERTS:/run/code-exec-build-ca.pem:ro" --build-arg NODE_EXTRA_CA_CERTS=/run/code-exec-build-ca.pem)
fi
log "building $IMAGE (BASE_IMAGE=$BASE_IMAGE JDK_IMAGE=$JDK_IMAGE)"
# The images our tags point at now: replaced by this build, they are removed after it (only ours, never others').
old_ids=$(podman image inspect --format '{{.Id}}' "$IMAGE" "$IMAGE-build" 2>/dev/null || true)
start=$(date +%s)
build=(podman build --format docker -v "$HOME/.m2:/root/.m2" "${build_ca[@]}"
  --build-arg BASE_IMAGE="$BASE_IMAGE" --build-arg JDK_IMAGE="$JDK_IMAGE")
# The build stage gets a tag of its own, so the next run finds its layers and need not build the jar again.
"${build[@]}" --target build -t "$IMAGE-build" . >"$TMP/build.log" 2>&1 \
  && "${build[@]}" -t "$IMAGE" --build-arg VERSION="$(git describe --always --dirty 2>/dev/null || echo dev)" . \
    >>"$TMP/build.log" 2>&1 \
  || { tail -40 "$TMP/build.log" >&2; exit 1; }
build_seconds=$(( $(date +%s) - start ))
size=$(podman image inspect "$IMAGE" --format '{{.Size}}')
# Images of earlier builds (replaced tags) would pile up: ~1.7 GB per change of the runtime layer.
new_ids=$(podman image inspect --format '{{.Id}}' "$IMAGE" "$IMAGE-build" 2>/dev/null || true)
for id in $old_ids; do
  case " $(echo $new_ids) " in *" $id "*) ;; *) podman rmi "$id" >/dev/null 2>&1 || true ;; esac
done
log "build time ${build_seconds}s, image size $(( size / 1024 / 1024 )) MiB"

free_port() { "$NODE" -e 's=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'; }
API_KEY=ctest-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')
SECURITY=(--security-opt systempaths=unconfined --security-opt seccomp=unconfined)
wait_healthz() { # URL CONTAINER...: until /healthz answers; fails at once when the container has stopped
  local url=$1; shift
  for _ in $(seq 240); do
    curl -fsS -o /dev/null "$url/healthz" 2>/dev/null && return 0
    for c in "$@"; do
      [ "$(podman inspect -f '{{.State.Running}}' "$c" 2>/dev/null)" = true ] \
        || { log "container $c stopped:"; podman logs --tail 40 "$c" >&2; return 1; }
    done
    sleep 0.5
  done
  log "no /healthz at $url after 120 s"; return 1
}
# The podman service that docker-compose talks to (steps 4 and 5).
start_podman_service() {
  [ -z "$SERVICE_PID" ] || return 0
  SOCK=$TMP/podman.sock
  podman system service --time=0 "unix://$SOCK" >"$TMP/service.log" 2>&1 &
  SERVICE_PID=$!
  for _ in $(seq 50); do [ -S "$SOCK" ] && break; sleep 0.1; done
  [ -S "$SOCK" ] || { log "podman system service did not start"; cat "$TMP/service.log" >&2; exit 1; }
  export DOCKER_HOST=unix://$SOCK
}

if [ "${CLUSTER_ONLY:-false}" != true ]; then
# ---- run it and drive it with the MCP client ----
PORT=$(free_port)
log "running $CTR on 127.0.0.1:$PORT"
# podman runs HEALTHCHECKs from systemd timers; without systemd it logs an error and runs none (stderr to a file),
# so the check is run by hand below with `podman healthcheck run`.
# The two --security-opt are what bubblewrap needs inside a container (docs/container.md): an unmasked /proc to
# mount its own, and a runtime seccomp profile that lets it set the sandbox's hostname (podman's refuses
# sethostname without CAP_SYS_ADMIN; Docker's also refuses the namespaces). Each run still gets the server's own
# seccomp filter.
podman run -d --name "$CTR" -p "127.0.0.1:$PORT:8080" -e API_KEY="$API_KEY" "${SECURITY[@]}" \
  -v "$CTR-data:/var/lib/code-exec-mcp" "$IMAGE" >/dev/null 2>"$TMP/run.log" || { cat "$TMP/run.log" >&2; exit 1; }
start=$(date +%s%N)
wait_healthz "http://127.0.0.1:$PORT" "$CTR"
log "container answers /healthz after $(( ($(date +%s%N) - start) / 1000000 )) ms"
# The image's HEALTHCHECK command, run once by hand: healthy means the sandbox works in this container.
if ! podman healthcheck run "$CTR" >/dev/null; then
  log "HEALTHCHECK: unhealthy: $(curl -s "http://127.0.0.1:$PORT/healthz")"; podman logs --tail 30 "$CTR" >&2; exit 1
fi
log "HEALTHCHECK: healthy"
export CTEST_URL=http://127.0.0.1:$PORT CTEST_API_KEY=$API_KEY CTEST_CONTAINER=$CTR
if ! "$NODE" --test --test-reporter=spec e2e/container/container.test.js; then
  log "server log:"; podman logs --tail 60 "$CTR" >&2 || true
  exit 1
fi
# Without API_KEY the image must refuse to start (HOST=0.0.0.0): it exits non-zero and says why.
if podman run --rm --no-healthcheck "${SECURITY[@]}" "$IMAGE" >"$TMP/nokey.log" 2>&1; then
  log "the image started without API_KEY on 0.0.0.0"; exit 1
fi
grep -q "API_KEY" "$TMP/nokey.log" || { log "no API_KEY hint when started without a key:"; cat "$TMP/nokey.log" >&2; exit 1; }
log "without API_KEY the image refuses to start, naming API_KEY: ok"
podman rm -f -v -t 5 "$CTR" >/dev/null 2>&1

# ---- the gVisor option: SANDBOX=gvisor in the same image (runsc needs CAP_SYS_ADMIN for its mount namespace) ----
GPORT=$(free_port)
podman run -d --name "$CTR" -p "127.0.0.1:$GPORT:8080" -e API_KEY="$API_KEY" -e SANDBOX=gvisor -e WARM_POOL=off \
  "${SECURITY[@]}" --cap-add SYS_ADMIN "$IMAGE" >/dev/null 2>"$TMP/run.log" || { cat "$TMP/run.log" >&2; exit 1; }
wait_healthz "http://127.0.0.1:$GPORT" "$CTR"
CTEST_URL=http://127.0.0.1:$GPORT "$NODE" --test --test-reporter=spec e2e/container/gvisor.test.js \
  || { podman logs --tail 30 "$CTR" >&2; exit 1; }
podman rm -f -v -t 5 "$CTR" >/dev/null 2>&1

# ---- compose through docker-compose on the podman socket ----
start_podman_service
mkdir "$TMP/compose"
cp compose.yaml "$TMP/compose/"
CPORT=$(free_port)
printf 'API_KEY=%s\nCODE_EXEC_PORT=%s\nCODE_EXEC_IMAGE=%s\n' "$API_KEY" "$CPORT" "$IMAGE" > "$TMP/compose/.env"
cd "$TMP/compose"
log "docker-compose up (project $PROJECT, port $CPORT)"
docker-compose -p "$PROJECT" up -d --no-build >"$TMP/compose.log" 2>&1 || { cat "$TMP/compose.log" >&2; exit 1; }
cd "$ROOT"
CTEST_URL=http://127.0.0.1:$CPORT "$NODE" --test --test-reporter=spec e2e/container/compose.test.js \
  || { (cd "$TMP/compose" && docker-compose -p "$PROJECT" logs --tail 60) >&2 || true; exit 1; }
(cd "$TMP/compose" && docker-compose -p "$PROJECT" down -v -t 5 >>"$TMP/compose.log" 2>&1) \
  || { cat "$TMP/compose.log" >&2; exit 1; }
left=$(podman ps -a --filter "label=com.docker.compose.project=$PROJECT" -q; podman volume ls -q --filter "label=com.docker.compose.project=$PROJECT")
[ -z "$left" ] || { log "compose down left: $left"; exit 1; }
log "compose up / check / down -v: ok"
fi

# ---- compose.cluster.yaml: a gateway and two workers of the same image ----
# A worker bound beyond loopback without WORKER_TOKEN must refuse to start, and say why.
if podman run --rm --no-healthcheck -e HOST=127.0.0.1 -e WORKER_HOST=0.0.0.0 "${SECURITY[@]}" "$IMAGE" worker \
    >"$TMP/notoken.log" 2>&1; then
  log "a worker started on 0.0.0.0 without WORKER_TOKEN"; exit 1
fi
grep -q "WORKER_TOKEN" "$TMP/notoken.log" \
  || { log "no WORKER_TOKEN hint from a worker without a token:"; tail -20 "$TMP/notoken.log" >&2; exit 1; }
log "a worker on 0.0.0.0 without WORKER_TOKEN refuses to start, naming WORKER_TOKEN: ok"
start_podman_service
mkdir "$TMP/cluster"
cp compose.cluster.yaml "$TMP/cluster/"
KPORT=$(free_port)
WORKER_TOKEN=wtest-$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
printf 'API_KEY=%s\nWORKER_TOKEN=%s\nCODE_EXEC_PORT=%s\nCODE_EXEC_IMAGE=%s\n' "$API_KEY" "$WORKER_TOKEN" "$KPORT" "$IMAGE" \
  > "$TMP/cluster/.env"
cluster() { (cd "$TMP/cluster" && docker-compose -p "$CLUSTER_PROJECT" -f compose.cluster.yaml "$@"); }
log "docker-compose -f compose.cluster.yaml up (project $CLUSTER_PROJECT, port $KPORT)"
start=$(date +%s%N)
cluster up -d --no-build >"$TMP/cluster.log" 2>&1 || { cat "$TMP/cluster.log" >&2; exit 1; }
# The workers are reachable on the compose network only: nothing of theirs is published on the host.
for w in worker1 worker2; do
  id=$(cluster ps -q "$w")
  [ -n "$id" ] || { log "no container for $w"; cluster ps >&2; exit 1; }
  published=$(podman port "$id" 2>/dev/null || true)
  [ -z "$published" ] || { log "$w publishes $published"; exit 1; }
done
CTEST_URL=http://127.0.0.1:$KPORT CTEST_API_KEY=$API_KEY CTEST_COMPOSE_DIR=$TMP/cluster CTEST_COMPOSE_PROJECT=$CLUSTER_PROJECT \
  "$NODE" --test --test-reporter=spec e2e/container/cluster.test.js \
  || { cluster logs --tail 60 >&2 || true; exit 1; }
log "cluster up to tests passed: $(( ($(date +%s%N) - start) / 1000000 )) ms"
cluster down -v -t 15 >>"$TMP/cluster.log" 2>&1 || { cat "$TMP/cluster.log" >&2; exit 1; }
left=$(podman ps -a --filter "label=com.docker.compose.project=$CLUSTER_PROJECT" -q; podman volume ls -q --filter "label=com.docker.compose.project=$CLUSTER_PROJECT")
[ -z "$left" ] || { log "compose.cluster.yaml down left: $left"; exit 1; }
log "compose.cluster.yaml up / gateway + 2 workers / down -v: ok"
log "summary: build ${build_seconds}s, image $(( size / 1024 / 1024 )) MiB ($IMAGE), whole test $(( $(date +%s) - T0 ))s"
