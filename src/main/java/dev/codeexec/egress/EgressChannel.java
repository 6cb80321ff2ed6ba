package dev.codeexec.egress;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

/**
 * One sandbox's way out: an HTTP proxy on a unix socket of the server's that is bound into that sandbox only, where
 * the sandbox's init relays {@code 127.0.0.1:3128} to it (see codeexec-helper's {@code --relay}).
 *
 * <p>It speaks {@code CONNECT host:port} (a tunnel, which must carry TLS whose SNI names the same host) and plain
 * HTTP requests with an absolute URI ({@code GET http://host/path}, sent on as origin-form with
 * {@code Connection: close}). Each request is decided by {@link EgressDecision} against the policy the channel is
 * {@link #arm armed} with; a refusal is an HTTP error whose body says what was refused and why, so the program's
 * own error message tells the model. Connections are bounded per run (how many at once, bytes each way, connect and
 * idle timeouts), every connection ends as a {@link ConnectionRecord} in the run's {@link NetworkReport} and as an
 * {@code egress} line in the audit log, and {@link #finish} closes whatever is still open the moment the run ends.
 *
 * <p>Threads: one virtual thread accepts; each connection gets a virtual thread per direction. One run's flood
 * only fills its own channel, up to its own connection cap.
 */
public final class EgressChannel implements AutoCloseable {

    /** Where the sandbox's relay listens. */
    public static final int PROXY_PORT = 3128;
    /** Where the channel's socket is bound inside the sandbox. */
    public static final String SOCKET_IN_SANDBOX = "/run/codeexec/egress.sock";
    /** The proxy's URL as a run's environment names it. */
    public static final String PROXY_URL = "http://127.0.0.1:" + PROXY_PORT;

    private static final Logger LOG = LoggerFactory.getLogger(EgressChannel.class);
    private static final Logger AUDIT = LoggerFactory.getLogger("audit");
    private static final int HEAD_MAX = 16 * 1024;
    /** A local request's body over the endpoint's limit is read and dropped up to this size before the answer. */
    private static final long DRAIN_MAX = 64L << 20;
    /** How long a connection refused at accept may take to send its request before it is answered anyway. */
    private static final java.time.Duration HEAD_WAIT = java.time.Duration.ofSeconds(2);
    /** Per connection: downloads are what is big (and what the benchmark measures); uploads get a smaller buffer. */
    private static final int DOWN_BUFFER = 1024 * 1024;
    private static final int UP_BUFFER = 64 * 1024;
    /** The unix socket's send buffer toward the sandbox (the kernel's default, ~200 KiB, halves the rate). */
    private static final int SOCKET_BUFFER = 2 * 1024 * 1024;
    private static final ScheduledExecutorService SWEEPER = Executors.newSingleThreadScheduledExecutor(r -> {
        Thread t = new Thread(r, "egress-idle-sweeper");
        t.setDaemon(true);
        return t;
    });

    private final EgressSettings settings;
    private final EgressDecision.Resolver resolver;
    private final Path socket;
    private final ServerSocketChannel server;
    private final ThreadFactory threads = Thread.ofVirtual().name("egress-", 0).factory();
    private static final ThreadFactory PUMPS = Thread.ofPlatform().name("egress-pump-", 0).daemon(true).factory();
    private final Set<Conn> open = ConcurrentHashMap.newKeySet();
    private final ScheduledFuture<?> sweep;
    private volatile Run run;
    private volatile boolean closed;

    /** The policy and accounting of the run the channel serves now. */
    private static final class Run {
        final EgressPolicy policy;
        final String tenant;
        final String runId;
        /** Code mode's endpoint for this run, or null. */
        final LocalEndpoint local;
        final AtomicLong bytesOut = new AtomicLong();
        final AtomicLong bytesIn = new AtomicLong();
        final List<ConnectionRecord> records = new ArrayList<>();
        final Map<String, Integer> counts = new TreeMap<>();
        int leftOut;
        /** Set on the state after {@link #finish}: the run that ended. No connection is served until the next arm. */
        final Run finished;

