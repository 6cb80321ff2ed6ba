package dev.codeexec.session;

import dev.codeexec.run.OutputCollector;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.concurrent.CompletableFuture;

/**
 * Drains one output stream of a session's interpreter for its whole life and cuts it into calls: what comes
 * before a call's marker (its 32-hex id, written by the runner after the call, docs/interpreter-protocol.md) is
 * that call's output; the marker itself is never passed on. Bytes that could be the start of the marker are held
 * back until the next read tells. Output written between calls (a background thread, a timer) is kept, up to a
 * cap, for the next call, which is where the runner's protocol puts it.
 */
final class MarkerSplitter implements Runnable {

    private static final byte[] NONE = new byte[0];

    private final InputStream in;
    private final long idleCap;
    private final ByteArrayOutputStream idle = new ByteArrayOutputStream();
    private byte[] marker;
    private OutputCollector sink;
    private CompletableFuture<Boolean> done;
    private byte[] held = NONE;
    private boolean eof;

    MarkerSplitter(InputStream in, long idleCap) {
        this.in = in;
        this.idleCap = idleCap;
    }

    /**
     * Routes the stream to {@code collector} until the marker {@code id}; the future completes (true) once the
     * marker was seen and the collector ended, or (false) at end of stream.
     */
    synchronized CompletableFuture<Boolean> begin(String id, OutputCollector collector) {
        marker = id.getBytes(StandardCharsets.US_ASCII);
        sink = collector;
        done = new CompletableFuture<>();
        if (idle.size() > 0) {
            byte[] b = idle.toByteArray();
            idle.reset();
            collector.feed(b, 0, b.length);
        }
        CompletableFuture<Boolean> d = done;
        if (eof) endSink(false);
        return d;
    }

    /**
     * Stops routing to {@code collector} (a call that ends without its marker: the interpreter was killed or
     * the marker is late). Returns true when the collector was already ended by its marker or end of stream;
     * false when the caller must end it.
     */
    synchronized boolean detach(OutputCollector collector) {
        if (sink != collector) return true;
        if (held.length > 0) collector.feed(held, 0, held.length);
        held = NONE;
        sink = null;
        marker = null;
        done = null;
        return false;
    }

    @Override
    public void run() {
        byte[] buf = new byte[8192];
        try {
            int n;
            while ((n = in.read(buf)) >= 0) {
                synchronized (this) {
                    take(buf, n);
                }
            }
        } catch (IOException e) {
            // closed under us when the session is discarded
        }
        synchronized (this) {
            eof = true;
            if (sink != null) endSink(false);
        }
    }

    private void take(byte[] buf, int n) {
        if (sink == null) {
            keepIdle(buf, 0, n);
            return;
        }
        byte[] data = buf;
        int len = n;
        if (held.length > 0) {
            data = Arrays.copyOf(held, held.length + n);
            System.arraycopy(buf, 0, data, held.length, n);
            len = data.length;
            held = NONE;
        }
        int at = indexOf(data, len, marker);
        if (at >= 0) {
            if (at > 0) sink.feed(data, 0, at);
            int rest = at + marker.length;
            endSink(true);
            if (rest < len) keepIdle(data, rest, len - rest);
        } else {
            int keep = heldBack(data, len, marker);
            if (len - keep > 0) sink.feed(data, 0, len - keep);
            if (keep > 0) held = Arrays.copyOfRange(data, len - keep, len);
        }
    }

    private void endSink(boolean markerSeen) {
        if (held.length > 0) sink.feed(held, 0, held.length);
        held = NONE;
        sink.end();
        CompletableFuture<Boolean> d = done;
        sink = null;
        marker = null;
        done = null;
        d.complete(markerSeen);
    }

    private void keepIdle(byte[] b, int off, int len) {
        int room = (int) Math.max(0, Math.min(Integer.MAX_VALUE, idleCap - idle.size()));
        idle.write(b, off, Math.min(room, len));
    }

    /** What was written while no call was running (diagnostics of an interpreter that failed to start). */
    synchronized String idleText() {
        return idle.toString(StandardCharsets.UTF_8);
    }

    static int indexOf(byte[] data, int len, byte[] m) {
        outer:
        for (int i = 0; i + m.length <= len; i++) {
            for (int j = 0; j < m.length; j++) if (data[i + j] != m[j]) continue outer;
            return i;
        }
        return -1;
    }

    /** Length of the longest end of {@code data} that is a proper beginning of the marker. */
    static int heldBack(byte[] data, int len, byte[] m) {
        for (int k = Math.min(m.length - 1, len); k > 0; k--) {
            boolean match = true;
            for (int j = 0; j < k && match; j++) match = data[len - k + j] == m[j];
            if (match) return k;
        }
        return 0;
    }
}
