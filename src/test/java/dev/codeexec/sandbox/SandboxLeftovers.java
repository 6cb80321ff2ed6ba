package dev.codeexec.sandbox;

import java.nio.file.Path;
import java.util.List;

/** For tests outside this package: what a sandbox may have left behind (processes of the sandbox uid, cgroups). */
public final class SandboxLeftovers {

    private SandboxLeftovers() {
    }

    /** Processes of the sandbox uid in this JVM's run cgroups, after a short wait for the kernel to reap. */
    public static List<Long> processes() throws InterruptedException {
        return SandboxTesting.lingeringSandboxProcesses();
    }

    /** Run cgroups still present under this JVM's instance directory (bwrap only; empty for other sandboxes). */
    public static List<Path> cgroups(Sandbox sandbox) {
        return sandbox instanceof BwrapSandbox b ? b.leftoverCgroups() : List.of();
    }
}
