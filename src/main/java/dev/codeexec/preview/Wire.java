package dev.codeexec.preview;

import dev.codeexec.http1.ChunkedBody;
import dev.codeexec.http1.Http1;
import dev.codeexec.http1.Malformed;

import java.io.EOFException;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.util.Arrays;

/**
 * One direction of a connection as the proxy reads it: a buffer over a byte source, from which heads are taken
 * whole and bodies are passed on as their framing says. Whatever arrives is written on at once (no waiting for a
 * buffer to fill), so a stream the app writes slowly reaches the client as it is written.
 */
final class Wire {

    /** Reads like {@link java.io.InputStream#read(byte[], int, int)}: -1 at the end. */
    interface Source {
        int read(byte[] b, int off, int len) throws IOException;
    }

    /** Writes all of {@code b[off, off + len)}. */
    interface Sink {
        void write(byte[] b, int off, int len) throws IOException;
    }

    /** A head longer than its bound. */
    static final class TooLarge extends IOException {
        TooLarge() {
            super("the head is too long", null);
        }
    }

    /** A request body that grew past its bound while it streamed. */
    static final class BodyTooLarge extends IOException {
        BodyTooLarge() {
            super("the body is too large", null);
        }
    }

    private static final int CHUNK = 16 * 1024;

    private final Source source;
    private byte[] buf = new byte[CHUNK];
    private int pos;
    private int lim;

    Wire(Source source) {
        this.source = source;
    }

    /**
     * The next head, without the blank line that ends it, taken from the buffer; what follows it stays buffered.
     *
     * @return null when the source ended before the head's first byte
     * @throws TooLarge the head is longer than {@code max}
     * @throws EOFException the source ended inside the head
     */
    byte[] readHead(int max) throws IOException {
        int searched = 0; // bytes after pos already looked through (fill may move them to the buffer's start)
        while (true) {
            int end = Http1.indexOf(buf, pos + Math.max(0, searched - 3), lim, Http1.CRLF_CRLF);
            if (end >= 0) {
                byte[] head = Arrays.copyOfRange(buf, pos, end);
                pos = end + 4;
                return head;
            }
            if (lim - pos > max) throw new TooLarge();
            searched = lim - pos;
            if (fill() < 0) {
                if (lim == pos) return null;
                throw new EOFException("the connection ended inside a head");
            }
        }
    }

    /**
     * Passes one body on to {@code out}, as far as its framing goes and not a byte further.
     *
     * @param length the body's length; -1 with {@code chunked} false: until the source ends
     * @param cap the most bytes the body may have (Long.MAX_VALUE: any)
     * @throws BodyTooLarge the body went past {@code cap}
     * @throws EOFException the source ended before the body did
     * @throws Malformed the chunked framing is not valid
     */
    void relayBody(boolean chunked, long length, long cap, Sink out) throws IOException, Malformed {
        ChunkedBody chunks = chunked ? new ChunkedBody() : null;
        long left = length, sent = 0;
        while (chunks != null || left != 0) {
            if (pos == lim && fill() < 0) {
                if (chunks == null && left < 0) return;
                throw new EOFException("the connection ended inside a body");
            }
            int stop;
            boolean last = false;
            if (chunks != null) {
                int end = chunks.scan(ByteBuffer.wrap(buf), pos, lim);
                last = end >= 0;
                stop = last ? end : lim;
            } else {
                stop = left < 0 ? lim : (int) Math.min(lim, pos + left);
            }
            int n = stop - pos;
            if ((sent += n) > cap) throw new BodyTooLarge();
            out.write(buf, pos, n);
            pos = stop;
            if (left > 0) left -= n;
            if (last) return;
        }
    }

    /** Everything from here to the source's end (buffered bytes first), as it arrives: one side of a tunnel. */
    void pump(Sink out) throws IOException {
        while (true) {
            if (pos < lim) {
                out.write(buf, pos, lim - pos);
                pos = lim;
            }
            if (fill() < 0) return;
        }
    }

    /** How many bytes are read but not yet taken. */
    int buffered() {
        return lim - pos;
    }

    /** Reads more into the buffer; the source's count, or -1 at its end. */
    private int fill() throws IOException {
        if (pos == lim) {
            pos = 0;
            lim = 0;
        } else if (lim == buf.length) {
            if (pos > 0) {
                System.arraycopy(buf, pos, buf, 0, lim - pos);
                lim -= pos;
                pos = 0;
            } else {
                buf = Arrays.copyOf(buf, buf.length * 2);
            }
        }
        int r = source.read(buf, lim, buf.length - lim);
        if (r > 0) lim += r;
        return r;
    }
}
