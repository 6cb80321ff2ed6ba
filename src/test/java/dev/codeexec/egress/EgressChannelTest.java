package dev.codeexec.egress;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import dev.codeexec.config.Config;
import dev.codeexec.testing.Poll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.lang.reflect.Field;
import java.lang.reflect.Method;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.net.UnixDomainSocketAddress;
import java.net.UnknownHostException;
import java.nio.ByteBuffer;
import java.nio.channels.SelectionKey;
import java.nio.channels.Selector;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.Callable;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.Predicate;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.fail;

/**
 * The proxy end to end, in process: a client on the channel's unix socket, upstreams on this machine's loopback
 * (127.0.0.1 only; names are pinned there with EGRESS_RESOLVE and opened with EGRESS_ALLOW_CIDRS). Nothing here
 * connects anywhere else: refusals of other addresses are decided without connecting. Timeouts are generous and
 * only bound a hang; no assertion is about speed.
 */
class EgressChannelTest {

    static final Duration WAIT = Duration.ofSeconds(20);
    static final InetAddress LOOPBACK = InetAddress.ofLiteral("127.0.0.1");

    @TempDir
    Path dir;

    HttpServer http;
    int httpPort;
    final Map<String, HttpExchangeSeen> seen = new ConcurrentHashMap<>();
    final List<AutoCloseable> toClose = new ArrayList<>();
    final ExecutorService io = Executors.newVirtualThreadPerTaskExecutor();

    /** What the upstream HTTP server saw of a request. */
    record HttpExchangeSeen(String method, String uri, Map<String, List<String>> headers) {
    }

    @BeforeEach
    void upstream() throws IOException {
        http = HttpServer.create(new InetSocketAddress(LOOPBACK, 0), 50);
        http.setExecutor(Executors.newVirtualThreadPerTaskExecutor());
        http.createContext("/", ex -> {
            seen.put(ex.getRequestURI().getPath(), new HttpExchangeSeen(ex.getRequestMethod(), ex.getRequestURI().toString(),
                    Map.copyOf(ex.getRequestHeaders())));
            byte[] body = ("hello from upstream " + ex.getRequestURI()).getBytes(StandardCharsets.UTF_8);
            ex.sendResponseHeaders(200, body.length);
            try (OutputStream o = ex.getResponseBody()) {
                o.write(body);
            }
        });
        http.createContext("/big", EgressChannelTest::big);
        http.start();
        httpPort = http.getAddress().getPort();
    }

    static void big(HttpExchange ex) throws IOException {
        byte[] chunk = new byte[64 * 1024];
        Arrays.fill(chunk, (byte) 'x');
        try (ex) {
            ex.sendResponseHeaders(200, 3L << 20);
            OutputStream o = ex.getResponseBody();
            for (int i = 0; i < 48; i++) o.write(chunk);
            o.close();
        } catch (IOException e) {
            // the proxy cut the transfer
        }
    }

    @AfterEach
    void stop() {
        for (AutoCloseable c : toClose.reversed()) {
            try {
                c.close();
            } catch (Exception e) {
                // closing
            }
        }
        http.stop(0);
        io.shutdownNow();
    }

    // ---- helpers ----

    EgressSettings settings(String... pairs) {
        List<String> all = new ArrayList<>(List.of("EGRESS", "on", "EGRESS_ALLOW", "fixture.test:" + httpPort,
                "EGRESS_ALLOW_CIDRS", "127.0.0.1/32", "EGRESS_RESOLVE", "fixture.test=127.0.0.1"));
        for (int i = 0; i + 1 < pairs.length; i += 2) {
            int at = all.indexOf(pairs[i]);
            if (at >= 0 && at % 2 == 0) all.set(at + 1, pairs[i + 1]);
            else {
                all.add(pairs[i]);
                all.add(pairs[i + 1]);
            }
        }
        return EgressSettings.of(Config.of(all.toArray(String[]::new)));
    }

    EgressChannel open(EgressSettings s) throws IOException {
        return open(s, EgressDecision.resolver(s));
    }

    EgressChannel open(EgressSettings s, EgressDecision.Resolver resolver) throws IOException {
        EgressChannel ch = EgressChannel.open(s, resolver, dir.resolve("t.sock"), s.policyFor(Optional.empty()), "tenant", "run-1");
        toClose.add(ch);
        return ch;
    }

    SocketChannel client(EgressChannel ch) throws IOException {
        SocketChannel c = SocketChannel.open(UnixDomainSocketAddress.of(ch.socket()));
        toClose.add(c);
        return c;
    }

    static void send(SocketChannel c, String s) throws IOException {
        send(c, s.getBytes(StandardCharsets.ISO_8859_1));
    }

    static void send(SocketChannel c, byte[] b) throws IOException {
        ByteBuffer buf = ByteBuffer.wrap(b);
        while (buf.hasRemaining()) c.write(buf);
    }

    /** Runs a blocking step, failing (and interrupting it, which closes a channel it blocks on) after WAIT. */
    <T> T within(Callable<T> step) throws Exception {
        Future<T> f = io.submit(step);
        try {
            return f.get(WAIT.toMillis(), TimeUnit.MILLISECONDS);
        } catch (TimeoutException e) {
            f.cancel(true);
            return fail("no outcome within " + WAIT);
        }
    }

    /** Everything the client receives until the proxy closes the connection. */
    byte[] readToEnd(SocketChannel c) throws Exception {
        return within(() -> {
            java.io.ByteArrayOutputStream all = new java.io.ByteArrayOutputStream();
            ByteBuffer b = ByteBuffer.allocate(64 * 1024);
            try {
                while (c.read(b.clear()) >= 0) all.write(b.array(), 0, b.position());
            } catch (IOException e) {
                // a reset ends the stream too
            }
            return all.toByteArray();
        });
    }

    String readTextToEnd(SocketChannel c) throws Exception {
        return new String(readToEnd(c), StandardCharsets.ISO_8859_1);
    }

    /** The response head, up to and including the blank line. */
    String readHead(SocketChannel c) throws Exception {
        return within(() -> {
            StringBuilder s = new StringBuilder();
            ByteBuffer one = ByteBuffer.allocate(1);
            while (!s.toString().endsWith("\r\n\r\n")) {
                if (c.read(one.clear()) < 0) break;
                s.append((char) (one.get(0) & 0xff));
            }
            return s.toString();
        });
    }

    /** Exactly n bytes. */
    byte[] readExactly(SocketChannel c, int n) throws Exception {
        return within(() -> {
            ByteBuffer b = ByteBuffer.allocate(n);
            while (b.hasRemaining()) if (c.read(b) < 0) break;
            return Arrays.copyOf(b.array(), b.position());
        });
    }

    /**
     * The report of the run so far, without ending its connections as {@link EgressChannel#finish} does. Test-only
     * reflection: the channel offers no read-only view of a run still going.
     */
    static NetworkReport peek(EgressChannel ch) throws Exception {
        Field f = EgressChannel.class.getDeclaredField("run");
        f.setAccessible(true);
        Object run = f.get(ch);
        Method m = run.getClass().getDeclaredMethod("report");
        m.setAccessible(true);
        return (NetworkReport) m.invoke(run);
    }

    /** How many connections the channel holds open now (test-only reflection, as {@link #peek}). */
    static int openConnections(EgressChannel ch) throws Exception {
        Field f = EgressChannel.class.getDeclaredField("open");
        f.setAccessible(true);
        return ((java.util.Set<?>) f.get(ch)).size();
    }

    /** Waits until the run has a record that matches, and returns it. */
    static ConnectionRecord awaitRecord(EgressChannel ch, Predicate<ConnectionRecord> p) throws Exception {
        return Poll.until("a matching record in the run's report", WAIT, () -> peek(ch).connections(),
                rs -> rs.stream().anyMatch(p)).stream().filter(p).findFirst().orElseThrow();
    }

    static Predicate<ConnectionRecord> reason(String reason) {
        return r -> r.reason().equals(reason);
    }

    ServerSocket rawUpstream() throws IOException {
        ServerSocket s = new ServerSocket(0, 50, LOOPBACK);
        s.setSoTimeout((int) WAIT.toMillis());
        toClose.add(s);
        return s;
    }

    /** A client whose CONNECT tunnel to fixture.test:port is established (200 read). */
    SocketChannel tunnel(EgressChannel ch, int port) throws Exception {
        SocketChannel c = client(ch);
        send(c, "CONNECT fixture.test:" + port + " HTTP/1.1\r\nHost: fixture.test:" + port + "\r\n\r\n");
        assertThat(readHead(c)).startsWith("HTTP/1.1 200 ");
        return c;
    }

    // ---- plain HTTP ----

