package dev.codeexec.engine;

import java.util.ArrayDeque;

/**
 * What a result keeps of one output stream: all of it up to {@code keepBytes} (counted as UTF-8), and beyond that
 * its head and its tail, half each, joined by a marker saying how many bytes were left out of the middle. The tail
 * is where errors and final answers are; the head says what the program set out to do. Memory stays within
 * {@code keepBytes} plus one chunk however much is appended. Thread-safe.
 */
public final class CapturedText {

    /** A stream's text as a result carries it; {@code truncated} when bytes were left out of its middle. */
    public record Captured(String text, boolean truncated) {
        public static final Captured EMPTY = new Captured("", false);
    }

    private final long headCap;
    private final long tailCap;
    private final StringBuilder head = new StringBuilder();
    private final ArrayDeque<String> tail = new ArrayDeque<>();
    private long headBytes;
    private long tailBytes;
    private long leftOut;
    /** An unpaired high surrogate at the end of the last append, held until its partner arrives. */
    private char pendingHigh;

    public CapturedText(long keepBytes) {
        this.headCap = keepBytes / 2;
        this.tailCap = keepBytes - headCap;
    }

    public synchronized void append(String s) {
        if (s.isEmpty()) return;
        if (pendingHigh != 0) {
            s = pendingHigh + s;
            pendingHigh = 0;
        }
        if (Character.isHighSurrogate(s.charAt(s.length() - 1))) {
            pendingHigh = s.charAt(s.length() - 1);
            s = s.substring(0, s.length() - 1);
            if (s.isEmpty()) return;
        }
        int i = 0;
        if (headBytes < headCap) {
            // into the head as far as it has room, never splitting a character
            int end = i;
            long bytes = headBytes;
            while (end < s.length()) {
                int cp = s.codePointAt(end);
                int n = utf8Length(cp);
                if (bytes + n > headCap) break;
                bytes += n;
                end += Character.charCount(cp);
            }
            head.append(s, i, end);
            headBytes = bytes;
            i = end;
            if (i == s.length()) return;
            // the head is full, or the next character does not fit in it: the head is closed from here on
            headBytes = headCap;
        }
        String rest = i == 0 ? s : s.substring(i);
        tail.addLast(rest);
        tailBytes += utf8Length(rest);
        while (tailBytes > tailCap) {
            String first = tail.pollFirst();
            long firstBytes = utf8Length(first);
            long over = tailBytes - tailCap;
            if (firstBytes <= over) {
                tailBytes -= firstBytes;
                leftOut += firstBytes;
                continue;
            }
            // drop whole characters from the front of this chunk until the tail fits
            int cut = 0;
            long dropped = 0;
            while (dropped < over) {
                int cp = first.codePointAt(cut);
                dropped += utf8Length(cp);
                cut += Character.charCount(cp);
            }
            tail.addFirst(first.substring(cut));
            tailBytes -= dropped;
            leftOut += dropped;
        }
    }

    /** The text kept so far: all of it, or the head, the marker and the tail. */
    public synchronized Captured captured() {
        StringBuilder s = new StringBuilder(head);
        if (leftOut > 0) {
            if (!s.isEmpty() && s.charAt(s.length() - 1) != '\n') s.append('\n');
            s.append("[... ").append(leftOut).append(" bytes left out ...]\n");
        }
        for (String t : tail) s.append(t);
        if (pendingHigh != 0) s.append('\uFFFD');
        return new Captured(s.toString(), leftOut > 0);
    }

    /** Bytes left out of the middle so far. */
    public synchronized long leftOut() {
        return leftOut;
    }

    public static int utf8Length(int cp) {
        return cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
    }

    public static long utf8Length(String s) {
        long n = 0;
        for (int i = 0; i < s.length(); ) {
            int cp = s.codePointAt(i);
            n += utf8Length(cp);
            i += Character.charCount(cp);
        }
        return n;
    }
}
