# code-exec-mcp: the MCP server plus every language runtime its sandbox offers, in one image.
#
#   docker build -t code-exec-mcp .
#   docker run -d -p 127.0.0.1:8080:8080 -e API_KEY="$(openssl rand -hex 24)" \
#     --security-opt systempaths=unconfined --security-opt seccomp=unconfined --security-opt apparmor=unconfined \
#     -v code-exec-data:/var/lib/code-exec-mcp code-exec-mcp
#
# The server listens on 0.0.0.0 in the image, and it refuses a non-loopback bind without API_KEY (or
# API_KEYS_FILE): the container exits at once with a message naming HOST unless one of them is set.
# Why the --security-opt flags: see docs/container.md (bubblewrap must create namespaces, set a
# hostname and mount a fresh /proc inside the container). scripts/container-test.sh builds and tests the image
# with podman from a local debootstrapped base (BASE_IMAGE) and a JDK image made from the host's JDK (JDK_IMAGE).

# Any image with a JDK 25 at /opt/java/openjdk (the Temurin images' layout).
ARG JDK_IMAGE=eclipse-temurin:25-jdk
# Debian 12: the runtime packages and bookworm-backports (Go 1.23, runsc) that scripts/install-deps.sh installs.
ARG BASE_IMAGE=debian:bookworm-slim

FROM ${JDK_IMAGE} AS jdk

# ---- build: the jar (with the admin console's npm build and the sandbox helper's C build, run by Maven) ----
FROM ${BASE_IMAGE} AS build
# Only for builds behind a TLS-intercepting proxy: a CA bundle file, mounted for the build, that npm should trust
# (scripts/container-test.sh passes the host's). Not kept in the image.
ARG NODE_EXTRA_CA_CERTS
RUN apt-get update -qq \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      ca-certificates curl unzip nodejs npm gcc libc6-dev >/dev/null \
 && rm -rf /var/lib/apt/lists/*
COPY --from=jdk /opt/java/openjdk /opt/java/openjdk
ENV JAVA_HOME=/opt/java/openjdk PATH=/opt/java/openjdk/bin:$PATH
WORKDIR /build
COPY . .
# Maven's repository and the wrapper's Maven live in /root/.m2: mount a cache there
# (`podman build -v $HOME/.m2:/root/.m2`, as scripts/container-test.sh does) to skip the downloads.
RUN ./mvnw -B -q package -DskipTests && cp target/code-exec-mcp.jar /code-exec-mcp.jar

# ---- runtime ----
FROM ${BASE_IMAGE}
COPY --from=jdk /opt/java/openjdk /opt/java/openjdk
ENV JAVA_HOME=/opt/java/openjdk PATH=/opt/java/openjdk/bin:$PATH
# The same script (and so the same package list) as a bare-metal install; the JDK above satisfies its Java check.
COPY scripts/install-deps.sh /tmp/install-deps.sh
ARG NODE_EXTRA_CA_CERTS
# tini as pid 1: it reaps orphans (a sandbox's bwrap can leave one when killed) and passes SIGTERM to the server,
# which then lets running executions finish (SHUTDOWN_GRACE_SECONDS) and kills the rest.
# Smaller image: no docs, man pages or translations. npm and pip stay: declared packages (`packages`) are
# installed with them in a sandbox, and runs with network access (EGRESS=on) may use them through the egress proxy.
RUN printf '%s\n' 'path-exclude=/usr/share/doc/*' 'path-include=/usr/share/doc/*/copyright' \
      'path-exclude=/usr/share/man/*' 'path-exclude=/usr/share/info/*' 'path-exclude=/usr/share/locale/*' \
      > /etc/dpkg/dpkg.cfg.d/code-exec-slim \
 && /tmp/install-deps.sh \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends tini >/dev/null \
 && apt-get clean && rm -rf /var/lib/apt/lists/* /root/.npm /tmp/install-deps.sh
COPY --from=build /code-exec-mcp.jar /opt/code-exec-mcp/code-exec-mcp.jar
# The JDK's ahead-of-time cache, trained on this jar and this JDK by a run of the real server on a temporary
# DATA_DIR (`train-aot`): a fresh container starts and answers its first calls far sooner. Where the build cannot
# create namespaces, the training's runs are refused and it covers the HTTP, MCP and JSON paths only. A failed
# training leaves no cache, and the JVM starts without one (it ignores a missing or stale cache).
RUN /opt/java/openjdk/bin/java -Xlog:disable -Xlog:all=warning:stderr \
      -XX:AOTCacheOutput=/opt/code-exec-mcp/code-exec-mcp.aot -jar /opt/code-exec-mcp/code-exec-mcp.jar train-aot \
 || rm -f /opt/code-exec-mcp/code-exec-mcp.aot
# The server runs as root inside the container: it creates each run's cgroup and starts every sandbox as the
# unprivileged uid 65534 (SANDBOX_UID), so user code never runs as root or as the server's uid.
# LANG: UTF-8 for the JVM's file names and for the programs' I/O (the server copes with the POSIX locale too, but
# file names outside ASCII would then be unnameable from Java).
ENV LANG=C.UTF-8 \
    HOST=0.0.0.0 \
    PORT=8080 \
    PREVIEW_HOST=0.0.0.0 \
    PREVIEW_PORT=8081 \
    DATA_DIR=/var/lib/code-exec-mcp \
    WORKSPACE_ROOT=/var/lib/code-exec-mcp/workspaces
VOLUME ["/var/lib/code-exec-mcp"]
# 8081: port previews (docs/previews.md), an origin of their own; publish it where previews are wanted
EXPOSE 8080 8081
# Healthy only when the sandbox works: /healthz says "degraded" when, say, the container options are missing.
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
  CMD curl -fsS "http://127.0.0.1:${PORT}/healthz" | grep -q '"status":"ok"' || exit 1
ENTRYPOINT ["/usr/bin/tini", "--", "/opt/java/openjdk/bin/java", "-Xlog:disable", "-Xlog:all=warning:stderr", \
            "-XX:AOTCache=/opt/code-exec-mcp/code-exec-mcp.aot", "-jar", "/opt/code-exec-mcp/code-exec-mcp.jar"]
# Last: a new VERSION (the git commit) must not invalidate the cached layers above.
ARG VERSION=dev
LABEL org.opencontainers.image.title="code-exec-mcp" \
      org.opencontainers.image.description="MCP server that runs untrusted Python, Node.js, TypeScript, Go, Java, C and shell code in a bubblewrap sandbox" \
      org.opencontainers.image.version="${VERSION}" \
      dev.codeexec.run-options="--security-opt systempaths=unconfined --security-opt seccomp=unconfined (and apparmor=unconfined on AppArmor hosts)" \
      dev.codeexec.required-env="API_KEY or API_KEYS_FILE (HOST is 0.0.0.0 in the image)"
