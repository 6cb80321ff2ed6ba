package dev.codeexec.http1;

import java.util.List;
import java.util.Locale;

/**
 * One response head as a proxy reads it from an upstream it does not trust: the status line
 * ({@code HTTP/1.x NNN reason}) and fields checked by the same rules as a {@link RequestHead}'s, so the proxy finds
 * where the body ends exactly as a client will.
 *
 * @param fields the header fields in order, names as sent, values without surrounding whitespace
 */
public record ResponseHead(String version, int status, List<RequestHead.Field> fields) {

    public ResponseHead {
        fields = List.copyOf(fields);
    }

    /** How a response's body is delimited: none, a length, chunked, or until the upstream closes. */
    public record Framing(Kind kind, long length) {
        public enum Kind { NONE, LENGTH, CHUNKED, UNTIL_CLOSE }
    }

    /**
     * Parses {@code b[0, len)}, the head without the blank line that ends it.
     *
     * @throws Malformed naming the first rule the head breaks
     */
    public static ResponseHead parse(byte[] b, int len) throws Malformed {
        String[] lines = RequestHead.lines(b, len, "response");
        String line = lines[0];
        if (line.length() < 12 || !(line.startsWith("HTTP/1.1 ") || line.startsWith("HTTP/1.0 "))
                || (line.length() > 12 && line.charAt(12) != ' '))
            throw new Malformed("not an HTTP/1.x status line: '" + Http1.shorten(line) + "'");
        int status = Http1.status(b, 0, len);
        if (status < 100 || status > 999) throw new Malformed("not an HTTP/1.x status line: '" + Http1.shorten(line) + "'");
        return new ResponseHead(line.substring(0, 8), status, RequestHead.fields(lines, "response"));
    }

    /** The values of every field with this name (any case), in order. */
    public List<String> values(String name) {
        return RequestHead.values(fields, name);
    }

    /** Whether this is an interim response (1xx) other than 101, after which the final one follows. */
    public boolean interim() {
        return status >= 100 && status < 200 && status != 101;
    }

    /** Whether the upstream may keep the connection for a next request after this response. */
    public boolean keepsAlive() {
        String connection = String.join(",", values("connection")).toLowerCase(Locale.ROOT);
        if (version.equals("HTTP/1.0")) return connection.contains("keep-alive");
        return !connection.contains("close");
    }

    /**
     * How the body after this head is delimited (RFC 9112 section 6.3), for a request with {@code method}. Refused:
     * Content-Length with Transfer-Encoding, or a Content-Length that is not one number (the answer to two
     * requests could be read differently).
     */
    public Framing framing(String method) throws Malformed {
        if (method.equals("HEAD") || status < 200 || status == 204 || status == 304) return new Framing(Framing.Kind.NONE, 0);
        List<String> te = values("transfer-encoding"), cl = values("content-length");
        if (!te.isEmpty()) {
            if (!cl.isEmpty()) throw new Malformed("the response has both Content-Length and Transfer-Encoding");
            String[] codings = String.join(",", te).split(",");
            return codings[codings.length - 1].strip().equalsIgnoreCase("chunked")
                    ? new Framing(Framing.Kind.CHUNKED, -1) : new Framing(Framing.Kind.UNTIL_CLOSE, -1);
        }
        if (cl.isEmpty()) return new Framing(Framing.Kind.UNTIL_CLOSE, -1);
        if (cl.size() > 1 || !cl.get(0).matches("[0-9]{1,18}")) throw new Malformed("the response's Content-Length is not one number");
        return new Framing(Framing.Kind.LENGTH, Long.parseLong(cl.get(0)));
    }
}
