package dev.codeexec.engine;

import java.io.IOException;
import java.io.InputStream;
import java.nio.ByteBuffer;
import java.nio.CharBuffer;
import java.nio.charset.CharsetDecoder;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;

/**
 * Drains one output stream of a run: keeps at most {@code capBytes} bytes as text, hands every decoded chunk to
 * the listener as it arrives, and reports once when the cap is passed. It keeps reading (and discarding) past the
 * cap until end of stream, so a child writing into a full pipe is never blocked by us; the run is killed by the
 * over-cap callback instead.
 *
 * <p>Decoding is streaming UTF-8 with replacement: a multibyte character split across two reads is decoded
 * whole, and bytes that are not UTF-8 (binary output) become U+FFFD, so the result is always valid text.
 */
final class OutputCollector implements Runnable {

    private final InputStream in;
    private final long capBytes;
    private final OutputListener.Stream stream;
    private final OutputListener listener;
    private final Runnable onOverCap;
    private final CharsetDecoder decoder = StandardCharsets.UTF_8.newDecoder()
            .onMalformedInput(CodingErrorAction.REPLACE)
            .onUnmappableCharacter(CodingErrorAction.REPLACE);
    private final ByteBuffer pending = ByteBuffer.allocate(16 * 1024);
    private final CharBuffer chars = CharBuffer.allocate(16 * 1024);
    private final StringBuilder text = new StringBuilder();
    private long kept;
    private volatile boolean truncated;

    OutputCollector(InputStream in, long capBytes, OutputListener.Stream stream, OutputListener listener,
            Runnable onOverCap) {
        this.in = in;
        this.capBytes = capBytes;
        this.stream = stream;
        this.listener = listener;
        this.onOverCap = onOverCap;
    }

    /**
     * A collector fed by its caller ({@link #feed}, then {@link #end}) instead of reading a stream itself: for a
     * session call, whose output is the part of a long-lived stream before the call's marker.
     */
    OutputCollector(long capBytes, OutputListener.Stream stream, OutputListener listener, Runnable onOverCap) {
        this(null, capBytes, stream, listener, onOverCap);
    }

    @Override
    public void run() {
        byte[] buf = new byte[8192];
        try {
            int n;
            while ((n = in.read(buf)) >= 0) feed(buf, 0, n);
        } catch (IOException e) {
            // The pipe was closed under us (run killed and process closed): what we have is the output.
        }
        end();
    }

    /** Takes the next bytes of the stream: kept up to the cap, passed on to the listener as text. */
    void feed(byte[] buf, int off, int n) {
        if (truncated) return;
        long room = capBytes - kept;
        int keep = (int) Math.min(n, room);
        if (keep > 0) accept(buf, off, keep);
        if (n > room) {
            truncated = true;
            finish();
            onOverCap.run();
        }
    }

    /** The stream ended: decodes what is pending (an incomplete character becomes U+FFFD). */
    void end() {
        if (!truncated) finish();
    }

    private void accept(byte[] buf, int start, int len) {
        kept += len;
        int off = start;
        int stop = start + len;
        while (off < stop) {
            int chunk = Math.min(stop - off, pending.remaining());
            pending.put(buf, off, chunk);
            off += chunk;
            pending.flip();
            // Decoded chars never outnumber bytes, so the char buffer cannot overflow here.
            decoder.decode(pending, chars, false);
            pending.compact();
            emit();
        }
    }

    private void finish() {
        pending.flip();
        decoder.decode(pending, chars, true);
        decoder.flush(chars);
        pending.clear();
        emit();
    }

    private void emit() {
        chars.flip();
        if (chars.hasRemaining()) {
            String s = chars.toString();
            synchronized (text) {
                text.append(s);
            }
            try {
                listener.onOutput(stream, s);
            } catch (RuntimeException e) {
                // A failing listener must not stop the draining of the pipe.
            }
        }
        chars.clear();
    }

    /** The text collected so far (complete once the reader thread has ended). */
    String text() {
        synchronized (text) {
            return text.toString();
        }
    }

    boolean truncated() {
        return truncated;
    }
}