    @Test
    void plainHttpGoesOnInOriginFormWithConnectionClose() throws Exception {
        EgressChannel ch = open(settings());
        assertThat(Files.getPosixFilePermissions(ch.socket())).isEqualTo(PosixFilePermissions.fromString("rw-------"));
        SocketChannel c = client(ch);
        send(c, "GET http://fixture.test:" + httpPort + "/x?q=1 HTTP/1.1\r\nHost: evil.test\r\nProxy-Connection: keep-alive\r\n"
                + "Proxy-Authorization: Basic c2VjcmV0\r\nKeep-Alive: 300\r\nConnection: keep-alive\r\nX-Test: yes\r\n\r\n");
        String response = readTextToEnd(c);
        assertThat(response).startsWith("HTTP/1.1 200").endsWith("hello from upstream /x?q=1");
        c.close();

        HttpExchangeSeen up = seen.get("/x");
        assertThat(up).isNotNull();
        assertThat(up.method()).isEqualTo("GET");
        assertThat(up.uri()).isEqualTo("/x?q=1");
        assertThat(up.headers().get("Host")).containsExactly("fixture.test:" + httpPort);
        assertThat(up.headers().get("Connection")).containsExactly("close");
        assertThat(up.headers().get("X-test")).containsExactly("yes");
        assertThat(up.headers()).doesNotContainKeys("Proxy-connection", "Proxy-authorization", "Keep-alive");

        ConnectionRecord r = awaitRecord(ch, rec -> true);
        assertThat(r.host()).isEqualTo("fixture.test");
        assertThat(r.port()).isEqualTo(httpPort);
        assertThat(r.decision()).isEqualTo(ConnectionRecord.ALLOWED);
        assertThat(r.reason()).isEqualTo("closed");
        assertThat(r.bytesIn()).isEqualTo(response.length());
        assertThat(r.bytesOut()).isPositive();
        NetworkReport report = ch.finish();
        assertThat(report.connections()).containsExactly(r);
        assertThat(report.policy()).containsExactly("fixture.test:" + httpPort);
        assertThat(report.bytesIn()).isEqualTo(r.bytesIn());
        assertThat(report.bytesOut()).isEqualTo(r.bytesOut());
        assertThat(report.counts()).containsExactly(Map.entry("allowed/closed", 1));
    }

    @Test
    void aRequestBodySentWithTheHeadGoesOnToo() throws Exception {
        EgressChannel ch = open(settings());
        SocketChannel c = client(ch);
        send(c, "POST http://fixture.test:" + httpPort + "/post HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello");
        assertThat(readTextToEnd(c)).startsWith("HTTP/1.1 200");
        assertThat(seen.get("/post").method()).isEqualTo("POST");
        assertThat(seen.get("/post").headers().get("Content-length")).containsExactly("5");
    }

    /** What a raw upstream reads until the text it has read ends with {@code end}. */
    String readUntil(Socket up, String end) throws Exception {
        return within(() -> {
            StringBuilder got = new StringBuilder();
            InputStream in = up.getInputStream();
            while (!got.toString().endsWith(end)) {
                int c = in.read();
                if (c < 0) break;
                got.append((char) c);
            }
            return got.toString();
        });
    }

    EgressSettings twoHostsOn(int port) {
        return settings("EGRESS_ALLOW", "fixture.test:" + port + ",evil.test:" + port,
                "EGRESS_RESOLVE", "fixture.test=127.0.0.1,evil.test=127.0.0.1");
    }

    @Test
    void aSecondRequestOnAKeptAliveConnectionIsNeverSentAndIsRecorded() throws Exception {
        ServerSocket upstream = rawUpstream();
        int port = upstream.getLocalPort();
        EgressChannel ch = open(twoHostsOn(port));
        SocketChannel c = client(ch);
        send(c, "GET http://fixture.test:" + port + "/first HTTP/1.1\r\nHost: fixture.test\r\nConnection: keep-alive\r\n\r\n");
        try (Socket up = within(upstream::accept)) {
            assertThat(readUntil(up, "\r\n\r\n")).startsWith("GET /first HTTP/1.1\r\nHost: fixture.test:" + port + "\r\n")
                    .contains("Connection: close\r\n").doesNotContain("keep-alive");
            // an upstream that keeps its connection open all the same
            up.getOutputStream().write(("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: keep-alive\r\n"
                    + "Keep-Alive: timeout=60\r\n\r\nfirst").getBytes(StandardCharsets.US_ASCII));
            String answer = readAnswer(c);
            assertThat(answer).as("the client is told not to reuse the connection").startsWith("HTTP/1.1 200 OK\r\n")
                    .contains("\r\nConnection: close\r\n").doesNotContainIgnoringCase("keep-alive").endsWith("first");
            // a client that reuses it anyway, for another host
            send(c, "GET http://evil.test:" + port + "/second HTTP/1.1\r\nHost: evil.test\r\n\r\n");
            ConnectionRecord second = awaitRecord(ch, reason("second_request"));
            assertThat(second.decision()).isEqualTo(ConnectionRecord.REFUSED);
            assertThat(second.host()).isEqualTo("evil.test");
            assertThat(second.port()).isEqualTo(port);
            assertThat(second.message()).contains("GET http://evil.test:" + port + "/second").contains("one request");
            // the upstream ends its response; it never got the second request, and the client sees the end
            up.shutdownOutput();
            assertThat(readToEnd(c)).isEmpty();
            assertThat(within(() -> up.getInputStream().readAllBytes())).isEmpty();
        }
        ConnectionRecord first = awaitRecord(ch, reason("closed"));
        assertThat(first.host()).isEqualTo("fixture.test");
        assertThat(first.decision()).isEqualTo(ConnectionRecord.ALLOWED);
        assertThat(peek(ch).counts()).containsOnly(Map.entry("allowed/closed", 1), Map.entry("refused/second_request", 1));
    }

    @Test
    void aPipelinedRequestAfterAChunkedBodyIsNeverSentAndTheBodyGoesOnWhole() throws Exception {
        ServerSocket upstream = rawUpstream();
        int port = upstream.getLocalPort();
        EgressChannel ch = open(twoHostsOn(port));
        SocketChannel c = client(ch);
        String body = "5\r\nhello\r\n6;x=y\r\n world\r\n0\r\nX-Trailer: t\r\n\r\n";
        send(c, "POST http://fixture.test:" + port + "/upload HTTP/1.1\r\nHost: fixture.test\r\nTransfer-Encoding: chunked\r\n\r\n"
                + body + "GET http://evil.test:" + port + "/pipelined HTTP/1.1\r\nHost: evil.test\r\n\r\n");
        try (Socket up = within(upstream::accept)) {
            String got = readUntil(up, body);
            assertThat(got).startsWith("POST /upload HTTP/1.1\r\nHost: fixture.test:" + port + "\r\n")
                    .contains("Transfer-Encoding: chunked\r\n").endsWith("\r\n\r\n" + body);
            up.getOutputStream().write("HTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\nok".getBytes(StandardCharsets.US_ASCII));
            up.shutdownOutput();
            assertThat(readTextToEnd(c)).startsWith("HTTP/1.1 201 Created\r\n").contains("Connection: close").endsWith("ok");
            assertThat(within(() -> up.getInputStream().readAllBytes())).as("nothing after the body").isEmpty();
        }
        ConnectionRecord second = awaitRecord(ch, reason("second_request"));
        assertThat(second.host()).isEqualTo("evil.test");
        assertThat(second.message()).contains("GET http://evil.test:" + port + "/pipelined");
        assertThat(awaitRecord(ch, reason("closed")).host()).isEqualTo("fixture.test");
    }

    @Test
    void aContentLengthBodyGoesOnToItsLengthAndNotAByteMore() throws Exception {
        ServerSocket upstream = rawUpstream();
        int port = upstream.getLocalPort();
        EgressChannel ch = open(twoHostsOn(port));
        SocketChannel c = client(ch);
        send(c, "POST http://fixture.test:" + port + "/form HTTP/1.1\r\nContent-Length: 11\r\n\r\nhello");
        try (Socket up = within(upstream::accept)) {
            assertThat(readUntil(up, "hello")).startsWith("POST /form HTTP/1.1\r\n");
            send(c, " world" + "GET http://evil.test:" + port + "/smuggled HTTP/1.1\r\n\r\n");
            assertThat(readUntil(up, " world")).isEqualTo(" world");
            awaitRecord(ch, reason("second_request"));
            up.getOutputStream().write("HTTP/1.0 200 OK\r\n\r\ndone".getBytes(StandardCharsets.US_ASCII));
            up.shutdownOutput();
            assertThat(readTextToEnd(c)).startsWith("HTTP/1.0 200 OK\r\nConnection: close\r\n\r\n").endsWith("done");
            assertThat(within(() -> up.getInputStream().readAllBytes())).isEmpty();
        }
    }

