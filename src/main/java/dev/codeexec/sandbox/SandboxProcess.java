package dev.codeexec.sandbox;

import java.io.InputStream;
import java.io.OutputStream;
import java.time.Duration;
import java.util.OptionalDouble;
import java.util.OptionalLong;

/**
 * A program running in a sandbox. {@link #close()} always leaves nothing behind: it kills what is left of the
 * process tree, waits for it, and removes the cgroup and staging files. Use with try-with-resources.
 */
public interface SandboxProcess extends AutoCloseable {

    OutputStream stdin();

    InputStream stdout();

    InputStream stderr();

    /** Waits for the sandbox to exit; returns false if the duration elapsed first. */
    boolean waitFor(Duration timeout) throws InterruptedException;

    /** Exit code once ended: the program's code, or 128+N when the program died from signal N. */
    int exitCode();

    /** Kills the whole process tree now (every process in the run's cgroup / pid namespace). Idempotent. */
    void kill();

    /** True when the kernel's OOM killer killed a process of this run because of its memory limit. */
    boolean memoryLimitHit();

    /** True when a process of this run was killed for going over its CPU-time limit (SIGXCPU/SIGKILL at RLIMIT_CPU). */
    boolean cpuLimitHit();

    /** Peak memory of the run, where the sandbox can measure it. */
    OptionalLong peakMemoryBytes();

    /** CPU time (user + system) of the whole run in milliseconds, where the sandbox can measure it. */
    OptionalDouble cpuTimeMs();

    @Override
    void close();
}
