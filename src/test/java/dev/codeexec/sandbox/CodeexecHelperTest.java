package dev.codeexec.sandbox;

import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

import static dev.codeexec.sandbox.SandboxTesting.UID;
import static org.assertj.core.api.Assertions.assertThat;

/**
 * codeexec-helper (src/main/c) on its own, outside bubblewrap: the launcher drops privileges for good or runs
 * nothing, and the init reports its program's status as a shell would. The sandbox tests cover both inside bwrap.
 */
@Tag("sandbox")
class CodeexecHelperTest {

    static Path helper;

    record Out(int exit, String out, String err) {
    }

    @BeforeAll
    static void install(@TempDir Path dir) throws Exception {
        helper = dir.resolve("codeexec-helper");
        try (InputStream in = CodeexecHelperTest.class.getResourceAsStream(BwrapSandbox.HELPER_RESOURCE)) {
            assertThat(in).as("the helper is built into target/classes by Maven").isNotNull();
            Files.copy(in, helper);
        }
        Files.setPosixFilePermissions(helper, PosixFilePermissions.fromString("rwxr-xr-x"));
        Files.setPosixFilePermissions(dir, PosixFilePermissions.fromString("rwxr-xr-x"));
    }

    static Out run(String... args) throws Exception {
        List<String> cmd = new ArrayList<>(List.of(helper.toString()));
        cmd.addAll(List.of(args));
        return exec(cmd);
    }

    static Out exec(List<String> cmd) throws Exception {
        Process p = new ProcessBuilder(cmd).start();
        p.getOutputStream().close();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        String err = new String(p.getErrorStream().readAllBytes(), StandardCharsets.UTF_8);
        assertThat(p.waitFor(10, TimeUnit.SECONDS)).isTrue();
        return new Out(p.exitValue(), out, err);
    }

    static String[] launch(String... rest) {
        List<String> a = new ArrayList<>(List.of("launch", "--uid", Integer.toString(UID), "--gid", Integer.toString(UID)));
        a.addAll(List.of(rest));
        return a.toArray(String[]::new);
    }

    @Test
    void launchDropsToTheUidForGoodWithNoGroupsAndNoNewPrivs() throws Exception {
        Out o = run(launch("--rlimit", "nofile=100:200", "--rlimit", "cpu=7:8", "--", "/bin/sh", "-c",
                "id -u; id -g; id -G; grep -E '^(Uid|Gid|Groups|CapEff|CapPrm|NoNewPrivs)' /proc/self/status; "
                        + "ulimit -S -n; ulimit -H -n; ulimit -S -t; ulimit -H -t"));
        assertThat(o.exit()).as(o.err()).isZero();
        assertThat(o.out().lines().map(String::strip).toList()).containsExactly("65534", "65534", "65534",
                "Uid:\t65534\t65534\t65534\t65534", "Gid:\t65534\t65534\t65534\t65534", "Groups:",
                "CapPrm:\t0000000000000000", "CapEff:\t0000000000000000", "NoNewPrivs:\t1",
                "100", "200", "7", "8");
    }

    @Test
    void launchPlacesFilesOnTheGivenDescriptorsAndNothingElse(@TempDir Path dir) throws Exception {
        Path secret = dir.resolve("root-only.txt");
        Files.writeString(secret, "opened as root\n");
        Files.setPosixFilePermissions(secret, PosixFilePermissions.fromString("rw-------"));
        Out o = run(launch("--fd", "5=" + secret, "--", "/bin/sh", "-c", "cat <&5; ls /proc/self/fd | tr '\\n' ' '; cat " + secret));
        assertThat(o.out()).startsWith("opened as root\n0 1 2 3 5 ");
        assertThat(o.err()).contains("Permission denied");
    }

    @Test
    void launchRunsNothingWhenASetupStepFails(@TempDir Path dir) throws Exception {
        Path marker = dir.resolve("ran");
        Files.setPosixFilePermissions(dir, PosixFilePermissions.fromString("rwxrwxrwx"));
        String[] program = {"--", "/usr/bin/touch", marker.toString()};
        List<String[]> bad = List.of(
                new String[] {"launch", "--uid", "0", "--gid", "65534", "--", "/usr/bin/touch", marker.toString()},
                new String[] {"launch", "--uid", "65534", "--", "/usr/bin/touch", marker.toString()},
                launch("--cgroup", dir.resolve("no-such-cgroup/cgroup.procs").toString(), program[0], program[1], program[2]),
                launch("--fd", "5=" + dir.resolve("missing"), program[0], program[1], program[2]),
                launch("--fd", "1=/dev/null", program[0], program[1], program[2]),
                launch("--rlimit", "stack=1:1", program[0], program[1], program[2]),
                launch("--rlimit", "cpu=-1:2", program[0], program[1], program[2]),
                launch("--bogus", "x", program[0], program[1], program[2]),
                launch("--", "touch", marker.toString()),
                launch("/usr/bin/touch", marker.toString()));
        for (String[] args : bad) {
            Out o = run(args);
            assertThat(o.exit()).as(String.join(" ", args) + ": " + o.err()).isEqualTo(Launcher.SETUP_FAILED);
            assertThat(o.err()).startsWith("codeexec-helper: ");
            assertThat(marker).as(String.join(" ", args)).doesNotExist();
        }
    }