    @Test
    void aBodyTheProgramStopsSendingEndsAtTheUpstreamToo() throws Exception {
        ServerSocket upstream = rawUpstream();
        int port = upstream.getLocalPort();
        EgressChannel ch = open(twoHostsOn(port));
        SocketChannel c = client(ch);
        send(c, "POST http://fixture.test:" + port + "/form HTTP/1.1\r\nContent-Length: 10\r\n\r\nabc");
        try (Socket up = within(upstream::accept)) {
            assertThat(readUntil(up, "abc")).startsWith("POST /form HTTP/1.1\r\n");
            c.shutdownOutput();
            assertThat(within(up.getInputStream()::readAllBytes)).as("the upstream sees the body end").isEmpty();
        }
        assertThat(readToEnd(c)).isEmpty();
        assertThat(awaitRecord(ch, reason("closed")).decision()).isEqualTo(ConnectionRecord.ALLOWED);
    }

    @Test
    void contentLengthWithTransferEncodingIsRefusedBeforeAnythingIsSent() throws Exception {
        EgressChannel ch = open(settings());
        String url = "http://fixture.test:" + httpPort;
        String[] smuggling = {
                "POST " + url + "/clte HTTP/1.1\r\nContent-Length: 6\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nG",
                "POST " + url + "/tecl HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n1\r\nG\r\n0\r\n\r\n",
                "POST " + url + "/te HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
                "POST " + url + "/cl HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nxy",
                // a framing field named as a hop-by-hop option: dropped from the head sent on, its body would have
                // reached the upstream as a request of its own, for another host
                "POST " + url + "/opt HTTP/1.1\r\nConnection: content-length\r\nContent-Length: 40\r\n\r\n"
                        + "GET / HTTP/1.1\r\nHost: evil.test\r\n\r\n",
                "POST " + url + "/opt2 HTTP/1.1\r\nConnection: keep-alive, Transfer-Encoding\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
                "GET " + url + "/opt3 HTTP/1.1\r\nConnection: host\r\n\r\n",
        };
        for (String request : smuggling) {
            SocketChannel c = client(ch);
            send(c, request);
            assertThat(readTextToEnd(c)).as(request).startsWith("HTTP/1.1 400 Bad Request")
                    .contains("X-Codeexec-Egress: refused; reason=bad_request");
        }
        Poll.until("every refusal recorded", WAIT, () -> peek(ch).counts().getOrDefault("refused/bad_request", 0) == smuggling.length);
        assertThat(seen).isEmpty();
    }

    /** A local endpoint that echoes what it got, holds a request whose path is /hold until closed, and counts closes. */
    static final class EchoEndpoint implements LocalEndpoint {
        final CountDownLatch closed = new CountDownLatch(1);
        final CountDownLatch holding = new CountDownLatch(1);

        @Override
        public int maxRequestBytes() {
            return 1000;
        }

        @Override
        public Response handle(String method, String path, byte[] body) {
            if (path.equals("/hold")) {
                holding.countDown();
                try {
                    closed.await();
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
                return new Response(410, "text/plain", "ended".getBytes(StandardCharsets.UTF_8));
            }
            return new Response(200, "text/plain", (method + " " + path + " " + new String(body, StandardCharsets.UTF_8))
                    .getBytes(StandardCharsets.UTF_8));
        }

        @Override
        public void close() {
            closed.countDown();
        }
    }

    /** Reads one answer whose head has a Content-Length, leaving the connection open. */
    String readAnswer(SocketChannel c) throws Exception {
        return within(() -> {
            StringBuilder sb = new StringBuilder();
            ByteBuffer b = ByteBuffer.allocate(1);
            int length = -1, headEnd = -1;
            while (headEnd < 0 || sb.length() < headEnd + length) {
                b.clear();
                if (c.read(b) < 0) break;
                sb.append((char) b.get(0));
                if (headEnd < 0 && sb.toString().endsWith("\r\n\r\n")) {
                    headEnd = sb.length();
                    java.util.regex.Matcher m = java.util.regex.Pattern.compile("Content-Length: (\\d+)").matcher(sb);
                    length = m.find() ? Integer.parseInt(m.group(1)) : 0;
                }
            }
            return sb.toString();
        });
    }

    @Test
    void originFormRequestsReachTheRunsLocalEndpointAndLeaveNoNetworkRecord() throws Exception {
        EgressChannel ch = open(settings());
        EchoEndpoint local = new EchoEndpoint();
        ch.arm(EgressPolicy.OFF, "tenant", "run-2", local);
        SocketChannel c = client(ch);
        // the body arrives after the head, in two writes
        send(c, "POST /code-tools/v1/call HTTP/1.1\r\nHost: 127.0.0.1:" + EgressChannel.PROXY_PORT + "\r\nConnection: close\r\nContent-Length: 11\r\n\r\nhello");
        send(c, " world");
        assertThat(readTextToEnd(c)).startsWith("HTTP/1.1 200").contains("Content-Length: 36", "Connection: close")
                .endsWith("POST /code-tools/v1/call hello world");
        // over the endpoint's limit: the body is read and dropped, then the endpoint's own answer
        c = client(ch);
        send(c, "POST /x HTTP/1.1\r\nContent-Length: 5000\r\n\r\n");
        send(c, "y".repeat(5000));
        assertThat(readTextToEnd(c)).startsWith("HTTP/1.1 413").contains("\"reason\": \"bad_request\"");
        // kept alive: two requests on one connection; the second goes to the endpoint armed meanwhile, and finish()
        // leaves the idle connection open for it
        SocketChannel kept = client(ch);
        send(kept, "POST /a HTTP/1.1\r\nContent-Length: 1\r\n\r\n1");
        assertThat(readAnswer(kept)).startsWith("HTTP/1.1 200").contains("Connection: keep-alive").endsWith("POST /a 1");
        ch.finish();
        EchoEndpoint second = new EchoEndpoint();
        ch.arm(EgressPolicy.OFF, "tenant", "run-2b", second);
        send(kept, "POST /b HTTP/1.1\r\nContent-Length: 2\r\n\r\n22");
        assertThat(readAnswer(kept)).startsWith("HTTP/1.1 200").endsWith("POST /b 22");
        send(kept, "GET http://fixture.test/ HTTP/1.1\r\n\r\n"); // not for the endpoint: answered and closed
        assertThat(readTextToEnd(kept)).startsWith("HTTP/1.1 400");
        local = second;
        // a request in flight when the run ends: the endpoint is closed first, so it answers, and the record stays empty
        SocketChannel held = client(ch);
        send(held, "GET /hold HTTP/1.1\r\n\r\n");
        assertThat(local.holding.await(WAIT.toSeconds(), TimeUnit.SECONDS)).isTrue();
        NetworkReport report = ch.finish();
        assertThat(local.closed.getCount()).isZero();
        assertThat(report.connections()).isEmpty();
        assertThat(report.counts()).isEmpty();
        // without an endpoint, origin form is not a proxy request
        ch.arm(EgressPolicy.OFF, "tenant", "run-3");
        c = client(ch);
        send(c, "GET /code-tools/v1/servers HTTP/1.1\r\n\r\n");
        assertThat(readTextToEnd(c)).startsWith("HTTP/1.1 400").contains("absolute http:// URL");
    }

