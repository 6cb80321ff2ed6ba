package dev.codeexec.sandbox;

import org.junit.jupiter.api.Test;

import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/** The root-side launcher script: limits are set before anything runs, and a failed step stops the run. */
class LauncherTest {

    final Limits limits = new Limits(Duration.ofSeconds(5), 3, 64L << 20, 32, 1024, 1 << 20);

    String run(List<String> cmd) throws Exception {
        Process p = Launcher.start(cmd, Map.of("PATH", "/usr/bin:/bin"), null);
        String out = new String(p.getInputStream().readAllBytes());
        p.waitFor();
        return p.exitValue() + ":" + out;
    }

    @Test
    void setsRlimitsBeforeExec() throws Exception {
        String out = run(Launcher.command(List.of(), Launcher.Rlimits.of(limits).withMemory().withNproc(), Map.of(),
                List.of("/bin/sh", "-c", "ulimit -St; ulimit -Ht; ulimit -c; ulimit -f; ulimit -n; ulimit -v; ulimit -p")));
        assertThat(out).isEqualTo("0:3\n4\n0\n2048\n4096\n65536\n32\n");
    }

    @Test
    void withoutFallbacksMemoryAndProcessesAreLeftToTheCgroup() throws Exception {
        String out = run(Launcher.command(List.of(), Launcher.Rlimits.of(limits), Map.of(),
                List.of("/bin/sh", "-c", "ulimit -v; ulimit -t")));
        assertThat(out).isEqualTo("0:unlimited\n3\n");
    }

    @Test
    void withoutCgroupsTheRlimitsStandInForMemoryAndProcesses() throws Exception {
        Launcher.Rlimits rlimits = Launcher.Rlimits.of(limits).standingInFor(Cgroups.none("test").withoutWatchdog());
        assertThat(rlimits).isEqualTo(Launcher.Rlimits.of(limits).withMemory().withNproc());
        String out = run(Launcher.command(List.of(), rlimits, Map.of(), List.of("/bin/sh", "-c", "ulimit -v; ulimit -p")));
        assertThat(out).isEqualTo("0:65536\n32\n");
    }

    @Test
    void withTheMemoryWatchdogTheAddressSpaceLimitLeavesRoomForReservations() throws Exception {
        Launcher.Rlimits rlimits = Launcher.Rlimits.of(limits).standingInFor(Cgroups.none("test"));
        String out = run(Launcher.command(List.of(), rlimits, Map.of(), List.of("/bin/sh", "-c", "ulimit -v; ulimit -p")));
        assertThat(out).isEqualTo("0:" + (65536 + (Launcher.Rlimits.WATCHED_SLACK >> 10)) + "\n32\n");
    }

    @Test
    void withoutFsizeTheFileSizeIsLeftUnlimited() throws Exception {
        String out = run(Launcher.command(List.of(), Launcher.Rlimits.of(limits).withoutFsize(), Map.of(),
                List.of("/bin/sh", "-c", "ulimit -f; ulimit -t")));
        assertThat(out).isEqualTo("0:unlimited\n3\n");
    }

    @Test
    void aCgroupThatCannotBeJoinedStopsTheRunBeforeTheProgram() throws Exception {
        String out = run(Launcher.command(List.of(Path.of("/nonexistent/cgroup.procs")), Launcher.Rlimits.of(limits),
                Map.of(), List.of("/bin/echo", "RAN")));
        assertThat(out).isEqualTo(Launcher.SETUP_FAILED + ":");
    }

    @Test
    void opensFilesAsFileDescriptorsAndQuotesPaths() throws Exception {
        Path f = java.nio.file.Files.createTempFile("it's a file", ".txt");
        java.nio.file.Files.writeString(f, "content");
        try {
            String out = run(Launcher.command(List.of(), Launcher.Rlimits.of(limits), Map.of(5, f),
                    List.of("/bin/sh", "-c", "cat <&5")));
            assertThat(out).isEqualTo("0:content");
        } finally {
            java.nio.file.Files.delete(f);
        }
        assertThatThrownBy(() -> Launcher.command(List.of(), Launcher.Rlimits.of(limits), Map.of(10, f), List.of("x")))
                .isInstanceOf(IllegalArgumentException.class);
    }
}