        Run(EgressPolicy policy, String tenant, String runId, LocalEndpoint local) {
            this(policy, tenant, runId, local, null);
        }

        private Run(EgressPolicy policy, String tenant, String runId, LocalEndpoint local, Run finished) {
            this.policy = policy;
            this.tenant = tenant;
            this.runId = runId;
            this.local = local;
            this.finished = finished;
        }

        synchronized void add(ConnectionRecord r) {
            counts.merge(r.decision() + "/" + r.reason(), 1, Integer::sum);
            if (records.size() < NetworkReport.MAX_RECORDS) records.add(r);
            else leftOut++;
        }

        synchronized NetworkReport report() {
            return new NetworkReport(policy.patterns(), records, leftOut, counts, bytesOut.get(), bytesIn.get());
        }
    }

    private EgressChannel(EgressSettings settings, EgressDecision.Resolver resolver, Path socket,
            ServerSocketChannel server, EgressPolicy policy, String tenant, String runId) {
        this.settings = settings;
        this.resolver = resolver;
        this.socket = socket;
        this.server = server;
        this.run = new Run(policy, tenant, runId, null);
        this.sweep = SWEEPER.scheduleWithFixedDelay(this::closeIdle, 1, 1, TimeUnit.SECONDS);
        threads.newThread(this::acceptLoop).start();
    }

    /**
     * Listens on a new socket at {@code socket} (mode 0600: the sandbox launcher gives it to the sandbox's uid).
     *
     * @param policy what the first run may reach; {@link EgressPolicy#OFF} for a warm sandbox armed later
     */
    public static EgressChannel open(EgressSettings settings, EgressDecision.Resolver resolver, Path socket,
            EgressPolicy policy, String tenant, String runId) throws IOException {
        Files.deleteIfExists(socket);
        ServerSocketChannel server = ServerSocketChannel.open(StandardProtocolFamily.UNIX);
        try {
            server.bind(UnixDomainSocketAddress.of(socket), 256);
            Files.setPosixFilePermissions(socket, PosixFilePermissions.fromString("rw-------"));
        } catch (IOException | RuntimeException e) {
            server.close();
            Files.deleteIfExists(socket);
            throw e;
        }
        return new EgressChannel(settings, resolver, socket, server, policy, tenant, runId);
    }

    /** The socket's path on the host. */
    public Path socket() {
        return socket;
    }

    /** Serves the next run (a warm sandbox's job, a session's call) with this policy; its report starts empty. */
    public void arm(EgressPolicy policy, String tenant, String runId) {
        arm(policy, tenant, runId, null);
    }

    /**
     * Serves the next run with this policy and, when {@code local} is not null, its local endpoint (code mode's tool
     * calls, in origin form at the proxy's address). {@link #finish} closes the endpoint.
     */
    public void arm(EgressPolicy policy, String tenant, String runId, LocalEndpoint local) {
        run = new Run(policy, tenant, runId, local);
    }

    /** The policy the channel serves now. */
    public EgressPolicy policy() {
        return run.policy;
    }

    /**
     * The run ended: closes every connection still open (recorded as {@code run_ended}) and returns its report (the
     * same report when called again). The channel stays open for the next {@link #arm} (a session's next call), and
     * until then refuses every new connection ({@code between_calls}): a session has network only while a call
     * runs, whatever its code left running.
     */
    public NetworkReport finish() {
        Run r = run;
        if (r.finished != null) r = r.finished;
        else run = new Run(EgressPolicy.OFF, r.tenant, r.runId, null, r); // before the ends: see Conn.connect
        if (r.local != null) r.local.close(); // first: a tool call in flight is cancelled, its connection answered
        // network connections end with the run; a library's kept-alive connection to the local endpoint stays for
        // the next run the channel serves (a session's next call), whose endpoint answers it then
        for (Conn c : List.copyOf(open)) if (!c.local) c.end(ConnectionRecord.ALLOWED, "run_ended", "the run ended");
        return r.report();
    }

