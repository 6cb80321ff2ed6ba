package dev.codeexec.codemode;

import io.modelcontextprotocol.client.McpAsyncClient;
import io.modelcontextprotocol.client.McpClient;
import io.modelcontextprotocol.client.transport.HttpClientStreamableHttpTransport;
import io.modelcontextprotocol.client.transport.ServerParameters;
import io.modelcontextprotocol.client.transport.StdioClientTransport;
import io.modelcontextprotocol.json.McpJsonDefaults;
import io.modelcontextprotocol.json.McpJsonMapper;
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
 * client (Streamable HTTP or stdio). Tool lists are kept current through {@code notifications/tools/list_changed}.
 *
 * <p>Connecting never holds a caller. Every attempt runs on a thread of its own ({@code upstream-NAME}): the first
 * from {@link #start}, the next ones when an upstream that is not connected is next used and its last attempt began
 * at least {@link #RETRY} ago. What is known is answered at once: {@link #tools} gives the tools as last listed (kept
 * while the server is down), {@link #problem} why it is not connected ({@code connecting} before its first attempt
 * ends). Only {@link #call} waits, and only for the attempt to connect to the upstream it calls that it starts (when
 * due) or finds under way, its caller bounding the wait; with none it fails at once with the last error. So a run
 * waits on no upstream it does not call, and writing its library waits on none.
 *
 * <p>Everything an upstream says (tool lists, results, error messages, why it cannot be reached) passes the file's
 * {@link Secrets} before anyone gets it: an upstream, or a proxy in front of it, may echo what it was sent,
 * credentials included. A call that is cancelled (its run ended, timed out or was cancelled) sends the upstream
 * {@code notifications/cancelled} for its request: the SDK does not, so each connection's transport is wrapped to
 * learn the request id of every {@code tools/call} it sends.
 */
public final class Upstreams implements AutoCloseable {

    private static final Logger LOG = LoggerFactory.getLogger(Upstreams.class);
    static final Duration RETRY = Duration.ofSeconds(5);
    /** Seconds an idle connection to an HTTP upstream is kept by the JDK's client (see the static block). */
    static final String KEEP_ALIVE_SECONDS = "4";

    static {
        // The JDK's HTTP client keeps an idle connection 30 s; Node's HTTP server (the usual MCP server) closes one
        // after 5 s. A call sent on a connection just as its server closes it meets EOF before any byte of the answer
        // ("header parser received no bytes"), and the tool call fails upstream_unavailable: CI saw it after a 5.7 s
        // pause between two calls to one upstream. Dropping idle connections first (4 s) leaves no such moment for
        // servers that wait 5 s or more. Read once, when the JDK's pool is first used: set here, before this class
        // builds the first client of the process; a value given with -D is kept.
        if (System.getProperty("jdk.httpclient.keepalive.timeout") == null)
            System.setProperty("jdk.httpclient.keepalive.timeout", KEEP_ALIVE_SECONDS);
    }
    private static final Duration INIT_TIMEOUT = Duration.ofSeconds(20);
    private static final CompletableFuture<Void> DONE = CompletableFuture.completedFuture(null);

    private final UpstreamConfig config;
    private final Secrets secrets;
    private final Duration retry;
    private final Map<String, Connection> connections = new ConcurrentHashMap<>();
    /** Told whenever an upstream's tool list may have changed (see {@link #onToolsChanged}). */
    private final List<Runnable> toolsListeners = new java.util.concurrent.CopyOnWriteArrayList<>();
    private volatile boolean closed;

    public Upstreams(UpstreamConfig config) {
        this(config, RETRY);
    }

    /** With {@code retry} as the least time between two attempts to connect to one upstream. */
    Upstreams(UpstreamConfig config, Duration retry) {
        this.config = config;
        this.secrets = config.secrets();
        this.retry = retry;
        for (UpstreamConfig.Upstream u : config.servers()) connections.put(u.name(), new Connection(u));
    }

    /** Starts connecting to every upstream, in the background. */
    public Upstreams start() {
        for (Connection c : connections.values()) c.connectIfDue();
        return this;
    }

    public UpstreamConfig config() {
        return config;
    }

    /**
     * Runs {@code listener} whenever an upstream's tool list may have changed: it connected (again), or it said its
     * tools changed. On the thread that learnt it; a listener must not block for long. A listener added after an
     * upstream connected hears only of later changes: read {@link #tools} once after adding it.
     */
    public void onToolsChanged(Runnable listener) {
        toolsListeners.add(listener);
    }

    private void toolsChanged() {
        for (Runnable r : toolsListeners) {
            try {
                r.run();
            } catch (RuntimeException e) {
                LOG.warn("a listener of upstream tool changes failed: {}", e.toString());
            }
        }
    }

    /**
     * The upstream's tools as it listed them last (empty before it ever did), at once; an upstream that is not
     * connected is tried again in the background when due.
     */
    public List<McpSchema.Tool> tools(String server) {
        Connection c = connections.get(server);
        if (c == null) return List.of();
        c.connectIfDue();
        return c.tools;
    }

    /** Whether the upstream is connected now (its tool list is current). */
    public boolean connected(String server) {
        Connection c = connections.get(server);
        return c != null && c.client != null;
    }

    /** Why the upstream is not connected, when it is not: its last error, or {@code connecting} before it has one. */
    public Optional<String> problem(String server) {
        Connection c = connections.get(server);
        if (c == null) return Optional.of("no such server");
        if (c.client != null) return Optional.empty();
        String error = c.lastError;
        return Optional.of(error == null ? "connecting" : error);
    }

    /**
     * Calls {@code tool} of {@code server}. The future completes with the upstream's result (an error result is a
     * result, every string in it scrubbed of the file's secrets), or
     * exceptionally with {@link UpstreamRefused} (a JSON-RPC error answer) or {@link UpstreamUnavailable} (the server
     * cannot be reached, or the call failed on the way); cancelling the future cancels the call upstream. To an
     * upstream that is not connected, the call is sent once the attempt to connect it starts (when due) or finds under
     * way succeeds; with no attempt, or when it fails, the call fails.
     */
    public CompletableFuture<McpSchema.CallToolResult> call(String server, String tool, Map<String, Object> arguments) {
        Connection c = connections.get(server);
        if (c == null) return CompletableFuture.failedFuture(new UpstreamUnavailable(server + " is not configured"));
        McpSchema.CallToolRequest request = new McpSchema.CallToolRequest(tool, arguments);
        CompletableFuture<McpSchema.CallToolResult> f = new CompletableFuture<>();
        c.connectIfDue().whenComplete((v, e) -> c.send(request, f));
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

    /**
     * An exception's message as callers and code may see it: with its causes' (the SDK's own message often says
     * only that something failed), scrubbed of the file's secrets, each on one line, bounded.
     */
    String message(Throwable e) {
        List<String> parts = new ArrayList<>();
        for (Throwable t = e; t != null && parts.size() < 5; t = t.getCause() == t ? null : t.getCause()) {
            String raw = t.getMessage();
            String m = secrets.scrub(raw == null || raw.isBlank() ? t.getClass().getSimpleName() : raw); // before cutting
            int nl = m.indexOf('\n');
            String line = (nl < 0 ? m : m.substring(0, nl)).strip();
            if (parts.stream().noneMatch(p -> p.contains(line))) parts.add(line);
        }
        String m = String.join(": ", parts);
        return m.length() > 300 ? m.substring(0, 300) + "…" : m;
    }

    /**
     * {@code value} with every string in it scrubbed of the file's secrets, whatever field it is in (text, structured
     * content, embedded resources and their blobs, links, icons, meta, schemas): through its JSON form, so a field
     * a later SDK adds is covered too.
     */
    private <T> T scrubbed(T value, Class<T> type) {
        if (value == null) return null;
        McpJsonMapper json = McpJsonDefaults.getMapper();
        return json.convertValue(secrets.scrubJson(json.convertValue(value, Object.class)), type);
    }

    private List<McpSchema.Tool> scrubbed(List<McpSchema.Tool> tools) {
        return tools.stream().map(t -> scrubbed(t, McpSchema.Tool.class)).toList();
    }

    private final class Connection {
        final UpstreamConfig.Upstream upstream;
        /** tools/call requests in flight → their JSON-RPC id, learnt by the transport wrapper. */
        final Map<McpSchema.CallToolRequest, Object> sent = Collections.synchronizedMap(new java.util.IdentityHashMap<>());
        volatile McpAsyncClient client;
        volatile Tracking transport;
        /** As last listed, scrubbed; kept while the connection is down. */
        volatile List<McpSchema.Tool> tools = List.of();
        /** Why the last attempt failed or the connection was lost, scrubbed; null while connected or before any. */
        volatile String lastError;
        /** The attempt under way, or the last one; null before the first. Guarded by this. */
        private CompletableFuture<Void> attempt;
        private long lastAttempt;

        Connection(UpstreamConfig.Upstream upstream) {
            this.upstream = upstream;
        }

        /**
         * Starts an attempt on a thread of its own when the upstream is not connected, none is under way and the last
         * began {@link #retry} ago or more; never waits. Answers the attempt under way, or a done future.
         */
        synchronized CompletableFuture<Void> connectIfDue() {
            if (client != null || closed) return DONE;
            if (attempt != null && (!attempt.isDone() || System.nanoTime() - lastAttempt < retry.toNanos())) return attempt;
            CompletableFuture<Void> a = new CompletableFuture<>();
            attempt = a;
            lastAttempt = System.nanoTime();
            Thread.ofVirtual().name("upstream-" + upstream.name()).start(() -> connect(a));
            return a;
        }

        /** One attempt to connect and list the tools; completes {@code done} when it ends, either way. */
        private void connect(CompletableFuture<Void> done) {
            McpAsyncClient c = null;
            try {
                Tracking t = new Tracking(transport(upstream.transport()), sent);
                c = McpClient.async(t).requestTimeout(Duration.ofHours(1)).initializationTimeout(INIT_TIMEOUT)
                        .clientInfo(new McpSchema.Implementation("code-exec-mcp", "code mode"))
                        .toolsChangeConsumer(list -> {
                            tools = scrubbed(list);
                            LOG.info("upstream {}: tools changed, {} now", upstream.name(), list.size());
                            toolsChanged();
                            return Mono.empty();
                        }).build();
                // a transport that cannot connect (a stdio command that cannot start) fails the attempt at once
                Mono.firstWithSignal(c.initialize(), Mono.fromFuture(t.connectFailure)).block(INIT_TIMEOUT);
                List<McpSchema.Tool> all = new ArrayList<>();
                String cursor = null;
                do {
                    McpSchema.ListToolsResult r = c.listTools(cursor).block(INIT_TIMEOUT);
                    if (r == null) break;
                    all.addAll(r.tools());
                    cursor = r.nextCursor();
                } while (cursor != null && all.size() < 10_000);
                boolean kept;
                synchronized (this) {
                    kept = !closed;
                    if (kept) {
                        tools = scrubbed(all);
                        transport = t;
                        client = c;
                        lastError = null;
                    }
                }
                if (!kept) {
                    c.close(); // the server is closing
                    return;
                }
                LOG.info("upstream {}: connected, {} tools", upstream.name(), all.size());
                toolsChanged();
            } catch (RuntimeException e) {
                lastError = message(e);
                LOG.warn("upstream {}: cannot connect: {}", upstream.name(), lastError);
                if (c != null) c.close();
            } finally {
                done.complete(null);
            }
        }

        /** Sends the call on the connection there is now; fails it when there is none. */
        void send(McpSchema.CallToolRequest request, CompletableFuture<McpSchema.CallToolResult> f) {
            McpAsyncClient c = client;
            if (f.isDone()) return; // cancelled while an attempt to connect was under way
            if (c == null) {
                String error = lastError;
                f.completeExceptionally(new UpstreamUnavailable(upstream.name() + " is not reachable"
                        + (error == null ? "" : " (" + error + ")")));
                return;
            }
            Disposable d = c.callTool(request).subscribe(r -> f.complete(scrubbed(r, McpSchema.CallToolResult.class)), e -> {
                        if (e instanceof McpError) {
                            f.completeExceptionally(new UpstreamRefused(message(e))); // a JSON-RPC error answer
                        } else {
                            lost(c, e); // the way to it broke: the next use connects again
                            f.completeExceptionally(new UpstreamUnavailable(upstream.name() + ": " + message(e)));
                        }
                    },
                    () -> f.completeExceptionally(new UpstreamUnavailable(upstream.name() + ": no answer")));
            f.whenComplete((r, e) -> {
                if (f.isCancelled()) {
                    d.dispose();
                    cancel(request);
                } else {
                    sent.remove(request);
                }
            });
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

        /** The connection {@code c} failed on the way: the next use connects again; the tools stay as last seen. */
        void lost(McpAsyncClient c, Throwable e) {
            synchronized (this) {
                if (client != c) return;
                client = null;
                lastError = "the connection was lost: " + message(e);
            }
            LOG.warn("upstream {}: {}", upstream.name(), lastError);
            c.close();
        }

        void close() {
            McpAsyncClient c;
            synchronized (this) {
                c = client;
                client = null;
            }
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
     * <p>Decision: the SDK (2.1.0, 2.2.0) starts the process from {@link #getProcessBuilder()}, a new ProcessBuilder, which
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

    /**
     * A transport that remembers the JSON-RPC id of every tools/call it sends, and whether it could not connect: the
     * SDK's client only logs that, and would wait for the answer to initialize until its timeout.
     */
    private static final class Tracking implements McpClientTransport {
        private final McpClientTransport inner;
        private final Map<McpSchema.CallToolRequest, Object> sent;
        /** Fails with the reason the transport could not connect; never completes otherwise. */
        final CompletableFuture<McpSchema.InitializeResult> connectFailure = new CompletableFuture<>();

        Tracking(McpClientTransport inner, Map<McpSchema.CallToolRequest, Object> sent) {
            this.inner = inner;
            this.sent = sent;
        }

        @Override
        public Mono<Void> connect(Function<Mono<McpSchema.JSONRPCMessage>, Mono<McpSchema.JSONRPCMessage>> handler) {
            return inner.connect(handler).doOnError(connectFailure::completeExceptionally);
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
