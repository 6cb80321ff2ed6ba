package dev.codeexec.egress;

import dev.codeexec.http1.Http1;
import dev.codeexec.http1.Malformed;
import dev.codeexec.http1.RequestHead;
import dev.codeexec.http1.ResponseHead;

import javax.net.ssl.SNIHostName;
import javax.net.ssl.SSLEngine;
import javax.net.ssl.SSLParameters;
import javax.net.ssl.SSLSocket;
import java.io.BufferedInputStream;
import java.io.BufferedOutputStream;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.security.GeneralSecurityException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Optional;
import java.util.Set;

/**
 * A CONNECT tunnel to a host that has a secret for the run, opened by the proxy: the program's TLS ends here with a
 * certificate of the server's CA ({@link InterceptCa}) for that host, the proxy connects to the real host with TLS
 * of its own (the certificate checked as an HTTPS client checks it), and HTTP/1.1 requests (the only protocol
 * offered, by ALPN) are relayed one at a time.
 *
 * <p>Each request head: origin form, its Host the tunnel's host (a Host naming another would let a shared front
 * end route the secret elsewhere), no protocol upgrade. In the request line and the header fields every
 * placeholder of a secret for this host is replaced with the real value; a placeholder of a secret that is not for
 * this host is refused (403 naming the secret, never a value) and the tunnel closed; Basic credentials are looked
 * into, decoded ({@link PlaceholderSwap}). Bodies go on as they came. The program's {@code Accept-Encoding} and
 * {@code TE} are replaced by {@code Accept-Encoding: identity}, so that answers come uncompressed and can be scanned
 * (clients ask for gzip by default, and a gzip body echoing the token would pass unseen).
 * Each response head has every real value of the run's secrets replaced with its placeholder, and so has a text
 * body (text/*, JSON, XML, JavaScript, form data, or no type) in its first {@link Interception#BODY_SCAN_MAX}
 * bytes; what follows passes as it came, as do binary bodies. A text body a server compresses all the same (a
 * content coding, or a transfer coding besides chunked) cannot be scanned: it is not passed on, the program gets 502
 * {@code encoded_response} and the tunnel closes. {@code Expect: 100-continue} is answered here.
 */
final class SecretTunnel {

    private static final int HEAD_MAX = 64 * 1024;
    private static final int COPY_BUFFER = 64 * 1024;

    /** What the tunnel reports to its connection as it goes. */
    interface Link {
        /** Counts bytes toward the run's caps; false: over them (the tunnel stops). */
        boolean out(long n);

        boolean in(long n);

        /** Data moved: not idle. */
        void active();
    }

    /** How the tunnel ended, and which secrets it put in. */
    record Outcome(String decision, String reason, String message, Set<String> applied) {
    }

    private final SocketChannel client;
    private final SocketChannel upstreamChannel;
    private final byte[] early;
    private final String host;
    private final int port;
    private final RunSecrets secrets;
    private final Link link;
    private final PlaceholderSwap swap;
    private final Set<String> applied;

    SecretTunnel(SocketChannel client, SocketChannel upstream, byte[] early, String host, int port, RunSecrets secrets, Link link) {
        this.client = client;
        this.upstreamChannel = upstream;
        this.early = early;
        this.host = host;
        this.port = port;
        this.secrets = secrets;
        this.link = link;
        this.swap = new PlaceholderSwap(secrets, host, port);
        this.applied = swap.applied();
    }

    /** The names of the secrets put in so far (read by another thread when the run ends first). */
    Set<String> applied() {
        return applied;
    }

