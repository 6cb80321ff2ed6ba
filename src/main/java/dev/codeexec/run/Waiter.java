package dev.codeexec.run;

/**
 * The thread that waits on a run's behalf (for the Go cache, a slot, an install of its packages), so that a cancel
 * can wake it, and so that no interrupt outlives the wait: a cancel that comes as the wait ends either interrupts it
 * before {@link #end} or finds no thread, and {@link #end} clears what arrived before. That matters where the thread
 * lives on: a slot's platform thread runs the next run.
 */
final class Waiter {

    private Thread thread;

    /** The current thread waits from now on. */
    synchronized void begin() {
        thread = Thread.currentThread();
    }

    /** The wait is over: no interrupt reaches the thread from here on, and none that came is left set. */
    void end() {
        synchronized (this) {
            thread = null;
        }
        Thread.interrupted();
    }

    /** Wakes the waiting thread, if one waits. */
    synchronized void interrupt() {
        if (thread != null) thread.interrupt();
    }
}
