package dev.codeexec.sandbox;

import dev.codeexec.config.DataDir;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;

import static dev.codeexec.sandbox.SandboxTesting.*;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * Interpreters started ahead of their code, against the real bwrap: the control channel on fds 8/9, a working
 * directory mounted after start (tmpfs or a workspace), limits reset when code arrives, SIGINT to the program.
 */
@Tag("sandbox")
@org.junit.jupiter.api.Timeout(value = 60, threadMode = org.junit.jupiter.api.Timeout.ThreadMode.SEPARATE_THREAD)
class ControlChannelTest {

    static BwrapSandbox sandbox;
    static Path dataDir;

    @BeforeAll
    static void setUp() throws Exception {
        dataDir = Files.createTempDirectory("code-exec-data-");
        sandbox = new BwrapSandbox(UID, UID, dataDir);
        assertThat(sandbox.unavailableReason()).isEmpty();
        assertThat(sandbox.lateWorkDirUnavailable()).isEmpty();
    }

    @AfterAll
    static void tearDown() {
        sandbox.close();
        assertThat(dataDir.resolve("late")).isEmptyDirectory();
        DataDir.deleteTree(dataDir);
    }

    @AfterEach
    void nothingLeftBehind() throws Exception {
        awaitNoSandboxProcesses("no process of uid 65534 after the test");
        assertThat(sandbox.leftoverCgroups()).isEmpty();
        assertThat(WorkDirMounts.mountPoints()).noneMatch(m -> m.startsWith(dataDir.resolve("late") + "/"));
        assertThat(dataDir.resolve("control")).isEmptyDirectory();
    }

    private static final String ECHO = "echo ready >&9; read line <&8; cd /work || exit 9; echo \"$line\" > got.txt; "
            + "cat got.txt; df -P . | tail -1 | awk '{print $2}'; echo done >&9";

    @Test
    void messagesFlowBothWaysAndAFreshTmpfsAppearsAtTheWorkDir() throws Exception {
        try (SandboxProcess p = sandbox.start(spec("/bin/sh", "-c", ECHO).withControl(true))) {
            ControlChannel c = p.control().orElseThrow();
            CompletableFuture<String> out = drain(p.stdout());
            assertThat(c.receive()).isEqualTo("ready");
            p.mountWorkDir(Optional.empty(), 3L << 20);
            c.send("hello");
            assertThat(c.receive()).isEqualTo("done");
            assertThat(p.waitFor(Duration.ofSeconds(10))).isTrue();
            // the file went to the 3 MiB tmpfs (df -P counts 1024-byte blocks)
            assertThat(out.get().lines().toList()).containsExactly("hello", "3072");
            assertThat(p.exitCode()).isZero();
        }
    }

    /** What a warm sandbox's mount table says of its working directory: no host path, server pid or run id. */
    @Test
    void theMountTableShowsNeitherDataDirNorTheServersPidNorTheRunsId() throws Exception {
        SandboxSpec spec = spec("/bin/sh", "-c", "echo ready >&9; read line <&8; grep ' /work ' /proc/self/mountinfo")
                .withControl(true);
        try (SandboxProcess p = sandbox.start(spec)) {
            ControlChannel c = p.control().orElseThrow();
            CompletableFuture<String> out = drain(p.stdout());
            assertThat(c.receive()).isEqualTo("ready");
            p.mountWorkDir(Optional.empty(), 1 << 20);
            c.send("go");
            assertThat(p.waitFor(Duration.ofSeconds(10))).isTrue();
            assertThat(out.get()).contains(" /work ").doesNotContain(dataDir.toString())
                    .doesNotContain("/" + ProcessHandle.current().pid() + "/").doesNotContain(spec.runId());
        }
    }

    /**
     * Without cgroups the memory watchdog counts the files of a tmpfs mounted after start as well (issue 35, finding
     * 4): 115 MiB written to the working directory of a run allowed 96 MiB of memory (and 128 MiB of disk).
     */
    @Test
    void withoutCgroupsFilesOfAWorkDirMountedAfterStartCountAsMemory() throws Exception {
        BwrapSandbox watched = new BwrapSandbox(UID, UID, dataDir, Cgroups.none("test"));
        Limits l = new Limits(Duration.ofSeconds(30), 10, 96L << 20, 64, 1 << 20, 128L << 20);
        String fill = "echo ready >&9; read line <&8; cd /work || exit 9; head -c 120000000 /dev/zero > fill; "
                + "echo filled; sleep 20; echo outlived";
        try (SandboxProcess p = watched.start(spec(l, "/bin/sh", "-c", fill).withControl(true))) {
            ControlChannel c = p.control().orElseThrow();
            CompletableFuture<String> out = drain(p.stdout());
            assertThat(c.receive()).isEqualTo("ready");
            p.mountWorkDir(Optional.empty(), 128L << 20);
            c.send("go");
            assertThat(p.waitFor(Duration.ofSeconds(25))).isTrue();
            assertThat(out.get()).doesNotContain("outlived");
            assertThat(p.memoryLimitHit()).as("reported as the memory limit").isTrue();
            assertThat(p.peakMemoryBytes().orElse(0)).isGreaterThan(96L << 20);
        } finally {
            watched.close();
        }
    }