    @Test
    void aChunkedBodyReachesTheLocalEndpointWholeWithinItsCapAndTheConnectionGoesOn() throws Exception {
        EgressChannel ch = open(settings());
        ch.arm(EgressPolicy.OFF, "tenant", "run-chunked", new EchoEndpoint());
        // in pieces, a chunk extension and a trailer; the next request pipelined right behind it
        SocketChannel c = client(ch);
        send(c, "POST /up HTTP/1.1\r\nHost: 127.0.0.1:3128\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel");
        send(c, "lo\r\n6;x=1\r\n world\r\n");
        send(c, "0\r\nX-Trailer: t\r\n\r\nPOST /after HTTP/1.1\r\nContent-Length: 2\r\n\r\nok");
        assertThat(readAnswer(c)).startsWith("HTTP/1.1 200").contains("Connection: keep-alive").endsWith("POST /up hello world");
        assertThat(readAnswer(c)).startsWith("HTTP/1.1 200").endsWith("POST /after ok");
        // Expect: 100-continue is answered before the body is read
        send(c, "PUT /e HTTP/1.1\r\nExpect: 100-continue\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n");
        String cont = within(() -> {
            StringBuilder sb = new StringBuilder();
            ByteBuffer b = ByteBuffer.allocate(1);
            while (!sb.toString().endsWith("\r\n\r\n") && c.read(b.clear()) > 0) sb.append((char) b.get(0));
            return sb.toString();
        });
        assertThat(cont).isEqualTo("HTTP/1.1 100 Continue\r\n\r\n");
        send(c, "3\r\nabc\r\n0\r\n\r\n");
        assertThat(readTextToEnd(c)).startsWith("HTTP/1.1 200").contains("Connection: close").endsWith("PUT /e abc");
        // past the endpoint's 1000 bytes: read to its end and dropped, then the endpoint's own answer
        SocketChannel big = client(ch);
        send(big, "POST /big HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n");
        for (int i = 0; i < 3; i++) send(big, "190\r\n" + "y".repeat(400) + "\r\n");
        send(big, "0\r\n\r\n");
        assertThat(readTextToEnd(big)).startsWith("HTTP/1.1 413").contains("longer than 1000 bytes");
        // framing the proxy cannot read: 400, and the endpoint never sees it
        SocketChannel bad = client(ch);
        send(bad, "POST /bad HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello0\r\n\r\n");
        assertThat(readTextToEnd(bad)).startsWith("HTTP/1.1 400").contains("chunked request body is malformed");
        SocketChannel both = client(ch);
        send(both, "POST /both HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n");
        assertThat(readTextToEnd(both)).startsWith("HTTP/1.1 400").contains("both Content-Length and Transfer-Encoding");
        assertThat(ch.finish().connections()).isEmpty();
    }

    @Test
    void aLocalEndpointGetsTheRequestsHeaderFieldsAndItsAnswersFieldsReachTheClient() throws Exception {
        EgressChannel ch = open(settings());
        LocalEndpoint fields = new LocalEndpoint() {
            @Override
            public int maxRequestBytes() {
                return 1000;
            }

            @Override
            public Response handle(String method, String path, byte[] body) {
                throw new AssertionError("the channel hands the endpoint the whole request");
            }

            @Override
            public void close() {
            }

            @Override
            public Response handle(Request r) {
                String seen = r.method() + " " + r.target() + " " + r.header("x-trace").orElse("-") + " "
                        + r.headers().size() + " " + new String(r.body(), StandardCharsets.UTF_8);
                return new Response(302, "text/plain", seen.getBytes(StandardCharsets.UTF_8),
                        List.of(new Header("Location", "http://127.0.0.1:3128/apis/x/next"), new Header("X-Answer", "a")));
            }
        };
        ch.arm(EgressPolicy.OFF, "tenant", "run-3", fields);
        SocketChannel c = client(ch);
        send(c, "POST /apis/x/y?q=1 HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Trace: t-1\r\nConnection: close\r\nContent-Length: 2\r\n\r\nhi");
        assertThat(readTextToEnd(c)).startsWith("HTTP/1.1 302 ")
                .contains("\r\nContent-Type: text/plain\r\n", "\r\nLocation: http://127.0.0.1:3128/apis/x/next\r\n",
                        "\r\nX-Answer: a\r\n", "\r\nContent-Length: 27\r\n")
                .endsWith("\r\n\r\nPOST /apis/x/y?q=1 t-1 4 hi");
        // HEAD: the head says how long the body is, and no body follows
        c = client(ch);
        send(c, "HEAD /apis/x/y HTTP/1.1\r\nConnection: close\r\n\r\n");
        assertThat(readTextToEnd(c)).startsWith("HTTP/1.1 302 ").endsWith("Connection: close\r\n\r\n");
        ch.finish();
    }

    @Test
    void malformedRequestsAreBadRequests() throws Exception {
        EgressChannel ch = open(settings());
        String[][] cases = {
                {"GET /relative HTTP/1.1\r\n\r\n", "400", "absolute http:// URL"},
                {"GET https://fixture.test/ HTTP/1.1\r\n\r\n", "400", "go through CONNECT"},
                {"hello there\r\n\r\n", "400", "not an HTTP proxy request"},
                {"CONNECT fixture.test HTTP/1.1\r\n\r\n", "400", "CONNECT needs host:port"},
                {"GET http://user@fixture.test/ HTTP/1.1\r\n\r\n", "400", "host is not valid"},
        };
        for (String[] k : cases) {
            SocketChannel c = client(ch);
            send(c, k[0]);
            String response = readTextToEnd(c);
            assertThat(response).as(k[0]).startsWith("HTTP/1.1 " + k[1]).contains("(bad_request)").contains(k[2])
                    .contains("X-Codeexec-Egress: refused; reason=bad_request");
        }
        SocketChannel silent = client(ch);
        silent.close();
        awaitRecord(ch, r -> r.message().contains("closed before a request arrived"));
        assertThat(peek(ch).counts()).containsEntry("refused/bad_request", cases.length + 1);
        assertThat(seen).isEmpty();
    }

    @Test
    void anOverlongRequestHeadIs431RequestHeaderFieldsTooLarge() throws Exception {
        EgressChannel ch = open(settings());
        SocketChannel c = client(ch);
        send(c, "GET http://fixture.test:" + httpPort + "/x HTTP/1.1\r\nX-Big: " + "a".repeat(20_000) + "\r\n\r\n");
        assertThat(readTextToEnd(c)).startsWith("HTTP/1.1 431 Request Header Fields Too Large\r\n")
                .contains("X-Codeexec-Egress: refused; reason=bad_request").contains("longer than");
        assertThat(seen).isEmpty();
    }

    @Test
    void headerLinesAnUpstreamCouldReadAsASecondHostAreRefusedAndNothingIsSent() throws Exception {
        EgressChannel ch = open(settings("EGRESS_ALLOW", "fixture.test:" + httpPort + ",evil.test:" + httpPort,
                "EGRESS_RESOLVE", "fixture.test=127.0.0.1,evil.test=127.0.0.1"));
        String url = "http://fixture.test:" + httpPort;
        String[][] cases = {
                {"GET " + url + "/a HTTP/1.1\r\nHost : evil.test\r\n\r\n", "whitespace between the header name 'Host'"},
                {"GET " + url + "/b HTTP/1.1\r\nHost\t: evil.test\r\n\r\n", "whitespace between the header name 'Host'"},
                {"GET " + url + "/c HTTP/1.1\r\n evil.test\r\nX-A: b\r\n\r\n", "obs-fold"},
                {"GET " + url + "/d HTTP/1.1\r\nX-A: b\r\n\tHost: evil.test\r\n\r\n", "obs-fold"},
                {"GET " + url + "/e HTTP/1.1\r\nHost: fixture.test\r\nHost: evil.test\r\n\r\n", "more than one Host"},
                {"GET " + url + "/f HTTP/1.1\r\nX-A: b\nHost: evil.test\r\n\r\n", "LF without CR"},
                {"GET " + url + "/g HTTP/1.1\r\nX-A: b\rHost: evil.test\r\n\r\n", "CR without LF"},
                {"GET " + url + "/h HTTP/1.1\r\nX-A: b\0\r\n\r\n", "NUL"},
                {"GET " + url + "/i HTTP/1.1\r\nX(A): b\r\n\r\n", "not a valid header name"},
                {"GET " + url + "/j HTTP/1.1\r\nX-A: b\u0008c\r\n\r\n", "control character"},
        };
        for (String[] k : cases) {
            SocketChannel c = client(ch);
            send(c, k[0]);
            assertThat(readTextToEnd(c)).as(k[0]).startsWith("HTTP/1.1 400 Bad Request")
                    .contains("X-Codeexec-Egress: refused; reason=bad_request").contains(k[1]);
        }
        // The refusals are recorded; the upstream saw none of these requests.
        Poll.until("every refusal recorded", WAIT, () -> peek(ch).counts().getOrDefault("refused/bad_request", 0) == cases.length);
        assertThat(seen).isEmpty();
    }

    // ---- refusals ----