    /** Runs the tunnel until either side closes it or a request is refused. */
    Outcome run() {
        Interception via = secrets.interception();
        TlsServerStream program;
        try {
            SSLEngine engine = via.ca().serverContext(host).createSSLEngine();
            engine.setUseClientMode(false);
            SSLParameters p = engine.getSSLParameters();
            p.setApplicationProtocols(new String[] {"http/1.1"});
            engine.setSSLParameters(p);
            program = new TlsServerStream(engine, client, early);
            program.handshake();
        } catch (GeneralSecurityException | IOException e) {
            return new Outcome(ConnectionRecord.REFUSED, "tls_failed", "the program's TLS handshake with the proxy "
                    + "failed (" + EgressDecision.shorten(e.getMessage()) + "); programs trust the server's CA through "
                    + "SSL_CERT_FILE and the like", applied);
        }
        InputStream fromProgram = new BufferedInputStream(program.in(), COPY_BUFFER);
        OutputStream toProgram = new BufferedOutputStream(program.out(), COPY_BUFFER);
        SSLSocket up;
        try {
            up = (SSLSocket) via.upstream().getSocketFactory().createSocket(upstreamChannel.socket(), host, port, true);
            SSLParameters p = up.getSSLParameters();
            p.setEndpointIdentificationAlgorithm("HTTPS");
            p.setServerNames(List.of(new SNIHostName(host)));
            p.setApplicationProtocols(new String[] {"http/1.1"});
            up.setSSLParameters(p);
            up.startHandshake();
        } catch (IOException | IllegalArgumentException e) {
            String why = host + ":" + port + " failed the proxy's TLS check (" + EgressDecision.shorten(rootMessage(e))
                    + "); nothing was sent to it";
            try {
                readHead(fromProgram); // the answer after the request: a close with the request unread could reset it
            } catch (IOException ignored) {
                // answered all the same
            }
            answer(toProgram, 502, "upstream_tls", why);
            program.close();
            return new Outcome(ConnectionRecord.FAILED, "upstream_tls", why, applied);
        }
        try {
            InputStream fromHost = new BufferedInputStream(up.getInputStream(), COPY_BUFFER);
            OutputStream toHost = new BufferedOutputStream(up.getOutputStream(), COPY_BUFFER);
            while (true) {
                Optional<Outcome> end = relayOne(fromProgram, toProgram, fromHost, toHost);
                if (end.isPresent()) {
                    program.close();
                    return end.get();
                }
            }
        } catch (IOException e) {
            return new Outcome(ConnectionRecord.ALLOWED, "closed", "closed", applied);
        } finally {
            try {
                up.close();
            } catch (IOException e) {
                // closing
            }
        }
    }

    /** One request and its response; an outcome when the tunnel ends with it. */
    private Optional<Outcome> relayOne(InputStream fromProgram, OutputStream toProgram, InputStream fromHost,
            OutputStream toHost) throws IOException {
        byte[] raw = readHead(fromProgram);
        if (raw == null) return Optional.of(new Outcome(ConnectionRecord.ALLOWED, "closed", "closed", applied));
        link.active();
        RequestHead request;
        RequestHead.Framing framing;
        try {
            request = RequestHead.parse(raw, raw.length);
            framing = request.framing();
        } catch (Malformed e) {
            return Optional.of(refuse(toProgram, 400, "bad_request", e.getMessage()));
        }
        if (!request.target().startsWith("/") && !request.target().equals("*"))
            return Optional.of(refuse(toProgram, 400, "bad_request", "a request through a tunnel to " + host
                    + " must be in origin form (/path)"));
        List<String> hosts = request.values("host");
        if (hosts.size() != 1 || !sameHost(hosts.get(0)))
            return Optional.of(refuse(toProgram, 400, "host_mismatch", "the request's Host must name " + host
                    + ", the host of its tunnel"));
        if (!request.values("upgrade").isEmpty())
            return Optional.of(refuse(toProgram, 400, "bad_request", "protocol upgrades (WebSocket) are not carried to a "
                    + "host that has a secret"));
        // the placeholders: each must be for this host
        StringBuilder head = new StringBuilder();
        boolean expectContinue = false;
        try {
            head.append(swap.text(request.method() + " " + request.target() + " " + request.version())).append("\r\n");
            for (RequestHead.Field f : request.fields()) {
                if (f.name().equalsIgnoreCase("expect") && f.value().equalsIgnoreCase("100-continue")) {
                    expectContinue = true;
                    continue;
                }
                // the answer must come as it is to be scanned: the program's wish for a compressed one is not passed
                if (f.name().equalsIgnoreCase("accept-encoding") || f.name().equalsIgnoreCase("te")) continue;
                head.append(f.name()).append(": ").append(swap.field(f.name(), f.value())).append("\r\n");
            }
            head.append("Accept-Encoding: identity\r\n");
        } catch (PlaceholderSwap.NotAllowed e) {
            RunSecrets.Placeholder p = e.placeholder();
            return Optional.of(refuse(toProgram, 403, "secret_not_allowed", "the placeholder of " + p.name()
                    + " may only be sent to " + String.join(", ", p.secret().hostPatterns()) + ", not to " + host));
        }
        head.append("\r\n");
        byte[] out = head.toString().getBytes(StandardCharsets.ISO_8859_1);
        if (!link.out(out.length)) return Optional.of(overCap());
        toHost.write(out);
        if (expectContinue) {
            toProgram.write("HTTP/1.1 100 Continue\r\n\r\n".getBytes(StandardCharsets.US_ASCII));
            toProgram.flush();
        }
        if (framing.chunked()) {
            if (!copyChunked(fromProgram, toHost, true)) return Optional.of(overCap());
        } else if (!copy(fromProgram, toHost, framing.length(), true)) {
            return Optional.of(overCap());
        }
        toHost.flush();
        boolean close = request.connectionOptions().contains("close") || request.version().equals("HTTP/1.0");
        return response(request.method(), fromHost, toProgram, close);
    }

