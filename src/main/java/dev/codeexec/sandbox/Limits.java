package dev.codeexec.sandbox;

import java.time.Duration;

/**
 * The resource limits of one sandboxed program, enforced by the kernel (cgroups, rlimits, tmpfs sizes): the
 * sandbox's contract. Immutable. A run's limits come from the server's configuration and the request's timeout
 * ({@code RequestValidator.defaultLimits}); a worker clamps what a gateway sends to its own maxima.
 *
 * @param timeout      wall-clock time from start to kill
 * @param cpuSeconds   CPU time per process (RLIMIT_CPU)
 * @param memoryBytes  memory of the whole run (cgroup memory limit; RLIMIT_AS where no cgroup can be used)
 * @param maxProcesses processes/threads of the whole run (cgroup pids.max)
 * @param outputBytes  what a result keeps of stdout and of stderr, each (its head and tail); the program runs on
 * @param diskBytes    size of the run's writable areas (working directory tmpfs and /tmp tmpfs, each)
 * @param drainBytes   output (stdout and stderr together) after which a run that floods without end is stopped;
 *                     at least {@code outputBytes}
 */
public record Limits(Duration timeout, int cpuSeconds, long memoryBytes, int maxProcesses, long outputBytes,
        long diskBytes, long drainBytes) {

    /** The drain limit of a run whose configuration does not name one (MAX_OUTPUT_DRAIN_MB's default). */
    public static final long DEFAULT_DRAIN_BYTES = 64L << 20;

    /** Limits with the default drain limit. */
    public Limits(Duration timeout, int cpuSeconds, long memoryBytes, int maxProcesses, long outputBytes,
            long diskBytes) {
        this(timeout, cpuSeconds, memoryBytes, maxProcesses, outputBytes, diskBytes, DEFAULT_DRAIN_BYTES);
    }

    public Limits {
        drainBytes = Math.max(drainBytes, outputBytes);
        if (timeout.isNegative() || timeout.isZero()) throw new IllegalArgumentException("timeout must be positive");
        if (cpuSeconds <= 0) throw new IllegalArgumentException("cpuSeconds must be positive");
        if (memoryBytes <= 0) throw new IllegalArgumentException("memoryBytes must be positive");
        if (maxProcesses <= 0) throw new IllegalArgumentException("maxProcesses must be positive");
        if (outputBytes <= 0) throw new IllegalArgumentException("outputBytes must be positive");
        if (diskBytes <= 0) throw new IllegalArgumentException("diskBytes must be positive");
    }

    public Limits withTimeout(Duration t) {
        return new Limits(t, cpuSeconds, memoryBytes, maxProcesses, outputBytes, diskBytes, drainBytes);
    }

    public Limits withDiskBytes(long bytes) {
        return new Limits(timeout, cpuSeconds, memoryBytes, maxProcesses, outputBytes, bytes, drainBytes);
    }

    public long memoryMb() {
        return memoryBytes / (1024 * 1024);
    }
}
