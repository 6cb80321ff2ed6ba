package dev.codeexec.sandbox;

import org.slf4j.LoggerFactory;

import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

/**
 * Removes what an ended run leaves on the host — its cgroup directories and its late working directory's mount —
 * off the request path: on this kernel an rmdir of a v1 cgroup and an unmount take several milliseconds each,
 * which a caller waiting for its result should not pay. The run's processes are gone and its figures (memory
 * peak, CPU, OOM) read before anything is queued here. One thread, in order; {@link #drain} waits for it
 * (tests, shutdown).
 */
final class Reaper {

    private static final LinkedBlockingQueue<Runnable> QUEUE = new LinkedBlockingQueue<>();
    private static final Object IDLE = new Object();
    private static int pending;

    static {
        Thread.ofPlatform().name("sandbox-reaper").daemon(true).start(Reaper::loop);
    }

    private Reaper() {
    }

    static void later(Runnable task) {
        synchronized (IDLE) {
            pending++;
        }
        QUEUE.add(task);
    }

    private static void loop() {
        while (true) {
            Runnable task;
            try {
                task = QUEUE.take();
            } catch (InterruptedException e) {
                continue;
            }
            try {
                task.run();
            } catch (RuntimeException e) {
                LoggerFactory.getLogger(Reaper.class).warn("cleanup after a run failed: {}", e.toString());
            } finally {
                synchronized (IDLE) {
                    pending--;
                    IDLE.notifyAll();
                }
            }
        }
    }

    /** Waits until everything queued so far is done (at most 30 s). */
    static void drain() {
        long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        synchronized (IDLE) {
            while (pending > 0) {
                long left = TimeUnit.NANOSECONDS.toMillis(end - System.nanoTime());
                if (left <= 0) return;
                try {
                    IDLE.wait(left);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    return;
                }
            }
        }
    }
}
