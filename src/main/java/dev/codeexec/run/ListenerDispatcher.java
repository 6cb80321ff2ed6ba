package dev.codeexec.run;

import dev.codeexec.engine.OutputListener;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.TimeUnit;

/**
 * Decouples a run's {@link OutputListener} from its pipe readers and shapes what the listener is told: readers hand
 * chunks over without waiting, stamped with the time they were read, and one thread delivers them in arrival order
 * (the order the server read them: two pipes carry no order between stdout and stderr, so writes to the two streams
 * closer together than the readers wake up can be seen either way), one line per delivery, each with the time its
 * first text was read. After each delivery it gathers for {@code interval} (PROGRESS_INTERVAL_MS); a line still
 * without its newline when a gathering ends waits up to {@link #PARTIAL_GRACE_MILLIS} for it (so {@code print(1)},
 * written as "1" then "\n", is one line) and then goes out as it is (a progress bar's redraw is a line of its own).
 * A gathering that makes more than {@link #MAX_LINES} lines is delivered as before this shaping: consecutive text of
 * one stream as one delivery, so a flood makes a few deliveries per interval, not thousands. A slow or stuck listener
 * (a client that does not read its progress notifications) never stalls the pipes, and so never the program; the
 * first output goes out at once. The queue needs no bound of its own: readers pass on at most the output cap per
 * stream.
 */
public final class ListenerDispatcher implements OutputListener {

    /** How long a line without its newline waits for the rest before it is delivered as it is. */
    static final long PARTIAL_GRACE_MILLIS = 10;
    /** The most lines one gathering delivers one by one; more are merged per stream. */
    static final int MAX_LINES = 64;

    private record Chunk(Stream stream, String text, long at) {
    }

    private static final Chunk END = new Chunk(Stream.STDOUT, "", 0);

    private final OutputListener delegate;
    private final long intervalNanos;
    private final long graceNanos;
    private final LinkedBlockingQueue<Chunk> queue = new LinkedBlockingQueue<>();
    private final Thread thread;

    public ListenerDispatcher(OutputListener delegate, ThreadFactory threads, Duration interval) {
        this(delegate, threads, interval, Duration.ofMillis(PARTIAL_GRACE_MILLIS));
    }

    /** With another grace for a line's end: tests use a long one, so a loaded machine cannot split their lines. */
    public ListenerDispatcher(OutputListener delegate, ThreadFactory threads, Duration interval, Duration partialGrace) {
        this.delegate = delegate;
        this.intervalNanos = interval.toNanos();
        this.graceNanos = partialGrace.toNanos();
        this.thread = threads.newThread(this::deliver);
        thread.start();
    }

    @Override
    public void onOutput(Stream stream, String text) {
        onOutput(stream, text, System.currentTimeMillis());
    }

    @Override
    public void onOutput(Stream stream, String text, long atMillis) {
        if (!text.isEmpty()) queue.add(new Chunk(stream, text, atMillis));
    }

    private void deliver() {
        try {
            long nextAt = System.nanoTime();
            List<Chunk> batch = new ArrayList<>();
            while (true) {
                Chunk c = queue.take();
                boolean end = c == END;
                // per stream: whether its last text in the batch left a line without its end
                boolean[] open = new boolean[Stream.values().length];
                if (!end) add(batch, open, c);
                // gather until the interval since the last delivery is over, then a little longer for a line's end
                // (of either stream: a stderr line between the pieces of a stdout line does not end it)
                long graceUntil = 0;
                while (!end) {
                    long now = System.nanoTime();
                    long left = nextAt - now;
                    if (left <= 0 && anyOpen(open)) {
                        if (graceUntil == 0) graceUntil = now + graceNanos;
                        left = graceUntil - now;
                    }
                    Chunk more = left > 0 ? queue.poll(left, TimeUnit.NANOSECONDS) : queue.poll();
                    if (more == null) break;
                    if (more == END) end = true;
                    else add(batch, open, more);
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

    private static boolean anyOpen(boolean[] open) {
        for (boolean o : open) if (o) return true;
        return false;
    }

    private static void add(List<Chunk> batch, boolean[] open, Chunk c) {
        batch.add(c);
        open[c.stream().ordinal()] = !c.text().endsWith("\n");
    }

    /** One piece of text to deliver: a line (or the rest of one), or a merged run of one stream's text. */
    private record Piece(Stream stream, String text, long at) {
    }

    /** The batch as lines in order (each stream's text split after every newline); merged runs when too many. */
    static List<Piece> pieces(List<Chunk> batch) {
        List<Piece> lines = new ArrayList<>();
        StringBuilder[] open = {new StringBuilder(), new StringBuilder()};
        long[] openAt = new long[2];
        for (Chunk c : batch) {
            int s = c.stream().ordinal();
            String t = c.text();
            int from = 0;
            while (from < t.length()) {
                if (open[s].isEmpty()) openAt[s] = c.at();
                int nl = t.indexOf('\n', from);
                int to = nl < 0 ? t.length() : nl + 1;
                open[s].append(t, from, to);
                if (nl >= 0) {
                    lines.add(new Piece(c.stream(), open[s].toString(), openAt[s]));
                    open[s].setLength(0);
                }
                from = to;
            }
        }
        for (Stream st : Stream.values()) {
            if (!open[st.ordinal()].isEmpty()) lines.add(new Piece(st, open[st.ordinal()].toString(), openAt[st.ordinal()]));
        }
        if (lines.size() <= MAX_LINES) return lines;
        List<Piece> merged = new ArrayList<>();
        int i = 0;
        while (i < batch.size()) {
            Stream s = batch.get(i).stream();
            long at = batch.get(i).at();
            StringBuilder text = new StringBuilder(batch.get(i).text());
            int j = i + 1;
            while (j < batch.size() && batch.get(j).stream() == s) text.append(batch.get(j++).text());
            merged.add(new Piece(s, text.toString(), at));
            i = j;
        }
        return merged;
    }

    private void send(List<Chunk> batch) {
        for (Piece p : pieces(batch)) {
            try {
                delegate.onOutput(p.stream(), p.text(), p.at());
            } catch (RuntimeException e) {
                // A failing listener must not change the run or stop later deliveries.
            }
        }
    }

    /**
     * Delivers what is queued (so progress arrives before the result), waiting at most {@code max} for a slow
     * listener; after that the rest is dropped: the result carries the output anyway.
     */
    public void finish(Duration max) throws InterruptedException {
        queue.add(END);
        if (!thread.join(max)) {
            queue.clear();
            thread.interrupt();
        }
    }

    /** Waits for nothing: used when the run ends abnormally. */
    public void abandon() {
        queue.clear();
        queue.add(END);
        thread.interrupt();
    }
}
