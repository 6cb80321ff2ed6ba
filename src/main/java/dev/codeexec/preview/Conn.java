package dev.codeexec.preview;

import dev.codeexec.http1.Malformed;
import dev.codeexec.http1.RequestHead;
import dev.codeexec.http1.ResponseHead;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.Socket;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Locale;
import java.util.Optional;
import java.util.Set;

/**
 * One client connection: its requests read one after another, each routed, checked and forwarded on its own; the
 * upstream connection kept for the next request while it goes to the same preview and the app allows it.
 */
final class Conn {

    static final int HEAD_MAX = 64 * 1024;
    private static final byte[] CRLF_CRLF = {'\r', '\n', '\r', '\n'};
    private static final Set<String> KEY_FIELDS = Set.of("authorization", "x-api-key");

    private final PreviewProxy proxy;
    private final PreviewProxy.Settings settings;
    private final Socket socket;
    private final String client;
    private final Wire in;
    private final OutputStream out;
    private volatile long lastActivity = System.nanoTime();
    private volatile String end;
    /** Bytes from and to the client, for the whole connection (the caps) ... */
    private long bytesIn;
    private long bytesOut;
    /** ... and where the current preview's share of them began (the reports). */
    private long segmentIn;
    private long segmentOut;
    private long segmentStart;
    private PreviewProxy.Target target;
    private volatile Upstream upstream;
    private volatile SocketChannel connecting;

    Conn(PreviewProxy proxy, Socket socket) {
        this.proxy = proxy;
        this.settings = proxy.settings();
        this.socket = socket;
        this.client = socket.getInetAddress().getHostAddress();
        InputStream is;
        OutputStream os;
        try {
            is = socket.getInputStream();
            os = socket.getOutputStream();
        } catch (IOException e) {
            is = InputStream.nullInputStream();
            os = OutputStream.nullOutputStream();
        }
        InputStream rawIn = is;
        this.in = new Wire((b, off, len) -> {
            int r = rawIn.read(b, off, len);
            if (r > 0) {
                touch();
                if ((bytesIn += r) > settings.maxConnectionBytes()) throw capped();
            }
            return r;
        });
        this.out = os;
    }

    long lastActivity() {
        return lastActivity;
    }

    private void touch() {
        lastActivity = System.nanoTime();
    }

    /** Ends the connection from outside (idle sweeper, proxy close): whatever thread waits on it gets an error. */
    void shut(String why) {
        if (end == null) end = why;
        Upstream.closeQuietly(socket);
        Upstream.closeQuietly(upstream);
        Upstream.closeQuietly(connecting);
    }

    private IOException capped() {
        if (end == null) end = "byte_cap";
        return new IOException("over the connection's byte cap");
    }

    /** Writes to the client, counted against the cap. */
    private void send(byte[] b, int off, int len) throws IOException {
        if ((bytesOut += len) > settings.maxConnectionBytes()) {
            long allowed = len - (bytesOut - settings.maxConnectionBytes());
            out.write(b, off, (int) allowed);
            throw capped();
        }
        out.write(b, off, len);
        touch();
    }

    private void send(byte[] b) throws IOException {
        send(b, 0, b.length);
    }

    void run() {
        try {
            while (serveOne()) {
                // next request on this connection
            }
        } catch (Malformed e) {
            if (end == null) end = "bad_request";
        } catch (IOException | RuntimeException e) {
            if (end == null) end = "client_closed";
        } finally {
            leaveTarget(end == null ? "client_closed" : end);
            Upstream.closeQuietly(socket);
        }
    }

