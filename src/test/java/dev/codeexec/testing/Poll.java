package dev.codeexec.testing;

import java.time.Duration;
import java.util.function.Predicate;

/**
 * The tests' one way to wait for state that no event announces: a process list, another component's counter, a
 * file on disk, an HTTP endpoint. Where a latch, a future, a listener or a log line exists, wait on that instead;
 * and never sleep to show that something did not happen: wait for a later event that proves it could not have.
 *
 * <p>The bound only stops a test that would otherwise hang: it is generous, it is not what the test asserts, and
 * reaching it fails the test with what was awaited and the last value seen. Polls start every few milliseconds
 * and slow down to {@link #MAX_INTERVAL}, so a quick condition costs little and a slow one little CPU.
 */
public final class Poll {

    /** The bound when a test gives none. */
    public static final Duration DEFAULT_MAX = Duration.ofSeconds(60);
    static final Duration MAX_INTERVAL = Duration.ofMillis(100);

    /** A condition to poll; it may throw (an HTTP call, a file read), which fails the wait. */
    @FunctionalInterface
    public interface Condition {
        boolean holds() throws Exception;
    }

    /** A value to poll. */
    @FunctionalInterface
    public interface Probe<T> {
        T get() throws Exception;
    }

    private Poll() {
    }

    /** Waits until the condition holds, at most {@link #DEFAULT_MAX}; {@code what} says what is awaited. */
    public static void until(String what, Condition condition) throws InterruptedException {
        until(what, DEFAULT_MAX, condition);
    }

    /** Waits until the condition holds; fails the test after {@code max}. */
    public static void until(String what, Duration max, Condition condition) throws InterruptedException {
        until(what, max, condition::holds, Boolean::booleanValue);
    }

    /** Polls the probe until its value satisfies {@code done}, at most {@link #DEFAULT_MAX}; returns that value. */
    public static <T> T until(String what, Probe<T> probe, Predicate<? super T> done) throws InterruptedException {
        return until(what, DEFAULT_MAX, probe, done);
    }

    /** Polls the probe until its value satisfies {@code done} and returns that value; fails the test after {@code max}. */
    public static <T> T until(String what, Duration max, Probe<T> probe, Predicate<? super T> done)
            throws InterruptedException {
        long end = System.nanoTime() + max.toNanos();
        long interval = 2;
        while (true) {
            T value;
            try {
                value = probe.get();
            } catch (InterruptedException e) {
                throw e;
            } catch (Exception e) {
                throw new AssertionError("while waiting for " + what + ": " + e, e);
            }
            if (done.test(value)) return value;
            if (System.nanoTime() - end > 0) {
                throw new AssertionError("not within " + max.toSeconds() + " s: " + what + " (last seen: " + value + ")");
            }
            Thread.sleep(interval);
            interval = Math.min(interval * 2, MAX_INTERVAL.toMillis());
        }
    }
}
