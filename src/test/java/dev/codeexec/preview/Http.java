package dev.codeexec.preview;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/** The tests' raw HTTP/1.1: a client on one connection, and the reading both it and the fake app need. */
final class Http implements AutoCloseable {

    final Socket socket;
    final InputStream in;
    final OutputStream out;
    /** Bytes this client sent and received, to compare with what the proxy reports. */
    long sent;
    long received;

    Http(int port) throws IOException {
        socket = new Socket(InetAddress.getLoopbackAddress(), port);
        socket.setSoTimeout(30_000);
        InputStream raw = socket.getInputStream();
        in = new InputStream() {
            @Override
            public int read() throws IOException {
                int c = raw.read();
                if (c >= 0) received++;
                return c;
            }

            @Override
            public int read(byte[] b, int off, int len) throws IOException {
                int r = raw.read(b, off, len);
                if (r > 0) received += r;
                return r;
            }
        };
        out = socket.getOutputStream();
    }

    Http send(String text) throws IOException {
        byte[] b = text.getBytes(StandardCharsets.ISO_8859_1);
        out.write(b);
        sent += b.length;
        return this;
    }

    /** A response as the client read it. */
    record Response(int status, String head, Map<String, List<String>> headers, String body) {
        String header(String name) {
            List<String> v = headers.get(name.toLowerCase(Locale.ROOT));
            return v == null ? null : v.getFirst();
        }
    }

    Response get(String target, String... fields) throws IOException {
        StringBuilder b = new StringBuilder("GET " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\n");
        for (String f : fields) b.append(f).append("\r\n");
        send(b.append("\r\n").toString());
        return read();
    }

    /** The next response (its body by Content-Length or chunked; without either, until the proxy closes). */
    Response read() throws IOException {
        String head = readHead(in);
        if (head == null) throw new IOException("the connection closed before a response");
        Map<String, List<String>> headers = headers(head);
        int status = Integer.parseInt(head.substring(9, 12));
        String body;
        if (headers.containsKey("content-length") || headers.containsKey("transfer-encoding")) body = readBody(in, headers);
        else body = status == 101 || status == 304 || status == 204 ? "" : new String(in.readAllBytes(), StandardCharsets.UTF_8);
        return new Response(status, head, headers, body);
    }

    static Map<String, List<String>> headers(String head) {
        Map<String, List<String>> headers = new HashMap<>();
        String[] lines = head.split("\r\n");
        for (int i = 1; i < lines.length; i++) {
            int c = lines[i].indexOf(':');
            headers.computeIfAbsent(lines[i].substring(0, c).toLowerCase(Locale.ROOT), k -> new java.util.ArrayList<>())
                    .add(lines[i].substring(c + 1).strip());
        }
        return headers;
    }

    /** One head without its blank line, or null when the stream ends first. */
    static String readHead(InputStream in) throws IOException {
        ByteArrayOutputStream b = new ByteArrayOutputStream();
        int state = 0;
        while (state < 4) {
            int c = in.read();
            if (c < 0) return null;
            b.write(c);
            state = (c == '\r' && (state == 0 || state == 2)) || (c == '\n' && (state == 1 || state == 3)) ? state + 1 : c == '\r' ? 1 : 0;
        }
        String s = b.toString(StandardCharsets.ISO_8859_1);
        return s.substring(0, s.length() - 4);
    }

    static String readBody(InputStream in, Map<String, List<String>> headers) throws IOException {
        if (headers.containsKey("transfer-encoding")) {
            ByteArrayOutputStream body = new ByteArrayOutputStream();
            while (true) {
                int size = Integer.parseInt(readLine(in).split(";")[0].strip(), 16);
                if (size == 0) {
                    while (!readLine(in).isEmpty()) {
                        // trailers
                    }
                    return body.toString(StandardCharsets.UTF_8);
                }
                body.write(in.readNBytes(size));
                readLine(in);
            }
        }
        List<String> cl = headers.get("content-length");
        return cl == null ? "" : new String(in.readNBytes(Integer.parseInt(cl.getFirst())), StandardCharsets.UTF_8);
    }

    static String readLine(InputStream in) throws IOException {
        StringBuilder b = new StringBuilder();
        int c;
        while ((c = in.read()) >= 0 && c != '\n') if (c != '\r') b.append((char) c);
        return b.toString();
    }

    static void writeChunk(OutputStream out, String data) throws IOException {
        byte[] b = data.getBytes(StandardCharsets.UTF_8);
        out.write((Integer.toHexString(b.length) + "\r\n").getBytes(StandardCharsets.US_ASCII));
        out.write(b);
        out.write("\r\n".getBytes(StandardCharsets.US_ASCII));
        out.flush();
    }

    /** Whether the proxy closed the connection: the next read is the end. */
    boolean closedByPeer() throws IOException {
        try {
            return in.read() < 0;
        } catch (java.net.SocketException e) {
            return true;
        }
    }

    @Override
    public void close() throws IOException {
        socket.close();
    }
}