    /** Serves one request; false when the connection ends after it. */
    private boolean serveOne() throws IOException, Malformed {
        long before = bytesIn - in.buffered();
        byte[] raw = in.readHead(HEAD_MAX);
        if (raw == null) {
            if (end == null) end = "client_closed";
            return false;
        }
        RequestHead req;
        try {
            req = RequestHead.parse(raw, raw.length);
        } catch (Malformed e) {
            send(PreviewProxy.answer(400, "Bad Request", "text/plain; charset=utf-8", "bad request: " + e.getMessage() + "\n", ""));
            end = "bad_request";
            return false;
        }
        List<String> hosts = req.values("host");
        String host = hosts.isEmpty() ? null : hosts.getFirst();
        Optional<Route> found = Route.of(req.target(), host, settings.domain());
        if (found.isEmpty()) return notFound(null, req);
        Route route = found.get();
        if (route.redirect() != null) {
            send(PreviewProxy.answer(308, "Permanent Redirect", "text/plain; charset=utf-8", "see " + route.redirect() + "\n",
                    "Location: " + route.redirect() + "\r\n"));
            return false;
        }
        Optional<PreviewProxy.Target> t = proxy.directory().find(route.token());
        if (t.isEmpty()) return notFound(null, req);
        PreviewProxy.Target preview = t.get();
        if (preview.auth() == PreviewProxy.Auth.KEY) {
            String key = apiKey(req);
            Optional<String> tenant = key == null ? Optional.empty() : proxy.keys().tenantOf(key);
            if (tenant.isEmpty()) {
                proxy.observer().request(preview, req.method(), 401);
                send(PreviewProxy.answer(401, "Unauthorized", "text/plain; charset=utf-8",
                        "this preview needs the API key of its tenant (Authorization: Bearer KEY or X-API-Key: KEY)\n",
                        "WWW-Authenticate: Bearer\r\n"));
                return false;
            }
            if (!tenant.get().equals(preview.tenant())) return notFound(preview, req);
        }
        if (target == null || !target.token().equals(preview.token())) {
            leaveTarget("next_preview");
            if (!proxy.enter(preview.token())) {
                proxy.observer().request(preview, req.method(), 503);
                send(PreviewProxy.answer(503, "Service Unavailable", "text/plain; charset=utf-8", "too many connections to this preview\n", ""));
                return false;
            }
            target = preview;
            segmentIn = before;
            segmentOut = bytesOut;
            segmentStart = System.nanoTime();
        }
        RequestHead.Framing framing = req.framing();
        if (!framing.chunked() && framing.length() > settings.maxBodyBytes())
            return refuse(preview, req, 413, "Content Too Large", "the request body is larger than " + settings.maxBodyBytes() + " bytes\n");
        return forward(preview, route, req, framing, host);
    }

    private boolean notFound(PreviewProxy.Target preview, RequestHead req) throws IOException {
        if (preview != null) proxy.observer().request(preview, req.method(), 404);
        send(PreviewProxy.answer(404, "Not Found", "text/plain; charset=utf-8", "no such preview\n", ""));
        return false;
    }

    private boolean refuse(PreviewProxy.Target preview, RequestHead req, int status, String reason, String text) throws IOException {
        proxy.observer().request(preview, req.method(), status);
        send(PreviewProxy.answer(status, reason, "text/plain; charset=utf-8", text, ""));
        if (end == null) end = "refused";
        return false;
    }

    /** The API key the request carries (Authorization: Bearer, or X-API-Key), or null. */
    private static String apiKey(RequestHead req) {
        for (String v : req.values("authorization"))
            if (v.regionMatches(true, 0, "Bearer ", 0, 7) && !v.substring(7).isBlank()) return v.substring(7).strip();
        List<String> x = req.values("x-api-key");
        return x.isEmpty() || x.getFirst().isBlank() ? null : x.getFirst();
    }

