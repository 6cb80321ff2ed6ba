package dev.codeexec.egress;

import dev.codeexec.http1.ChunkedBody;
import dev.codeexec.http1.Http1;
import dev.codeexec.http1.Malformed;
import dev.codeexec.http1.RequestHead;
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
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
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
 * <p>It speaks {@code CONNECT host:port} (a tunnel, which must carry TLS whose SNI names the same host, to an
 * upstream that answers with TLS: see {@link Conn#tunnel}) and plain
 * HTTP requests with an absolute URI ({@code GET http://host/path}, sent on as origin-form with
 * {@code Connection: close}, one request per connection: see {@link Conn#relayHttp}). Each request is decided by {@link EgressDecision} against the policy the channel is
 * {@link #arm armed} with; a refusal is an HTTP error whose body says what was refused and why, so the program's
 * own error message tells the model. Connections are bounded per run (how many at once, bytes each way, connect and
 * idle timeouts), every connection ends as a {@link ConnectionRecord} in the run's {@link NetworkReport} and as an
 * {@code egress} line in the audit log, and {@link #finish} closes whatever is still open the moment the run ends.
 *
 * <p>Threads: one virtual thread accepts. Each connection gets a virtual thread that reads and decides its request,
 * connects, and then carries what the program sends (a tunnel's bytes, a plain request's body); what the upstream
 * sends back (a tunnel's bytes, a plain request's response) goes on a platform thread, {@code egress-pump-*}, since
 * a virtual thread parked and woken for every socket buffer's worth halves a download's rate. A connection over the
 * cap gets a virtual thread that answers it 429. One daemon thread for all channels, {@code egress-idle-sweeper},
 * closes idle connections and refused ones that do not send their request in time. One run's flood only fills its
 * own channel, up to its own caps, which the server enforces from accept on (see {@link #admit}): a program that
 * connects to the socket itself, past the sandbox relay's cap, is held to them as well.
 */
public final class EgressChannel implements AutoCloseable {

    /** Where the sandbox's relay listens. */
    public static final int PROXY_PORT = 3128;
    /** The proxy's URL as a run's environment names it. */
    public static final String PROXY_URL = "http://127.0.0.1:" + PROXY_PORT;

    private static final Logger LOG = LoggerFactory.getLogger(EgressChannel.class);
    private static final Logger AUDIT = LoggerFactory.getLogger("audit");
    private static final int HEAD_MAX = 16 * 1024;
    /** A request head's first buffer: most fit; it grows to HEAD_MAX for the rest. */
    private static final int HEAD_START = 2048;
    private static final byte[] CRLF_CRLF = Http1.CRLF_CRLF;
    /**
     * Connections over the cap answered 429 at once per channel: as many as the sandbox's relay carries at once
     * (codeexec-helper's MAX_RELAYS), so a program going through the relay always gets its answer; a program that
     * connects to the socket itself gets closed past that.
     */
    static final int REFUSING_MAX = 128;
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
    /** Connections over the cap that are being answered 429 now (each holds its one descriptor until answered). */
    private final AtomicInteger refusing = new AtomicInteger();
    private final Descriptors descriptors;
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
        final AtomicInteger closedAtOnce = new AtomicInteger();
        /** The run's placeholder secrets ({@link #useSecrets}): set before its sandbox starts. */
        volatile RunSecrets secrets = RunSecrets.NONE;
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

        /**
         * A connection closed at accept, over the caps: in the report like any other, in the audit log only the
         * first of the run (a flood would otherwise write a line per connect).
         */
        void closedAtOnce(String message) {
            add(new ConnectionRecord("", 0, ConnectionRecord.REFUSED, "connection_limit", message, 0, 0, 0));
            if (closedAtOnce.getAndIncrement() == 0)
                AUDIT.info("egress run={} tenant={} host= port=0 decision=refused reason=connection_limit bytesOut=0 bytesIn=0 "
                        + "ms=0 closedAtOnce=true (more such connections of this run are counted in its report only)", runId, tenant);
        }

        synchronized NetworkReport report() {
            return new NetworkReport(policy.patterns(), records, leftOut, counts, bytesOut.get(), bytesIn.get());
        }
    }

    private EgressChannel(EgressSettings settings, EgressDecision.Resolver resolver, Path socket,
            ServerSocketChannel server, EgressPolicy policy, String tenant, String runId, Descriptors descriptors) {
        this.settings = settings;
        this.descriptors = descriptors;
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
        return open(settings, resolver, socket, policy, tenant, runId, Descriptors.PROCESS);
    }

    /** As {@link #open(EgressSettings, EgressDecision.Resolver, Path, EgressPolicy, String, String)}, within this share. */
    static EgressChannel open(EgressSettings settings, EgressDecision.Resolver resolver, Path socket,
            EgressPolicy policy, String tenant, String runId, Descriptors descriptors) throws IOException {
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
        return new EgressChannel(settings, resolver, socket, server, policy, tenant, runId, descriptors);
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

    /**
     * As {@link #arm(EgressPolicy, String, String, LocalEndpoint)}, with the placeholder secrets its program holds
     * already: a session's, made when its interpreter started and kept for each of its calls. The next run starts
     * with them, so no connection of the call is served without them.
     */
    public void arm(EgressPolicy policy, String tenant, String runId, LocalEndpoint local, RunSecrets secrets) {
        Run next = new Run(policy, tenant, runId, local);
        next.secrets = secrets;
        run = next;
    }

    /**
     * The run the channel serves now has these placeholder secrets (its environment holds the placeholders). Called
     * before the run's program starts; the next {@link #arm} or {@link #finish} drops them.
     */
    public void useSecrets(RunSecrets secrets) {
        run.secrets = secrets;
    }

    /** The placeholder secrets of the run the channel serves now. */
    RunSecrets secrets() {
        return run.secrets;
    }

    /** The policy the channel serves now (nothing, between a session's calls). */
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

    /**
     * Accepts for as long as the channel is open. A failed accept (EMFILE: the process is out of descriptors) leaves
     * the connection queued and is tried again after a pause that grows to a second: the loop neither spins nor
     * ends, so the run keeps its proxy once descriptors are free again.
     */
    private void acceptLoop() {
        long pauseMs = 0;
        while (!closed) {
            SocketChannel client;
            try {
                client = server.accept();
            } catch (IOException e) {
                if (closed || !server.isOpen()) return;
                if (pauseMs == 0)
                    LOG.warn("egress {}: accept failed: {}; retrying until it succeeds", socket.getFileName(), e.toString());
                pauseMs = Math.min(1000, Math.max(10, pauseMs * 2));
                try {
                    Thread.sleep(pauseMs);
                } catch (InterruptedException ie) {
                    return;
                }
                continue;
            }
            if (pauseMs != 0) {
                LOG.info("egress {}: accepting again", socket.getFileName());
                pauseMs = 0;
            }
            admit(client);
        }
    }

    /**
     * What a run may hold: {@link EgressSettings#maxConnections} connections served (each a client descriptor and
     * one upstream, counted from accept, so connections still sending their request and dials still pending are
     * in), and up to {@link #REFUSING_MAX} more being answered 429; anything beyond is closed at once and recorded.
     * Every descriptor also comes out of the process's {@link Descriptors} share, so all runs together leave the
     * server its own half.
     */
    private void admit(SocketChannel client) {
        Run r = run;
        if (open.size() < settings.maxConnections()) {
            if (descriptors.take(2)) {
                Conn c = new Conn(client, r, 2, false);
                open.add(c);
                threads.newThread(c::serve).start();
                return;
            }
        } else if (refusing.get() < REFUSING_MAX && descriptors.take(1)) {
            refusing.incrementAndGet();
            Conn c = new Conn(client, r, 1, true);
            threads.newThread(() -> refuseOverCap(c)).start();
            return;
        }
        closeQuietly(client);
        boolean ownCap = open.size() >= settings.maxConnections();
        r.closedAtOnce(ownCap ? "this run already has " + settings.maxConnections() + " connections open "
                + "(EGRESS_MAX_CONNECTIONS) and " + REFUSING_MAX + " more waiting for their refusal; this one was closed at once"
                : "the server's egress proxies hold all the descriptors they may (half of the server's limit); this "
                + "connection was closed at once");
    }

    /**
     * A connection over EGRESS_MAX_CONNECTIONS: its request is read first (for at most {@link #HEAD_WAIT}), then
     * answered 429. Answering and hanging up before the request arrived would make the program's write of it fail
     * (EPIPE) and lose the answer that says why. What is read is dropped as it comes: no buffer per connection. A
     * request that has not come within the wait ends the reading only (the read sees its end), so the answer is
     * written all the same: the program never meets a bare close (a loaded machine's flood once got one in CI).
     */
    private void refuseOverCap(Conn c) {
        ScheduledFuture<?> guard = SWEEPER.schedule(() -> shutdownInputQuietly(c.client), HEAD_WAIT.toMillis(),
                TimeUnit.MILLISECONDS);
        try {
            ByteBuffer b = ByteBuffer.allocate(512);
            int total = 0, matched = 0; // how much of CRLF CRLF the bytes so far end with
            reading:
            while (total < HEAD_MAX) {
                int got = c.client.read(b.clear());
                if (got <= 0) break;
                total += got;
                for (int i = 0; i < got; i++) {
                    byte x = b.get(i);
                    matched = x == (matched % 2 == 0 ? '\r' : '\n') ? matched + 1 : x == '\r' ? 1 : 0;
                    if (matched == 4) break reading;
                }
            }
        } catch (IOException e) {
            // closed by the guard or by the program: the refusal is recorded all the same
        } finally {
            guard.cancel(false);
        }
        c.refuse(429, EgressDecision.refused("", "connection_limit",
                "this run already has " + settings.maxConnections() + " connections open (EGRESS_MAX_CONNECTIONS)"));
    }

    /** Connections being answered 429 now (tests). */
    int refusingNow() {
        return refusing.get();
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
        /** A tunnel's: opens when the upstream has answered the ClientHello with TLS, or when the connection ends. */
        volatile CountDownLatch serverAnswered;
        /** The tunnel to a secret's host relaying this connection, if any: which secrets it put in. */
        volatile SecretTunnel secretTunnel;

        /** Descriptors taken from the process's share for this connection, given back when it ends. */
        final int descriptorsHeld;
        /** Over the cap, answered 429: holds one of the {@link #REFUSING_MAX} places until it closes. */
        final boolean overCap;

        Conn(SocketChannel client, Run owner, int descriptorsHeld, boolean overCap) {
            this.client = client;
            this.owner = owner;
            this.descriptorsHeld = descriptorsHeld;
            this.overCap = overCap;
        }

        void serve() {
            Runnable relay;
            try {
                relay = serveRequest();
            } catch (IOException | RuntimeException e) {
                end(ConnectionRecord.REFUSED, "bad_request", "the request could not be read: " + e.getMessage());
                return;
            }
            if (relay == null) return;
            try {
                relay.run(); // the request's buffers are garbage from here: a relay holds only its two pump buffers
            } catch (RuntimeException e) {
                end(ConnectionRecord.ALLOWED, "closed", "closed");
            }
        }

        /** Reads and decides the request; returns the relay that carries the connection on, or null when done. */
        private Runnable serveRequest() throws IOException {
            byte[] head = new byte[HEAD_START];
            int n = 0, headEnd = -1;
            while (headEnd < 0) {
                if (n == head.length) {
                    if (n >= HEAD_MAX) {
                        refuse(431, EgressDecision.refused("", "bad_request", "the request head is longer than " + HEAD_MAX + " bytes"));
                        return null;
                    }
                    head = Arrays.copyOf(head, Math.min(HEAD_MAX, 2 * n));
                }
                int r = client.read(ByteBuffer.wrap(head, n, head.length - n));
                if (r < 0) {
                    end(ConnectionRecord.REFUSED, "bad_request", "the connection closed before a request arrived");
                    return null;
                }
                lastActivity = System.nanoTime();
                int from = Math.max(0, n - 3);
                n += r;
                headEnd = Http1.indexOf(head, from, n, CRLF_CRLF);
            }
            RequestHead request;
            try {
                request = RequestHead.parse(head, headEnd);
            } catch (Malformed e) {
                refuse(400, EgressDecision.refused("", "bad_request", e.getMessage()));
                return null;
            }
            int bodyStart = headEnd + 4;
            if (request.method().equals("CONNECT")) {
                HostPort hp = HostPort.parse(request.target(), -1);
                if (hp == null) {
                    refuse(400, EgressDecision.refused(EgressDecision.shorten(request.target()), "bad_request", "CONNECT needs host:port"));
                    return null;
                }
                return tunnel(hp, head, bodyStart, n);
            }
            String target = request.target();
            if (target.startsWith("/") && owner.local != null) {
                serveLocal(owner.local, request, head, bodyStart, n);
                return null;
            }
            if (!target.regionMatches(true, 0, "http://", 0, 7)) {
                String why = target.regionMatches(true, 0, "https://", 0, 8)
                        ? "https:// URLs go through CONNECT (the client's HTTPS proxy support), not as a plain request"
                        : "a proxy request needs an absolute http:// URL";
                refuse(400, EgressDecision.refused("", "bad_request", why));
                return null;
            }
            Url url = Url.parse(target);
            if (url.host() == null) {
                refuse(400, EgressDecision.refused(EgressDecision.shorten(url.authority()), "bad_request", "the URL's host is not valid"));
                return null;
            }
            RequestHead.Framing framing;
            try {
                framing = request.framing();
            } catch (Malformed e) {
                refuse(400, EgressDecision.refused(EgressDecision.shorten(url.authority()), "bad_request", e.getMessage()));
                return null;
            }
            // in clear or inside Basic credentials: values never travel unencrypted
            java.util.Optional<RunSecrets.Placeholder> placeholder = owner.secrets.foundIn(new String(head, 0, headEnd,
                    StandardCharsets.ISO_8859_1), request.fields());
            if (placeholder.isPresent()) {
                RunSecrets.Placeholder p = placeholder.get();
                port = url.host().port();
                refuse(403, EgressDecision.refused(normalizedOrShort(url.host().host()), "secret_not_allowed", "the placeholder of "
                        + p.name() + " may only be sent to " + String.join(", ", p.secret().hostPatterns())
                        + " over https, not in a plain http:// request"));
                return null;
            }
            byte[] rewritten = originForm(request, url.path(), url.authority());
            if (!connect(url.host())) return null;
            if (!count(true, rewritten.length)) return null;
            writeAll(upstream, ByteBuffer.wrap(rewritten));
            byte[] early = Arrays.copyOfRange(head, bodyStart, n); // the body's start, or already a next request
            return () -> relayHttp(framing, early);
        }

        /**
         * Plain HTTP carries one request per connection (simpler than reading every response's framing to find
         * where the next request may start, and safe: nothing the proxy did not check reaches an upstream). The
         * request's body goes on exactly as its head frames it, and not a byte more: what follows it, a pipelined
         * request or one sent on a kept-alive connection, is never sent on and is recorded as refused. The
         * response goes back with its head saying {@code Connection: close} (see {@link ResponseHeads}) until the
         * upstream, which was sent {@code Connection: close}, closes; that ends the connection.
         */
        private void relayHttp(RequestHead.Framing framing, byte[] early) {
            relaying = true;
            raiseSendBuffer();
            PUMPS.newThread(this::pumpResponse).start();
            try {
                byte[] after = forwardBody(framing, early);
                if (after != null) watchForNextRequest(after);
            } catch (Malformed e) {
                end(ConnectionRecord.REFUSED, "bad_request", "the chunked request body is malformed: " + e.getMessage()
                        + "; the connection was closed");
            } catch (IOException e) {
                end(ConnectionRecord.ALLOWED, "closed", "closed");
            }
        }

        /**
         * Sends on the request's body, from {@code early} and then from the client, as far as its framing goes.
         *
         * @return the bytes read past the body's end (empty when none), or null when the client closed first or the
         *         run's byte cap ended the connection
         */
        private byte[] forwardBody(RequestHead.Framing framing, byte[] early) throws IOException, Malformed {
            ChunkedBody chunks = framing.chunked() ? new ChunkedBody() : null;
            long left = framing.length();
            ByteBuffer b = ByteBuffer.wrap(early);
            ByteBuffer fresh = null;
            while (true) {
                if (chunks == null && left == 0) return rest(b);
                if (b.hasRemaining()) {
                    int end = chunks != null ? chunks.scan(b, b.position(), b.limit())
                            : left <= b.remaining() ? b.position() + (int) left : -1;
                    int stop = end < 0 ? b.limit() : end;
                    int n = stop - b.position();
                    long granted = take(true, n);
                    writeAll(upstream, b.duplicate().limit(b.position() + (int) granted));
                    if (granted < n) {
                        overCap(true);
                        return null;
                    }
                    b.position(stop);
                    if (chunks == null) left -= n;
                    if (end >= 0) return rest(b);
                    continue;
                }
                if (fresh == null) fresh = ByteBuffer.allocate(UP_BUFFER);
                if (client.read(fresh.clear()) < 0) {
                    upstream.shutdownOutput(); // the body will not come whole: the upstream sees it end, as the program did
                    return null;
                }
                lastActivity = System.nanoTime();
                b = fresh.flip();
            }
        }

        private static byte[] rest(ByteBuffer b) {
            byte[] out = new byte[b.remaining()];
            b.get(out);
            return out;
        }

        /**
         * The request is complete and the connection carries no other, so bytes that come now are a next request:
         * its head is read (to name its host in the record) but never sent on, and the connection ends with the
         * response. A client that waits for the response, as it should, sends nothing here.
         */
        private void watchForNextRequest(byte[] after) throws IOException {
            byte[] next = Arrays.copyOf(after, Math.max(512, after.length));
            int n = after.length;
            while (n < HEAD_MAX && Http1.indexOf(next, 0, n, CRLF_CRLF) < 0) {
                if (n == next.length) next = Arrays.copyOf(next, Math.min(HEAD_MAX, 2 * n));
                int r = client.read(ByteBuffer.wrap(next, n, next.length - n));
                if (r < 0) break;
                n += r;
            }
            if (n == 0) return;
            String what = "a next request";
            String nextHost = host;
            int nextPort = port;
            int headEnd = Http1.indexOf(next, 0, n, CRLF_CRLF);
            if (headEnd >= 0) {
                try {
                    RequestHead h = RequestHead.parse(next, headEnd);
                    what = h.method() + " " + EgressDecision.shorten(h.target());
                    HostPort hp = h.target().startsWith("/") ? null : Url.parse(h.target()).host();
                    if (hp != null) {
                        nextHost = normalizedOrShort(hp.host());
                        nextPort = hp.port();
                    }
                } catch (Malformed | RuntimeException e) {
                    // recorded as "a next request"
                }
            }
            String message = "a plain-HTTP connection through the proxy carries one request; " + what
                    + " came after the first on the same connection and was not sent (send it on a new connection)";
            owner.add(new ConnectionRecord(nextHost, nextPort, ConnectionRecord.REFUSED, "second_request", message, 0, 0, 0));
            AUDIT.info("egress run={} tenant={} host={} port={} decision=refused reason=second_request bytesOut=0 bytesIn=0 ms=0",
                    owner.runId, owner.tenant, nextHost, nextPort);
        }

        /** The upstream's response, its heads made to say Connection: close; the upstream's close ends the connection. */
        private void pumpResponse() {
            ByteBuffer b = ByteBuffer.allocateDirect(DOWN_BUFFER);
            ResponseHeads heads = new ResponseHeads();
            try {
                while (true) {
                    int r = upstream.read(b.clear());
                    if (r < 0) break;
                    lastActivity = System.nanoTime();
                    ByteBuffer out = b.flip();
                    if (!heads.done()) {
                        out = ByteBuffer.wrap(heads.feed(b));
                        if (!out.hasRemaining()) continue;
                    }
                    if (!deliver(out)) return;
                }
                if (!heads.done() && !deliver(ByteBuffer.wrap(heads.rest()))) return;
                end(ConnectionRecord.ALLOWED, "closed", "closed");
            } catch (IOException e) {
                end(ConnectionRecord.ALLOWED, "closed", "closed");
            }
        }

        /** Writes to the client what the run's byte cap allows; false (and the connection ended) past it. */
        private boolean deliver(ByteBuffer out) throws IOException {
            int n = out.remaining();
            long granted = take(false, n);
            out.limit(out.position() + (int) granted);
            writeAll(client, out);
            if (granted == n) return true;
            overCap(false);
            return false;
        }

        /**
         * The head sent on: origin form, Host from the URL (the one the proxy decided on), every field of the
         * request but the hop-by-hop ones (Connection and the fields it names, Keep-Alive, Proxy-*), and
         * {@code Connection: close}. The fields went through {@link RequestHead#parse}: each is one line, read the
         * same way by any upstream.
         */
        private static byte[] originForm(RequestHead request, String path, String authority) {
            Set<String> hopByHop = new java.util.HashSet<>(Set.of("host", "connection", "keep-alive"));
            hopByHop.addAll(request.connectionOptions()); // never a framing field: framing() refused those
            StringBuilder out = new StringBuilder(request.method()).append(' ').append(path).append(' ')
                    .append(request.version()).append("\r\n");
            out.append("Host: ").append(authority).append("\r\n");
            for (RequestHead.Field f : request.fields()) {
                String name = f.name().toLowerCase(Locale.ROOT);
                if (hopByHop.contains(name) || name.startsWith("proxy-")) continue;
                out.append(f.name()).append(": ").append(f.value()).append("\r\n");
            }
            out.append("Connection: close\r\n\r\n");
            return out.toString().getBytes(StandardCharsets.ISO_8859_1);
        }

        /**
         * A request to the proxy's own address in origin form: the run's local endpoint answers it. Not a network
         * connection: it is left out of the run's network report (the endpoint keeps its own records). Its body,
         * framed by Content-Length or chunked, is read whole within the endpoint's {@link LocalEndpoint#maxRequestBytes}
         * (a chunked one is handed on without its framing); the connection stays open for the next request unless
         * the client or an answer ends it.
         */
        private void serveLocal(LocalEndpoint endpoint, RequestHead request, byte[] head, int bodyStart, int n)
                throws IOException {
            local = true;
            while (true) {
                String method = request.method(), path = request.target();
                boolean keepAlive = request.version().equals("HTTP/1.1") && !request.connectionOptions().contains("close");
                LocalEndpoint.Response answer;
                byte[] rest = new byte[0]; // read past this request's body: the next request's start
                LocalBody body;
                String malformed = "";
                try {
                    RequestHead.Framing framing = request.framing();
                    if ((framing.chunked() || framing.length() > n - bodyStart) && request.version().equals("HTTP/1.1")
                            && request.values("expect").stream().anyMatch(v -> v.equalsIgnoreCase("100-continue")))
                        writeAll(client, ByteBuffer.wrap("HTTP/1.1 100 Continue\r\n\r\n".getBytes(StandardCharsets.US_ASCII)));
                    body = framing.chunked() ? readChunked(endpoint.maxRequestBytes(), head, bodyStart, n)
                            : readLength(endpoint.maxRequestBytes(), framing.length(), head, bodyStart, n);
                    if (body == null) { // the client closed before its body was in
                        endLocal();
                        return;
                    }
                } catch (Malformed e) {
                    body = null;
                    malformed = e.getMessage();
                }
                if (body == null) { // framing the proxy cannot read as an upstream would
                    answer = localError(400, malformed);
                    keepAlive = false;
                } else if (body.bytes() == null) {
                    // over the cap: its bytes were read (and dropped) first, as answering before the body is sent
                    // would fail the program's write of it and lose the answer that says why
                    answer = endpoint.tooLarge(method, path, body.length());
                    keepAlive = false;
                } else {
                    rest = body.rest();
                    lastActivity = System.nanoTime();
                    List<LocalEndpoint.Header> fields = new ArrayList<>();
                    for (RequestHead.Field f : request.fields()) fields.add(new LocalEndpoint.Header(f.name(), f.value()));
                    connecting = true; // waiting on the endpoint (an upstream call) is not idleness
                    try {
                        answer = endpoint.handle(new LocalEndpoint.Request(method, path, fields, body.bytes()));
                    } finally {
                        connecting = false;
                    }
                }
                StringBuilder headOut = new StringBuilder("HTTP/1.1 ").append(answer.status()).append(' ')
                        .append(answer.status() == 200 ? "OK" : answer.status() >= 300 && answer.status() < 400 ? "Redirect"
                                : answer.status() < 300 ? "Success" : "Error").append("\r\n");
                if (!answer.contentType().isEmpty()) headOut.append("Content-Type: ").append(answer.contentType()).append("\r\n");
                for (LocalEndpoint.Header h : answer.headers()) headOut.append(h.name()).append(": ").append(h.value()).append("\r\n");
                headOut.append("Content-Length: ").append(answer.body().length).append("\r\nConnection: ")
                        .append(keepAlive ? "keep-alive" : "close").append("\r\n\r\n");
                writeAll(client, ByteBuffer.wrap(headOut.toString().getBytes(StandardCharsets.ISO_8859_1)));
                if (!method.equals("HEAD")) writeAll(client, ByteBuffer.wrap(answer.body()));
                lastActivity = System.nanoTime();
                if (!keepAlive) {
                    endLocal();
                    return;
                }
                // the next request on this connection (a library keeps it for its next call); bytes already read past
                // this request's body are its start. It goes to the endpoint of the run the channel serves then.
                byte[] next = new byte[HEAD_MAX];
                System.arraycopy(rest, 0, next, 0, rest.length);
                ByteBuffer buf = ByteBuffer.wrap(next);
                buf.position(rest.length);
                int headEnd = Http1.indexOf(next, 0, rest.length, CRLF_CRLF);
                while (headEnd < 0) {
                    if (!buf.hasRemaining() || client.read(buf) < 0) {
                        endLocal();
                        return;
                    }
                    lastActivity = System.nanoTime();
                    headEnd = Http1.indexOf(next, 0, buf.position(), CRLF_CRLF);
                }
                endpoint = run.local;
                RequestHead nextRequest;
                try {
                    nextRequest = RequestHead.parse(next, headEnd);
                } catch (Malformed e) {
                    nextRequest = null;
                }
                if (nextRequest == null || !nextRequest.target().startsWith("/") || endpoint == null) {
                    LocalEndpoint.Response bad = localError(400, "a connection to the local endpoint carries origin-form "
                            + "requests to it only");
                    writeAll(client, ByteBuffer.wrap(("HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\n"
                            + "Content-Length: " + bad.body().length + "\r\nConnection: close\r\n\r\n").getBytes(StandardCharsets.US_ASCII)));
                    writeAll(client, ByteBuffer.wrap(bad.body()));
                    endLocal();
                    return;
                }
                request = nextRequest;
                head = next;
                bodyStart = headEnd + 4;
                n = buf.position();
            }
        }

        /**
         * A local request's body.
         *
         * @param bytes  the whole body (a chunked one without its framing); null when it was longer than the cap
         * @param length its length; past the cap, as much as was seen (a chunked body is read only so far)
         * @param rest   bytes read past its end: the next request's start
         */
        private record LocalBody(byte[] bytes, long length, byte[] rest) {
        }

        /** A body of {@code length} bytes, its start at {@code head[bodyStart, n)}; null when the client closed first. */
        private LocalBody readLength(int max, long length, byte[] head, int bodyStart, int n) throws IOException {
            if (length > max) {
                long left = length - (n - bodyStart);
                ByteBuffer sink = ByteBuffer.allocate(64 * 1024);
                while (left > 0 && left <= DRAIN_MAX) {
                    sink.clear();
                    if (left < sink.capacity()) sink.limit((int) left);
                    int got = client.read(sink);
                    if (got < 0) break;
                    left -= got;
                }
                return new LocalBody(null, length, new byte[0]);
            }
            byte[] body = new byte[(int) length];
            int have = Math.min(n - bodyStart, body.length);
            System.arraycopy(head, bodyStart, body, 0, have);
            ByteBuffer b = ByteBuffer.wrap(body, have, body.length - have);
            while (b.hasRemaining()) if (client.read(b) < 0) return null;
            return new LocalBody(body, length, Arrays.copyOfRange(head, bodyStart + have, n));
        }

        /**
         * A chunked body, its start at {@code head[bodyStart, n)}, read to its end and decoded while it is within
         * {@code max}; past that, read on and dropped up to DRAIN_MAX. Null when the client closed first.
         *
         * @throws Malformed the framing is not valid chunked encoding (see {@link ChunkedBody})
         */
        private LocalBody readChunked(int max, byte[] head, int bodyStart, int n) throws IOException, Malformed {
            ChunkedBody chunks = new ChunkedBody();
            ByteBuffer in = ByteBuffer.wrap(head, 0, n);
            long[] seen = {0};
            byte[][] data = {new byte[Math.min(max, 8192)]};
            ChunkedBody.Data sink = (b, from, length) -> {
                long total = seen[0] + length;
                if (seen[0] <= max && total <= max) {
                    if (total > data[0].length) data[0] = Arrays.copyOf(data[0], (int) Math.min(max, Math.max(total, 2L * data[0].length)));
                    b.get(from, data[0], (int) seen[0], length);
                }
                seen[0] = total;
            };
            int from = bodyStart, to = n;
            long raw = n - bodyStart;
            ByteBuffer more = null;
            try {
                int end = chunks.scan(in, from, to, sink);
                while (end < 0) {
                    if (seen[0] > max && raw > DRAIN_MAX) return new LocalBody(null, seen[0], new byte[0]);
                    if (raw > DRAIN_MAX + 2L * max) throw new Malformed("its framing is far longer than the data it carries");
                    if (more == null) more = ByteBuffer.allocate(HEAD_MAX);
                    more.clear();
                    int got = client.read(more);
                    if (got < 0) return null;
                    lastActivity = System.nanoTime();
                    raw += got;
                    in = more;
                    from = 0;
                    to = got;
                    end = chunks.scan(in, from, to, sink);
                }
                if (seen[0] > max) return new LocalBody(null, seen[0], new byte[0]);
                byte[] rest = new byte[to - end];
                in.get(end, rest);
                return new LocalBody(Arrays.copyOf(data[0], (int) seen[0]), seen[0], rest);
            } catch (Malformed e) {
                throw new Malformed("the chunked request body is malformed: " + e.getMessage());
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
            descriptors.release(descriptorsHeld);
        }

        /**
         * A CONNECT tunnel, which must carry TLS: the first bytes a ClientHello (reassembled from any number of
         * records and reads, up to a bound) whose server name (SNI, normalised as the CONNECT host is: lower case,
         * no trailing dot) is the host that was checked, so no other name is fronted behind an allowed one. The
         * hello alone goes on; what the program sends after it waits until the upstream has answered with TLS (see
         * {@link #relayTls}), so no plain protocol reaches an upstream through a tunnel.
         */
        private Runnable tunnel(HostPort hp, byte[] head, int bodyStart, int n) throws IOException {
            if (!connect(hp)) return null;
            writeAll(client, ByteBuffer.wrap("HTTP/1.1 200 Connection established\r\n\r\n".getBytes(StandardCharsets.US_ASCII)));
            ClientHello.Reader reader = new ClientHello.Reader();
            ByteBuffer in = ByteBuffer.wrap(head, bodyStart, n - bodyStart);
            ByteBuffer more = null;
            while (true) {
                ClientHello.Result r = reader.add(in);
                if (r instanceof ClientHello.Result.NotTls) {
                    end(ConnectionRecord.REFUSED, "not_tls", "a CONNECT tunnel must carry TLS; plain HTTP goes as http:// requests");
                    return null;
                }
                if (r instanceof ClientHello.Result.TooLarge) {
                    end(ConnectionRecord.REFUSED, "not_tls", "the TLS ClientHello is larger than " + ClientHello.MAX_BYTES
                            + " bytes or spread over more than " + ClientHello.MAX_RECORDS + " records");
                    return null;
                }
                if (r instanceof ClientHello.Result.Hello h) {
                    if (h.serverName().isEmpty()) {
                        end(ConnectionRecord.REFUSED, "no_sni", "the TLS ClientHello names no server (SNI); it must name " + host);
                        return null;
                    }
                    String sni = normalizedOrShort(h.serverName().get());
                    if (!sni.equals(host)) {
                        end(ConnectionRecord.REFUSED, "sni_mismatch", "the TLS server name " + EgressDecision.shorten(sni)
                                + " differs from the CONNECT host " + host);
                        return null;
                    }
                    break;
                }
                if (more == null) more = ByteBuffer.allocate(4096);
                if (client.read(more.clear()) < 0) {
                    end(ConnectionRecord.ALLOWED, "closed", "closed before TLS started");
                    return null;
                }
                lastActivity = System.nanoTime();
                in = more.flip();
            }
            byte[] hello = reader.hello();
            RunSecrets secrets = owner.secrets;
            if (secrets.interception() != null && !secrets.forHost(host, port).isEmpty()) {
                // a host with a secret for this run: the proxy ends the program's TLS and opens its own
                byte[] rest = reader.rest();
                byte[] all = Arrays.copyOf(hello, hello.length + rest.length);
                System.arraycopy(rest, 0, all, hello.length, rest.length);
                if (!count(true, all.length)) return null;
                return () -> intercept(all);
            }
            if (!count(true, hello.length)) return null;
            writeAll(upstream, ByteBuffer.wrap(hello));
            byte[] early = reader.rest();
            return () -> relayTls(early);
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

        private void raiseSendBuffer() {
            try {
                client.setOption(java.net.StandardSocketOptions.SO_SNDBUF, SOCKET_BUFFER);
            } catch (IOException | UnsupportedOperationException e) {
                // the default then
            }
        }

        /**
         * Relays a tunnel whose ClientHello went on. Until the upstream's first record header is in and is a TLS
         * handshake or alert (a TLS server's answer to a hello), nothing more of the program's is read: a plain
         * server, which answers a hello with an error or not at all, never gets a byte past the hello. Until each
         * direction's first application-data record, its bytes must be TLS records ({@link TlsRecords}); after
         * that they are relayed unread. The tunnel is closed (refused, not_tls) at the first byte that is not.
         */
        private void relayTls(byte[] early) {
            relaying = true;
            raiseSendBuffer();
            CountDownLatch answered = new CountDownLatch(1);
            serverAnswered = answered;
            if (ended.get()) return;
            // downloads on a platform thread: a virtual one parks and is woken for every socket buffer's worth, at
            // half the rate (measured); uploads and everything else on virtual threads
            PUMPS.newThread(() -> pump(upstream, client, false, TlsRecords.fromServer(), answered)).start();
            try {
                answered.await();
            } catch (InterruptedException e) {
                end(ConnectionRecord.ALLOWED, "closed", "closed");
                return;
            }
            if (ended.get()) return;
            TlsRecords check = TlsRecords.fromClient();
            if (early.length > 0) {
                ByteBuffer b = ByteBuffer.wrap(early);
                TlsRecords.Verdict v = check.scan(b, 0, early.length);
                if (v == TlsRecords.Verdict.NOT_TLS) {
                    notTls(true);
                    return;
                }
                if (v == TlsRecords.Verdict.DONE) check = null;
                if (!count(true, early.length)) return;
                try {
                    writeAll(upstream, b);
                } catch (IOException e) {
                    end(ConnectionRecord.ALLOWED, "closed", "closed");
                    return;
                }
            }
            pump(client, upstream, true, check, null);
        }

        /** A tunnel to a secret's host, relayed by a {@link SecretTunnel}; it ends the connection when it is done. */
        private void intercept(byte[] early) {
            relaying = true;
            SecretTunnel tunnel = new SecretTunnel(client, upstream, early, host, port, owner.secrets, new SecretTunnel.Link() {
                @Override
                public boolean out(long n) {
                    return take(true, n) == n;
                }

                @Override
                public boolean in(long n) {
                    return take(false, n) == n;
                }

                @Override
                public void active() {
                    lastActivity = System.nanoTime();
                }
            });
            secretTunnel = tunnel; // before it runs: a run that ends first (finish) still records what it put in
            SecretTunnel.Outcome o = tunnel.run();
            end(o.decision(), o.reason(), o.message());
        }

        private void notTls(boolean outbound) {
            end(ConnectionRecord.REFUSED, "not_tls", outbound
                    ? "the program sent bytes that are not TLS records through its CONNECT tunnel; the tunnel was closed"
                    : host + ":" + port + " did not answer with TLS; the tunnel was closed");
        }

        /**
         * One direction of a tunnel. With {@code check}, each read is checked as TLS records before it is written;
         * {@code answered} opens once the first record header passed.
         */
        private void pump(SocketChannel from, SocketChannel to, boolean outbound, TlsRecords check, CountDownLatch answered) {
            ByteBuffer b = ByteBuffer.allocateDirect(outbound ? UP_BUFFER : DOWN_BUFFER);
            try {
                while (true) {
                    b.clear();
                    int r = from.read(b);
                    if (r < 0) break;
                    lastActivity = System.nanoTime();
                    if (check != null) {
                        TlsRecords.Verdict v = check.scan(b, 0, r);
                        if (v == TlsRecords.Verdict.NOT_TLS) {
                            notTls(outbound);
                            return;
                        }
                        if (answered != null && check.answered()) answered.countDown();
                        if (v == TlsRecords.Verdict.DONE) check = null;
                    }
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
                if (answered != null && answered.getCount() > 0) {
                    end(ConnectionRecord.ALLOWED, "closed", host + ":" + port + " closed the tunnel without answering the TLS ClientHello");
                    return;
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
            String resp = "HTTP/1.1 " + status + " " + reasonPhrase(status) + "\r\n"
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
            CountDownLatch waiting = serverAnswered;
            if (waiting != null) waiting.countDown();
            EgressDecision.Verdict refused = refusal;
            if (refused != null) {
                decision = refused.decision();
                reason = refused.reason();
                message = refused.message();
            }
            // The place is free before the close can be seen: the relay in the sandbox takes its next connection as
            // soon as this one closes, and a count still holding this one would close that one at once (CI saw it).
            if (overCap) refusing.decrementAndGet();
            closeQuietly(client);
            SocketChannel up = upstream;
            if (up != null) closeQuietly(up);
            long ms = (System.nanoTime() - started) / 1_000_000;
            SecretTunnel tunnel = secretTunnel;
            List<String> secretsApplied = tunnel == null ? List.of() : List.copyOf(tunnel.applied());
            ConnectionRecord rec = new ConnectionRecord(host, port, decision, reason, message, bytesOut, bytesIn, ms, secretsApplied);
            owner.add(rec);
            open.remove(this);
            if (secretsApplied.isEmpty())
                AUDIT.info("egress run={} tenant={} host={} port={} decision={} reason={} bytesOut={} bytesIn={} ms={}",
                        owner.runId, owner.tenant, host, port, decision, reason, bytesOut, bytesIn, ms);
            else
                AUDIT.info("egress run={} tenant={} host={} port={} decision={} reason={} bytesOut={} bytesIn={} ms={} secrets={}",
                        owner.runId, owner.tenant, host, port, decision, reason, bytesOut, bytesIn, ms, String.join(",", secretsApplied));
            descriptors.release(descriptorsHeld); // last: once the share is back, the connection is wholly done
        }
    }

    /** The reason phrase of each status the proxy answers with (RFC 9110 section 15). */
    static String reasonPhrase(int status) {
        return switch (status) {
            case 400 -> "Bad Request";
            case 403 -> "Forbidden";
            case 429 -> "Too Many Requests";
            case 431 -> "Request Header Fields Too Large";
            case 502 -> "Bad Gateway";
            case 504 -> "Gateway Timeout";
            default -> "Error";
        };
    }

    private static void writeAll(SocketChannel ch, ByteBuffer b) throws IOException {
        while (b.hasRemaining()) ch.write(b);
    }

    /** Ends the reading side only: a read in progress returns its end, and the answer can still be written. */
    private static void shutdownInputQuietly(SocketChannel ch) {
        try {
            ch.shutdownInput();
        } catch (IOException e) {
            // closed already
        }
    }

    private static void closeQuietly(SocketChannel ch) {
        try {
            ch.close();
        } catch (IOException e) {
            // closing
        }
    }

    /** A name as policies compare it, or as sent (shortened) when it is not a valid one. */
    private static String normalizedOrShort(String name) {
        try {
            return HostNames.normalize(name);
        } catch (IllegalArgumentException e) {
            return EgressDecision.shorten(name);
        }
    }

    /**
     * An absolute {@code http://} URL taken apart: its authority as sent, the host and port in it (null when not
     * valid, e.g. with user info), and the path in origin form.
     */
    record Url(String authority, HostPort host, String path) {
        static Url parse(String target) {
            int slash = target.length();
            for (char stop : new char[] {'/', '?', '#'}) {
                int i = target.indexOf(stop, 7);
                if (i >= 0) slash = Math.min(slash, i);
            }
            String authority = target.substring(Math.min(7, target.length()), slash);
            HostPort hp = authority.contains("@") || !target.regionMatches(true, 0, "http://", 0, 7)
                    ? null : HostPort.parse(authority, 80);
            String path = slash == target.length() || target.charAt(slash) != '/' ? "/" + target.substring(slash) : target.substring(slash);
            return new Url(authority, hp, path);
        }
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
