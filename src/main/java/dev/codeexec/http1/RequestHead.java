package dev.codeexec.http1;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;

/**
 * One request head as a proxy (egress, preview) reads it, checked as strictly as RFC 9112 asks of a server: whatever an upstream
 * might read differently from the proxy is refused (400) before anything is sent on. The proxy decides on the URL's
 * host and rewrites the head; a line it reads one way and an upstream another (a second Host smuggled past the
 * check, a body whose end they disagree on) would undo that decision.
 *
 * <p>Refused: a NUL, a CR not followed by LF or a LF not preceded by CR anywhere in the head; a request line other
 * than {@code method SP target SP HTTP/1.0|1.1}; a line folded onto the one before (obs-fold, a line starting with
 * SP or HTAB); a field name that is not a token, including whitespace before its colon ({@code Host : evil}); a
 * control character in a field value; more than one Host. {@link #framing} adds the body's rules.
 *
 * @param fields the header fields in order, names as sent, values without surrounding whitespace
 */
public record RequestHead(String method, String target, String version, List<Field> fields) {

    public RequestHead {
        fields = List.copyOf(fields);
    }

    /** One header field line. */
    public record Field(String name, String value) {
    }

    /** How the request's body is delimited. */
    public record Framing(boolean chunked, long length) {
        public static final Framing NONE = new Framing(false, 0);
    }

    /**
     * Parses {@code b[0, len)}, the head without the blank line that ends it.
     *
     * @throws Malformed naming the first rule the head breaks
     */
    public static RequestHead parse(byte[] b, int len) throws Malformed {
        String[] lines = lines(b, len, "request");
        String[] req = lines[0].split(" ", -1);
        if (req.length != 3 || !Http1.isToken(req[0]) || !isTarget(req[1]) || !(req[2].equals("HTTP/1.1") || req[2].equals("HTTP/1.0")))
            throw new Malformed("not an HTTP proxy request: '" + Http1.shorten(lines[0]) + "'");
        List<Field> fields = fields(lines, "request");
        if (values(fields, "host").size() > 1) throw new Malformed("the request has more than one Host header");
        return new RequestHead(req[0], req[1], req[2], fields);
    }

    /** The lines of the head {@code b[0, len)}; refused: a NUL, a CR without LF, a LF without CR. */
    static String[] lines(byte[] b, int len, String what) throws Malformed {
        for (int i = 0; i < len; i++) {
            byte c = b[i];
            if (c == 0) throw new Malformed("the " + what + " head has a NUL byte");
            if (c == '\r' && (i + 1 == len || b[i + 1] != '\n')) throw new Malformed("the " + what + " head has a CR without LF");
            if (c == '\n' && (i == 0 || b[i - 1] != '\r')) throw new Malformed("the " + what + " head has a LF without CR");
        }
        return new String(b, 0, len, StandardCharsets.ISO_8859_1).split("\r\n", -1);
    }

    /** The field lines after the first line, each checked (see the class comment). */
    static List<Field> fields(String[] lines, String what) throws Malformed {
        List<Field> fields = new ArrayList<>(lines.length - 1);
        for (int i = 1; i < lines.length; i++) {
            String line = lines[i];
            if (line.isEmpty()) throw new Malformed("the " + what + " head has an empty line inside it");
            if (line.charAt(0) == ' ' || line.charAt(0) == '\t')
                throw new Malformed("a header line folded onto the one before it (obs-fold) is not accepted");
            int colon = line.indexOf(':');
            if (colon < 0) throw new Malformed("a header line without a colon: '" + Http1.shorten(line) + "'");
            String name = line.substring(0, colon);
            if (name.endsWith(" ") || name.endsWith("\t"))
                throw new Malformed("whitespace between the header name '" + Http1.shorten(name.strip()) + "' and its colon");
            if (!Http1.isToken(name)) throw new Malformed("'" + Http1.shorten(name) + "' is not a valid header name");
            String value = stripOws(line.substring(colon + 1));
            for (int k = 0; k < value.length(); k++) {
                char c = value.charAt(k);
                if ((c < 0x20 && c != '\t') || c == 0x7f)
                    throw new Malformed("the value of " + Http1.shorten(name) + " has a control character");
            }
            fields.add(new Field(name, value));
        }
        return fields;
    }

    /** The values of every field with this name (any case), in order. */
    static List<String> values(List<Field> fields, String name) {
        List<String> out = new ArrayList<>(1);
        for (Field f : fields) if (f.name.equalsIgnoreCase(name)) out.add(f.value);
        return out;
    }

    /** The values of every field with this name (any case), in order. */
    public List<String> values(String name) {
        return values(fields, name);
    }

    /** The options the Connection fields name, lower case: fields meant for this hop only. */
    public java.util.Set<String> connectionOptions() {
        java.util.Set<String> options = new java.util.HashSet<>();
        for (String v : values("connection"))
            for (String option : v.split(",")) if (!option.isBlank()) options.add(option.strip().toLowerCase(java.util.Locale.ROOT));
        return options;
    }

    /**
     * How the body is delimited (RFC 9112 section 6): chunked, a Content-Length, or no body. Refused: both
     * Content-Length and Transfer-Encoding (the CL.TE and TE.CL smuggling pair), a transfer coding other than
     * chunked alone, Transfer-Encoding in an HTTP/1.0 request, and a Content-Length that is not one number.
     */
    public Framing framing() throws Malformed {
        // a field that frames the message or names its host is for every recipient (RFC 9110 7.6.1): naming it as a
        // hop-by-hop option would have the proxy drop it from the request it sends on while still sending the body
        // it framed, which the upstream would then read as a request of its own
        for (String option : connectionOptions())
            if (option.equals("content-length") || option.equals("transfer-encoding") || option.equals("host"))
                throw new Malformed("Connection names " + option + ", which is not a hop-by-hop field");
        List<String> te = values("transfer-encoding"), cl = values("content-length");
        if (!te.isEmpty() && !cl.isEmpty())
            throw new Malformed("the request has both Content-Length and Transfer-Encoding; it must give its body's length one way");
        if (!te.isEmpty()) {
            String codings = String.join(", ", te);
            if (version.equals("HTTP/1.0")) throw new Malformed("Transfer-Encoding in an HTTP/1.0 request");
            if (!codings.equalsIgnoreCase("chunked"))
                throw new Malformed("Transfer-Encoding '" + Http1.shorten(codings) + "': only chunked is accepted");
            return new Framing(true, -1);
        }
        if (cl.isEmpty()) return Framing.NONE;
        if (cl.size() > 1 || !cl.get(0).matches("[0-9]{1,18}")) throw new Malformed("Content-Length must be one number");
        return new Framing(false, Long.parseLong(cl.get(0)));
    }

    /** Visible ASCII only: no whitespace, no control character, no byte over 0x7e. */
    private static boolean isTarget(String s) {
        if (s.isEmpty()) return false;
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            if (c <= 0x20 || c >= 0x7f) return false;
        }
        return true;
    }

    private static String stripOws(String s) {
        int from = 0, to = s.length();
        while (from < to && (s.charAt(from) == ' ' || s.charAt(from) == '\t')) from++;
        while (to > from && (s.charAt(to - 1) == ' ' || s.charAt(to - 1) == '\t')) to--;
        return s.substring(from, to);
    }
}