    @Test
    void aWorkspaceMountedAfterStartIsTheWorkDirAndKeepsItsFiles() throws Exception {
        Path ws = Files.createTempDirectory(dataDir, "ws-");
        Files.writeString(ws.resolve("old.txt"), "kept");
        HostDirs.chown(ws, UID, UID);
        // a workspace as Workspaces makes it: every sandbox runs as a host uid of its own, in the workspace's group
        Files.setPosixFilePermissions(ws, java.nio.file.attribute.PosixFilePermissions.fromString("rwxrwx---"));
        try (SandboxProcess p = sandbox.start(spec("/bin/sh", "-c", ECHO + "; cat old.txt").withControl(true))) {
            ControlChannel c = p.control().orElseThrow();
            CompletableFuture<String> out = drain(p.stdout());
            assertThat(c.receive()).isEqualTo("ready");
            p.mountWorkDir(Optional.of(ws), 1 << 20);
            c.send("into the workspace");
            assertThat(c.receive()).isEqualTo("done");
            assertThat(p.waitFor(Duration.ofSeconds(10))).isTrue();
            assertThat(out.get()).startsWith("into the workspace\n").endsWith("kept");
        }
        assertThat(ws.resolve("got.txt")).hasContent("into the workspace");
        assertThat(ws.resolve("old.txt")).hasContent("kept");
    }

    @Test
    void limitProgramGivesAFreshCpuBudgetAndCapsFileSizes() throws Exception {
        // launched with 10 s of CPU; cut to 1 s when the "code" arrives: the busy loop dies of SIGXCPU
        String prog = "echo ready >&9; read line <&8; head -c 200000 /dev/zero > /tmp/big; ls -l /tmp/big | awk '{print $5}'; "
                + "exec " + PY + " -c 'while True: pass'";
        try (SandboxProcess p = sandbox.start(spec("/bin/sh", "-c", prog).withControl(false))) {
            ControlChannel c = p.control().orElseThrow();
            CompletableFuture<String> out = drain(p.stdout());
            drain(p.stderr());
            assertThat(c.receive()).isEqualTo("ready");
            p.limitProgramCpu(1);
            p.limitProgramFileSize(100_000);
            c.send("go");
            assertThat(p.waitFor(Duration.ofSeconds(20))).isTrue();
            assertThat(p.exitCode()).isEqualTo(128 + 24);
            assertThat(out.get().trim()).isEqualTo("100000");
        }
    }

    @Test
    void interruptSendsSigintToTheProgram() throws Exception {
        String prog = "trap 'echo interrupted >&9; exit 0' INT; echo ready >&9; while :; do sleep 0.05; done";
        try (SandboxProcess p = sandbox.start(spec("/bin/sh", "-c", prog).withControl(false))) {
            ControlChannel c = p.control().orElseThrow();
            drain(p.stdout());
            assertThat(c.receive()).isEqualTo("ready");
            assertThat(p.interrupt()).isTrue();
            assertThat(c.receive()).isEqualTo("interrupted");
            assertThat(p.waitFor(Duration.ofSeconds(10))).isTrue();
        }
    }

    @Test
    void endOfStreamWhenTheProgramDies() throws Exception {
        try (SandboxProcess p = sandbox.start(spec("/bin/sh", "-c", "echo ready >&9; exit 3").withControl(false))) {
            ControlChannel c = p.control().orElseThrow();
            assertThat(c.receive()).isEqualTo("ready");
            assertThat(c.receive()).isNull();
            assertThat(p.waitFor(Duration.ofSeconds(10))).isTrue();
            assertThat(p.exitCode()).isEqualTo(3);
        }
    }

    @Test
    void theProgramDoesNotSeeTheFifosOrTheControlDirectory() throws Exception {
        Result r = run(sandbox, spec("/bin/sh", "-c", "ls -l /proc/self/fd/ | awk '{print $9, $11}'; ls " + dataDir
                + "/control 2>&1 | head -1").withControl(false));
        // the descriptors name the host path of the (already unlinked) FIFOs; nothing can open them by that name
        assertThat(r.out()).contains("\n8 /").contains("\n9 /").contains("No such file or directory");
    }

    @Test
    void otherSandboxesRefuseControl() {
        NoSandbox none = new NoSandbox(UID, UID);
        assertThatThrownBy(() -> none.start(spec("/bin/true").withControl(false)))
                .isInstanceOf(SandboxException.class).hasMessageContaining("does not support");
        assertThat(none.supportsControl()).isFalse();
    }
}
