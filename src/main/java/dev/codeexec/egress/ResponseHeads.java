package dev.codeexec.egress;

import dev.codeexec.http1.Http1;

import java.io.ByteArrayOutputStream;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.HashSet;
import java.util.Locale;
import java.util.Set;

/**
 * The response heads of a plain-HTTP request on their way to the client: interim ones (1xx, e.g. 100 Continue) as
 * they are, the final one saying {@code Connection: close} in place of any Connection or Keep-Alive fields. The
 * proxy carries one request per connection; a client told so opens a new connection for its next request instead
 * of sending it on this one. Only the heads are read; the body after them passes untouched. A response that does
 * not look like HTTP/1.x, or whose head is longer than {@link #MAX}, passes as it came.
 */
final class ResponseHeads {

    static final int MAX = 64 * 1024;

    private byte[] buf = new byte[2048];
    private int len;
    private boolean done;

    /** Whether the final head has gone by: what follows is body, to be relayed as it is. */
    boolean done() {
        return done;
    }

    /**
     * Takes the bytes {@code b} has left (all of them) and returns what the client gets now: nothing while a head is
     * incomplete, else the heads so far (the final one rewritten) and whatever followed them.
     */
    byte[] feed(ByteBuffer b) {
        int n = b.remaining();
        if (len + n > buf.length) buf = Arrays.copyOf(buf, Math.max(buf.length * 2, len + n));
        b.get(buf, len, n);
        len += n;
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        int at = 0;
        while (!done) {
            if (len - at >= 7 && !startsWith(buf, at, "HTTP/1.")) return passRest(out, at);
            int end = Http1.indexOf(buf, at, len, Http1.CRLF_CRLF);
            if (end < 0) {
                if (len - at > MAX) return passRest(out, at);
                break;
            }
            int status = Http1.status(buf, at, end);
            if (status >= 100 && status < 200 && status != 101) {
                out.write(buf, at, end + 4 - at); // interim: the final head is still to come
                at = end + 4;
                continue;
            }
            out.writeBytes(closing(new String(buf, at, end - at, StandardCharsets.ISO_8859_1)));
            at = end + 4;
            done = true;
            out.write(buf, at, len - at);
            at = len;
        }
        System.arraycopy(buf, at, buf, 0, len - at);
        len -= at;
        if (done) buf = null;
        return out.toByteArray();
    }

    /** What is held back when the upstream closes before a head was complete: passed as it came. */
    byte[] rest() {
        return buf == null ? new byte[0] : Arrays.copyOf(buf, len);
    }

    private byte[] passRest(ByteArrayOutputStream out, int at) {
        out.write(buf, at, len - at);
        done = true;
        buf = null;
        return out.toByteArray();
    }

    /** The head with Connection: close, without the fields that say otherwise or that Connection names. */
    static byte[] closing(String head) {
        String[] lines = head.split("\r\n", -1);
        Set<String> drop = new HashSet<>(Set.of("connection", "keep-alive", "proxy-connection"));
        for (String line : lines) {
            int colon = line.indexOf(':');
            if (colon > 0 && line.substring(0, colon).strip().equalsIgnoreCase("connection"))
                for (String option : line.substring(colon + 1).split(",")) drop.add(option.strip().toLowerCase(Locale.ROOT));
        }
        StringBuilder out = new StringBuilder(lines[0]).append("\r\n");
        for (int i = 1; i < lines.length; i++) {
            int colon = lines[i].indexOf(':');
            if (colon > 0 && drop.contains(lines[i].substring(0, colon).strip().toLowerCase(Locale.ROOT))) continue;
            out.append(lines[i]).append("\r\n");
        }
        return out.append("Connection: close\r\n\r\n").toString().getBytes(StandardCharsets.ISO_8859_1);
    }

    private static boolean startsWith(byte[] b, int at, String prefix) {
        for (int i = 0; i < prefix.length(); i++) if (b[at + i] != prefix.charAt(i)) return false;
        return true;
    }
}