    private boolean forward(PreviewProxy.Target preview, Route route, RequestHead req, RequestHead.Framing framing, String host)
            throws IOException, Malformed {
        boolean expectContinue = req.values("expect").stream().anyMatch(v -> v.equalsIgnoreCase("100-continue"));
        byte[] head = upstreamHead(preview, route, req, host);
        boolean hasBody = framing.chunked() || framing.length() > 0;
        boolean reused = upstream != null && upstream.token.equals(preview.token());
        for (int attempt = 0; ; attempt++) {
            if (upstream == null && !connect(preview)) {
                proxy.observer().request(preview, req.method(), 502);
                send(nothingListens(preview.port()));
                if (end == null) end = "no_upstream";
                return false;
            }
            ResponseHead response;
            try {
                upstream.write(head, 0, head.length);
                if (hasBody) {
                    if (expectContinue) send("HTTP/1.1 100 Continue\r\n\r\n".getBytes(StandardCharsets.US_ASCII));
                    try {
                        in.relayBody(framing.chunked(), framing.length(), settings.maxBodyBytes(), upstream::write);
                    } catch (Wire.BodyTooLarge e) {
                        if (end == null) end = "body_cap";
                        return false;
                    }
                }
                response = relayHeads(preview, req);
            } catch (UpstreamGone e) {
                // a kept connection the app closed meanwhile: once more on a new one, when nothing of the request is lost
                closeUpstream();
                if (reused && !hasBody && attempt == 0) continue;
                proxy.observer().request(preview, req.method(), 502);
                send(nothingListens(preview.port()));
                if (end == null) end = "upstream_closed";
                return false;
            }
            if (response == null) return false;
            return relayResponse(preview, req, response);
        }
    }

    /** The upstream ended or failed before a response head arrived. */
    private static final class UpstreamGone extends IOException {
        UpstreamGone() {
            super("the upstream ended before its response", null);
        }
    }

    private boolean connect(PreviewProxy.Target preview) {
        Upstream u = Upstream.open(preview, this::touch, ch -> connecting = ch);
        connecting = null;
        upstream = u;
        if (end != null) closeUpstream(); // shut while connecting
        return upstream != null;
    }

    /**
     * Relays interim heads (1xx but 101) and returns the final one, already sent to the client; null when the
     * response could not be read (a 502 was sent, the connection is to end).
     */
    private ResponseHead relayHeads(PreviewProxy.Target preview, RequestHead req) throws IOException {
        while (true) {
            byte[] raw;
            try {
                raw = upstream.in.readHead(HEAD_MAX);
            } catch (Wire.TooLarge e) {
                return badResponse(preview, req, "its response head is longer than " + HEAD_MAX + " bytes");
            } catch (IOException e) {
                if (end != null) throw e;
                throw new UpstreamGone();
            }
            if (raw == null) throw new UpstreamGone();
            ResponseHead head;
            try {
                head = ResponseHead.parse(raw, raw.length);
            } catch (Malformed e) {
                return badResponse(preview, req, e.getMessage());
            }
            send(raw);
            send(CRLF_CRLF);
            if (!head.interim()) return head;
        }
    }

    private ResponseHead badResponse(PreviewProxy.Target preview, RequestHead req, String why) throws IOException {
        proxy.observer().request(preview, req.method(), 502);
        send(PreviewProxy.answer(502, "Bad Gateway", "text/plain; charset=utf-8",
                "the app on port " + preview.port() + " sent a response that could not be read: " + why + "\n", ""));
        if (end == null) end = "bad_response";
        return null;
    }

    /** The final response's body, or the tunnel after a 101; whether the connection carries a next request. */
    private boolean relayResponse(PreviewProxy.Target preview, RequestHead req, ResponseHead response) throws IOException {
        proxy.observer().request(preview, req.method(), response.status());
        if (response.status() == 101) {
            tunnel();
            return false;
        }
        ResponseHead.Framing framing;
        try {
            framing = response.framing(req.method());
        } catch (Malformed e) {
            if (end == null) end = "bad_response";
            return false;
        }
        try {
            switch (framing.kind()) {
                case NONE -> { }
                case LENGTH -> upstream.in.relayBody(false, framing.length(), Long.MAX_VALUE, this::send);
                case CHUNKED -> upstream.in.relayBody(true, -1, Long.MAX_VALUE, this::send);
                case UNTIL_CLOSE -> {
                    upstream.in.relayBody(false, -1, Long.MAX_VALUE, this::send);
                    if (end == null) end = "upstream_closed";
                    return false;
                }
            }
        } catch (Malformed e) {
            if (end == null) end = "bad_response";
            return false;
        } catch (IOException e) {
            if (end == null) end = socket.isClosed() ? "client_closed" : "upstream_closed";
            throw e;
        }
        if (!response.keepsAlive()) closeUpstream();
        return clientKeepsAlive(req);
    }