    @Test
    void connectRefusalsAreForbiddenWithTheReasonInTheBody() throws Exception {
        EgressChannel ch = open(settings("EGRESS_ALLOW", "fixture.test:" + httpPort + ",inside.test:" + httpPort,
                "EGRESS_RESOLVE", "fixture.test=127.0.0.1,inside.test=127.0.0.2"));
        String[][] cases = {
                {"other.test:443", "not_allowed"},
                {"fixture.test:443", "not_allowed"},
                {"127.0.0.1:" + httpPort, "ip_literal"},
                {"2130706433:" + httpPort, "ip_literal"},
                {"[::1]:" + httpPort, "ip_literal"},
                {"inside.test:" + httpPort, "loopback"},
        };
        for (String[] k : cases) {
            SocketChannel c = client(ch);
            send(c, "CONNECT " + k[0] + " HTTP/1.1\r\nHost: " + k[0] + "\r\n\r\n");
            String response = readTextToEnd(c);
            assertThat(response).as(k[0]).startsWith("HTTP/1.1 403 Forbidden")
                    .contains("X-Codeexec-Egress: refused; reason=" + k[1])
                    .contains("code-exec-mcp egress proxy: refused (" + k[1] + "): ");
        }
        ConnectionRecord loop = awaitRecord(ch, reason("loopback"));
        assertThat(loop.host()).isEqualTo("inside.test");
        assertThat(loop.decision()).isEqualTo(ConnectionRecord.REFUSED);
        assertThat(loop.message()).contains("127.0.0.2");
        awaitRecord(ch, r -> r.host().equals("[::1]"));
        NetworkReport report = ch.finish();
        assertThat(report.connections()).hasSize(cases.length).allSatisfy(r -> {
            assertThat(r.decision()).isEqualTo(ConnectionRecord.REFUSED);
            assertThat(r.bytesIn()).isZero();
            assertThat(r.bytesOut()).isZero();
        });
        assertThat(report.counts()).containsEntry("refused/not_allowed", 2).containsEntry("refused/ip_literal", 3)
                .containsEntry("refused/loopback", 1);
        assertThat(seen).isEmpty();
    }

    @Test
    void aReportListsAHundredConnectionsAndCountsTheRest() throws Exception {
        EgressChannel ch = open(settings());
        int n = NetworkReport.MAX_RECORDS + 3;
        for (int i = 0; i < n; i++) {
            SocketChannel c = client(ch);
            send(c, "CONNECT other.test:443 HTTP/1.1\r\n\r\n");
            assertThat(readTextToEnd(c)).startsWith("HTTP/1.1 403");
            c.close();
        }
        Poll.until("every refusal is in the run's report",
                () -> peek(ch).counts().getOrDefault("refused/not_allowed", 0) >= n);
        NetworkReport report = ch.finish();
        assertThat(report.connections()).hasSize(NetworkReport.MAX_RECORDS);
        assertThat(report.leftOut()).isEqualTo(3);
        assertThat(report.counts()).containsExactly(Map.entry("refused/not_allowed", n));
    }

    @Test
    void plainHttpIsRefusedTheSameWay() throws Exception {
        EgressChannel ch = open(settings());
        SocketChannel c = client(ch);
        send(c, "GET http://other.test/ HTTP/1.1\r\n\r\n");
        assertThat(readTextToEnd(c)).startsWith("HTTP/1.1 403").contains("(not_allowed)").contains("other.test:80");
        SocketChannel lit = client(ch);
        send(lit, "GET http://127.0.0.1:" + httpPort + "/ HTTP/1.1\r\n\r\n");
        assertThat(readTextToEnd(lit)).startsWith("HTTP/1.1 403").contains("(ip_literal)");
        assertThat(seen).isEmpty();
    }

    @Test
    void aPlaceholderInPlainHttpIsRefusedAlsoInsideBasicCredentialsAndNothingIsSent() throws Exception {
        EgressChannel ch = open(settings());
        RunSecrets secrets = EgressSecrets.parse("{\"PYPI_TOKEN\": {\"value\": \"pypi-real\", \"hosts\": [\"fixture.test:"
                + httpPort + "\"]}}", name -> null).forRun(ch.policy(), "tenant");
        assertThat(secrets.environment()).containsKey("PYPI_TOKEN");
        ch.useSecrets(secrets);
        String placeholder = secrets.environment().get("PYPI_TOKEN");
        String credentials = java.util.Base64.getEncoder().encodeToString(("__token__:" + placeholder)
                .getBytes(StandardCharsets.US_ASCII));
        SocketChannel c = client(ch);
        send(c, "GET http://fixture.test:" + httpPort + "/simple/ HTTP/1.1\r\nAuthorization: Basic " + credentials + "\r\n\r\n");
        assertThat(readTextToEnd(c)).startsWith("HTTP/1.1 403").contains("(secret_not_allowed)")
                .contains("the placeholder of PYPI_TOKEN").contains("not in a plain http:// request")
                .doesNotContain(placeholder).doesNotContain("pypi-real");
        // credentials without a placeholder go on as before
        SocketChannel plain = client(ch);
        send(plain, "GET http://fixture.test:" + httpPort + "/ok HTTP/1.1\r\nAuthorization: Basic dXNlcjpwYXNz\r\n\r\n");
        assertThat(readTextToEnd(plain)).startsWith("HTTP/1.1 200");
        assertThat(seen).containsOnlyKeys("/ok");
        assertThat(seen.get("/ok").headers().get("Authorization")).containsExactly("Basic dXNlcjpwYXNz");
        assertThat(ch.finish().counts()).containsEntry("refused/secret_not_allowed", 1);
    }

    @Test
    void loopbackIsRefusedUnlessTheOperatorOpensIt() throws Exception {
        ServerSocket upstream = rawUpstream();
        upstream.setSoTimeout(1000);
        EgressChannel ch = open(settings("EGRESS_ALLOW", "fixture.test:" + upstream.getLocalPort(), "EGRESS_ALLOW_CIDRS", ""));
        SocketChannel c = client(ch);
        send(c, "CONNECT fixture.test:" + upstream.getLocalPort() + " HTTP/1.1\r\n\r\n");
        assertThat(readTextToEnd(c)).startsWith("HTTP/1.1 403").contains("(loopback)").contains("127.0.0.1");
        assertThat(awaitRecord(ch, reason("loopback")).host()).isEqualTo("fixture.test");
        // Nothing was sent anywhere: the upstream was never connected to.
        assertThatThrownBy(upstream::accept).isInstanceOf(SocketTimeoutException.class);
    }

    @Test
    void anAllowedHostThatCannotBeReachedOrResolvedFails() throws Exception {
        int closedPort;
        try (ServerSocket s = new ServerSocket(0, 1, LOOPBACK)) {
            closedPort = s.getLocalPort();
        }
        EgressSettings s = settings("EGRESS_ALLOW", "fixture.test:" + closedPort + ",gone.test:443");
        EgressDecision.Resolver pinsOrNothing = name -> {
            if (name.equals("fixture.test")) return List.of(LOOPBACK);
            throw new UnknownHostException(name);
        };
        EgressChannel ch = open(s, pinsOrNothing);
        SocketChannel c = client(ch);
        send(c, "CONNECT fixture.test:" + closedPort + " HTTP/1.1\r\n\r\n");
        assertThat(readTextToEnd(c)).startsWith("HTTP/1.1 502 Bad Gateway").contains("failed (connect_failed)");
        SocketChannel g = client(ch);
        send(g, "CONNECT gone.test:443 HTTP/1.1\r\n\r\n");
        assertThat(readTextToEnd(g)).startsWith("HTTP/1.1 502").contains("failed (resolve_failed)");
        assertThat(awaitRecord(ch, reason("connect_failed")).decision()).isEqualTo(ConnectionRecord.FAILED);
        assertThat(awaitRecord(ch, reason("resolve_failed")).decision()).isEqualTo(ConnectionRecord.FAILED);
    }

    // ---- CONNECT tunnels and SNI ----

    @Test
    void aTunnelCarriesTlsNamingTheConnectHostBothWays() throws Exception {
        ServerSocket upstream = rawUpstream();
        int port = upstream.getLocalPort();
        EgressChannel ch = open(settings("EGRESS_ALLOW", "fixture.test:" + port));
        SocketChannel c = tunnel(ch, port);
        byte[] hello = TlsHellos.jdk("fixture.test");
        send(c, hello);
        // records as the two sides of a handshake would frame them (the proxy reads only the framing)
        byte[] serverHello = TlsHellos.tlsRecord(22, "server hello");
        byte[] appData = TlsHellos.tlsRecord(23, "encrypted");
        try (Socket up = within(upstream::accept)) {
            InputStream in = up.getInputStream();
            assertThat(within(() -> in.readNBytes(hello.length))).isEqualTo(hello);
            up.getOutputStream().write(serverHello);
            assertThat(readExactly(c, serverHello.length)).isEqualTo(serverHello);
            send(c, appData);
            assertThat(within(() -> in.readNBytes(appData.length))).isEqualTo(appData);
        }
        assertThat(readToEnd(c)).isEmpty(); // the upstream closed: so does the client's side
        c.close();
        ConnectionRecord r = awaitRecord(ch, rec -> true);
        assertThat(r.decision()).isEqualTo(ConnectionRecord.ALLOWED);
        assertThat(r.reason()).isEqualTo("closed");
        assertThat(r.bytesOut()).isEqualTo(hello.length + appData.length);
        assertThat(r.bytesIn()).isEqualTo(serverHello.length);
    }

