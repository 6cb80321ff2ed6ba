package dev.codeexec.http1;

import java.nio.charset.StandardCharsets;

/** The byte and text helpers the HTTP/1.x readers of both proxies share. */
public final class Http1 {

    /** The blank line that ends a head. */
    public static final byte[] CRLF_CRLF = "\r\n\r\n".getBytes(StandardCharsets.US_ASCII);

    private Http1() {
    }

    /** Where {@code needle} starts in {@code hay[from, len)}, or -1. */
    public static int indexOf(byte[] hay, int from, int len, byte[] needle) {
        outer:
        for (int i = from; i + needle.length <= len; i++) {
            for (int j = 0; j < needle.length; j++) if (hay[i + j] != needle[j]) continue outer;
            return i;
        }
        return -1;
    }

    /**
     * A text from the wire made safe to quote in a message or a log line: at most 100 characters, every one outside
     * printable ASCII, and every quote and backslash, as {@code ?}.
     */
    public static String shorten(String s) {
        if (s == null) return "";
        StringBuilder b = new StringBuilder();
        for (int i = 0; i < s.length() && b.length() < 100; i++) {
            char c = s.charAt(i);
            b.append(c >= 0x20 && c < 0x7f && c != '"' && c != '\\' ? c : '?');
        }
        return b.toString();
    }

    /** Whether {@code s} is an RFC 9110 token (a method or a field name). */
    public static boolean isToken(String s) {
        if (s.isEmpty()) return false;
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            boolean ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || "!#$%&'*+-.^_`|~".indexOf(c) >= 0;
            if (!ok) return false;
        }
        return true;
    }

    /** The status code of the response head at {@code b[at, end)} ({@code HTTP/1.x NNN ...}), or -1. */
    public static int status(byte[] b, int at, int end) {
        if (end - at < 12 || b[at + 8] != ' ') return -1;
        int s = 0;
        for (int i = at + 9; i < at + 12; i++) {
            if (b[i] < '0' || b[i] > '9') return -1;
            s = s * 10 + (b[i] - '0');
        }
        return s;
    }
}
