package dev.codeexec.egress;

import java.lang.management.ManagementFactory;
import java.lang.management.OperatingSystemMXBean;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * The file descriptors that every {@link EgressChannel} of the process may hold together: {@link #PROCESS} is half
 * of the process's limit (RLIMIT_NOFILE, e.g. 10,000 of 20,000); the other half is the server's own (its HTTP
 * connections, sandboxes, the warm pool's refills, logs), which no run's connections can take. Each channel also
 * caps what one run holds (see {@link EgressChannel}), so one run takes at most its own small share of this.
 */
final class Descriptors {

    /** The process's share for egress. */
    static final Descriptors PROCESS = new Descriptors(Math.max(64, processLimit() / 2));

    private final int max;
    private final AtomicInteger used = new AtomicInteger();

    Descriptors(int max) {
        this.max = max;
    }

    /** Takes {@code n} descriptors of the share; false (and nothing taken) when that would go over it. */
    boolean take(int n) {
        while (true) {
            int now = used.get();
            if (now + n > max) return false;
            if (used.compareAndSet(now, now + n)) return true;
        }
    }

    void release(int n) {
        used.addAndGet(-n);
    }

    /** Descriptors taken now. */
    int used() {
        return used.get();
    }

    int max() {
        return max;
    }

    /** RLIMIT_NOFILE as the JVM raised it at start (to the hard limit), or a conservative 4096 if it cannot tell. */
    private static int processLimit() {
        OperatingSystemMXBean os = ManagementFactory.getOperatingSystemMXBean();
        if (os instanceof com.sun.management.UnixOperatingSystemMXBean unix)
            return (int) Math.min(Integer.MAX_VALUE, unix.getMaxFileDescriptorCount());
        return 4096;
    }
}