    private void acceptLoop() {
        while (!closed) {
            SocketChannel client;
            try {
                client = server.accept();
            } catch (IOException e) {
                if (!closed) LOG.warn("egress {}: accept failed: {}", socket.getFileName(), e.toString());
                return;
            }
            Conn c = new Conn(client, run);
            if (open.size() >= settings.maxConnections()) {
                threads.newThread(() -> refuseOverCap(c)).start();
                continue;
            }
            open.add(c);
            threads.newThread(c::serve).start();
        }
    }

    /**
     * A connection over EGRESS_MAX_CONNECTIONS: its request is read first (for at most {@link #HEAD_WAIT}), then
     * answered 429. Answering and hanging up before the request arrived would make the program's write of it fail
     * (EPIPE) and lose the answer that says why.
     */
    private void refuseOverCap(Conn c) {
        ScheduledFuture<?> guard = SWEEPER.schedule(() -> closeQuietly(c.client), HEAD_WAIT.toMillis(), TimeUnit.MILLISECONDS);
        try {
            ByteBuffer b = ByteBuffer.allocate(HEAD_MAX);
            while (b.hasRemaining() && c.client.read(b) > 0)
                if (indexOf(b.array(), b.position(), "\r\n\r\n".getBytes(StandardCharsets.US_ASCII)) >= 0) break;
        } catch (IOException e) {
            // closed by the guard or by the program: the refusal is recorded all the same
        } finally {
            guard.cancel(false);
        }
        c.refuse(429, EgressDecision.refused("", "connection_limit",
                "this run already has " + settings.maxConnections() + " connections open (EGRESS_MAX_CONNECTIONS)"));
    }

    private void closeIdle() {
        long now = System.nanoTime(), idle = settings.idleTimeout().toNanos();
        for (Conn c : open)
            if (!c.connecting && now - c.lastActivity > idle)
                c.end(ConnectionRecord.ALLOWED, "idle_timeout", "no data either way for " + settings.idleTimeout().toMillis()
                        + " ms (EGRESS_IDLE_TIMEOUT_MS)");
    }

    @Override
    public void close() {
        closed = true;
        sweep.cancel(false);
        try {
            server.close();
        } catch (IOException e) {
            // closing
        }
        finish();
        for (Conn c : List.copyOf(open)) c.end(ConnectionRecord.ALLOWED, "run_ended", "the channel closed");
        try {
            Files.deleteIfExists(socket);
        } catch (IOException e) {
            LOG.warn("egress: cannot delete {}: {}", socket, e.toString());
        }
    }

    /** One connection from the sandbox: request head, decision, then a relay in both directions. */
    private final class Conn {
        final SocketChannel client;
        final Run owner;
        final long started = System.nanoTime();
        final AtomicBoolean ended = new AtomicBoolean();
        /**
         * Set before a refusal's answer is written: the program can read the answer, exit and end the run before
         * {@link #refuse} records it, and the run's end must then record the refusal, not an allowed connection
         * that the run ended (CI saw that record).
         */
        volatile EgressDecision.Verdict refusal;
        final AtomicInteger halvesDone = new AtomicInteger();
        volatile long lastActivity = System.nanoTime();
        volatile SocketChannel upstream;
        volatile String host = "";
        volatile int port;
        volatile long bytesOut;
        volatile long bytesIn;
        volatile boolean relaying;
        /** Waiting for the upstream to accept (or the local endpoint to answer): not idleness. */
        volatile boolean connecting;
        /** A request to the local endpoint, not a network connection: it leaves no network record. */
        volatile boolean local;

        Conn(SocketChannel client, Run owner) {
            this.client = client;
            this.owner = owner;
        }

        void serve() {
            try {
                serveRequest();
            } catch (IOException | RuntimeException e) {
                if (relaying) end(ConnectionRecord.ALLOWED, "closed", "closed");
                else end(ConnectionRecord.REFUSED, "bad_request", "the request could not be read: " + e.getMessage());
            }
        }