    /**
     * The hellos a program could fake to open a tunnel to a plain server: whole, spread over two records and three
     * writes, and naming the host in capitals with a trailing dot; each followed at once by a plain request.
     */
    List<byte[][]> fakeHellosEachWithAPlainRequest() throws Exception {
        byte[] get = "GET /smuggled HTTP/1.1\r\nHost: evil.test\r\n\r\n".getBytes(StandardCharsets.US_ASCII);
        byte[] whole = TlsHellos.jdk("fixture.test");
        byte[] split = TlsHellos.splitIntoTwoRecords(whole, 40);
        byte[] shouted = TlsHellos.handBuilt(TlsHellos.sniExtension("FIXTURE.TEST.", -1));
        return List.of(
                new byte[][] {TlsHellos.concat(whole, get)},
                new byte[][] {Arrays.copyOf(split, 30), Arrays.copyOfRange(split, 30, 60),
                        TlsHellos.concat(Arrays.copyOfRange(split, 60, split.length), get)},
                new byte[][] {TlsHellos.concat(shouted, get)});
    }

    @Test
    void plainBytesAfterAFakeHelloNeverReachAPlainServer() throws Exception {
        ServerSocket upstream = rawUpstream();
        int port = upstream.getLocalPort();
        EgressChannel ch = open(settings("EGRESS_ALLOW", "fixture.test:" + port));
        List<byte[][]> attempts = fakeHellosEachWithAPlainRequest();
        for (byte[][] writes : attempts) {
            byte[] all = TlsHellos.concat(writes);
            int helloLength = all.length - "GET /smuggled HTTP/1.1\r\nHost: evil.test\r\n\r\n".length();
            SocketChannel c = tunnel(ch, port);
            for (byte[] w : writes) send(c, w);
            try (Socket up = within(upstream::accept)) {
                InputStream in = up.getInputStream();
                // the hello was checked (the host in capitals with a trailing dot is the host) and went on alone
                assertThat(within(() -> in.readNBytes(helloLength))).isEqualTo(Arrays.copyOf(all, helloLength));
                // a plain server answers the hello in plain text: the tunnel closes, and the GET never came
                up.getOutputStream().write("HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n".getBytes(StandardCharsets.US_ASCII));
                assertThat(within(in::readAllBytes)).as("bytes past the hello").isEmpty();
            }
            assertThat(readToEnd(c)).as("the plain answer is not passed on either").isEmpty();
        }
        Poll.until("every tunnel recorded", WAIT, () -> peek(ch).counts().getOrDefault("refused/not_tls", 0) == attempts.size());
        assertThat(peek(ch).connections()).allSatisfy(r -> {
            assertThat(r.host()).isEqualTo("fixture.test");
            assertThat(r.message()).contains("did not answer with TLS");
        });
    }

    @Test
    void plainBytesAfterTheServersTlsAnswerCloseTheTunnel() throws Exception {
        ServerSocket upstream = rawUpstream();
        int port = upstream.getLocalPort();
        EgressChannel ch = open(settings("EGRESS_ALLOW", "fixture.test:" + port));
        SocketChannel c = tunnel(ch, port);
        byte[] hello = TlsHellos.jdk("fixture.test");
        send(c, hello);
        try (Socket up = within(upstream::accept)) {
            InputStream in = up.getInputStream();
            assertThat(within(() -> in.readNBytes(hello.length))).isEqualTo(hello);
            byte[] serverHello = TlsHellos.tlsRecord(22, "server hello");
            up.getOutputStream().write(serverHello);
            assertThat(readExactly(c, serverHello.length)).isEqualTo(serverHello);
            send(c, "GET /smuggled HTTP/1.1\r\nHost: evil.test\r\n\r\n");
            assertThat(within(in::readAllBytes)).as("bytes past the hello").isEmpty();
        }
        assertThat(readToEnd(c)).isEmpty();
        ConnectionRecord r = awaitRecord(ch, reason("not_tls"));
        assertThat(r.decision()).isEqualTo(ConnectionRecord.REFUSED);
        assertThat(r.message()).contains("not TLS records");
        assertThat(r.bytesOut()).isEqualTo(hello.length);
    }

    @Test
    void recordsThatAreNotTlsFromEitherSideCloseTheTunnel() throws Exception {
        ServerSocket upstream = rawUpstream();
        int port = upstream.getLocalPort();
        EgressChannel ch = open(settings("EGRESS_ALLOW", "fixture.test:" + port));
        byte[] hello = TlsHellos.jdk("fixture.test");
        // from the server: application data before any handshake, a version other than 3.x, an over-long record
        byte[][] serverFirsts = {TlsHellos.tlsRecord(23, "data"), {22, 4, 0, 0, 1, 0}, {22, 3, 3, 0x48, 1}};
        // from the program, after the server's answer: an unknown type, an empty handshake record
        byte[][] clientNexts = {{24, 3, 3, 0, 1, 0}, {22, 3, 3, 0, 0}};
        for (byte[] first : serverFirsts) {
            SocketChannel c = tunnel(ch, port);
            send(c, hello);
            try (Socket up = within(upstream::accept)) {
                assertThat(within(() -> up.getInputStream().readNBytes(hello.length))).hasSize(hello.length);
                up.getOutputStream().write(first);
                assertThat(within(up.getInputStream()::readAllBytes)).isEmpty();
            }
            assertThat(readToEnd(c)).isEmpty();
        }
        for (byte[] next : clientNexts) {
            SocketChannel c = tunnel(ch, port);
            send(c, hello);
            try (Socket up = within(upstream::accept)) {
                assertThat(within(() -> up.getInputStream().readNBytes(hello.length))).hasSize(hello.length);
                up.getOutputStream().write(TlsHellos.tlsRecord(22, "server hello"));
                send(c, next);
                assertThat(within(up.getInputStream()::readAllBytes)).isEmpty();
            }
        }
        Poll.until("every tunnel recorded", WAIT, () -> peek(ch).counts().getOrDefault("refused/not_tls", 0)
                == serverFirsts.length + clientNexts.length);
    }

    @Test
    void aHelloSentWithTheConnectHeadIsCheckedAndForwarded() throws Exception {
        ServerSocket upstream = rawUpstream();
        int port = upstream.getLocalPort();
        EgressChannel ch = open(settings("EGRESS_ALLOW", "fixture.test:" + port));
        SocketChannel c = client(ch);
        byte[] hello = TlsHellos.splitIntoTwoRecords(TlsHellos.jdk("Fixture.Test"), 50);
        send(c, TlsHellos.concat(("CONNECT fixture.test:" + port + " HTTP/1.1\r\n\r\n").getBytes(StandardCharsets.US_ASCII),
                Arrays.copyOf(hello, 20)));
        assertThat(readHead(c)).startsWith("HTTP/1.1 200");
        send(c, Arrays.copyOfRange(hello, 20, hello.length));
        try (Socket up = within(upstream::accept)) {
            assertThat(within(() -> up.getInputStream().readNBytes(hello.length))).isEqualTo(hello);
        }
    }

    @Test
    void aHelloNamingAnotherHostClosesTheTunnel() throws Exception {
        ServerSocket upstream = rawUpstream();
        int port = upstream.getLocalPort();
        EgressChannel ch = open(settings("EGRESS_ALLOW", "fixture.test:" + port + ",other.test:" + port));
        SocketChannel c = tunnel(ch, port);
        send(c, TlsHellos.jdk("other.test"));
        assertThat(readToEnd(c)).isEmpty();
        ConnectionRecord r = awaitRecord(ch, reason("sni_mismatch"));
        assertThat(r.decision()).isEqualTo(ConnectionRecord.REFUSED);
        assertThat(r.host()).isEqualTo("fixture.test");
        assertThat(r.message()).contains("other.test").contains("fixture.test");
        // Not one byte of the hello reached the upstream.
        try (Socket up = within(upstream::accept)) {
            assertThat(within(() -> up.getInputStream().read())).isEqualTo(-1);
        }
    }

    @Test
    void aTunnelWithoutSniOrWithoutTlsIsClosed() throws Exception {
        ServerSocket upstream = rawUpstream();
        int port = upstream.getLocalPort();
        EgressChannel ch = open(settings("EGRESS_ALLOW", "fixture.test:" + port));
        SocketChannel noSni = tunnel(ch, port);
        send(noSni, TlsHellos.jdk(null));
        assertThat(readToEnd(noSni)).isEmpty();
        assertThat(awaitRecord(ch, reason("no_sni")).decision()).isEqualTo(ConnectionRecord.REFUSED);

        SocketChannel plain = tunnel(ch, port);
        send(plain, "GET / HTTP/1.1\r\nHost: fixture.test\r\n\r\n");
        assertThat(readToEnd(plain)).isEmpty();
        assertThat(awaitRecord(ch, reason("not_tls")).decision()).isEqualTo(ConnectionRecord.REFUSED);
        for (int i = 0; i < 2; i++) {
            try (Socket up = within(upstream::accept)) {
                assertThat(within(() -> up.getInputStream().read())).isEqualTo(-1);
            }
        }
    }