    /** The response to the request just sent: heads scrubbed, a text body scrubbed within its bound. */
    private Optional<Outcome> response(String method, InputStream fromHost, OutputStream toProgram, boolean close)
            throws IOException {
        while (true) {
            byte[] raw = readHead(fromHost);
            if (raw == null) return Optional.of(new Outcome(ConnectionRecord.ALLOWED, "closed", host + " closed the connection", applied));
            link.active();
            ResponseHead response;
            ResponseHead.Framing framing;
            try {
                response = ResponseHead.parse(raw, raw.length);
                framing = response.framing(method);
            } catch (Malformed e) {
                return Optional.of(refuse(toProgram, 502, "bad_response", host + " sent a response the proxy cannot read: "
                        + e.getMessage()));
            }
            String head = scrub(new String(raw, StandardCharsets.ISO_8859_1));
            if (response.interim() || response.status() == 101) {
                if (!send(toProgram, (head + "\r\n\r\n").getBytes(StandardCharsets.ISO_8859_1))) return Optional.of(overCap());
                toProgram.flush();
                if (response.status() == 101)
                    return Optional.of(new Outcome(ConnectionRecord.ALLOWED, "closed", "the upgrade was not carried", applied));
                continue;
            }
            boolean text = scanned(response);
            String codings = codings(response);
            if (text && !codings.isEmpty() && framing.kind() != ResponseHead.Framing.Kind.NONE)
                return Optional.of(refuse(toProgram, 502, "encoded_response", host + " answered with a compressed body ("
                        + EgressDecision.shorten(scrub(codings)) + ") although the proxy asked it for identity; a compressed text body cannot be "
                        + "scanned for the run's secrets, so it was not passed on"));
            boolean ok = switch (framing.kind()) {
                case NONE -> send(toProgram, (head + "\r\n\r\n").getBytes(StandardCharsets.ISO_8859_1));
                case LENGTH -> text ? scrubLength(fromHost, toProgram, head, framing.length())
                        : send(toProgram, (head + "\r\n\r\n").getBytes(StandardCharsets.ISO_8859_1))
                        && copy(fromHost, toProgram, framing.length(), false);
                case CHUNKED -> text ? scrubChunked(fromHost, toProgram, head)
                        : send(toProgram, (head + "\r\n\r\n").getBytes(StandardCharsets.ISO_8859_1))
                        && copyChunked(fromHost, toProgram, false);
                case UNTIL_CLOSE -> untilClose(fromHost, toProgram, head, text);
            };
            toProgram.flush();
            if (!ok) return Optional.of(overCap());
            if (framing.kind() == ResponseHead.Framing.Kind.UNTIL_CLOSE || close || !response.keepsAlive())
                return Optional.of(new Outcome(ConnectionRecord.ALLOWED, "closed", "closed", applied));
            return Optional.empty();
        }
    }

