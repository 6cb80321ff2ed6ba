package dev.codeexec.boot;

/**
 * How text that may come from a request (a JSON-RPC id, a client's name, a URI, a program's output) is written into
 * a log line, in one place. The threat: a value with a line break plants whole lines in the log ("... audit - run
 * id=... tenant=other"), a value with spaces and {@code =} plants fields in a {@code key=value} line, bidirectional
 * controls make a line read differently from what it holds. So:
 * <ul>
 *   <li>{@link #escape}: every control character (C0, DEL, C1), format character (bidirectional controls, zero-width
 *   characters) and line or paragraph separator becomes {@code \n}, {@code \r}, {@code \t} or {@code \}{@code uXXXX}.
 *   Every log event goes through it ({@link Logging}'s encoders, text and JSON alike), whatever logged it: our code,
 *   the MCP SDK (which logs a client's {@code clientInfo}), Jetty.</li>
 *   <li>{@link #value}: a field of a {@code key=value} line such as the audit line: a plain token as it is, anything
 *   else in double quotes with {@code "} and {@code \} escaped too, so a field ends where it seems to.</li>
 * </ul>
 */
public final class LogValues {

    private LogValues() {
    }

    /** The text with every character that could break or disguise a log line escaped; other text unchanged. */
    public static String escape(String s) {
        return escape(s, false);
    }

    /**
     * The inside of a double-quoted field: {@link #escape} plus {@code "} and {@code \}, so a reader splitting the line
     * on the quotes gets the value back whole.
     */
    public static String escapeQuoted(String s) {
        return escape(s, true);
    }

    /** A {@code key=value} field's value: a plain token as it is, else double-quoted with {@link #escapeQuoted}. */
    public static String value(String s) {
        return plain(s) ? s : "\"" + escapeQuoted(s) + "\"";
    }

    private static boolean plain(String s) {
        if (s.isEmpty()) return false;
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            boolean ok = c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || ".:_/@+-".indexOf(c) >= 0;
            if (!ok) return false;
        }
        return true;
    }

    private static String escape(String s, boolean quoted) {
        if (s == null) return "null";
        int first = 0;
        while (first < s.length() && !needsEscape(s.charAt(first), quoted)) first++;
        if (first == s.length()) return s; // the common case: nothing to do, no copy
        StringBuilder b = new StringBuilder(s.length() + 16).append(s, 0, first);
        for (int i = first; i < s.length(); i++) {
            char c = s.charAt(i);
            if (!needsEscape(c, quoted)) {
                b.append(c);
                continue;
            }
            switch (c) {
                case '\n' -> b.append("\\n");
                case '\r' -> b.append("\\r");
                case '\t' -> b.append("\\t");
                case '"' -> b.append("\\\"");
                case '\\' -> b.append("\\\\");
                default -> b.append(String.format("\\u%04x", (int) c));
            }
        }
        return b.toString();
    }

    private static boolean needsEscape(char c, boolean quoted) {
        if (c >= 0x20 && c < 0x7f) return quoted && (c == '"' || c == '\\');
        return switch (Character.getType(c)) {
            case Character.CONTROL, Character.FORMAT, Character.LINE_SEPARATOR, Character.PARAGRAPH_SEPARATOR -> true;
            default -> false;
        };
    }
}
