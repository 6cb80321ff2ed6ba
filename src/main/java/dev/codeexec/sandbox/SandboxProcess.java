package dev.codeexec.sandbox;

import java.io.InputStream;
import java.io.OutputStream;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Optional;
import java.util.OptionalDouble;
import java.util.OptionalInt;
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

    /** How the program ended; valid once {@link #waitFor} returned true. */
    Termination termination();

    /** Exit status once ended: the program's code, or 128+N when the program died from signal N. */
    default int exitCode() {
        return termination().exitCode();
    }

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

    /** Memory the run uses now, where the sandbox can measure it. */
    default OptionalLong memoryBytes() {
        return OptionalLong.empty();
    }

    /**
     * The host uid the sandbox's processes run as, where it is one of its own or the server-wide SANDBOX_UID (bwrap);
     * empty where the sandbox does not say (gVisor, SANDBOX=none). A persistent working directory is handed to it
     * ({@link WorkDirOwner}) before code runs.
     */
    default OptionalInt hostUid() {
        return OptionalInt.empty();
    }

    /** The control channel, when the spec asked for one ({@link SandboxSpec#control()}). */
    default Optional<ControlChannel> control() {
        return Optional.empty();
    }

    /**
     * Mounts the run's working directory into the running sandbox (spec with {@link SandboxSpec#lateWorkDir()}):
     * the workspace directory read-write, or when empty a fresh tmpfs of {@code tmpfsBytes}. The program must
     * change into the directory again to see it. Once per process.
     */
    default void mountWorkDir(Optional<Path> workspace, long tmpfsBytes) throws SandboxException {
        throw new SandboxException("this sandbox cannot mount a working directory after start");
    }

    /**
     * Mounts {@code hostDir} read-only on the sandbox's {@link SandboxSpec#lateReadOnlyDir()} (a warm sandbox that
     * gets a run's declared packages). Once per process; unmounted when the sandbox is closed.
     */
    default void mountReadOnly(Path hostDir) throws SandboxException {
        throw new SandboxException("this sandbox cannot mount a directory after its start");
    }

    /**
     * Creates a read-only file (root-owned, 0444) in the working directory mounted by {@link #mountWorkDir}:
     * a warm run's code file, where a cold run has it. {@code name} is one plain file name that must not exist.
     */
    default void writeWorkFile(String name, byte[] content) throws SandboxException {
        throw new SandboxException("this sandbox has no late working directory");
    }

    /**
     * Gives the program (the process the sandbox started, not its children) a fresh CPU budget of
     * {@code cpuSeconds} counted from now: for an interpreter started ahead of its code, so the code gets the
     * CPU limit of a cold run. Children started later inherit it.
     */
    default void limitProgramCpu(int cpuSeconds) throws SandboxException {
        throw new SandboxException("this sandbox cannot change the limits of a running program");
    }

    /**
     * For a sandbox whose init waits for its command ({@link Sandbox#awaitsCommands()}): the command starts later as
     * a new child, whose CPU time counts from zero, so it gets exactly {@code cpuSeconds}, as a cold run's program
     * does; what the init itself spent while it waited is not added (it would give the command a second more
     * whenever the init had used a clock tick).
     */
    default void limitCommandCpu(int cpuSeconds) throws SandboxException {
        throw new SandboxException("this sandbox cannot change the limits of a running program");
    }

    /**
     * Per-call limits of an interpreter that serves many calls (a session), whose limits must rise again after a
     * call lowered them. CPU: only the soft limit moves ({@code cpuSeconds} from now), under the hard limit set at
     * start, which bounds the interpreter's whole life. File size: soft and hard both at {@code fileSizeBytes} (at
     * most the start's hard limit), like {@link #limitProgramFileSize}, so the program cannot raise its own limit past
     * the cap (a workspace's quota); raising it for a later call needs CAP_SYS_RESOURCE, without which the lower cap
     * of an earlier call stays.
     *
     * @return the file-size limit in effect now: {@code fileSizeBytes}, or less when it could not be raised
     */
    default long limitProgramSoft(int cpuSeconds, long fileSizeBytes) throws SandboxException {
        throw new SandboxException("this sandbox cannot change the limits of a running program");
    }

    /** Caps the size of files the program (and children it starts later) writes. */
    default void limitProgramFileSize(long fileSizeBytes) throws SandboxException {
        throw new SandboxException("this sandbox cannot change the limits of a running program");
    }

    /** Sends SIGINT to the program (not its children). False when it is gone or the sandbox cannot do this. */
    default boolean interrupt() {
        return false;
    }

    @Override
    void close();
}
