package dev.codeexec.preview;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The port-preview proxy against a fake of the sandbox side (init's unix socket) in front of a raw test app. Slow:
 * a fresh listener per test, and the idle and event-stream tests wait on purpose (about 2 s in all).
 */
@Tag("slow")
class PreviewProxyTest {

    record Connection(PreviewProxy.Target target, long bytesIn, long bytesOut, String end) {
    }

    @TempDir
    Path dir;
    FakeSandbox sandbox;
    FakeSandbox.App app;
    final Map<String, PreviewProxy.Target> previews = new ConcurrentHashMap<>();
    final BlockingQueue<Connection> connections = new LinkedBlockingQueue<>();
    final BlockingQueue<String> requests = new LinkedBlockingQueue<>();
    PreviewProxy proxy;

    static final String TOKEN = "tok_aaaaaaaaaaaaaaaaaaaaaa";
    static final String OTHER = "tok_bbbbbbbbbbbbbbbbbbbbbb";
    static final String KEYED = "tok_kkkkkkkkkkkkkkkkkkkkkk";
    static final Map<String, String> KEYS = Map.of("key-of-a", "tenant-a", "key-of-b", "tenant-b");

    @BeforeEach
    void start() throws Exception {
        sandbox = new FakeSandbox(dir);
        app = sandbox.app(0);
        add(TOKEN, app.port(), PreviewProxy.Auth.TOKEN);
        add(OTHER, app.port(), PreviewProxy.Auth.TOKEN);
        add(KEYED, app.port(), PreviewProxy.Auth.KEY);
        proxy = start(Duration.ofSeconds(20), 1 << 20);
    }

    PreviewProxy start(Duration idle, long maxBody) throws IOException {
        var settings = new PreviewProxy.Settings("127.0.0.1", 0, Optional.of("preview.test"), "https", 2, 50, maxBody, 64L << 20, idle);
        return PreviewProxy.start(settings, token -> Optional.ofNullable(previews.get(token)),
                key -> Optional.ofNullable(KEYS.get(key)), new PreviewProxy.Observer() {
                    @Override
                    public void request(PreviewProxy.Target t, String method, int status) {
                        requests.add(t.token() + " " + method + " " + status);
                    }

                    @Override
                    public void connection(PreviewProxy.Target t, String client, long bytesIn, long bytesOut, long millis, String end) {
                        connections.add(new Connection(t, bytesIn, bytesOut, end));
                    }
                });
    }

    void add(String token, int port, PreviewProxy.Auth auth) {
        previews.put(token, new PreviewProxy.Target(token, "tenant-a", port, auth, sandbox.socket, "session test"));
    }

    @AfterEach
    void stop() throws Exception {
        proxy.close();
        sandbox.close();
    }

    Http client() throws IOException {
        return new Http(proxy.port());
    }

    @Test
    void twoRequestsOnOneClientConnectionShareOneUpstreamConnection() throws Exception {
        try (Http c = client()) {
            assertThat(c.get("/p/" + TOKEN + "/one").body()).isEqualTo("GET /one\n");
            assertThat(c.get("/p/" + TOKEN + "/two").body()).isEqualTo("GET /two\n");
        }
        assertThat(app.connections.get()).isEqualTo(1);
        assertThat(sandbox.relayed.get()).isEqualTo(1);
    }

    @Test
    void theAppSeesTheRewrittenPathAndOnlyTheProxysForwardedFields() throws Exception {
        try (Http c = client()) {
            Http.Response r = c.get("/p/" + TOKEN + "/a/b?x=1&y=2", "X-Forwarded-For: 6.6.6.6", "X-Forwarded-Host: evil.test",
                    "Forwarded: for=6.6.6.6", "X-Forwarded-Prefix: /evil", "Cookie: session=abc");
            assertThat(r.status()).isEqualTo(200);
        }
        FakeSandbox.Seen seen = app.seen.poll(10, TimeUnit.SECONDS);
        assertThat(seen.target()).isEqualTo("/a/b?x=1&y=2");
        assertThat(seen.headers().get("x-forwarded-for")).containsExactly("127.0.0.1");
        assertThat(seen.headers().get("x-forwarded-host")).containsExactly("127.0.0.1");
        assertThat(seen.headers().get("x-forwarded-proto")).containsExactly("http");
        assertThat(seen.headers().get("x-forwarded-prefix")).containsExactly("/p/" + TOKEN);
        assertThat(seen.headers()).doesNotContainKey("forwarded");
        assertThat(seen.header("host")).isEqualTo("127.0.0.1");
        assertThat(seen.header("cookie")).isEqualTo("session=abc");
    }

    @Test
    void serverSentEventsReachTheClientOneByOneAsTheAppWritesThem() throws Exception {
        try (Http c = client()) {
            c.send("GET /p/" + TOKEN + "/sse HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
            String head = Http.readHead(c.in);
            assertThat(head).startsWith("HTTP/1.1 200").contains("text/event-stream");
            for (int i = 0; i < 3; i++) {
                int size = Integer.parseInt(Http.readLine(c.in), 16);
                String event = new String(c.in.readNBytes(size), StandardCharsets.UTF_8);
                Http.readLine(c.in);
                assertThat(event).isEqualTo("data: event " + i + "\n\n");
                // the app sends the next event only once this one has arrived: a proxy that held the stream back
                // until its end would make the app give up waiting, which it records
                app.eventRead.get(i).countDown();
            }
            assertThat(Http.readLine(c.in)).isEqualTo("0");
        }
        assertThat(app.eventSentUnread).as("an event was sent before the one before it had arrived").isFalse();
    }

    @Test
    void postBodiesWithContentLengthAndChunkedReachTheApp() throws Exception {
        try (Http c = client()) {
            c.send("POST /p/" + TOKEN + "/form HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 11\r\n\r\nhello world");
            assertThat(c.read().body()).isEqualTo("POST /form\nhello world");
            c.send("POST /p/" + TOKEN + "/chunks HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n"
                    + "5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n");
            assertThat(c.read().body()).isEqualTo("POST /chunks\nhello world");
        }
    }

    @Test
    void aWebSocketUpgradeBecomesATwoWayByteRelay() throws Exception {
        try (Http c = client()) {
            c.send("GET /p/" + TOKEN + "/ws HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n");
            Http.Response r = c.read();
            assertThat(r.status()).isEqualTo(101);
            c.send("\u0081\u0005hello");
            assertThat(new String(c.in.readNBytes(7), StandardCharsets.ISO_8859_1)).isEqualTo("\u0081\u0005hello");
            c.send("more bytes");
            assertThat(new String(c.in.readNBytes(10), StandardCharsets.ISO_8859_1)).isEqualTo("more bytes");
            c.socket.shutdownOutput(); // the half-close reaches the app, which ends its side in turn
            assertThat(c.closedByPeer()).isTrue();
        }
        FakeSandbox.Seen seen = app.seen.poll(10, TimeUnit.SECONDS);
        assertThat(seen.header("upgrade")).isEqualTo("websocket");
    }

    @Test
    void nothingListeningIsA502PageUntilTheAppStartsThenTheSameTokenServes() throws Exception {
        int port;
        try (ServerSocket free = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            port = free.getLocalPort();
        }
        String token = "tok_late_cccccccccccccccc";
        add(token, port, PreviewProxy.Auth.TOKEN);
        try (Http c = client()) {
            Http.Response r = c.get("/p/" + token + "/");
            assertThat(r.status()).isEqualTo(502);
            assertThat(r.header("content-type")).startsWith("text/html");
            assertThat(r.header("connection")).isEqualTo("close");
            assertThat(r.header("cache-control")).isEqualTo("no-store");
            assertThat(r.body()).contains("Nothing listens on port " + port).contains("127.0.0.1:" + port)
                    .contains("0.0.0.0:" + port).contains("reload");
        }
        FakeSandbox.App late = sandbox.app(port);
        try (Http c = client()) {
            Http.Response r = c.get("/p/" + token + "/now");
            assertThat(r.status()).isEqualTo(200);
            assertThat(r.body()).isEqualTo("GET /now\n");
        }
        assertThat(late.connections.get()).isEqualTo(1);
    }

    @Test
    void unknownAndMalformedTokensAre404AndATokenWithoutSlashIsRedirected() throws Exception {
        for (String target : new String[] {"/p/tok_zzzzzzzzzzzzzzzzzzzzzz/", "/p/short/", "/p/" + "x".repeat(65) + "/", "/p/bad.token.aaaaaaaaaaaaaaaa/",
                "/", "/other"}) {
            try (Http c = client()) {
                Http.Response r = c.get(target);
                assertThat(r.status()).as(target).isEqualTo(404);
                assertThat(r.body()).as(target).isEqualTo("no such preview\n");
                assertThat(r.header("connection")).isEqualTo("close");
            }
        }
        try (Http c = client()) {
            Http.Response r = c.get("/p/" + TOKEN + "?q=1");
            assertThat(r.status()).isEqualTo(308);
            assertThat(r.header("location")).isEqualTo("/p/" + TOKEN + "/?q=1");
        }
        assertThat(app.connections.get()).isZero();
    }

    @Test
    void aKeyPreviewNeedsItsTenantsKeyAndTheAppNeverSeesIt() throws Exception {
        try (Http c = client()) {
            Http.Response r = c.get("/p/" + KEYED + "/");
            assertThat(r.status()).isEqualTo(401);
            assertThat(r.header("www-authenticate")).isEqualTo("Bearer");
        }
        try (Http c = client()) {
            assertThat(c.get("/p/" + KEYED + "/", "Authorization: Bearer not-a-key").status()).isEqualTo(401);
        }
        try (Http c = client()) {
            Http.Response r = c.get("/p/" + KEYED + "/", "Authorization: Bearer key-of-b");
            assertThat(r.status()).isEqualTo(404);
            assertThat(r.body()).isEqualTo("no such preview\n");
        }
        assertThat(app.connections.get()).isZero();
        try (Http c = client()) {
            assertThat(c.get("/p/" + KEYED + "/bearer", "Authorization: Bearer key-of-a").status()).isEqualTo(200);
            assertThat(c.get("/p/" + KEYED + "/header", "X-API-Key: key-of-a").status()).isEqualTo(200);
        }
        for (int i = 0; i < 2; i++) {
            FakeSandbox.Seen seen = app.seen.poll(10, TimeUnit.SECONDS);
            assertThat(seen.headers()).doesNotContainKeys("authorization", "x-api-key");
        }
    }

    @Test
    void theHostFormRoutesByTheFirstLabelAndKeepsThePath() throws Exception {
        try (Http c = client()) {
            c.send("GET /x/y?z=1 HTTP/1.1\r\nHost: " + TOKEN + ".Preview.Test:8443\r\n\r\n");
            Http.Response r = c.read();
            assertThat(r.body()).isEqualTo("GET /x/y?z=1\n");
            c.send("GET / HTTP/1.1\r\nHost: tok_nonexistent_zzzzzzzzzz.preview.test\r\n\r\n");
            assertThat(c.read().status()).isEqualTo(404);
        }
        FakeSandbox.Seen seen = app.seen.poll(10, TimeUnit.SECONDS);
        assertThat(seen.header("x-forwarded-proto")).isEqualTo("https");
        assertThat(seen.header("x-forwarded-host")).isEqualTo(TOKEN + ".Preview.Test:8443");
        assertThat(seen.headers()).doesNotContainKey("x-forwarded-prefix");
    }

    @Test
    void pastThePerPreviewCapA503WhileOtherPreviewsStillWork() throws Exception {
        try (Http a = client(); Http b = client(); Http c = client(); Http d = client()) {
            assertThat(a.get("/p/" + TOKEN + "/1").status()).isEqualTo(200);
            assertThat(b.get("/p/" + TOKEN + "/2").status()).isEqualTo(200);
            Http.Response third = c.get("/p/" + TOKEN + "/3");
            assertThat(third.status()).isEqualTo(503);
            assertThat(third.body()).isEqualTo("too many connections to this preview\n");
            assertThat(d.get("/p/" + OTHER + "/4").status()).isEqualTo(200);
            assertThat(a.get("/p/" + TOKEN + "/5").status()).as("a connection holding its place goes on").isEqualTo(200);
        }
    }

    @Test
    void aBodyOverTheCapIs413BeforeTheAppIsReached() throws Exception {
        try (Http c = client()) {
            c.send("POST /p/" + TOKEN + "/big HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: " + ((1 << 20) + 1) + "\r\n\r\n");
            Http.Response r = c.read();
            assertThat(r.status()).isEqualTo(413);
            assertThat(r.header("connection")).isEqualTo("close");
        }
        assertThat(app.connections.get()).isZero();
        assertThat(requests.poll(10, TimeUnit.SECONDS)).isEqualTo(TOKEN + " POST 413");
    }

    @Test
    void aConnectionSilentForTheIdleTimeoutIsClosed() throws Exception {
        proxy.close();
        proxy = start(Duration.ofMillis(300), 1 << 20);
        try (Http c = client()) {
            c.send("GET /p/" + TOKEN + "/hang HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
            assertThat(c.closedByPeer()).isTrue();
        }
        Connection ended = connections.poll(10, TimeUnit.SECONDS);
        assertThat(ended.end()).isEqualTo("idle_timeout");
        try (Http c = client()) {
            assertThat(c.closedByPeer()).as("a client that sends nothing").isTrue();
        }
    }

    @Test
    void aStalledClientDoesNotDelayAnotherClientsRequest() throws Exception {
        try (Socket stalled = new Socket()) {
            stalled.setReceiveBufferSize(4096);
            stalled.connect(new java.net.InetSocketAddress(InetAddress.getLoopbackAddress(), proxy.port()));
            stalled.getOutputStream().write(("GET /p/" + TOKEN + "/big HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").getBytes(StandardCharsets.US_ASCII));
            assertThat(app.bigStarted.await(10, TimeUnit.SECONDS)).isTrue();
            try (Http c = client()) {
                assertThat(c.get("/p/" + OTHER + "/meanwhile").body()).isEqualTo("GET /meanwhile\n");
            }
        }
    }

    @Test
    void theByteCountsReportedAreWhatTheClientSentAndReceived() throws Exception {
        long sent, received;
        try (Http c = client()) {
            c.send("POST /p/" + TOKEN + "/count HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 5\r\n\r\nabcde");
            assertThat(c.read().status()).isEqualTo(200);
            assertThat(c.get("/p/" + TOKEN + "/again").status()).isEqualTo(200);
            sent = c.sent;
            received = c.received;
        }
        Connection report = connections.poll(10, TimeUnit.SECONDS);
        assertThat(report.target().token()).isEqualTo(TOKEN);
        assertThat(report.bytesIn()).isEqualTo(sent);
        assertThat(report.bytesOut()).isEqualTo(received);
        assertThat(report.end()).isEqualTo("client_closed");
    }
}
