package dev.codeexec.sandbox;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.time.Duration;
import java.util.OptionalDouble;
import java.util.OptionalLong;
import java.util.concurrent.TimeUnit;

/**
 * A started launcher process plus the run's cgroup and whatever else must be cleaned up. Shared by all sandbox
 * kinds: the difference between them is only the command line the launcher execs.
 */
final class LaunchedProcess implements SandboxProcess {

    static final int SIGXCPU = 24;

    private final Process process;
    private final Cgroups.RunCgroup cgroup;
    private final int cpuSeconds;
    private final boolean pidNamespace;
    private final Runnable cleanup;

    private volatile boolean killedByUs;
    private boolean closed;
    // Final figures read just before the cgroup is removed.
    private boolean oom;
    private OptionalLong peak = OptionalLong.empty();
    private OptionalDouble cpu = OptionalDouble.empty();

    /**
     * @param pidNamespace the launcher's only child is the init of a pid namespace holding the whole run (bwrap)
     */
    LaunchedProcess(Process process, Cgroups.RunCgroup cgroup, int cpuSeconds, boolean pidNamespace, Runnable cleanup) {
        this.process = process;
        this.pidNamespace = pidNamespace;
        this.cgroup = cgroup;
        this.cpuSeconds = cpuSeconds;
        this.cleanup = cleanup;
    }

    @Override
    public OutputStream stdin() {
        return process.getOutputStream();
    }

    @Override
    public InputStream stdout() {
        return process.getInputStream();
    }

    @Override
    public InputStream stderr() {
        return process.getErrorStream();
    }

    @Override
    public boolean waitFor(Duration timeout) throws InterruptedException {
        return process.waitFor(timeout.toNanos(), TimeUnit.NANOSECONDS);
    }

    @Override
    public int exitCode() {
        return process.exitValue();
    }

    @Override
    public void kill() {
        killedByUs = true;
        // Killing must finish even on an interrupted thread (a cancelled run): waits below would throw at once.
        boolean interrupted = Thread.interrupted();
        try {
            killTree();
        } finally {
            if (interrupted) Thread.currentThread().interrupt();
        }
    }

    private void killTree() {
        if (pidNamespace && process.isAlive()) {
            // SIGKILL to the namespace's pid 1 makes the kernel kill every process in it at once, fork bombs
            // included. bwrap, still alive, then reaps it and exits: killing bwrap itself would orphan its child
            // as a zombie on the host.
            // Repeated because a kill right after start may come before bwrap has forked that init.
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(1);
            try {
                while (System.nanoTime() < deadline) {
                    process.children().forEach(ProcessHandle::destroyForcibly);
                    if (process.waitFor(20, TimeUnit.MILLISECONDS)) {
                        cgroup.killAll();
                        return;
                    }
                }
            } catch (InterruptedException e) {
                // interrupted again while killing: fall through to the unconditional kill below
            }
        }
        // Everything that is left, wherever it is: the cgroup loop returns only when the kernel emptied the run.
        cgroup.killAll();
        process.descendants().forEach(ProcessHandle::destroyForcibly);
        process.destroyForcibly();
    }

    @Override
    public synchronized boolean memoryLimitHit() {
        return closed ? oom : cgroup.oomKilled();
    }

    @Override
    public boolean cpuLimitHit() {
        if (process.isAlive() || killedByUs) return false;
        int code = process.exitValue();
        if (code == 128 + SIGXCPU) return true;
        // SIGKILL at the hard limit (program caught SIGXCPU): only plausible if the run used that much CPU.
        OptionalDouble used = cpuTimeMs();
        return code == 128 + 9 && !memoryLimitHit() && used.isPresent() && used.getAsDouble() >= cpuSeconds * 1000.0;
    }

    @Override
    public synchronized OptionalLong peakMemoryBytes() {
        return closed ? peak : cgroup.peakMemoryBytes();
    }

    @Override
    public synchronized OptionalDouble cpuTimeMs() {
        return closed ? cpu : cgroup.cpuTimeMs();
    }

    @Override
    public synchronized void close() {
        if (closed) return;
        // Cleanup must complete on an interrupted thread too; the flag is restored at the end.
        boolean interrupted = Thread.interrupted();
        try {
            if (process.isAlive()) {
                killedByUs = true;
                killTree();
            }
            else cgroup.killAll(); // stragglers after the main program ended are not "killed by us" for its exit
            try {
                if (!process.waitFor(5, TimeUnit.SECONDS)) process.destroyForcibly();
            } catch (InterruptedException e) {
                interrupted = true;
            }
            cgroup.killAll();
            oom = cgroup.oomKilled();
            peak = cgroup.peakMemoryBytes();
            cpu = cgroup.cpuTimeMs();
        } finally {
            closed = true;
            cgroup.remove();
            closeQuietly(process.getOutputStream());
            closeQuietly(process.getInputStream());
            closeQuietly(process.getErrorStream());
            cleanup.run();
            if (interrupted) Thread.currentThread().interrupt();
        }
    }

    private static void closeQuietly(AutoCloseable c) {
        try {
            c.close();
        } catch (Exception e) {
            // nothing more to do for a pipe to a dead process
        }
    }
}
