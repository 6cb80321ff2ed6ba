package dev.codeexec.engine;

import java.time.Duration;

/**
 * The resource limits of one run, resolved once at the edge (server default, then request value, clamped to
 * the server maximum) and enforced by the kernel. Immutable.
 *
 * @param timeout      wall-clock time from start to kill
 * @param cpuSeconds   CPU time per process (RLIMIT_CPU)
 * @param memoryBytes  memory of the whole run (cgroup memory limit; RLIMIT_AS where no cgroup can be used)
 * @param maxProcesses processes/threads of the whole run (cgroup pids.max)
 * @param outputBytes  cap for stdout and for stderr, each
 * @param diskBytes    size of the run's writable areas (working directory tmpfs and /tmp tmpfs, each)
 */
public record Limits(Duration timeout, int cpuSeconds, long memoryBytes, int maxProcesses, long outputBytes,
        long diskBytes) {

    public Limits {
        if (timeout.isNegative() || timeout.isZero()) throw new IllegalArgumentException("timeout must be positive");
        if (cpuSeconds <= 0) throw new IllegalArgumentException("cpuSeconds must be positive");
        if (memoryBytes <= 0) throw new IllegalArgumentException("memoryBytes must be positive");
        if (maxProcesses <= 0) throw new IllegalArgumentException("maxProcesses must be positive");
        if (outputBytes <= 0) throw new IllegalArgumentException("outputBytes must be positive");
        if (diskBytes <= 0) throw new IllegalArgumentException("diskBytes must be positive");
    }

    /** The server's limits (CPU_LIMIT_SECONDS, MEMORY_LIMIT_MB, ...) with the given timeout. */
    public static Limits defaults(dev.codeexec.config.Config config, Duration timeout) {
        long mb = 1024L * 1024L;
        return new Limits(timeout, config.get(dev.codeexec.config.Config.CPU_LIMIT_SECONDS),
                config.get(dev.codeexec.config.Config.MEMORY_LIMIT_MB) * mb, config.get(dev.codeexec.config.Config.MAX_PROCESSES),
                config.get(dev.codeexec.config.Config.MAX_OUTPUT_KB) * 1024L, config.get(dev.codeexec.config.Config.MAX_DISK_MB) * mb);
    }

    public Limits withTimeout(Duration t) {
        return new Limits(t, cpuSeconds, memoryBytes, maxProcesses, outputBytes, diskBytes);
    }

    public Limits withDiskBytes(long bytes) {
        return new Limits(timeout, cpuSeconds, memoryBytes, maxProcesses, outputBytes, bytes);
    }

    public long memoryMb() {
        return memoryBytes / (1024 * 1024);
    }
}
