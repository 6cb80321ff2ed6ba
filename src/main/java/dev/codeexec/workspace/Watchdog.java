package dev.codeexec.workspace;

import dev.codeexec.linux.Posix;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.time.Duration;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;

/**
 * Bounds a running program's workspace where the kernel does not ({@link Quota.Measured}): walks of the workspace
 * decide, and the first one past a limit stops the run. Two kinds of walk: a count of entries from names alone
 * (several times faster than a walk that stats each file) every {@link #INTERVAL}, and a full walk with file sizes
 * every {@link #FULL_INTERVAL}; each kind is at least twice its own cost apart, so a large tree is walked less often.
 * Between walks the file system's own counters ({@code fstatfs}, every {@link #TICK}) say when the workspace may
 * have gone past a limit, and then the matching walk runs at once. Those counters count every file of the file
 * system (other runs, other tenants), so they only say when to look, never whom to stop.
 *
 * <p>Measured on the project's 2-core machine: a program that makes empty files as fast as it can (about 20,000 a
 * second) is stopped a few thousand files past a limit of 50,000. A program that keeps moving directories around
 * can make a walk fail; {@link #MAX_FAILURES} failed walks in a row stop the run too.
 */
final class Watchdog implements Runnable {

    private static final Logger LOG = LoggerFactory.getLogger(Watchdog.class);
    /** How often the file system's counters are read. */
    static final Duration TICK = Duration.ofMillis(100);
    /** How often entries are counted at least. */
    static final Duration INTERVAL = Duration.ofMillis(500);
    /** How often the full walk (with sizes) runs at least. */
    static final Duration FULL_INTERVAL = Duration.ofSeconds(2);
    private static final int MAX_FAILURES = 3;

    private final Workspace ws;
    private final long maxEntries;
    private final long bytesAllowed;
    private final Runnable stop;
    private final Supplier<Posix.FsStat> counters;
    private final ScheduledExecutorService thread;
    private volatile boolean closed;

    private long entries;
    private long bytes;
    /** The file system's counters when {@link #entries} and {@link #bytes} were measured. */
    private Posix.FsStat entriesBase;
    private Posix.FsStat bytesBase;
    private final Pace counts = new Pace(INTERVAL);
    private final Pace fulls = new Pace(FULL_INTERVAL);
    private int failures;

    Watchdog(Workspace ws, Workspace.Usage before, long maxEntries, long bytesAllowed, Runnable stop,
            Supplier<Posix.FsStat> counters, ScheduledExecutorService thread) {
        this.ws = ws;
        this.maxEntries = maxEntries;
        this.bytesAllowed = bytesAllowed;
        this.stop = stop;
        this.counters = counters;
        this.thread = thread;
        this.entries = before.entries();
        this.bytes = before.bytes();
        this.entriesBase = counters.get();
        this.bytesBase = entriesBase;
    }

    void start() {
        thread.schedule(this, TICK.toNanos(), TimeUnit.NANOSECONDS);
    }

    void close() {
        closed = true;
    }

    /** When a kind of walk is due: every {@code interval}, and never sooner than twice its last cost after it. */
    private static final class Pace {
        final long interval;
        long next;
        long earliest;

        Pace(Duration interval) {
            this.interval = interval.toNanos();
            this.next = System.nanoTime() + this.interval;
            this.earliest = System.nanoTime();
        }

        boolean due(long now, boolean suspect) {
            return now - next >= 0 || suspect && now - earliest >= 0;
        }

        void done(long started, long ended) {
            long cost = ended - started;
            earliest = ended + 2 * cost;
            next = ended + Math.max(interval, 2 * cost);
        }
    }

    @Override
    public void run() {
        if (closed) return;
        Posix.FsStat now = counters.get();
        long t0 = System.nanoTime();
        String over;
        boolean manyMore = grown(entriesBase, now, 0) + entries > maxEntries;
        if (manyMore && counts.due(t0, true)) { // the quicker walk first when entries are in question
            over = walk(now, false);
            counts.done(t0, System.nanoTime());
        } else if (fulls.due(t0, grown(bytesBase, now, 1) + bytes > bytesAllowed)) {
            over = walk(now, true);
            fulls.done(t0, System.nanoTime());
        } else if (counts.due(t0, false)) {
            over = walk(now, false);
            counts.done(t0, System.nanoTime());
        } else {
            over = null;
        }
        if (over != null) {
            if (!closed) {
                closed = true;
                LOG.info("workspace {}/{} went past its limits during a run ({}): the run is stopped", ws.tenant(),
                        ws.name(), over);
                stop.run();
            }
            return;
        }
        if (!closed) thread.schedule(this, TICK.toNanos(), TimeUnit.NANOSECONDS);
    }

    /** How much the file system's inodes (0) or bytes (1) in use grew since {@code base}; 0 when unknown. */
    private static long grown(Posix.FsStat base, Posix.FsStat now, int which) {
        if (base == null || now == null) return 0;
        return which == 0 ? (now.files() - now.freeFiles()) - (base.files() - base.freeFiles())
                : ((now.blocks() - now.freeBlocks()) - (base.blocks() - base.freeBlocks())) * now.blockSize();
    }

    /** A walk, with sizes or entries only: what is over a limit, or null. */
    private String walk(Posix.FsStat now, boolean sizes) {
        WorkspaceFs.Tally t;
        try {
            t = ws.fs().tally(maxEntries, sizes);
            failures = 0;
        } catch (RuntimeException e) {
            // the tree changed under the walk; a program doing that on purpose could keep every walk from finishing
            return ++failures >= MAX_FAILURES ? "it could not be measured: " + e.getMessage() : null;
        }
        entries = t.entries();
        entriesBase = now;
        if (sizes) {
            bytes = t.bytes();
            bytesBase = now;
        }
        if (!t.complete()) return "more than " + maxEntries + " entries";
        if (sizes && t.bytes() > bytesAllowed) return t.bytes() + " bytes of " + bytesAllowed + " allowed";
        return null;
    }
}