        private void serveRequest() throws IOException {
            byte[] head = new byte[HEAD_MAX];
            int n = 0, headEnd = -1;
            ByteBuffer buf = ByteBuffer.wrap(head);
            while (headEnd < 0) {
                if (!buf.hasRemaining()) {
                    refuse(431, EgressDecision.refused("", "bad_request", "the request head is longer than " + HEAD_MAX + " bytes"));
                    return;
                }
                int r = client.read(buf);
                if (r < 0) {
                    end(ConnectionRecord.REFUSED, "bad_request", "the connection closed before a request arrived");
                    return;
                }
                lastActivity = System.nanoTime();
                n = buf.position();
                headEnd = indexOf(head, n, "\r\n\r\n".getBytes(StandardCharsets.US_ASCII));
            }
            String text = new String(head, 0, headEnd, StandardCharsets.ISO_8859_1);
            String[] lines = text.split("\r\n");
            String[] req = lines[0].split(" ");
            if (req.length != 3 || !req[2].startsWith("HTTP/1.")) {
                refuse(400, EgressDecision.refused("", "bad_request", "not an HTTP proxy request: '" + EgressDecision.shorten(lines[0]) + "'"));
                return;
            }
            int bodyStart = headEnd + 4;
            if (req[0].equals("CONNECT")) {
                HostPort hp = HostPort.parse(req[1], -1);
                if (hp == null) {
                    refuse(400, EgressDecision.refused(EgressDecision.shorten(req[1]), "bad_request", "CONNECT needs host:port"));
                    return;
                }
                tunnel(hp, head, bodyStart, n);
                return;
            }
            String target = req[1];
            if (target.startsWith("/") && owner.local != null) {
                serveLocal(owner.local, req[0], target, lines, head, bodyStart, n);
                return;
            }
            if (!target.regionMatches(true, 0, "http://", 0, 7)) {
                String why = target.regionMatches(true, 0, "https://", 0, 8)
                        ? "https:// URLs go through CONNECT (the client's HTTPS proxy support), not as a plain request"
                        : "a proxy request needs an absolute http:// URL";
                refuse(400, EgressDecision.refused("", "bad_request", why));
                return;
            }
            int slash = target.length();
            for (char stop : new char[] {'/', '?', '#'}) {
                int i = target.indexOf(stop, 7);
                if (i >= 0) slash = Math.min(slash, i);
            }
            String authority = target.substring(7, slash);
            HostPort hp = authority.contains("@") ? null : HostPort.parse(authority, 80);
            if (hp == null) {
                refuse(400, EgressDecision.refused(EgressDecision.shorten(authority), "bad_request", "the URL's host is not valid"));
                return;
            }
            String path = slash == target.length() || target.charAt(slash) != '/' ? "/" + target.substring(slash) : target.substring(slash);
            StringBuilder out = new StringBuilder(req[0]).append(' ').append(path).append(' ').append(req[2]).append("\r\n");
            out.append("Host: ").append(authority).append("\r\n");
            for (int i = 1; i < lines.length; i++) {
                String h = lines[i].toLowerCase(Locale.ROOT);
                if (h.startsWith("host:") || h.startsWith("connection:") || h.startsWith("proxy-") || h.startsWith("keep-alive:"))
                    continue;
                out.append(lines[i]).append("\r\n");
            }
            out.append("Connection: close\r\n\r\n");
            byte[] rewritten = out.toString().getBytes(StandardCharsets.ISO_8859_1);
            if (!connect(hp)) return;
            if (!count(true, rewritten.length)) return;
            writeAll(upstream, ByteBuffer.wrap(rewritten));
            if (n > bodyStart) {
                count(true, n - bodyStart);
                writeAll(upstream, ByteBuffer.wrap(head, bodyStart, n - bodyStart));
            }
            relay();
        }

