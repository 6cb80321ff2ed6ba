package dev.codeexec.sandbox;

import dev.codeexec.config.DataDir;
import dev.codeexec.testing.Requires;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;

import static dev.codeexec.sandbox.SandboxTesting.*;
import static org.assertj.core.api.Assertions.assertThat;

/** gVisor where runsc is installed; elsewhere only that it explains why it cannot run. */
@Tag("sandbox")
class GvisorSandboxTest {

    static GvisorSandbox sandbox;
    static Path dataDir;

    @BeforeAll
    static void setUp() throws Exception {
        dataDir = Files.createTempDirectory("gvisor-data-");
        sandbox = new GvisorSandbox(UID, UID, dataDir);
    }

    @AfterAll
    static void tearDown() {
        DataDir.deleteTree(dataDir);
    }

    @Test
    void explainsWhyItIsUnavailableWhenRunscIsMissing() {
        if (Files.isExecutable(Path.of(GvisorSandbox.RUNSC))) {
            assertThat(sandbox.unavailableReason()).isEmpty();
        } else {
            assertThat(sandbox.unavailableReason()).hasValueSatisfying(r -> assertThat(r).contains("runsc"));
        }
        assertThat(sandbox.info()).containsEntry("kind", "gvisor").containsEntry("network", "none");
    }

    @Test
    void runsCodeWithFilesStdinAndNoNetwork() throws Exception {
        Requires.that(sandbox.unavailableReason().isEmpty(), "gVisor (runsc, which install-deps.sh installs) usable here ("
                + sandbox.unavailableReason().orElse("") + ")");
        Path code = Files.createTempFile("code-", ".py");
        try (ServerSocket server = new ServerSocket(0, 50, java.net.InetAddress.getLoopbackAddress())) {
            Files.writeString(code, """
                    import socket, os, sys
                    print(sys.stdin.read().strip(), os.getcwd(), sorted(os.environ))
                    s = socket.socket(); s.settimeout(2)
                    try:
                        s.connect(("127.0.0.1", %d)); print("CONNECTED")
                    except OSError as e:
                        print("refused")
                    print("routes", open("/proc/net/route").read().splitlines()[1:])
                    try:
                        open("/etc/shadow").read(); print("SHADOW READ")
                    except OSError:
                        print("no shadow")
                    print(sorted(os.listdir("/work")), [p for p in ["/root", "/home", "/var", "/srv", "/work/briefs"] if os.path.exists(p)])
                    open("/work/out.txt", "w").write("x"); print("wrote")
                    """.formatted(server.getLocalPort()));
            Result r = run(sandbox, SandboxSpec.builder(runId(), List.of(PY, "/work/main.py"), "/work", limits())
                    .readOnlyFiles(Map.of("/work/main.py", code)).env(ENV).build(), "hi", java.time.Duration.ofSeconds(30));
            assertThat(r.exit()).as("out=" + r.out() + " err=" + r.err()).isZero();
            assertThat(r.out()).startsWith("hi /work ['HOME', 'LANG', 'PATH']").doesNotContain("CONNECTED")
                    .contains("refused\nroutes []\nno shadow\n['main.py'] []\nwrote");
        } finally {
            Files.delete(code);
        }
        assertThat(liveProcessesOfSandboxUid()).isEmpty();
    }

    @Test
    void theWorkDirNeedNotExistOnTheHost() throws Exception {
        Requires.that(sandbox.unavailableReason().isEmpty(), "gVisor (runsc, which install-deps.sh installs) usable here ("
                + sandbox.unavailableReason().orElse("") + ")");
        String workDir = "/code-exec-not-on-host-" + ProcessHandle.current().pid();
        assertThat(Path.of(workDir)).doesNotExist();
        Result r = run(sandbox, SandboxSpec.builder(runId(), List.of(PY, "-c", "import os; print(os.getcwd())"), workDir, limits())
                .env(ENV).build(), "", java.time.Duration.ofSeconds(30));
        assertThat(r.exit()).as("out=" + r.out() + " err=" + r.err()).isZero();
        assertThat(r.out()).isEqualTo(workDir + "\n");
        assertThat(Path.of(workDir)).doesNotExist();
    }
}
