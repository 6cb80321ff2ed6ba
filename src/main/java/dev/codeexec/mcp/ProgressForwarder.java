package dev.codeexec.mcp;

import dev.codeexec.engine.OutputListener;
import io.modelcontextprotocol.spec.McpSchema.ProgressNotification;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.util.ArrayList;
import java.util.List;
import java.util.function.Consumer;

/**
 * Turns a run's output chunks into MCP progress notifications for one call.
 *
 * <p>The engine calls {@link #onOutput} from its pipe readers, which must never wait on a slow client, so chunks
 * go into a buffer and one virtual thread sends them. The first chunk leaves at once; after each send the sender
 * pauses {@link #COALESCE_MILLIS} so that a program printing many tiny lines produces a few notifications, not
 * thousands. Consecutive chunks of the same stream are merged; stderr text is prefixed with {@code [stderr] }.
 * {@link #close()} sends what is left before the call's result goes out, so progress never trails the result.
 */
final class ProgressForwarder implements OutputListener, AutoCloseable {

    static final long COALESCE_MILLIS = 50;
    private static final Logger LOG = LoggerFactory.getLogger(ProgressForwarder.class);

    private record Chunk(Stream stream, StringBuilder text) { }

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
        if (text.isEmpty()) return;
        synchronized (lock) {
            if (closed) return;
            Chunk last = pending.isEmpty() ? null : pending.getLast();
            if (last != null && last.stream() == stream) last.text().append(text);
            else pending.add(new Chunk(stream, new StringBuilder(text)));
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
                sink.accept(new ProgressNotification(progressToken, (double) ++progress, null, message));
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