        /**
         * A request to the proxy's own address in origin form: the run's local endpoint answers it. Not a network
         * connection: it is left out of the run's network report (the endpoint keeps its own records).
         */
        private void serveLocal(LocalEndpoint endpoint, String method, String path, String[] lines, byte[] head,
                int bodyStart, int n) throws IOException {
            local = true;
            while (true) {
                long length = 0;
                boolean keepAlive = lines[0].endsWith("HTTP/1.1");
                for (int i = 1; i < lines.length; i++) {
                    int colon = lines[i].indexOf(':');
                    if (colon <= 0) continue;
                    String name = lines[i].substring(0, colon).trim(), value = lines[i].substring(colon + 1).trim();
                    if (name.equalsIgnoreCase("content-length")) {
                        try {
                            length = Long.parseLong(value);
                        } catch (NumberFormatException e) {
                            length = -1;
                        }
                    } else if (name.equalsIgnoreCase("transfer-encoding")) {
                        length = -2;
                    } else if (name.equalsIgnoreCase("connection") && value.equalsIgnoreCase("close")) {
                        keepAlive = false;
                    }
                }
                LocalEndpoint.Response answer;
                int consumed = n;
                if (length < 0) {
                    answer = localError(length == -2 ? 411 : 400, "send the body with a Content-Length");
                    keepAlive = false;
                } else if (length > endpoint.maxRequestBytes()) {
                    // read (and drop) first: answering before the body is sent would fail the program's write of it
                    // and lose the answer that says why
                    long left = length - (n - bodyStart);
                    ByteBuffer sink = ByteBuffer.allocate(64 * 1024);
                    while (left > 0 && left <= DRAIN_MAX) {
                        sink.clear();
                        if (left < sink.capacity()) sink.limit((int) left);
                        int got = client.read(sink);
                        if (got < 0) break;
                        left -= got;
                    }
                    answer = endpoint.tooLarge(method, path, length);
                    keepAlive = false;
                } else {
                    byte[] body = new byte[(int) length];
                    int have = Math.min(n - bodyStart, body.length);
                    System.arraycopy(head, bodyStart, body, 0, have);
                    consumed = bodyStart + have;
                    ByteBuffer b = ByteBuffer.wrap(body, have, body.length - have);
                    while (b.hasRemaining()) {
                        if (client.read(b) < 0) {
                            endLocal();
                            return;
                        }
                    }
                    lastActivity = System.nanoTime();
                    connecting = true; // waiting on the endpoint (an upstream call) is not idleness
                    try {
                        answer = endpoint.handle(method, path, body);
                    } finally {
                        connecting = false;
                    }
                }
                byte[] headOut = ("HTTP/1.1 " + answer.status() + " " + (answer.status() == 200 ? "OK" : "Error") + "\r\n"
                        + "Content-Type: " + answer.contentType() + "\r\nContent-Length: " + answer.body().length
                        + "\r\nConnection: " + (keepAlive ? "keep-alive" : "close") + "\r\n\r\n").getBytes(StandardCharsets.US_ASCII);
                writeAll(client, ByteBuffer.wrap(headOut));
                writeAll(client, ByteBuffer.wrap(answer.body()));
                lastActivity = System.nanoTime();
                if (!keepAlive) {
                    endLocal();
                    return;
                }
                // the next request on this connection (a library keeps it for its next call); bytes already read past
                // this request's body are its start. It goes to the endpoint of the run the channel serves then.
                byte[] next = new byte[HEAD_MAX];
                int carry = n - consumed;
                System.arraycopy(head, consumed, next, 0, carry);
                ByteBuffer buf = ByteBuffer.wrap(next);
                buf.position(carry);
                int headEnd = indexOf(next, carry, "\r\n\r\n".getBytes(StandardCharsets.US_ASCII));
                while (headEnd < 0) {
                    if (!buf.hasRemaining() || client.read(buf) < 0) {
                        endLocal();
                        return;
                    }
                    lastActivity = System.nanoTime();
                    headEnd = indexOf(next, buf.position(), "\r\n\r\n".getBytes(StandardCharsets.US_ASCII));
                }
                lines = new String(next, 0, headEnd, StandardCharsets.ISO_8859_1).split("\r\n");
                String[] req = lines[0].split(" ");
                endpoint = run.local;
                if (req.length != 3 || !req[2].startsWith("HTTP/1.") || !req[1].startsWith("/") || endpoint == null) {
                    LocalEndpoint.Response bad = localError(400, "a connection to the local endpoint carries origin-form "
                            + "requests to it only");
                    writeAll(client, ByteBuffer.wrap(("HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\n"
                            + "Content-Length: " + bad.body().length + "\r\nConnection: close\r\n\r\n").getBytes(StandardCharsets.US_ASCII)));
                    writeAll(client, ByteBuffer.wrap(bad.body()));
                    endLocal();
                    return;
                }
                method = req[0];
                path = req[1];
                head = next;
                bodyStart = headEnd + 4;
                n = buf.position();
            }
        }