    // ---- bounds ----

    @Test
    void theConnectionCapAnswers429() throws Exception {
        EgressChannel ch = open(settings("EGRESS_MAX_CONNECTIONS", "2"));
        SocketChannel a = client(ch);
        SocketChannel b = client(ch);
        send(a, "GET http://fixture.test:" + httpPort + "/a HTTP/1.1\r\n"); // mid-request: the head is not complete
        send(b, "GET http://fixture.test:" + httpPort + "/b HTTP/1.1\r\n");
        SocketChannel third = client(ch);
        send(third, "GET http://fixture.test:" + httpPort + "/c HTTP/1.1\r\n\r\n");
        String response = readTextToEnd(third);
        assertThat(response).startsWith("HTTP/1.1 429 Too Many Requests").contains("(connection_limit)")
                .contains("EGRESS_MAX_CONNECTIONS");
        ConnectionRecord r = awaitRecord(ch, reason("connection_limit"));
        assertThat(r.decision()).isEqualTo(ConnectionRecord.REFUSED);
        assertThat(seen).doesNotContainKey("/c");

        // The two held ones still work when their heads complete, and then a new one fits again.
        send(a, "\r\n");
        assertThat(readTextToEnd(a)).startsWith("HTTP/1.1 200");
        a.close();
        awaitRecord(ch, rec -> rec.reason().equals("closed"));
        SocketChannel fourth = client(ch);
        send(fourth, "GET http://fixture.test:" + httpPort + "/d HTTP/1.1\r\n\r\n");
        assertThat(readTextToEnd(fourth)).startsWith("HTTP/1.1 200");
    }

    @Test
    void aConnectionOverTheCapThatSendsNoRequestIsStillAnswered429NotJustClosed() throws Exception {
        EgressChannel ch = open(settings("EGRESS_MAX_CONNECTIONS", "1"));
        SocketChannel held = client(ch);
        send(held, "GET http://fixture.test:" + httpPort + "/held HTTP/1.1\r\n");
        SocketChannel silent = client(ch); // a program whose request is slow to come (a loaded machine's relay)
        assertThat(readTextToEnd(silent)).startsWith("HTTP/1.1 429 Too Many Requests").contains("EGRESS_MAX_CONNECTIONS");
        assertThat(awaitRecord(ch, reason("connection_limit")).decision()).isEqualTo(ConnectionRecord.REFUSED);
    }

    @Test
    void aRefusalsPlaceIsFreeByTheTimeItsCloseIsSeen() throws Exception {
        // The sandbox's relay takes its next connection the moment one closes: were the place still counted then, a
        // flood through the relay would meet a bare close. Checked right at each close, many times over.
        EgressChannel ch = open(settings("EGRESS_MAX_CONNECTIONS", "1"));
        SocketChannel held = client(ch);
        send(held, "GET http://fixture.test:" + httpPort + "/held HTTP/1.1\r\n");
        for (int i = 0; i < 300; i++) {
            SocketChannel c = client(ch);
            send(c, "GET http://fixture.test:" + httpPort + "/x HTTP/1.1\r\n\r\n");
            assertThat(readTextToEnd(c)).startsWith("HTTP/1.1 429");
            assertThat(ch.refusingNow()).as("refusals still counted after close %d", i).isZero();
            c.close();
            toClose.remove(c);
        }
    }

    /** Descriptors this JVM has open: the test's own ends of its connections and the channels' ends. */
    static long openDescriptors() throws IOException {
        try (java.util.stream.Stream<Path> fds = Files.list(Path.of("/proc/self/fd"))) {
            return fds.count();
        }
    }

    @Test
    void rawConnectionsPastTheCapAreClosedAtOnceSoTheServersDescriptorsStayBoundedAndAnotherChannelKeepsWorking()
            throws Exception {
        int cap = 4, n = 600;
        EgressSettings s = settings("EGRESS_MAX_CONNECTIONS", String.valueOf(cap));
        EgressChannel flooded = open(s);
        EgressChannel other = EgressChannel.open(s, EgressDecision.resolver(s), dir.resolve("other.sock"),
                s.policyFor(Optional.empty()), "tenant-b", "run-b");
        toClose.add(other);
        try (Selector selector = Selector.open()) {
            long before = openDescriptors(), most = before;
            // A hostile program on the socket itself (not through the relay's cap): n connections, nothing sent.
            for (int i = 0; i < n; i++) {
                SocketChannel c = client(flooded);
                c.configureBlocking(false);
                c.register(selector, SelectionKey.OP_READ, new StringBuilder());
                if (i % 25 == 0) most = Math.max(most, openDescriptors());
            }
            // Meanwhile another run's channel serves its request.
            SocketChannel mine = client(other);
            send(mine, "GET http://fixture.test:" + httpPort + "/other HTTP/1.1\r\n\r\n");
            assertThat(readTextToEnd(mine)).startsWith("HTTP/1.1 200");
            mine.close();
            // Every connection past the served ones ends: at once without a word, or (those waiting for their
            // request, at most REFUSING_MAX at a time) with a 429 when their request does not come.
            int ended = 0, closedAtOnce = 0, answered = 0;
            ByteBuffer b = ByteBuffer.allocate(4096);
            long deadline = System.nanoTime() + WAIT.toNanos();
            while (ended < n - cap) {
                most = Math.max(most, openDescriptors());
                assertThat(System.nanoTime()).as("connections still open past the cap: " + (n - cap - ended)).isLessThan(deadline);
                selector.select(1000);
                for (SelectionKey k : selector.selectedKeys()) {
                    StringBuilder got = (StringBuilder) k.attachment();
                    int r;
                    try {
                        r = ((SocketChannel) k.channel()).read(b.clear());
                    } catch (IOException e) {
                        r = -1;
                    }
                    if (r > 0) got.append(new String(b.array(), 0, r, StandardCharsets.ISO_8859_1));
                    if (r >= 0) continue;
                    k.cancel();
                    ended++;
                    if (got.isEmpty()) closedAtOnce++;
                    else {
                        assertThat(got.toString()).startsWith("HTTP/1.1 429 ").contains("EGRESS_MAX_CONNECTIONS");
                        answered++;
                    }
                }
                selector.selectedKeys().clear();
            }
            assertThat(closedAtOnce).as("closed at once").isPositive();
            assertThat(closedAtOnce + answered).isEqualTo(n - cap);
            // The server's side of the flood: the served connections and those being refused, never one per connect.
            assertThat(most - before).as("descriptors over the test's own " + n)
                    .isLessThanOrEqualTo(n + cap + EgressChannel.REFUSING_MAX + 8);
        }
        Poll.until("every connection past the cap recorded", WAIT,
                () -> peek(flooded).counts().getOrDefault("refused/connection_limit", 0) == n - cap);
        awaitRecord(other, reason("closed"));
        assertThat(peek(other).counts()).containsExactly(Map.entry("allowed/closed", 1));
    }

    @Test
    void allChannelsTogetherStayWithinTheProcesssShareOfDescriptors() throws Exception {
        Descriptors share = new Descriptors(10);
        EgressSettings s = settings();
        EgressChannel a = EgressChannel.open(s, EgressDecision.resolver(s), dir.resolve("a.sock"),
                s.policyFor(Optional.empty()), "tenant-a", "run-a", share);
        EgressChannel b = EgressChannel.open(s, EgressDecision.resolver(s), dir.resolve("b.sock"),
                s.policyFor(Optional.empty()), "tenant-b", "run-b", share);
        toClose.add(a);
        toClose.add(b);
        // Run a holds five connections (two descriptors each: its end and the upstream's): the whole share.
        List<SocketChannel> held = new ArrayList<>();
        for (int i = 0; i < 5; i++) {
            SocketChannel c = SocketChannel.open(UnixDomainSocketAddress.of(a.socket()));
            toClose.add(c);
            held.add(c);
        }
        Poll.until("run a's connections accepted", WAIT, () -> share.used() == 10);
        // Past the share, a connection to either channel is closed at once and recorded.
        SocketChannel late = SocketChannel.open(UnixDomainSocketAddress.of(b.socket()));
        toClose.add(late);
        assertThat(readToEnd(late)).isEmpty();
        assertThat(awaitRecord(b, reason("connection_limit")).message()).contains("half of the server's limit");
        // Run a's connections end, and the share is there again.
        for (SocketChannel c : held) c.close();
        Poll.until("run a's descriptors given back", WAIT, () -> share.used() == 0);
        SocketChannel again = SocketChannel.open(UnixDomainSocketAddress.of(b.socket()));
        toClose.add(again);
        send(again, "GET http://fixture.test:" + httpPort + "/again HTTP/1.1\r\n\r\n");
        assertThat(readTextToEnd(again)).startsWith("HTTP/1.1 200");
        again.close();
        Poll.until("given back when the connection ends", WAIT, () -> share.used() == 0);
    }

