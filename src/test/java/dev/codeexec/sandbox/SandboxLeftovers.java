package dev.codeexec.sandbox;

import java.nio.file.Path;
import java.util.List;

/** For tests outside this package: what a sandbox may have left behind (processes of the sandbox uid, cgroups). */
public final class SandboxLeftovers {

    private SandboxLeftovers() {
    }

    /**
     * Waits until no process of the sandbox uid is left in this JVM's run cgroups (the kernel reaps killed ones a
     * moment after the kill); fails the test with {@code what} and the processes still there after the bound.
     */
    public static void awaitNoProcesses(String what) throws InterruptedException {
        SandboxTesting.awaitNoSandboxProcesses(what);
    }

    /** Processes of the sandbox uid in this JVM's run cgroups right now. */
    public static List<Long> processesNow() {
        return SandboxTesting.processesOfSandboxUid();
    }

    /** Run cgroups still present under this JVM's instance directory (bwrap only; empty for other sandboxes). */
    public static List<Path> cgroups(Sandbox sandbox) {
        return sandbox instanceof BwrapSandbox b ? b.leftoverCgroups() : List.of();
    }
}
