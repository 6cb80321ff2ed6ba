package dev.codeexec.engine;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.TimeUnit;

/**
 * Decouples a run's {@link OutputListener} from its pipe readers and bounds what the listener is told: readers hand
 * chunks over without waiting and one thread delivers them in arrival order, gathered for {@code interval}
 * (PROGRESS_INTERVAL_MS) after each delivery, consecutive chunks of one stream as one text. So a slow or stuck
 * listener (a client that does not read its progress notifications) never stalls the pipes, and so never the
 * program; a program printing many tiny lines makes a few notifications, not thousands; the first output goes out
 * at once. The queue needs no bound of its own: readers pass on at most the output cap per stream.
 */
final class ListenerDispatcher implements OutputListener {

    private record Chunk(Stream stream, String text) {
    }

    private static final Chunk END = new Chunk(Stream.STDOUT, "");

    private final OutputListener delegate;
    private final long intervalNanos;
    private final LinkedBlockingQueue<Chunk> queue = new LinkedBlockingQueue<>();
    private final Thread thread;

    ListenerDispatcher(OutputListener delegate, ThreadFactory threads, Duration interval) {
        this.delegate = delegate;
        this.intervalNanos = interval.toNanos();
        this.thread = threads.newThread(this::deliver);
        thread.start();
    }

    @Override
    public void onOutput(Stream stream, String text) {
        if (!text.isEmpty()) queue.add(new Chunk(stream, text));
    }

    private void deliver() {
        try {
            long nextAt = System.nanoTime();
            List<Chunk> batch = new ArrayList<>();
            while (true) {
                Chunk c = queue.take();
                boolean end = c == END;
                if (!end) batch.add(c);
                // gather until the interval since the last delivery is over
                while (!end) {
                    long left = nextAt - System.nanoTime();
                    Chunk more = left > 0 ? queue.poll(left, TimeUnit.NANOSECONDS) : queue.poll();
                    if (more == null) break;
                    if (more == END) end = true;
                    else batch.add(more);
                }
                send(batch);
                batch.clear();
                if (end) return;
                nextAt = System.nanoTime() + intervalNanos;
            }
        } catch (InterruptedException e) {
            // Abandoned: the listener was too slow, or the run ended abnormally.
        }
    }

    /** Consecutive chunks of one stream as one text, in order. */
    private void send(List<Chunk> batch) {
        int i = 0;
        while (i < batch.size()) {
            Stream s = batch.get(i).stream();
            StringBuilder text = new StringBuilder(batch.get(i).text());
            int j = i + 1;
            while (j < batch.size() && batch.get(j).stream() == s) text.append(batch.get(j++).text());
            try {
                delegate.onOutput(s, text.toString());
            } catch (RuntimeException e) {
                // A failing listener must not change the run or stop later deliveries.
            }
            i = j;
        }
    }

    /**
     * Delivers what is queued (so progress arrives before the result), waiting at most {@code max} for a slow
     * listener; after that the rest is dropped: the result carries the output anyway.
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