        private LocalEndpoint.Response localError(int status, String message) {
            String json = "{\"error\":\"" + message.replace("\"", "'") + "\",\"reason\":\"bad_request\"}";
            return new LocalEndpoint.Response(status, "application/json", json.getBytes(StandardCharsets.UTF_8));
        }

        /** Ends a local request's connection without a network record. */
        private void endLocal() {
            if (!ended.compareAndSet(false, true)) return;
            closeQuietly(client);
            open.remove(this);
        }

        private void tunnel(HostPort hp, byte[] head, int bodyStart, int n) throws IOException {
            if (!connect(hp)) return;
            writeAll(client, ByteBuffer.wrap("HTTP/1.1 200 Connection established\r\n\r\n".getBytes(StandardCharsets.US_ASCII)));
            // The first bytes must be a TLS ClientHello naming the host that was checked: no fronting another name
            // behind an allowed one, and no plain protocol the proxy cannot see.
            byte[] hello = new byte[ClientHello.MAX_BYTES];
            int len = n - bodyStart;
            System.arraycopy(head, bodyStart, hello, 0, len);
            ByteBuffer hb = ByteBuffer.wrap(hello);
            hb.position(len);
            while (true) {
                ClientHello.Result r = ClientHello.parse(hello, len);
                if (r instanceof ClientHello.Result.NotTls) {
                    end(ConnectionRecord.REFUSED, "not_tls", "a CONNECT tunnel must carry TLS; plain HTTP goes as http:// requests");
                    return;
                }
                if (r instanceof ClientHello.Result.Hello h) {
                    if (h.serverName().isEmpty()) {
                        end(ConnectionRecord.REFUSED, "no_sni", "the TLS ClientHello names no server (SNI); it must name " + host);
                        return;
                    }
                    String sni;
                    try {
                        sni = HostNames.normalize(h.serverName().get());
                    } catch (IllegalArgumentException e) {
                        sni = EgressDecision.shorten(h.serverName().get());
                    }
                    if (!sni.equals(host)) {
                        end(ConnectionRecord.REFUSED, "sni_mismatch", "the TLS server name " + EgressDecision.shorten(sni)
                                + " differs from the CONNECT host " + host);
                        return;
                    }
                    break;
                }
                if (!hb.hasRemaining()) {
                    end(ConnectionRecord.REFUSED, "not_tls", "the TLS ClientHello is larger than " + ClientHello.MAX_BYTES + " bytes");
                    return;
                }
                int got = client.read(hb);
                if (got < 0) {
                    end(ConnectionRecord.ALLOWED, "closed", "closed before TLS started");
                    return;
                }
                lastActivity = System.nanoTime();
                len = hb.position();
            }
            count(true, len);
            writeAll(upstream, ByteBuffer.wrap(hello, 0, len));
            relay();
        }

