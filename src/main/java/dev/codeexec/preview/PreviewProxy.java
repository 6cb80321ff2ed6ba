package dev.codeexec.preview;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Objects;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.TimeUnit;

/**
 * Port previews: the server's own HTTP listener that carries a browser's requests to a port a program inside a
 * sandbox listens on, through that sandbox's unix socket (see {@link Upstream}). Each request of a connection is
 * routed on its own ({@link Route}: {@code /p/{token}/...} or {@code {token}.{domain}}), checked ({@link Auth}), and
 * passed on with its head rewritten; the response comes back as the app writes it, and a {@code 101} turns the
 * connection into a two-way byte relay (WebSockets).
 *
 * <p>Why not Jetty's proxy: the upstream is a unix socket with a one-byte handshake, responses must be relayed as raw
 * bytes as they arrive (server-sent events, chunked pages), and upgraded connections must be passed through as
 * bytes both ways; Jetty's ProxyHandler does none of these. So this is a plain {@link ServerSocket}, one virtual
 * thread per connection (and a second one while a connection is upgraded), and the strict HTTP/1.x readers of
 * {@code http1} shared with the egress proxy.
 *
 * <p>Bounds: connections at once for the whole listener and per preview (503 past them), bytes each way per
 * connection, a request body's size (413), and an idle timeout on every read and write, client and upstream alike,
 * enforced by one sweeper thread that closes what has not moved for that long. A stalled client holds only its own
 * thread. The proxy's own answers never carry a stack trace and always say {@code Connection: close} and
 * {@code Cache-Control: no-store}; "no such preview" is the same for a wrong token, an ended preview and another
 * tenant's key.
 */
public final class PreviewProxy implements AutoCloseable {

    private static final Logger LOG = LoggerFactory.getLogger(PreviewProxy.class);

    /**
     * @param domain the host form's domain ({@code {token}.{domain}}), or empty for the path form alone
     * @param domainScheme X-Forwarded-Proto for the host form (the scheme the domain is served at)
     */
    public record Settings(String host, int port, Optional<String> domain, String domainScheme, int maxConnectionsPerPreview,
            int maxConnections, long maxBodyBytes, long maxConnectionBytes, Duration idleTimeout) {
        public Settings {
            Objects.requireNonNull(host, "host");
            Objects.requireNonNull(domain, "domain");
            Objects.requireNonNull(domainScheme, "domainScheme");
            if (port < 0 || port > 65535) throw new IllegalArgumentException("port must be 0 to 65535");
            if (maxConnectionsPerPreview < 1 || maxConnections < 1) throw new IllegalArgumentException("connection caps must be at least 1");
            if (maxBodyBytes < 0 || maxConnectionBytes < 1) throw new IllegalArgumentException("byte caps must be positive");
            if (idleTimeout.isNegative() || idleTimeout.isZero()) throw new IllegalArgumentException("idleTimeout must be positive");
        }
    }

    /** Finds the preview a token names. */
    public interface Directory {
        Optional<Target> find(String token);
    }

    /** How a preview's requests are allowed: by the URL alone (TOKEN), or with the tenant's API key as well (KEY). */
    public enum Auth { TOKEN, KEY }

    /**
     * One preview: the port inside the sandbox, reached through {@code socket}.
     *
     * @param label what it previews, for logs only (e.g. "session nb")
     */
    public record Target(String token, String tenant, int port, Auth auth, Path socket, String label) {
    }

    /** The tenant of an API key, or empty when it is not a key. */
    public interface KeyCheck {
        Optional<String> tenantOf(String apiKey);
    }

    /** What the proxy reports: each routed request, and each connection's time with one preview. */
    public interface Observer {
        void request(Target t, String method, int status);

        /** @param end how it ended: client_closed, upstream_closed, idle_timeout, byte_cap, ... */
        void connection(Target t, String client, long bytesIn, long bytesOut, long millis, String end);
    }

    private final Settings settings;
    private final Directory directory;
    private final KeyCheck keys;
    private final Observer observer;
    private final ServerSocket server;
    private final Set<Conn> open = ConcurrentHashMap.newKeySet();
    private final ConcurrentHashMap<String, Integer> perPreview = new ConcurrentHashMap<>();
    private final ThreadFactory threads = Thread.ofVirtual().name("preview-", 0).factory();
    private final ScheduledExecutorService sweeper;
    private volatile boolean closed;