    private String scrub(String text) {
        return swap.scrub(text);
    }

    private byte[] scrub(byte[] body) {
        return swap.scrub(body);
    }

    static byte[] replace(byte[] in, byte[] what, byte[] with) {
        int at = Http1.indexOf(in, 0, in.length, what);
        if (at < 0) return in;
        ByteArrayOutputStream out = new ByteArrayOutputStream(in.length);
        int from = 0;
        while (at >= 0) {
            out.write(in, from, at - from);
            out.writeBytes(with);
            from = at + what.length;
            at = Http1.indexOf(in, from, in.length, what);
        }
        out.write(in, from, in.length - from);
        return out.toByteArray();
    }

    /** A whole text body, scrubbed, with its Content-Length as it is now. */
    private boolean sendWhole(OutputStream toProgram, String head, byte[] body) throws IOException {
        return sendScrubbed(toProgram, head, body, 0);
    }

    /**
     * A text body of a known length: its first part (up to the bound) scrubbed, the rest as it comes. A placeholder is
     * not as long as the value it replaces, so the Content-Length is the scrubbed part's plus the rest's.
     */
    private boolean scrubLength(InputStream fromHost, OutputStream toProgram, String head, long length) throws IOException {
        int first = (int) Math.min(length, Interception.BODY_SCAN_MAX);
        long rest = length - first;
        return sendScrubbed(toProgram, head, readExactly(fromHost, first), rest) && copy(fromHost, toProgram, rest, false);
    }

    /** The head with a Content-Length for {@code first} scrubbed and {@code rest} bytes after it, then {@code first}. */
    private boolean sendScrubbed(OutputStream toProgram, String head, byte[] first, long rest) throws IOException {
        byte[] clean = scrub(first);
        String h = withoutFields(head, "content-length", "transfer-encoding") + "\r\nContent-Length: " + (clean.length + rest)
                + "\r\n\r\n";
        return send(toProgram, h.getBytes(StandardCharsets.ISO_8859_1)) && send(toProgram, clean);
    }

    /**
     * A chunked text body: read whole when it ends within the bound and sent scrubbed with a Content-Length;
     * else its first part scrubbed as one chunk and the rest of its chunks as they come.
     */
    private boolean scrubChunked(InputStream fromHost, OutputStream toProgram, String head) throws IOException {
        ByteArrayOutputStream body = new ByteArrayOutputStream();
        while (body.size() <= Interception.BODY_SCAN_MAX) {
            String sizeLine = readLine(fromHost);
            long size = chunkSize(sizeLine);
            if (size == 0) {
                while (!readLine(fromHost).isEmpty()) {
                    // trailers: dropped with the chunked framing
                }
                return sendWhole(toProgram, head, body.toByteArray());
            }
            body.writeBytes(readExactly(fromHost, (int) Math.min(size, Interception.BODY_SCAN_MAX + 1L)));
            if (size > Interception.BODY_SCAN_MAX + 1L) throw new IOException("a chunk larger than the scan bound");
            if (!readLine(fromHost).isEmpty()) throw new IOException("a chunk's data is not followed by CRLF");
        }
        byte[] first = scrub(body.toByteArray());
        if (!send(toProgram, (head + "\r\n\r\n").getBytes(StandardCharsets.ISO_8859_1))) return false;
        if (!send(toProgram, (Integer.toHexString(first.length) + "\r\n").getBytes(StandardCharsets.US_ASCII))) return false;
        if (!send(toProgram, first) || !send(toProgram, "\r\n".getBytes(StandardCharsets.US_ASCII))) return false;
        return copyChunked(fromHost, toProgram, false);
    }

