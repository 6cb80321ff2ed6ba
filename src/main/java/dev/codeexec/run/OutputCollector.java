package dev.codeexec.run;

import dev.codeexec.engine.CapturedText;
import dev.codeexec.engine.OutputListener;
import java.io.IOException;
import java.io.InputStream;
import java.nio.ByteBuffer;
import java.nio.CharBuffer;
import java.nio.charset.CharsetDecoder;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;

/**
 * Drains one output stream of a run to its end, never blocking the program on a full pipe. What it read goes to
 * three places:
 * <ul>
 * <li>the result: {@link CapturedText} keeps all of it up to the output cap, else its head and its tail;</li>
 * <li>the listener (progress): the first cap's worth as it arrives, then one notice that the rest is not
 *     streamed, so progress is bounded like the result; a background job's listener (its log, which has its own
 *     cap, JOB_LOG_MB) is given all of it;</li>
 * <li>the run's {@link Drain}: stdout and stderr together may pass the much larger drain limit only once, when
 *     the run is stopped (a program that floods without end).</li>
 * </ul>
 * A program that writes a lot and then ends runs to its end: its exit code counts, and its last lines are in the
 * result.
 *
 * <p>Decoding is streaming UTF-8 with replacement: a multibyte character split across two reads is decoded whole,
 * and bytes that are not UTF-8 (binary output) become U+FFFD, so the result is always valid text.
 */
public final class OutputCollector implements Runnable {

    /** What progress says once a stream has streamed its cap. */
    static final String NOT_STREAMED = "\n[... more output is not streamed: the result keeps its head and its tail ...]\n";

    private final InputStream in;
    private final long capBytes;
    /** Bytes passed to the listener at most (then one notice): the output cap, or unbounded for a job's log. */
    private final long streamCapBytes;
    private final OutputListener.Stream stream;
    private final OutputListener listener;
    private final Drain drain;
    private final CharsetDecoder decoder = StandardCharsets.UTF_8.newDecoder()
            .onMalformedInput(CodingErrorAction.REPLACE)
            .onUnmappableCharacter(CodingErrorAction.REPLACE);
    private final ByteBuffer pending = ByteBuffer.allocate(16 * 1024);
    private final CharBuffer chars = CharBuffer.allocate(16 * 1024);
    private final CapturedText text;
    /** Bytes passed to the listener so far; past the cap, nothing more is. */
    private long streamed;
    private boolean ended;
    private boolean noticeSent;

    /**
     * The bytes that a run may write before it is stopped, shared by its two streams. {@code onExceeded} runs once,
     * on the reader thread that passed the limit (it kills a run, or interrupts a session call).
     */
    public static final class Drain {
        private final long limit;
        private final Runnable onExceeded;
        private long used;
        private boolean exceeded;

        public Drain(long limit, Runnable onExceeded) {
            this.limit = limit;
            this.onExceeded = onExceeded;
        }

        void take(int n) {
            boolean now;
            synchronized (this) {
                used += n;
                now = !exceeded && used > limit;
                if (now) exceeded = true;
            }
            if (now) onExceeded.run();
        }

        public synchronized boolean exceeded() {
            return exceeded;
        }
    }

    public OutputCollector(InputStream in, long capBytes, OutputListener.Stream stream, OutputListener listener, Drain drain) {
        this(in, capBytes, capBytes, stream, listener, drain);
    }

    /**
     * A collector whose listener may be given more than the result keeps: {@code streamCapBytes} (Long.MAX_VALUE for
     * a background job, whose log keeps its head and tail of JOB_LOG_MB itself and counts every byte written).
     */
    public OutputCollector(InputStream in, long capBytes, long streamCapBytes, OutputListener.Stream stream,
            OutputListener listener, Drain drain) {
        this.in = in;
        this.capBytes = capBytes;
        this.streamCapBytes = streamCapBytes;
        this.stream = stream;
        this.listener = listener;
        this.drain = drain;
        this.text = new CapturedText(capBytes);
    }

    /**
     * A collector fed by its caller ({@link #feed}, then {@link #end}) instead of reading a stream itself: for a
     * session call, whose output is the part of a long-lived stream before the call's marker.
     */
    public OutputCollector(long capBytes, OutputListener.Stream stream, OutputListener listener, Drain drain) {
        this(null, capBytes, stream, listener, drain);
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

    /** Takes the next bytes of the stream. */
    public synchronized void feed(byte[] buf, int off, int n) {
        if (ended) return;
        drain.take(n);
        int stop = off + n;
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

    /** The stream ended: decodes what is pending (an incomplete character becomes U+FFFD). */
    public synchronized void end() {
        if (ended) return;
        ended = true;
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
            text.append(s);
            stream(s);
        }
        chars.clear();
    }

    /**
     * Chunks go out while less than the stream cap has streamed (the last one may pass it by a chunk); the first chunk
     * after that is replaced by the notice, and later ones are dropped.
     */
    private void stream(String s) {
        if (streamed < streamCapBytes) {
            streamed += CapturedText.utf8Length(s);
            tell(s);
        } else if (!noticeSent) {
            noticeSent = true;
            tell(NOT_STREAMED);
        }
    }

    private void tell(String s) {
        try {
            listener.onOutput(stream, s);
        } catch (RuntimeException e) {
            // A failing listener must not stop the draining of the pipe.
        }
    }

    /** What the result keeps (complete once the stream has ended). */
    public CapturedText.Captured captured() {
        return text.captured();
    }

    /** The text kept so far, as the result would show it. */
    String text() {
        return text.captured().text();
    }

    boolean truncated() {
        return text.leftOut() > 0;
    }
}