    private PreviewProxy(Settings settings, Directory directory, KeyCheck keys, Observer observer, ServerSocket server) {
        this.settings = settings;
        this.directory = directory;
        this.keys = keys;
        this.observer = observer;
        this.server = server;
        this.sweeper = Executors.newSingleThreadScheduledExecutor(r -> {
            Thread t = new Thread(r, "preview-idle-sweeper");
            t.setDaemon(true);
            return t;
        });
        long tick = Math.clamp(settings.idleTimeout().toMillis() / 4, 10, 1000);
        sweeper.scheduleWithFixedDelay(this::sweep, tick, tick, TimeUnit.MILLISECONDS);
    }

    /** Listens on {@code settings.host():settings.port()} (0: any free port) and serves until {@link #close}. */
    public static PreviewProxy start(Settings settings, Directory directory, KeyCheck keys, Observer observer) throws IOException {
        ServerSocket server = new ServerSocket();
        try {
            server.bind(new InetSocketAddress(InetAddress.getByName(settings.host()), settings.port()), 256);
        } catch (IOException e) {
            server.close();
            throw e;
        }
        PreviewProxy proxy = new PreviewProxy(settings, directory, keys, observer, server);
        Thread.ofVirtual().name("preview-accept").start(proxy::accept);
        return proxy;
    }

    /** Client connections open now. */
    public int openConnections() {
        return open.size();
    }

    /** The port it listens on. */
    public int port() {
        return server.getLocalPort();
    }

    /** Stops accepting and closes every connection. */
    @Override
    public void close() {
        closed = true;
        Upstream.closeQuietly(server);
        for (Conn c : open) c.shut("proxy_closed");
        sweeper.shutdownNow();
    }

    Settings settings() {
        return settings;
    }

    Directory directory() {
        return directory;
    }

    KeyCheck keys() {
        return keys;
    }

    Observer observer() {
        return observer;
    }

    private void accept() {
        while (!closed) {
            Socket s;
            try {
                s = server.accept();
            } catch (IOException e) {
                if (!closed) LOG.warn("the preview listener stopped accepting: {}", e.getMessage());
                return;
            }
            try {
                // a response goes out in a few writes (head, its end, the body): with Nagle's algorithm the later
                // ones wait for the client's delayed acknowledgement, 40 ms per request on a kept-alive connection
                // (measured by the preview benchmark: 44 ms p50 against 0.1 ms inside the sandbox)
                s.setTcpNoDelay(true);
            } catch (IOException e) {
                // a connection that is already gone: its thread finds out
            }
            if (open.size() >= settings.maxConnections()) {
                threads.newThread(() -> refuse(s)).start();
                continue;
            }
            Conn c = new Conn(this, s);
            open.add(c);
            if (closed) c.shut("proxy_closed");
            threads.newThread(() -> {
                try {
                    c.run();
                } finally {
                    open.remove(c);
                }
            }).start();
        }
    }

    /** Over the listener's cap: answered at once, without reading the request. */
    private static void refuse(Socket s) {
        try (s) {
            s.setSoTimeout(1000);
            s.getOutputStream().write(answer(503, "Service Unavailable", "text/plain; charset=utf-8",
                    "too many connections to previews; try again later\n", ""));
        } catch (IOException e) {
            // the client went away
        }
    }

    /** Takes a place among the connections to {@code token}; false when they are all taken. */
    boolean enter(String token) {
        boolean[] ok = {false};
        perPreview.compute(token, (k, n) -> {
            int now = n == null ? 0 : n;
            if (now >= settings.maxConnectionsPerPreview()) return n;
            ok[0] = true;
            return now + 1;
        });
        return ok[0];
    }

    void leave(String token) {
        perPreview.computeIfPresent(token, (k, n) -> n <= 1 ? null : n - 1);
    }

    private void sweep() {
        long now = System.nanoTime(), idle = settings.idleTimeout().toNanos();
        for (Conn c : open) if (now - c.lastActivity() > idle) c.shut("idle_timeout");
    }

    /** One of the proxy's own answers: never a stack trace, never cached, the connection closed after it. */
    static byte[] answer(int status, String reason, String contentType, String body, String extraFields) {
        byte[] b = body.getBytes(StandardCharsets.UTF_8);
        String head = "HTTP/1.1 " + status + " " + reason + "\r\nContent-Type: " + contentType + "\r\nContent-Length: " + b.length
                + "\r\nCache-Control: no-store\r\nConnection: close\r\n" + extraFields + "\r\n";
        byte[] h = head.getBytes(StandardCharsets.ISO_8859_1);
        byte[] out = new byte[h.length + b.length];
        System.arraycopy(h, 0, out, 0, h.length);
        System.arraycopy(b, 0, out, h.length, b.length);
        return out;
    }
}
