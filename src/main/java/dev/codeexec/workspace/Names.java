package dev.codeexec.workspace;

/**
 * File names as the kernel has them (any bytes but '/' and NUL, not necessarily UTF-8), as this package holds them
 * (a String), and as clients see them. A program can create names that are not UTF-8; decoding them the usual way
 * replaces every bad byte with U+FFFD, so two different files would list under one name and could not be told apart.
 *
 * <ul>
 * <li><b>Held</b> ({@link #decode}, {@link #encode}): UTF-8 where it is valid; each byte of an invalid sequence
 * becomes the lone surrogate U+DC80..U+DCFF ("surrogateescape"), which valid UTF-8 never yields, so the String maps
 * back to exactly the bytes on disk. {@link RelPath#parse} refuses lone surrogates from clients.</li>
 * <li><b>Shown</b> ({@link #display}): a name that is valid UTF-8 without control characters or backslashes is
 * shown as it is; any other is shown with each byte of an invalid sequence and each control character as
 * {@code \xHH} and a backslash as {@code \\}. Plain names hold no backslash and shown ones always do, and the
 * escapes decode back to the bytes, so two different names never show alike.</li>
 * </ul>
 */
final class Names {

    private Names() {
    }

    /** The held form of raw name bytes. */
    static String decode(byte[] raw) {
        StringBuilder sb = new StringBuilder(raw.length);
        int i = 0;
        while (i < raw.length) {
            int n = sequenceLength(raw, i);
            if (n == 0) {
                sb.append((char) (0xDC00 | (raw[i] & 0xff)));
                i++;
            } else {
                sb.append(new String(raw, i, n, java.nio.charset.StandardCharsets.UTF_8));
                i += n;
            }
        }
        return sb.toString();
    }

    /** The raw bytes of a held name. */
    static byte[] encode(String held) {
        java.io.ByteArrayOutputStream out = new java.io.ByteArrayOutputStream(held.length() + 8);
        for (int i = 0; i < held.length(); ) {
            int cp = held.codePointAt(i);
            i += Character.charCount(cp);
            if (cp >= 0xDC80 && cp <= 0xDCFF) {
                out.write(cp & 0xff);
            } else if (cp >= 0xD800 && cp <= 0xDFFF) {
                throw new WorkspaceException(WorkspaceException.Kind.BAD_PATH, "a name is not valid Unicode");
            } else {
                out.writeBytes(new String(Character.toChars(cp)).getBytes(java.nio.charset.StandardCharsets.UTF_8));
            }
        }
        return out.toByteArray();
    }

    /** How a held name is shown to clients (see the class comment). */
    static String display(String held) {
        if (plain(held)) return held;
        StringBuilder sb = new StringBuilder(held.length() + 16);
        for (int i = 0; i < held.length(); ) {
            int cp = held.codePointAt(i);
            i += Character.charCount(cp);
            if (cp >= 0xDC80 && cp <= 0xDCFF) {
                hex(sb, cp & 0xff);
            } else if (cp == '\\') {
                sb.append("\\\\");
            } else if (isControl(cp)) {
                for (byte b : new String(Character.toChars(cp)).getBytes(java.nio.charset.StandardCharsets.UTF_8))
                    hex(sb, b & 0xff);
            } else {
                sb.appendCodePoint(cp);
            }
        }
        return sb.toString();
    }

    private static boolean plain(String held) {
        for (int i = 0; i < held.length(); ) {
            int cp = held.codePointAt(i);
            i += Character.charCount(cp);
            // codePointAt yields a lone surrogate as itself: a byte of an invalid sequence
            if (cp == '\\' || isControl(cp) || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
        }
        return true;
    }

    /** C0, DEL and C1 controls: a name holding them could fake lines or terminal escapes in a listing. */
    private static boolean isControl(int cp) {
        return cp < 0x20 || cp >= 0x7f && cp < 0xa0;
    }

    private static void hex(StringBuilder sb, int b) {
        sb.append("\\x").append(Character.forDigit(b >> 4, 16)).append(Character.forDigit(b & 15, 16));
    }

    /** The length of the valid UTF-8 sequence at {@code i}, or 0 when the byte there does not start one. */
    private static int sequenceLength(byte[] b, int i) {
        int c = b[i] & 0xff;
        if (c < 0x80) return 1;
        int n;
        int min;
        if (c >= 0xC2 && c <= 0xDF) {
            n = 2;
            min = 0x80;
        } else if (c >= 0xE0 && c <= 0xEF) {
            n = 3;
            min = 0x800;
        } else if (c >= 0xF0 && c <= 0xF4) {
            n = 4;
            min = 0x10000;
        } else {
            return 0;
        }
        if (i + n > b.length) return 0;
        int cp = c & (0xFF >> (n + 1));
        for (int k = 1; k < n; k++) {
            int cc = b[i + k] & 0xff;
            if ((cc & 0xC0) != 0x80) return 0;
            cp = (cp << 6) | (cc & 0x3F);
        }
        if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
        return n;
    }
}
