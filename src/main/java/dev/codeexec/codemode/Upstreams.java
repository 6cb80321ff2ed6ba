package dev.codeexec.codemode;

import io.modelcontextprotocol.client.McpAsyncClient;
import io.modelcontextprotocol.client.McpClient;
import io.modelcontextprotocol.client.transport.HttpClientStreamableHttpTransport;
import io.modelcontextprotocol.client.transport.ServerParameters;
import io.modelcontextprotocol.client.transport.StdioClientTransport;
import io.modelcontextprotocol.json.McpJsonDefaults;
import io.modelcontextprotocol.json.TypeRef;
import io.modelcontextprotocol.spec.McpClientTransport;
import io.modelcontextprotocol.spec.McpError;
import io.modelcontextprotocol.spec.McpSchema;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import reactor.core.Disposable;
import reactor.core.publisher.Mono;

import java.net.http.HttpRequest;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Function;

/**
 * The server's MCP client connections to the upstreams of {@link UpstreamConfig}, made with the official SDK's
 * client (Streamable HTTP or stdio). Each connects in the background at start; one that is down is tried again,
 * at most every {@link #RETRY}, when its tools are next asked for or called. Tool lists are kept current through
 * {@code notifications/tools/list_changed}. A call that is cancelled (its run ended, timed out or was cancelled)
 * sends the upstream {@code notifications/cancelled} for its request: the SDK does not, so each connection's
 * transport is wrapped to learn the request id of every {@code tools/call} it sends.
 */
public final class Upstreams implements AutoCloseable {

    private static final Logger LOG = LoggerFactory.getLogger(Upstreams.class);
    static final Duration RETRY = Duration.ofSeconds(5);
    private static final Duration INIT_TIMEOUT = Duration.ofSeconds(20);
    /** How long a use right after the start waits for an upstream's first attempt to connect. */
    static final Duration FIRST_WAIT = Duration.ofSeconds(10);

    private final UpstreamConfig config;
    private final Map<String, Connection> connections = new ConcurrentHashMap<>();
    private volatile boolean closed;

    public Upstreams(UpstreamConfig config) {
        this.config = config;
        for (UpstreamConfig.Upstream u : config.servers()) connections.put(u.name(), new Connection(u));
    }

    /** Starts connecting to every upstream, in the background. */
    public Upstreams start() {
        for (Connection c : connections.values()) Thread.ofVirtual().name("upstream-" + c.upstream.name()).start(c::connect);
        return this;
    }

    public UpstreamConfig config() {
        return config;
    }