    private boolean untilClose(InputStream fromHost, OutputStream toProgram, String head, boolean text) throws IOException {
        if (!send(toProgram, (head + "\r\n\r\n").getBytes(StandardCharsets.ISO_8859_1))) return false;
        if (text) {
            byte[] first = fromHost.readNBytes(Interception.BODY_SCAN_MAX);
            if (!send(toProgram, scrub(first))) return false;
        }
        return copy(fromHost, toProgram, Long.MAX_VALUE, false);
    }

    /** Copies {@code length} bytes (or to the end); false past the run's caps. */
    private boolean copy(InputStream from, OutputStream to, long length, boolean outbound) throws IOException {
        byte[] b = new byte[COPY_BUFFER];
        long left = length;
        while (left > 0) {
            int r = from.read(b, 0, (int) Math.min(b.length, left));
            if (r < 0) {
                if (length == Long.MAX_VALUE) break;
                throw new IOException("closed within a body");
            }
            link.active();
            if (!(outbound ? link.out(r) : link.in(r))) return false;
            to.write(b, 0, r);
            left -= r;
        }
        return true;
    }

    /** Copies a chunked body as it is, chunk by chunk, to its end (trailers included). */
    private boolean copyChunked(InputStream from, OutputStream to, boolean outbound) throws IOException {
        while (true) {
            String sizeLine = readLine(from);
            long size = chunkSize(sizeLine);
            byte[] line = (sizeLine + "\r\n").getBytes(StandardCharsets.ISO_8859_1);
            if (!(outbound ? link.out(line.length) : link.in(line.length))) return false;
            to.write(line);
            if (size == 0) {
                while (true) {
                    String trailer = readLine(from);
                    to.write((trailer + "\r\n").getBytes(StandardCharsets.ISO_8859_1));
                    if (trailer.isEmpty()) return true;
                }
            }
            if (!copy(from, to, size, outbound)) return false;
            if (!readLine(from).isEmpty()) throw new IOException("a chunk's data is not followed by CRLF");
            to.write("\r\n".getBytes(StandardCharsets.US_ASCII));
        }
    }

    private static long chunkSize(String line) throws IOException {
        int end = 0;
        while (end < line.length() && Character.digit(line.charAt(end), 16) >= 0) end++;
        if (end == 0 || end > 15) throw new IOException("a chunk size is not a hex number");
        return Long.parseLong(line.substring(0, end), 16);
    }

    /** One CRLF-ended line (without it), at most 8 KiB. */
    private static String readLine(InputStream in) throws IOException {
        StringBuilder b = new StringBuilder();
        while (true) {
            int c = in.read();
            if (c < 0) throw new IOException("closed within a chunked body");
            if (c == '\n') {
                if (b.isEmpty() || b.charAt(b.length() - 1) != '\r') throw new IOException("a line without CR");
                return b.substring(0, b.length() - 1);
            }
            if (b.length() > 8192) throw new IOException("a chunk line is too long");
            b.append((char) c);
        }
    }

    private static byte[] readExactly(InputStream in, int n) throws IOException {
        byte[] b = in.readNBytes(n);
        if (b.length < n) throw new IOException("closed within a body");
        return b;
    }

    /** A head up to its blank line (without it), or null when the stream ends before a byte of it. */
    private static byte[] readHead(InputStream in) throws IOException {
        ByteArrayOutputStream b = new ByteArrayOutputStream(1024);
        int matched = 0;
        while (matched < 4) {
            int c = in.read();
            if (c < 0) {
                if (b.size() == 0) return null;
                throw new IOException("closed within a head");
            }
            b.write(c);
            matched = c == (matched % 2 == 0 ? '\r' : '\n') ? matched + 1 : c == '\r' ? 1 : 0;
            if (b.size() > HEAD_MAX) throw new IOException("a head longer than " + HEAD_MAX + " bytes");
        }
        byte[] all = b.toByteArray();
        return Arrays.copyOf(all, all.length - 4);
    }