    private static boolean clientKeepsAlive(RequestHead req) {
        Set<String> options = req.connectionOptions();
        return req.version().equals("HTTP/1.1") ? !options.contains("close") : options.contains("keep-alive");
    }

    /** After a 101: bytes both ways until either side closes, each half-close passed on. */
    private void tunnel() {
        Upstream u = upstream;
        Thread down = Thread.ofVirtual().name("preview-ws-").start(() -> {
            try {
                u.in.pump(this::send);
                if (end == null) end = "upstream_closed";
                socket.shutdownOutput();
            } catch (IOException e) {
                shut(end == null ? "upstream_closed" : end);
            }
        });
        try {
            in.pump(u::write);
            if (end == null) end = "client_closed";
            u.channel.shutdownOutput();
        } catch (IOException e) {
            shut(end == null ? "client_closed" : end);
        }
        try {
            down.join();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    /**
     * The head the app gets: its request-target (the prefix taken off in the path form), the key fields removed when
     * the preview checked a key (the app never sees a key), every X-Forwarded-* and Forwarded replaced by the
     * proxy's own, Expect answered here (the body follows at once), everything else as the client sent it.
     */
    private byte[] upstreamHead(PreviewProxy.Target preview, Route route, RequestHead req, String host) {
        StringBuilder b = new StringBuilder(req.method()).append(' ').append(route.path()).append(' ').append(req.version()).append("\r\n");
        for (RequestHead.Field f : req.fields()) {
            String name = f.name().toLowerCase(Locale.ROOT);
            if (name.startsWith("x-forwarded-") || name.equals("forwarded") || name.equals("expect")) continue;
            if (KEY_FIELDS.contains(name) && (preview.auth() == PreviewProxy.Auth.KEY || isKey(name, f.value()))) continue;
            b.append(f.name()).append(": ").append(f.value()).append("\r\n");
        }
        b.append("X-Forwarded-For: ").append(client).append("\r\n");
        if (host != null) b.append("X-Forwarded-Host: ").append(host).append("\r\n");
        b.append("X-Forwarded-Proto: ").append(route.hostForm() ? settings.domainScheme() : "http").append("\r\n");
        if (!route.hostForm()) b.append("X-Forwarded-Prefix: ").append(route.prefix()).append("\r\n");
        return b.append("\r\n").toString().getBytes(StandardCharsets.ISO_8859_1);
    }

    /** Whether a key field of a TOKEN preview's request carries one of the server's API keys: never passed on. */
    private boolean isKey(String name, String value) {
        String key = name.equals("x-api-key") ? value : value.regionMatches(true, 0, "Bearer ", 0, 7) ? value.substring(7).strip() : null;
        return key != null && !key.isEmpty() && proxy.keys().tenantOf(key).isPresent();
    }

    private static byte[] nothingListens(int port) {
        String html = "<!doctype html><html><head><meta charset=\"utf-8\"><title>Nothing listens on port " + port + "</title></head>"
                + "<body><h1>Nothing listens on port " + port + " in the sandbox yet</h1>"
                + "<p>Nothing listens on port " + port + " inside the sandbox yet, or the server there stopped. Start the server on "
                + "<code>127.0.0.1:" + port + "</code> or <code>0.0.0.0:" + port + "</code>, then reload this page.</p></body></html>\n";
        return PreviewProxy.answer(502, "Bad Gateway", "text/html; charset=utf-8", html, "");
    }

    private void closeUpstream() {
        Upstream.closeQuietly(upstream);
        upstream = null;
    }

    /** The current preview's share of the connection ends: its place freed, its upstream closed, its report made. */
    private void leaveTarget(String why) {
        closeUpstream();
        if (target == null) return;
        proxy.leave(target.token());
        long millis = (System.nanoTime() - segmentStart) / 1_000_000;
        proxy.observer().connection(target, client, bytesIn - segmentIn, bytesOut - segmentOut, millis, why);
        target = null;
    }
}