    /**
     * The upstream's tools as it listed them last (empty while it is not connected); tries to connect if due. Right
     * after the start, waits (up to {@link #FIRST_WAIT}) for the first attempt to connect, so that the first runs
     * see the same tools as later ones.
     */
    public List<McpSchema.Tool> tools(String server) {
        Connection c = connections.get(server);
        if (c == null) return List.of();
        c.connectIfDue();
        try {
            c.firstAttempt.get(FIRST_WAIT.toMillis(), java.util.concurrent.TimeUnit.MILLISECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        } catch (java.util.concurrent.ExecutionException | java.util.concurrent.TimeoutException e) {
            // still connecting: what it has (nothing yet)
        }
        return c.tools;
    }

    /** Whether the upstream is connected now (its tool list is current). */
    public boolean connected(String server) {
        Connection c = connections.get(server);
        return c != null && c.client != null;
    }

    /** Why the upstream is not connected, when it is not. */
    public Optional<String> problem(String server) {
        Connection c = connections.get(server);
        return c == null ? Optional.of("no such server") : Optional.ofNullable(c.client == null ? c.lastError : null);
    }

    /**
     * Calls {@code tool} of {@code server}. The future completes with the upstream's result (an error result is a
     * result), or exceptionally with {@link UpstreamUnavailable} when the server cannot be reached or the call
     * fails on the way; cancelling the future cancels the call upstream.
     */
    public CompletableFuture<McpSchema.CallToolResult> call(String server, String tool, Map<String, Object> arguments) {
        Connection c = connections.get(server);
        if (c == null) return CompletableFuture.failedFuture(new UpstreamUnavailable(server + " is not configured"));
        c.connectIfDue();
        McpAsyncClient client = c.client;
        if (client == null)
            return CompletableFuture.failedFuture(new UpstreamUnavailable(server + " is not reachable"
                    + (c.lastError == null ? "" : " (" + c.lastError + ")")));
        McpSchema.CallToolRequest request = new McpSchema.CallToolRequest(tool, arguments);
        CompletableFuture<McpSchema.CallToolResult> f = new CompletableFuture<>();
        Disposable d = client.callTool(request).subscribe(f::complete, e -> {
                    if (e instanceof McpError) {
                        f.completeExceptionally(new UpstreamRefused(message(e))); // a JSON-RPC error answer
                    } else {
                        c.lost(); // the way to it broke: the next use connects again
                        f.completeExceptionally(new UpstreamUnavailable(server + ": " + message(e)));
                    }
                },
                () -> f.completeExceptionally(new UpstreamUnavailable(server + ": no answer")));
        f.whenComplete((r, e) -> {
            if (f.isCancelled()) {
                d.dispose();
                c.cancel(request);
            } else {
                c.sent.remove(request);
            }
        });
        return f;
    }

    @Override
    public void close() {
        closed = true;
        for (Connection c : connections.values()) c.close();
    }

    /** The upstream could not be reached, or the call failed on the way (not an error result of the tool). */
    public static final class UpstreamUnavailable extends RuntimeException {
        UpstreamUnavailable(String message) {
            super(message, null, false, false);
        }
    }

    /** The upstream answered the call with a JSON-RPC error (an unknown tool, invalid arguments, ...). */
    public static final class UpstreamRefused extends RuntimeException {
        UpstreamRefused(String message) {
            super(message, null, false, false);
        }
    }

    static String message(Throwable e) {
        String m = e.getMessage();
        if (m == null || m.isBlank()) m = e.getClass().getSimpleName();
        int nl = m.indexOf('\n');
        m = nl < 0 ? m : m.substring(0, nl);
        return m.length() > 300 ? m.substring(0, 300) + "…" : m;
    }

    private final class Connection {
        final UpstreamConfig.Upstream upstream;
        /** tools/call requests in flight → their JSON-RPC id, learnt by the transport wrapper. */
        final Map<McpSchema.CallToolRequest, Object> sent = Collections.synchronizedMap(new java.util.IdentityHashMap<>());
        volatile McpAsyncClient client;
        volatile Tracking transport;
        volatile List<McpSchema.Tool> tools = List.of();
        volatile String lastError;
        volatile long lastAttempt = System.nanoTime() - RETRY.toNanos();
        /** Done when the first attempt to connect ended, either way. */
        final CompletableFuture<Void> firstAttempt = new CompletableFuture<>();
        private boolean connecting;

        Connection(UpstreamConfig.Upstream upstream) {
            this.upstream = upstream;
        }

        void connectIfDue() {
            if (client != null || closed || System.nanoTime() - lastAttempt < RETRY.toNanos()) return;
            synchronized (this) {
                if (connecting) return;
            }
            connect();
        }

        void connect() {
            synchronized (this) {
                if (closed) firstAttempt.complete(null);
                if (connecting || client != null || closed) return;
                connecting = true;
                lastAttempt = System.nanoTime();
            }
            McpAsyncClient c = null;
            try {
                Tracking t = new Tracking(transport(upstream.transport()), sent);
                c = McpClient.async(t).requestTimeout(Duration.ofHours(1)).initializationTimeout(INIT_TIMEOUT)
                        .clientInfo(new McpSchema.Implementation("code-exec-mcp", "code mode"))
                        .toolsChangeConsumer(list -> {
                            tools = List.copyOf(list);
                            LOG.info("upstream {}: tools changed, {} now", upstream.name(), list.size());
                            return Mono.empty();
                        }).build();
                c.initialize().block(INIT_TIMEOUT);
                List<McpSchema.Tool> all = new ArrayList<>();
                String cursor = null;
                do {
                    McpSchema.ListToolsResult r = c.listTools(cursor).block(INIT_TIMEOUT);
                    if (r == null) break;
                    all.addAll(r.tools());
                    cursor = r.nextCursor();
                } while (cursor != null && all.size() < 10_000);
                tools = List.copyOf(all);
                transport = t;
                client = c;
                lastError = null;
                LOG.info("upstream {}: connected, {} tools", upstream.name(), all.size());
            } catch (RuntimeException e) {
                lastError = message(e);
                LOG.warn("upstream {}: cannot connect: {}", upstream.name(), lastError);
                if (c != null) c.close();
            } finally {
                synchronized (this) {
                    connecting = false;
                }
                firstAttempt.complete(null);
            }
        }

        /** Tells the upstream a call is cancelled, when its request id is known. */
        void cancel(McpSchema.CallToolRequest request) {
            Object id = sent.remove(request);
            Tracking t = transport;
            if (id == null || t == null) return;
            t.sendMessage(new McpSchema.JSONRPCNotification(McpSchema.JSONRPC_VERSION, "notifications/cancelled",
                    Map.of("requestId", id, "reason", "the run that made the call ended")))
                    .subscribe(v -> { }, e -> LOG.debug("upstream {}: cancel not sent: {}", upstream.name(), e.toString()));
        }

        /** The connection failed on the way: the next use connects again. */
        void lost() {
            McpAsyncClient c = client;
            client = null;
            tools = List.of();
            if (c != null) c.close();
        }

        void close() {
            McpAsyncClient c = client;
            client = null;
            if (c != null) {
                try {
                    c.closeGracefully().block(Duration.ofSeconds(2));
                } catch (RuntimeException e) {
                    c.close();
                }
            }
        }
    }

    private static McpClientTransport transport(UpstreamConfig.Transport t) {
        return switch (t) {
            case UpstreamConfig.Transport.Http h -> {
                String base = h.url().getScheme() + "://" + h.url().getRawAuthority();
                String path = h.url().getRawPath() == null || h.url().getRawPath().isEmpty() ? "/" : h.url().getRawPath();
                if (h.url().getRawQuery() != null) path += "?" + h.url().getRawQuery();
                HttpRequest.Builder rb = HttpRequest.newBuilder();
                h.headers().forEach(rb::header);
                yield HttpClientStreamableHttpTransport.builder(base).endpoint(path).requestBuilder(rb)
                        .connectTimeout(Duration.ofSeconds(10)).build();
            }
            case UpstreamConfig.Transport.Stdio s -> new StdioTransport(s);
        };
    }

    /** The whole environment of a stdio upstream's process: PATH (the server's), LANG and the upstream's own env. */
    static Map<String, String> environment(UpstreamConfig.Transport.Stdio s) {
        Map<String, String> env = new LinkedHashMap<>();
        env.put("PATH", System.getenv().getOrDefault("PATH", "/usr/local/bin:/usr/bin:/bin"));
        env.put("LANG", "C.UTF-8");
        env.putAll(s.env());
        return env;
    }

    /**
     * The SDK's stdio transport with the upstream's process started in exactly {@link #environment} and its
     * {@code cwd}.
     *
     * <p>Decision: the SDK (2.1.0) starts the process from {@link #getProcessBuilder()}, a new ProcessBuilder, which
     * inherits the server's whole environment (METRICS_TOKEN, every other upstream's {@code ${VAR}}, ...), and adds
     * {@link ServerParameters#getEnv()} to it, a map it seeds with HOME, LOGNAME, PATH, SHELL, TERM and USER from the
     * server's environment before the given variables. So this overrides that hook, the SDK's extension point for
     * it, to start from an empty environment in the upstream's {@code cwd}, and trims the parameters' map (the SDK
     * hands out the map it uses) to the given variables, refusing to start when it cannot. Not {@code env -i
     * NAME=VALUE ... command}: that would put the values, credentials among them, on a command line that every user
     * of the host can read. UpstreamsTest starts an upstream that reports what it got, so an SDK that changes either
     * step fails there.
     */
    private static final class StdioTransport extends StdioClientTransport {
        private final Optional<Path> cwd;

        StdioTransport(UpstreamConfig.Transport.Stdio s) {
            super(parameters(s), McpJsonDefaults.getMapper());
            this.cwd = s.cwd();
        }

        private static ServerParameters parameters(UpstreamConfig.Transport.Stdio s) {
            Map<String, String> env = environment(s);
            ServerParameters p = ServerParameters.builder(s.command()).args(s.args()).env(env).build();
            p.getEnv().keySet().retainAll(env.keySet()); // what the SDK seeded from the server's own environment
            if (!p.getEnv().equals(env))
                throw new IllegalStateException("the MCP SDK does not let the upstream's environment be set exactly");
            return p;
        }

        @Override
        protected ProcessBuilder getProcessBuilder() {
            ProcessBuilder pb = new ProcessBuilder();
            pb.environment().clear();
            cwd.ifPresent(d -> pb.directory(d.toFile()));
            return pb;
        }
    }

    /** A transport that remembers the JSON-RPC id of every tools/call it sends. */
    private static final class Tracking implements McpClientTransport {
        private final McpClientTransport inner;
        private final Map<McpSchema.CallToolRequest, Object> sent;

        Tracking(McpClientTransport inner, Map<McpSchema.CallToolRequest, Object> sent) {
            this.inner = inner;
            this.sent = sent;
        }

        @Override
        public Mono<Void> connect(Function<Mono<McpSchema.JSONRPCMessage>, Mono<McpSchema.JSONRPCMessage>> handler) {
            return inner.connect(handler);
        }

        @Override
        public void setExceptionHandler(java.util.function.Consumer<Throwable> handler) {
            inner.setExceptionHandler(handler);
        }

        @Override
        public Mono<Void> sendMessage(McpSchema.JSONRPCMessage message) {
            if (message instanceof McpSchema.JSONRPCRequest r && r.params() instanceof McpSchema.CallToolRequest c)
                sent.put(c, r.id());
            return inner.sendMessage(message);
        }

        @Override
        public Mono<Void> closeGracefully() {
            return inner.closeGracefully();
        }

        @Override
        public void close() {
            inner.close();
        }

        @Override
        public <T> T unmarshalFrom(Object data, TypeRef<T> typeRef) {
            return inner.unmarshalFrom(data, typeRef);
        }

        @Override
        public List<String> protocolVersions() {
            return inner.protocolVersions();
        }
    }
}
