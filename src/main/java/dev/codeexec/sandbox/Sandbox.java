package dev.codeexec.sandbox;

import java.util.Map;
import java.util.Optional;

/**
 * A way to run a program isolated from the host. The engine sees only this interface; implementations are
 * bubblewrap (default), gVisor and none. Created by {@link Sandboxes#create}.
 */
public interface Sandbox extends AutoCloseable {

    /** "bwrap", "gvisor" or "none". */
    String name();

    /**
     * Why this sandbox cannot run code on this machine (missing binary, no user namespaces, ...), or empty if
     * it can. Checked once at start by actually starting a trivial sandboxed program.
     */
    Optional<String> unavailableReason();

    /**
     * Starts the program; stdin/stdout/stderr are pipes. Any thread may call this, virtual threads included:
     * the fork happens on one long-lived platform thread inside the sandbox package, because bwrap's
     * {@code --die-with-parent} follows the forking thread. The caller must drain stdout and stderr (or the
     * program blocks on a full pipe), must call {@link SandboxProcess#close()} on every path, and should call
     * {@link SandboxProcess#kill()} at its wall-clock timeout or on cancel. {@link SandboxProcess#exitCode()} is
     * valid once {@code waitFor} returned true. Throws when the sandbox is unavailable or the spec is invalid
     * (relative or system workDir, more than 4 read-only files); nothing is left behind then.
     */
    SandboxProcess start(SandboxSpec spec) throws SandboxException;

    /** The sandbox's name and, when it cannot run code, why: what /healthz, a worker's status and the start-up log say. */
    default Status status() {
        return new Status(name(), unavailableReason());
    }

    /**
     * A sandbox's name and availability, as plain data (a gateway, which has no sandbox of its own, says "workers").
     *
     * @param name              bwrap, gvisor, none (or "workers" for a gateway)
     * @param unavailableReason empty when the sandbox works
     */
    record Status(String name, Optional<String> unavailableReason) {
        public boolean available() {
            return unavailableReason.isEmpty();
        }
    }

    /** What runtime_info shows: kind, isolation features, cgroup version, uid. Plain data for JSON. */
    Map<String, Object> info();

    /**
     * Whether {@link SandboxSpec#control()} gives a control channel on fds 8 and 9 here (interpreters started ahead
     * of their code: warm sandboxes, sessions). bwrap only: gVisor's runsc does not pass extra descriptors (its
     * warm sandboxes talk over stdio instead, {@link #controlOverStdio()}; it has no sessions), and "none" has no
     * mount namespace to put a late working directory into.
     */
    default boolean supportsControl() {
        return false;
    }

    /**
     * Whether a warm sandbox's interpreter talks to the server over its stdin and stdout instead of a control
     * channel on fds 8 and 9 (gVisor: runsc passes no other descriptors). Such a sandbox's {@link SandboxSpec#control()}
     * gives a channel {@link ControlChannel#overStdio over the program's own pipes}: the ready line comes out on stdout
     * ahead of any output, the run message goes in on stdin ahead of the user's input. Only interpreters whose
     * languages-table row says how to start them so ({@code warm.stdio}) can be kept warm there; sessions, which
     * keep writing to their control channel, cannot.
     */
    default boolean controlOverStdio() {
        return false;
    }

    /**
     * Whether a sandbox can start with an empty command and receive it later on the control channel
     * ({@link SandboxSpec#awaitsCommand()}): its init waits for the run message and then starts the command, so
     * a warm sandbox can serve any language (shell, compiled ones), not only those with a warm interpreter.
     */
    default boolean awaitsCommands() {
        return false;
    }

    /** Why {@link SandboxSpec#lateWorkDir()} cannot work here, or empty when it can. */
    default Optional<String> lateWorkDirUnavailable() {
        return Optional.of("the '" + name() + "' sandbox cannot mount a working directory into a running sandbox");
    }

    /** Releases what the sandbox set up on the host for its whole life (mounts). Runs must have ended. */
    @Override
    default void close() {
    }
}