        /** Decides and connects; on refusal or failure answers the client and returns false. */
        private boolean connect(HostPort hp) throws IOException {
            host = EgressDecision.shorten(hp.host());
            port = hp.port();
            Run r = owner;
            // Accepted after its run finished, or so late that finish did not see it among the open ones.
            if (r.finished != null || r != run) {
                refuse(403, EgressDecision.refused(host, "between_calls", "no call is running: a session has network "
                        + "only while a call runs, so a connection made between calls (by a thread the code left "
                        + "running, say) is refused"));
                return false;
            }
            if (r.bytesOut.get() >= settings.maxBytes() || r.bytesIn.get() >= settings.maxBytes()) {
                refuse(403, EgressDecision.refused(host, "byte_limit", "this run has used its " + (settings.maxBytes() >> 20)
                        + " MiB of network transfer (EGRESS_MAX_MB)"));
                return false;
            }
            EgressDecision.Verdict v = EgressDecision.decide(hp.host(), hp.port(), r.policy, settings.addresses(), resolver);
            host = v.host();
            if (!v.connect()) {
                refuse(v.decision().equals(ConnectionRecord.FAILED) ? 502 : 403, v);
                return false;
            }
            if (ended.get()) return false; // the run ended (or the sweeper closed it) during the lookup
            SocketChannel up = SocketChannel.open();
            upstream = up;
            connecting = true;
            try {
                up.socket().connect(new InetSocketAddress(v.address().get(), hp.port()), (int) settings.connectTimeout().toMillis());
            } catch (java.net.SocketTimeoutException e) {
                refuse(504, new EgressDecision.Verdict(host, v.address(), ConnectionRecord.FAILED, "connect_timeout",
                        host + ":" + port + " did not answer within " + settings.connectTimeout().toMillis() + " ms"));
                return false;
            } catch (IOException e) {
                if (ended.get()) return false;
                refuse(502, new EgressDecision.Verdict(host, v.address(), ConnectionRecord.FAILED, "connect_failed",
                        host + ":" + port + " could not be reached (" + e.getMessage() + ")"));
                return false;
            } finally {
                connecting = false;
            }
            lastActivity = System.nanoTime();
            if (ended.get()) {
                closeQuietly(up); // ended while connecting: end() may have run before upstream was set
                return false;
            }
            up.setOption(java.net.StandardSocketOptions.TCP_NODELAY, true);
            return true;
        }

        private void relay() {
            relaying = true;
            try {
                client.setOption(java.net.StandardSocketOptions.SO_SNDBUF, SOCKET_BUFFER);
            } catch (IOException | UnsupportedOperationException e) {
                // the default then
            }
            // downloads on a platform thread: a virtual one parks and is woken for every socket buffer's worth, at
            // half the rate (measured); uploads and everything else on virtual threads
            PUMPS.newThread(() -> pump(upstream, client, false)).start();
            pump(client, upstream, true);
        }

        private void pump(SocketChannel from, SocketChannel to, boolean outbound) {
            ByteBuffer b = ByteBuffer.allocateDirect(outbound ? UP_BUFFER : DOWN_BUFFER);
            try {
                while (true) {
                    b.clear();
                    int r = from.read(b);
                    if (r < 0) break;
                    lastActivity = System.nanoTime();
                    long granted = take(outbound, r);
                    b.flip();
                    if (granted < r) {
                        b.limit((int) granted);
                        writeAll(to, b);
                        overCap(outbound);
                        return;
                    }
                    writeAll(to, b);
                }
                to.shutdownOutput();
                if (halvesDone.incrementAndGet() == 2) end(ConnectionRecord.ALLOWED, "closed", "closed");
            } catch (IOException e) {
                end(ConnectionRecord.ALLOWED, "closed", "closed");
            }
        }

        /** Adds to the connection's and the run's counts; false (and the connection ended) past the run's cap. */
        private boolean count(boolean outbound, long n) {
            if (take(outbound, n) == n) return true;
            overCap(outbound);
            return false;
        }

        /**
         * Takes up to {@code n} bytes of the run's allowance in one direction and returns how many it got: exactly
         * {@code n} until the run reaches EGRESS_MAX_MB, then what is left (the transfer is cut at the cap).
         */
        private long take(boolean outbound, long n) {
            AtomicLong total = outbound ? owner.bytesOut : owner.bytesIn;
            long granted;
            while (true) {
                long now = total.get();
                granted = Math.max(0, Math.min(n, settings.maxBytes() - now));
                if (total.compareAndSet(now, now + granted)) break;
            }
            if (outbound) bytesOut += granted;
            else bytesIn += granted;
            return granted;
        }

        private void overCap(boolean outbound) {
            end(ConnectionRecord.ALLOWED, "byte_limit", "the run reached its " + (settings.maxBytes() >> 20)
                    + " MiB of network transfer " + (outbound ? "out" : "in") + " (EGRESS_MAX_MB); the connection was closed");
        }