    @Test
    void initExitsWithTheProgramsStatusAsAShellWould() throws Exception {
        assertThat(run("init", "/bin/sh", "-c", "echo out; echo err >&2; exit 7")).isEqualTo(new Out(7, "out\n", "err\n"));
        assertThat(run("init", "/bin/sh", "-c", "kill -TERM $$").exit()).isEqualTo(128 + 15);
        assertThat(run("init", "no-such-program-xyz")).isEqualTo(
                new Out(127, "", "env: 'no-such-program-xyz': No such file or directory\n"));
        assertThat(run("init", "sh", "-c", "exit 3").exit()).as("found on PATH").isEqualTo(3);
    }

    /** With --status-fd the real wait status goes to the server: exit 130 and death by SIGINT look alike otherwise. */
    @Test
    void initReportsTheProgramsWaitStatusOnTheStatusDescriptorWhichTheProgramNeverSees(@TempDir Path dir)
            throws Exception {
        Path report = dir.resolve("status");
        String withFd5 = "exec 5>\"$0\"; exec \"$@\"";
        Out exited = exec(List.of("/bin/sh", "-c", withFd5, report.toString(), helper.toString(), "init", "--status-fd", "5",
                "/bin/sh", "-c", "ls /proc/self/fd; exit 130"));
        assertThat(exited.exit()).as(exited.err()).isEqualTo(130);
        assertThat(exited.out().lines().toList()).as("the program's descriptors").containsExactly("0", "1", "2", "3");
        assertThat(Files.readString(report)).isEqualTo("exit 130\n");
        Out signaled = exec(List.of("/bin/sh", "-c", withFd5, report.toString(), helper.toString(), "init", "--status-fd", "5",
                "/bin/sh", "-c", "kill -INT $$"));
        assertThat(signaled.exit()).isEqualTo(130);
        assertThat(Files.readString(report)).isEqualTo("signal 2\n");
        assertThat(run("init", "--status-fd", "99", "/bin/true").exit()).as("a descriptor that is not open").isEqualTo(125);
    }

    @Test
    void initClosesTheDescriptorItWasExecutedThroughAndCannotBeInspected(@TempDir Path dir) throws Exception {
        Files.setPosixFilePermissions(dir, PosixFilePermissions.fromString("rwxr-xr-x"));
        Out o = run(launch("--fd", "10=" + helper, "--", "/bin/sh", "-c",
                "exec /proc/self/fd/10 init /bin/sh -c 'ls /proc/self/fd | tr \"\\n\" \" \"; "
                        + "readlink /proc/$PPID/exe || echo exe-hidden; cat /proc/$PPID/environ || echo environ-hidden'"));
        assertThat(o.out()).isEqualTo("0 1 2 3 exe-hidden\nenviron-hidden\n");
    }

    @Test
    void initGivesTheProgramDefaultSignalDispositions() throws Exception {
        // SigIgn and SigBlk of the program: nothing ignored or blocked, whatever the init itself has
        Out o = run("init", "/bin/sh", "-c", "grep -E '^(SigIgn|SigBlk)' /proc/self/status");
        assertThat(o.out().lines().toList()).containsExactly("SigBlk:\t0000000000000000", "SigIgn:\t0000000000000000");
    }

    /**
     * mntns makes a namespace without the detached mounts and waits; a launch with --mntns enters it before it
     * drops privileges (the program sees that mount table), one without stays in the server's; a namespace path
     * that cannot be entered runs nothing.
     */
    @Test
    void launchEntersTheNamespaceMntnsMade() throws Exception {
        assertThat(Files.readString(Path.of("/proc/self/mountinfo"))).contains(" /sys ");
        Process ns = new ProcessBuilder(helper.toString(), "mntns", "--umount", "/sys", "--umount", "/not/a/mount").start();
        try {
            assertThat(new String(ns.getInputStream().readNBytes(6), StandardCharsets.UTF_8)).isEqualTo("ready\n");
            String path = "/proc/" + ns.pid() + "/ns/mnt";
            Out in = run(launch("--mntns", path, "--", "/bin/cat", "/proc/self/mountinfo"));
            assertThat(in.exit()).as(in.err()).isZero();
            assertThat(in.out()).doesNotContain(" /sys ").contains(" / / ");
            assertThat(TrimmedMounts.mountPoints(in.out())).noneMatch(m -> m.startsWith("/sys"));
            Out out = run(launch("--", "/bin/cat", "/proc/self/mountinfo"));
            assertThat(out.out()).contains(" /sys ");

            Out bad = run(launch("--mntns", "/proc/self/fd/999", "--", "/bin/echo", "ran"));
            assertThat(bad.exit()).isEqualTo(125);
            assertThat(bad.out()).isEmpty();
            Out notNs = run(launch("--mntns", "/etc/hostname", "--", "/bin/echo", "ran"));
            assertThat(notNs.exit()).isEqualTo(125);
            assertThat(notNs.err()).contains("cannot enter mount namespace");
            assertThat(notNs.out()).isEmpty();
        } finally {
            ns.getOutputStream().close();
            assertThat(ns.waitFor(10, TimeUnit.SECONDS)).isTrue();
        }
        assertThat(ns.exitValue()).isZero();
        // the host's namespace never changed
        assertThat(Files.readString(Path.of("/proc/self/mountinfo"))).contains(" /sys ");
        assertThat(run("mntns", "--umount", "relative").exit()).isEqualTo(125);
        assertThat(run("mntns", "--umount", "/").exit()).isEqualTo(125);
    }

    @Test
    void unknownRoleIsAUsageError() throws Exception {
        Out o = run("frobnicate");
        assertThat(o.exit()).isEqualTo(2);
        assertThat(o.err()).startsWith("usage: codeexec-helper");
    }
}
