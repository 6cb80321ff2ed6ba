package dev.codeexec.http1;

import java.nio.ByteBuffer;

/**
 * Finds where a chunked body ends (RFC 9112 section 7.1), so a proxy sends on that body and not one byte
 * of what follows it. Reads only the framing: chunk data is skipped by count, so the cost is per chunk, not per
 * byte. Strict where a lenient upstream could end the body elsewhere: a chunk size is hex digits (at most 15),
 * every line ends in CRLF, and a chunk's data is followed by CRLF. A reader that needs the body itself (the egress
 * channel's local endpoint) gets each stretch of chunk data passed to a {@link Data} as the scan goes over it.
 */
public final class ChunkedBody {

    /** A chunk-size line with its extensions, or one trailer line. */
    private static final int LINE_MAX = 4096;
    private static final int TRAILERS_MAX = 16 * 1024;

    private enum State { SIZE, SIZE_EXT, SIZE_LF, DATA, DATA_CR, DATA_LF, TRAILER, TRAILER_LF, DONE }

    /** Receives the body's data, without the framing, in order. */
    @FunctionalInterface
    public interface Data {
        /** {@code b[from, from + length)} is the body's next data. */
        void accept(ByteBuffer b, int from, int length);
    }

    private State state = State.SIZE;
    private long size;
    private int digits;
    private int lineLength;
    private int trailerBytes;

    /**
     * Scans {@code b[from, to)}, the body's next bytes.
     *
     * @return the index just past the body's last byte, or -1 when the body goes on past {@code to}
     * @throws Malformed the framing is not valid chunked encoding
     */
    public int scan(ByteBuffer b, int from, int to) throws Malformed {
        return scan(b, from, to, null);
    }

    /**
     * Scans as {@link #scan(ByteBuffer, int, int)} does, passing the chunks' data to {@code data} (null: none).
     *
     * @return the index just past the body's last byte, or -1 when the body goes on past {@code to}
     * @throws Malformed the framing is not valid chunked encoding
     */
    public int scan(ByteBuffer b, int from, int to, Data data) throws Malformed {
        int i = from;
        while (i < to) {
            if (state == State.DATA) {
                int skip = (int) Math.min(size, to - i);
                if (data != null && skip > 0) data.accept(b, i, skip);
                size -= skip;
                i += skip;
                if (size == 0) state = State.DATA_CR;
                continue;
            }
            byte c = b.get(i++);
            switch (state) {
                case SIZE -> {
                    int hex = Character.digit(c, 16);
                    if (hex >= 0 && c < 0x80) {
                        if (++digits > 15) throw new Malformed("a chunk size is too long");
                        size = size * 16 + hex;
                    } else if (digits > 0 && (c == ';' || c == ' ' || c == '\t')) {
                        state = State.SIZE_EXT;
                    } else if (digits > 0 && c == '\r') {
                        state = State.SIZE_LF;
                    } else {
                        throw new Malformed("a chunk size is not a hex number");
                    }
                }
                case SIZE_EXT -> {
                    if (c == '\r') state = State.SIZE_LF;
                    else if (c == '\n' || c == 0) throw new Malformed("a chunk extension has a bare LF or a NUL");
                    else if (++lineLength > LINE_MAX) throw new Malformed("a chunk-size line is too long");
                }
                case SIZE_LF -> {
                    if (c != '\n') throw new Malformed("a chunk-size line does not end in CRLF");
                    lineLength = 0;
                    digits = 0;
                    state = size == 0 ? State.TRAILER : State.DATA;
                }
                case DATA_CR -> {
                    if (c != '\r') throw new Malformed("a chunk's data is not followed by CRLF");
                    state = State.DATA_LF;
                }
                case DATA_LF -> {
                    if (c != '\n') throw new Malformed("a chunk's data is not followed by CRLF");
                    state = State.SIZE;
                }
                case TRAILER -> {
                    if (++trailerBytes > TRAILERS_MAX) throw new Malformed("the chunked body's trailers are too long");
                    if (c == '\r') state = State.TRAILER_LF;
                    else if (c == '\n' || c == 0) throw new Malformed("a trailer line has a bare LF or a NUL");
                    else lineLength++;
                }
                case TRAILER_LF -> {
                    if (c != '\n') throw new Malformed("a trailer line does not end in CRLF");
                    if (lineLength == 0) {
                        state = State.DONE;
                        return i;
                    }
                    lineLength = 0;
                    state = State.TRAILER;
                }
                case DATA, DONE -> throw new IllegalStateException(state.name());
            }
        }
        return -1;
    }
}