        void refuse(int status, EgressDecision.Verdict v) {
            host = v.host().isEmpty() ? host : v.host();
            if (ended.get()) return;
            refusal = v;
            String body = "code-exec-mcp egress proxy: " + (v.decision().equals(ConnectionRecord.REFUSED) ? "refused" : "failed")
                    + " (" + v.reason() + "): " + v.message() + "\n";
            String resp = "HTTP/1.1 " + status + " " + (status == 403 ? "Forbidden" : status == 429 ? "Too Many Requests"
                    : status == 502 ? "Bad Gateway" : status == 504 ? "Gateway Timeout" : "Bad Request") + "\r\n"
                    + "Content-Type: text/plain; charset=utf-8\r\nX-Codeexec-Egress: " + v.decision() + "; reason=" + v.reason()
                    + "\r\nContent-Length: " + body.getBytes(StandardCharsets.UTF_8).length + "\r\nConnection: close\r\n\r\n" + body;
            try {
                client.configureBlocking(true);
                writeAll(client, ByteBuffer.wrap(resp.getBytes(StandardCharsets.UTF_8)));
            } catch (IOException e) {
                // the program went away; the record still says why
            }
            end(v.decision(), v.reason(), v.message());
        }

        /**
         * Closes both sides and records the connection, once. Synchronized, and leaving {@link #open} only when the
         * record is in: {@link #finish} either sees the connection and waits here for its record, or finds it gone
         * with its record already in the report.
         */
        synchronized void end(String decision, String reason, String message) {
            if (local) {
                endLocal();
                return;
            }
            if (!ended.compareAndSet(false, true)) return;
            EgressDecision.Verdict refused = refusal;
            if (refused != null) {
                decision = refused.decision();
                reason = refused.reason();
                message = refused.message();
            }
            closeQuietly(client);
            SocketChannel up = upstream;
            if (up != null) closeQuietly(up);
            long ms = (System.nanoTime() - started) / 1_000_000;
            ConnectionRecord rec = new ConnectionRecord(host, port, decision, reason, message, bytesOut, bytesIn, ms);
            owner.add(rec);
            open.remove(this);
            AUDIT.info("egress run={} tenant={} host={} port={} decision={} reason={} bytesOut={} bytesIn={} ms={}",
                    owner.runId, owner.tenant, host, port, decision, reason, bytesOut, bytesIn, ms);
        }
    }

    private static void writeAll(SocketChannel ch, ByteBuffer b) throws IOException {
        while (b.hasRemaining()) ch.write(b);
    }

    private static void closeQuietly(SocketChannel ch) {
        try {
            ch.close();
        } catch (IOException e) {
            // closing
        }
    }

    private static int indexOf(byte[] hay, int len, byte[] needle) {
        outer:
        for (int i = 0; i + needle.length <= len; i++) {
            for (int j = 0; j < needle.length; j++) if (hay[i + j] != needle[j]) continue outer;
            return i;
        }
        return -1;
    }

    /** {@code host:port} or {@code [v6]:port} as sent; {@code defaultPort} when the port is absent (-1: required). */
    record HostPort(String host, int port) {
        static HostPort parse(String s, int defaultPort) {
            String host;
            String portText = null;
            if (s.startsWith("[")) {
                int close = s.indexOf(']');
                if (close < 0) return null;
                host = s.substring(0, close + 1);
                if (close + 1 < s.length()) {
                    if (s.charAt(close + 1) != ':') return null;
                    portText = s.substring(close + 2);
                }
            } else {
                int colon = s.lastIndexOf(':');
                host = colon < 0 ? s : s.substring(0, colon);
                if (colon >= 0) portText = s.substring(colon + 1);
            }
            int port = defaultPort;
            if (portText != null) {
                if (!portText.matches("[0-9]{1,5}")) return null;
                port = Integer.parseInt(portText);
            }
            if (port < 1 || port > 65535 || host.isEmpty()) return null;
            return new HostPort(host, port);
        }
    }
}
