package dev.codeexec.warm;

import dev.codeexec.testing.Poll;
import dev.codeexec.testing.Requires;
import org.junit.jupiter.api.Test;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;

import static org.assertj.core.api.Assertions.assertThat;

/** Start-time work runs below the runs: in a scheduler group of its own at nice 19, and at nice 10 inside it. */
class StartupProcessesTest {

    private static String run(List<String> argv) throws Exception {
        Process p = new ProcessBuilder(argv).redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertThat(p.waitFor()).as("exit status of %s: %s", argv, out).isZero();
        return out;
    }

    @Test
    void backgroundWorkRunsInALowestPriorityGroupOfItsOwnAndPassesItsExitStatusOn() throws Exception {
        Path own = Path.of("/proc/self/autogroup");
        Requires.onlyWhere(Files.exists(own), "the kernel groups tasks by session (CONFIG_SCHED_AUTOGROUP)");
        String server = Files.readString(own).trim(); // "/autogroup-N nice 0"
        String[] got = run(StartupProcesses.background(List.of("/bin/sh", "-c",
                "cat /proc/self/autogroup; cut -d' ' -f19 /proc/self/stat"))).trim().split("\n");
        assertThat(got[0]).as("a group other than the server's (%s)", server)
                .isNotEqualTo(server).startsWith("/autogroup-");
        if (new com.sun.security.auth.module.UnixSystem().getUid() == 0) assertThat(got[0]).endsWith("nice 19");
        assertThat(got[1]).as("the task's own nice value").isEqualTo("10");
        Process failing = new ProcessBuilder(StartupProcesses.background(List.of("/bin/sh", "-c", "exit 3"))).start();
        assertThat(failing.waitFor()).as("the command's exit status, not setsid's").isEqualTo(3);
    }

    @Test
    void workARunWaitsForIsRaisedToTheDefaultWeightAndLaterStepsStartThere() throws Exception {
        Requires.onlyWhere(Files.exists(Path.of("/proc/self/autogroup")),
                "the kernel groups tasks by session (CONFIG_SCHED_AUTOGROUP)");
        Requires.that(new com.sun.security.auth.module.UnixSystem().getUid() == 0, "root: raising a group needs CAP_SYS_NICE");
        Process p = new ProcessBuilder(StartupProcesses.background(List.of("/bin/sleep", "30"))).start();
        try {
            Path group = Path.of("/proc", Long.toString(p.pid()), "autogroup");
            Poll.until("the background group is lowered to nice 19", () -> Files.readString(group).trim().endsWith("nice 19"));
            assertThat(StartupProcesses.raise(p)).isTrue();
            assertThat(Files.readString(group).trim()).endsWith("nice 0");
        } finally {
            p.destroyForcibly().waitFor();
        }
        String later = run(StartupProcesses.background(List.of("/bin/cat", "/proc/self/autogroup"), false)).trim();
        assertThat(later).as("a step started for a waiting run").endsWith("nice 0")
                .isNotEqualTo(Files.readString(Path.of("/proc/self/autogroup")).trim());
    }
}