    @Test
    void theByteCapEndsTheTransferAndRefusesMore() throws Exception {
        EgressChannel ch = open(settings("EGRESS_MAX_MB", "1"));
        SocketChannel c = client(ch);
        send(c, "GET http://fixture.test:" + httpPort + "/big HTTP/1.1\r\n\r\n");
        byte[] got = readToEnd(c);
        assertThat(got.length).isLessThanOrEqualTo(1 << 20).isGreaterThan(0);
        ConnectionRecord r = awaitRecord(ch, reason("byte_limit"));
        assertThat(r.decision()).isEqualTo(ConnectionRecord.ALLOWED);
        assertThat(r.message()).contains("EGRESS_MAX_MB");
        assertThat(peek(ch).bytesIn()).as("cut exactly at the cap").isEqualTo(1 << 20);

        SocketChannel next = client(ch);
        send(next, "GET http://fixture.test:" + httpPort + "/x HTTP/1.1\r\n\r\n");
        assertThat(readTextToEnd(next)).startsWith("HTTP/1.1 403").contains("(byte_limit)");
        // the refusal's record is written as its connection closes, which the client can see first
        awaitRecord(ch, reason("byte_limit").and(rec -> rec.decision().equals(ConnectionRecord.REFUSED)));
        assertThat(peek(ch).counts()).containsEntry("allowed/byte_limit", 1).containsEntry("refused/byte_limit", 1);
        assertThat(seen).doesNotContainKey("/x");
    }

    @Test
    void finishClosesOpenTunnelsAtOnceAndArmStartsAFreshReport() throws Exception {
        ServerSocket upstream = rawUpstream();
        int port = upstream.getLocalPort();
        EgressChannel ch = open(settings("EGRESS_ALLOW", "fixture.test:" + port));
        SocketChannel c = tunnel(ch, port);
        byte[] hello = TlsHellos.jdk("fixture.test");
        send(c, hello);
        try (Socket up = within(upstream::accept)) {
            assertThat(within(() -> up.getInputStream().readNBytes(hello.length))).hasSize(hello.length);

            NetworkReport report = ch.finish();
            assertThat(report.connections()).singleElement().satisfies(r -> {
                assertThat(r.reason()).isEqualTo("run_ended");
                assertThat(r.decision()).isEqualTo(ConnectionRecord.ALLOWED);
                assertThat(r.host()).isEqualTo("fixture.test");
                assertThat(r.bytesOut()).isEqualTo(hello.length);
            });
            assertThat(readToEnd(c)).isEmpty();
            assertThat(within(() -> up.getInputStream().read())).isEqualTo(-1);
        }

        ch.arm(EgressPolicy.parse("other.test"), "tenant-2", "run-2");
        assertThat(ch.policy().patterns()).containsExactly("other.test");
        // The new policy applies to the next connection.
        SocketChannel again = client(ch);
        send(again, "CONNECT fixture.test:" + port + " HTTP/1.1\r\n\r\n");
        assertThat(readTextToEnd(again)).startsWith("HTTP/1.1 403").contains("(not_allowed)");
        awaitRecord(ch, reason("not_allowed"));
        NetworkReport fresh = ch.finish();
        assertThat(fresh.connections()).as("the second run's own record only").singleElement()
                .satisfies(r -> assertThat(r.reason()).isEqualTo("not_allowed"));
        assertThat(fresh.policy()).containsExactly("other.test");
        // Finished, the channel serves nothing until it is armed again (a session between two calls).
        assertThat(ch.policy().isOff()).isTrue();
        SocketChannel between = client(ch);
        send(between, "GET http://other.test/ HTTP/1.1\r\n\r\n");
        assertThat(readTextToEnd(between)).startsWith("HTTP/1.1 403").contains("(between_calls)")
                .contains("network only while a call runs");
        assertThat(ch.finish()).as("finish again: the finished run's report, without the refusal between runs")
                .isEqualTo(fresh);

        ch.arm(EgressPolicy.OFF, "tenant-2", "run-3");
        SocketChannel off = client(ch);
        send(off, "CONNECT fixture.test:" + port + " HTTP/1.1\r\n\r\n");
        assertThat(readTextToEnd(off)).startsWith("HTTP/1.1 403").contains("(egress_off)");
    }

    @Test
    void closeDeletesTheSocketAndEndsWhatIsOpen() throws Exception {
        EgressChannel ch = open(settings());
        Path socket = ch.socket();
        assertThat(socket).exists();
        SocketChannel waiting = client(ch);
        send(waiting, "GET http://fixture.test:" + httpPort + "/x HTTP/1.1\r\n");
        Poll.until("the channel accepted the connection and holds it open", () -> openConnections(ch) == 1);
        ch.close();
        assertThat(socket).doesNotExist();
        assertThat(readToEnd(waiting)).isEmpty();
        assertThat(openConnections(ch)).isZero();
        assertThat(ch.finish().connections()).as("close ended the open connection and recorded it")
                .singleElement().satisfies(r -> assertThat(r.reason()).isEqualTo("run_ended"));
        assertThatThrownBy(() -> SocketChannel.open(UnixDomainSocketAddress.of(socket))).isInstanceOf(IOException.class);
        ch.close(); // twice is harmless
    }

    @Test
    void openReplacesAStaleSocketFile() throws Exception {
        Files.writeString(dir.resolve("t.sock"), "stale");
        EgressChannel ch = open(settings());
        SocketChannel c = client(ch);
        send(c, "GET http://fixture.test:" + httpPort + "/x HTTP/1.1\r\n\r\n");
        assertThat(readTextToEnd(c)).startsWith("HTTP/1.1 200");
    }

    @Test
    void anIdleTunnelIsClosed() throws Exception {
        ServerSocket upstream = rawUpstream();
        int port = upstream.getLocalPort();
        EgressChannel ch = open(settings("EGRESS_ALLOW", "fixture.test:" + port, "EGRESS_IDLE_TIMEOUT_MS", "1000"));
        SocketChannel c = tunnel(ch, port);
        byte[] hello = TlsHellos.jdk("fixture.test");
        send(c, hello);
        try (Socket up = within(upstream::accept)) {
            assertThat(within(() -> up.getInputStream().readNBytes(hello.length))).hasSize(hello.length);
            assertThat(readToEnd(c)).isEmpty(); // nothing either way: closed by the sweeper
            assertThat(within(() -> up.getInputStream().read())).isEqualTo(-1);
        }
        ConnectionRecord r = awaitRecord(ch, reason("idle_timeout"));
        assertThat(r.decision()).isEqualTo(ConnectionRecord.ALLOWED);
        assertThat(r.message()).contains("EGRESS_IDLE_TIMEOUT_MS");
    }

    @Test
    void aRunThatEndsDuringTheLookupLeavesNoUpstreamConnectionOpen() throws Exception {
        ServerSocket upstream = rawUpstream();
        int port = upstream.getLocalPort();
        CountDownLatch asked = new CountDownLatch(1);
        CountDownLatch answer = new CountDownLatch(1);
        EgressDecision.Resolver slow = name -> {
            asked.countDown();
            try {
                answer.await();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            return List.of(LOOPBACK);
        };
        EgressChannel ch = open(settings("EGRESS_ALLOW", "fixture.test:" + port), slow);
        SocketChannel c = client(ch);
        send(c, "CONNECT fixture.test:" + port + " HTTP/1.1\r\n\r\n");
        assertThat(asked.await(WAIT.toSeconds(), TimeUnit.SECONDS)).isTrue();
        assertThat(ch.finish().connections()).singleElement().satisfies(r -> assertThat(r.reason()).isEqualTo("run_ended"));
        assertThat(readToEnd(c)).isEmpty();
        answer.countDown();
        // Either no connection is made after the run ended, or it is closed at once.
        upstream.setSoTimeout(3000);
        Socket up;
        try {
            up = upstream.accept();
        } catch (SocketTimeoutException e) {
            return;
        }
        try (up) {
            up.setSoTimeout(5000);
            assertThat(up.getInputStream().read()).as("the upstream connection is closed").isEqualTo(-1);
        }
    }
}
