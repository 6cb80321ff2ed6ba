package dev.codeexec.sandbox;

import java.util.Map;
import java.util.Optional;

/**
 * A way to run a program isolated from the host. The engine sees only this interface; implementations are
 * bubblewrap (default), gVisor and none. Created by {@link Sandboxes#create}.
 */
public interface Sandbox {

    /** "bwrap", "gvisor" or "none". */
    String name();

    /**
     * Why this sandbox cannot run code on this machine (missing binary, no user namespaces, ...), or empty if
     * it can. Checked once at start by actually starting a trivial sandboxed program.
     */
    Optional<String> unavailableReason();

    /** Starts the program; stdin/stdout/stderr are pipes. */
    SandboxProcess start(SandboxSpec spec) throws SandboxException;

    /** What runtime_info shows: kind, isolation features, cgroup version, uid. Plain data for JSON. */
    Map<String, Object> info();
}
