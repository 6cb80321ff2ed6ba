package dev.codeexec.engine;

import java.time.Duration;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.ThreadFactory;

/**
 * Decouples a run's {@link OutputListener} from its pipe readers: readers hand chunks over without waiting and one
 * thread delivers them in arrival order. A slow or stuck listener (a client that does not read its progress
 * notifications) therefore never stalls the pipes, and so never stalls the program. The queue needs no bound of
 * its own: what readers hand over is already capped per stream by the output limit.
 */
final class ListenerDispatcher implements OutputListener {

    private record Chunk(Stream stream, String text) {
    }

    private static final Chunk END = new Chunk(Stream.STDOUT, "");

    private final OutputListener delegate;
    private final LinkedBlockingQueue<Chunk> queue = new LinkedBlockingQueue<>();
    private final Thread thread;

    ListenerDispatcher(OutputListener delegate, ThreadFactory threads) {
        this.delegate = delegate;
        this.thread = threads.newThread(this::deliver);
        thread.start();
    }

    @Override
    public void onOutput(Stream stream, String text) {
        queue.add(new Chunk(stream, text));
    }

    private void deliver() {
        try {
            for (Chunk c = queue.take(); c != END; c = queue.take()) {
                try {
                    delegate.onOutput(c.stream(), c.text());
                } catch (RuntimeException e) {
                    // A failing listener must not change the run or stop later deliveries.
                }
            }
        } catch (InterruptedException e) {
            // Abandoned by finish(): the listener was too slow.
        }
    }

    /**
     * Delivers what is queued (so progress arrives before the result), waiting at most {@code max} for a slow
     * listener; after that the rest is dropped: the result carries the complete output anyway.
     */
    void finish(Duration max) throws InterruptedException {
        queue.add(END);
        if (!thread.join(max)) {
            queue.clear();
            thread.interrupt();
        }
    }

    /** Waits for nothing: used when the run ends abnormally. */
    void abandon() {
        queue.clear();
        queue.add(END);
        thread.interrupt();
    }
}
