package dev.codeexec.mcp;

import dev.codeexec.engine.OutputListener;
import io.modelcontextprotocol.spec.McpSchema.ProgressNotification;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.function.Consumer;

/**
 * Turns a run's output chunks into MCP progress notifications for one call.
 *
 * <p>The engine delivers output one line at a time (ListenerDispatcher: lines in the order the server read them,
 * merged per stream only in a flood) without waiting on a slow client, so pieces go into a buffer and one virtual
 * thread sends them: one notification per piece, its {@code message} the text (stderr's prefixed with
 * {@code [stderr] }), its {@code _meta} the stream ({@value #STREAM}: stdout or stderr) and the time the server read
 * it ({@value #AT}: ISO-8601 UTC). After each send the sender pauses {@link #COALESCE_MILLIS}; a client too slow to
 * keep up (more than {@link #MAX_PENDING} pieces waiting) gets consecutive pieces of one stream merged.
 * {@link #close()} sends what is left before the call's result goes out, so progress never trails the result.
 */
final class ProgressForwarder implements OutputListener, AutoCloseable {

    static final long COALESCE_MILLIS = 50;
    static final int MAX_PENDING = 256;
    static final String STREAM = "dev.codeexec/stream";
    static final String AT = "dev.codeexec/at";
    private static final Logger LOG = LoggerFactory.getLogger(ProgressForwarder.class);

    private record Chunk(Stream stream, StringBuilder text, long at) { }

    private final Object progressToken;
    private final Consumer<ProgressNotification> sink;
    private final Object lock = new Object();
    private final List<Chunk> pending = new ArrayList<>();
    private final Thread sender;
    private boolean closed;
    private boolean sinkFailed;
    private long progress;

    ProgressForwarder(Object progressToken, Consumer<ProgressNotification> sink) {
        this.progressToken = progressToken;
        this.sink = sink;
        this.sender = Thread.ofVirtual().name("progress-", 0).unstarted(this::sendLoop);
        sender.start();
    }

    @Override
    public void onOutput(Stream stream, String text) {
        onOutput(stream, text, System.currentTimeMillis());
    }

    @Override
    public void onOutput(Stream stream, String text, long atMillis) {
        if (text.isEmpty()) return;
        synchronized (lock) {
            if (closed) return;
            Chunk last = pending.isEmpty() ? null : pending.getLast();
            if (last != null && last.stream() == stream && pending.size() >= MAX_PENDING) last.text().append(text);
            else pending.add(new Chunk(stream, new StringBuilder(text), atMillis));
            lock.notifyAll();
        }
    }

    private void sendLoop() {
        try {
            while (true) {
                List<Chunk> batch;
                synchronized (lock) {
                    while (pending.isEmpty() && !closed) lock.wait();
                    if (closed) return;
                    batch = drain();
                }
                send(batch);
                synchronized (lock) {
                    long until = System.nanoTime() + COALESCE_MILLIS * 1_000_000;
                    long left;
                    while (!closed && (left = until - System.nanoTime()) > 0) lock.wait(left / 1_000_000 + 1);
                }
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    private List<Chunk> drain() {
        List<Chunk> batch = new ArrayList<>(pending);
        pending.clear();
        return batch;
    }

    /** Serialized by {@link #close()} joining the sender first, so notifications keep their order. */
    private void send(List<Chunk> batch) {
        for (Chunk c : batch) {
            if (sinkFailed) return;
            String message = c.stream() == Stream.STDERR ? "[stderr] " + c.text() : c.text().toString();
            try {
                Map<String, Object> meta = Map.of(STREAM, c.stream() == Stream.STDERR ? "stderr" : "stdout",
                        AT, java.time.Instant.ofEpochMilli(c.at()).toString());
                sink.accept(new ProgressNotification(progressToken, (double) ++progress, null, message, meta));
            } catch (RuntimeException e) {
                sinkFailed = true;
                LOG.debug("progress notification not delivered: {}", e.toString());
            }
        }
    }

    /** Stops the sender and sends whatever output is still buffered. */
    @Override
    public void close() {
        synchronized (lock) {
            closed = true;
            lock.notifyAll();
        }
        try {
            sender.join();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        List<Chunk> rest;
        synchronized (lock) {
            rest = drain();
        }
        send(rest);
    }
}