    private boolean send(OutputStream toProgram, byte[] b) throws IOException {
        if (!link.in(b.length)) return false;
        toProgram.write(b);
        return true;
    }

    private boolean sameHost(String value) {
        String v = value.toLowerCase(Locale.ROOT);
        if (v.endsWith(":" + port)) v = v.substring(0, v.length() - (":" + port).length());
        else if (v.endsWith(":443") && port != 443) return false;
        if (v.endsWith(".")) v = v.substring(0, v.length() - 1);
        return v.equals(host);
    }

    /** Whether a body of this type is one the tunnel scans: text, JSON, XML, JavaScript, form data, or no type. */
    private static boolean scanned(ResponseHead r) {
        String type = String.join(",", r.values("content-type")).toLowerCase(Locale.ROOT);
        return type.startsWith("text/") || type.contains("json") || type.contains("xml") || type.contains("javascript")
                || type.contains("x-www-form-urlencoded") || type.isEmpty();
    }

    /**
     * The codings of a body besides identity and chunked, as the head names them ("" for none): a compressed body
     * (a content coding, or a transfer coding), which cannot be scanned.
     */
    private static String codings(ResponseHead r) {
        List<String> out = new ArrayList<>();
        for (String field : List.of("content-encoding", "transfer-encoding"))
            for (String coding : String.join(",", r.values(field)).split(","))
                if (!coding.isBlank() && !coding.strip().equalsIgnoreCase("identity") && !coding.strip().equalsIgnoreCase("chunked"))
                    out.add(coding.strip().toLowerCase(Locale.ROOT));
        return String.join(", ", out);
    }

    private static String withoutFields(String head, String... names) {
        StringBuilder out = new StringBuilder();
        String[] lines = head.split("\r\n", -1);
        out.append(lines[0]);
        outer:
        for (int i = 1; i < lines.length; i++) {
            int colon = lines[i].indexOf(':');
            String name = colon < 0 ? "" : lines[i].substring(0, colon).strip();
            for (String n : names) if (name.equalsIgnoreCase(n)) continue outer;
            out.append("\r\n").append(lines[i]);
        }
        return out.toString();
    }

    private Outcome refuse(OutputStream toProgram, int status, String reason, String message) {
        answer(toProgram, status, reason, message);
        String decision = status == 502 ? ConnectionRecord.FAILED : ConnectionRecord.REFUSED;
        return new Outcome(decision, reason, message, applied);
    }

    private Outcome overCap() {
        return new Outcome(ConnectionRecord.ALLOWED, "byte_limit", "the run reached its network transfer cap (EGRESS_MAX_MB); "
                + "the connection was closed", applied);
    }

    /** The proxy's own answer to the program, in the words of the proxy's other refusals. */
    private static void answer(OutputStream toProgram, int status, String reason, String message) {
        String decision = status == 502 ? ConnectionRecord.FAILED : ConnectionRecord.REFUSED;
        String body = "code-exec-mcp egress proxy: " + (status == 502 ? "failed" : "refused") + " (" + reason + "): " + message + "\n";
        byte[] b = body.getBytes(StandardCharsets.UTF_8);
        String head = "HTTP/1.1 " + status + " " + EgressChannel.reasonPhrase(status) + "\r\nContent-Type: text/plain; charset=utf-8\r\n"
                + "X-Codeexec-Egress: " + decision + "; reason=" + reason + "\r\nContent-Length: " + b.length
                + "\r\nConnection: close\r\n\r\n";
        try {
            toProgram.write(head.getBytes(StandardCharsets.US_ASCII));
            toProgram.write(b);
            toProgram.flush();
        } catch (IOException e) {
            // the program went away; the record says why
        }
    }

    private static String rootMessage(Throwable e) {
        Throwable t = e;
        while (t.getCause() != null && t.getCause() != t) t = t.getCause();
        return t.getMessage() == null ? t.getClass().getSimpleName() : t.getMessage();
    }
}
