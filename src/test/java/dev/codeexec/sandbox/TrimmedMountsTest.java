package dev.codeexec.sandbox;

import org.junit.jupiter.api.Test;

import java.nio.file.Path;
import java.util.List;

import static org.assertj.core.api.Assertions.assertThat;

/** Which host mounts the sandboxes' namespace leaves out, and when a run must not start in it. */
class TrimmedMountsTest {

    static final String MOUNTINFO = """
            22 1 253:1 / / rw,relatime shared:1 - ext4 /dev/vda rw
            23 22 0:21 / /proc rw,nosuid,nodev,noexec,relatime shared:5 - proc proc rw
            24 22 0:22 / /sys rw,nosuid,nodev,noexec,relatime shared:6 - sysfs sysfs rw
            25 24 0:23 / /sys/fs/cgroup ro,nosuid,nodev,noexec shared:7 - tmpfs tmpfs ro
            26 25 0:24 / /sys/fs/cgroup/memory rw,nosuid,nodev,noexec,relatime shared:8 - cgroup cgroup rw,memory
            27 22 0:5 / /dev rw,nosuid shared:2 - devtmpfs udev rw
            28 27 0:25 / /dev/pts rw,nosuid,noexec,relatime shared:3 - devpts devpts rw
            29 27 0:26 / /dev/shm rw,nosuid,nodev shared:4 - tmpfs tmpfs rw
            30 27 0:26 / /dev/shm rw,nosuid,nodev shared:4 - tmpfs tmpfs rw
            31 22 0:27 / /run rw,nosuid,nodev shared:9 - tmpfs tmpfs rw
            32 31 0:28 / /run/user/1000 rw,nosuid,nodev shared:10 - tmpfs tmpfs rw
            33 22 0:29 / /mnt/my\\040data rw shared:11 - ext4 /dev/vdb rw
            34 22 0:30 / /srv/data rw shared:12 - ext4 /dev/vdc rw
            35 22 0:31 / /var/lib/code-exec-mcp/late rw shared:13 - ext4 /dev/vda rw
            """;

    @Test
    void mountPointsAreDecoded() {
        List<Path> m = TrimmedMounts.mountPoints(MOUNTINFO);
        assertThat(m).hasSize(14).contains(Path.of("/mnt/my data"), Path.of("/dev/shm"));
    }

    @Test
    void detachesOnlyTheTopmostMountsUnderTheKnownPrefixes() {
        List<Path> d = TrimmedMounts.toDetach(TrimmedMounts.mountPoints(MOUNTINFO), List.of(Path.of("/var/lib/code-exec-mcp")));
        // /sys takes its cgroup mounts along; /, /proc, /dev itself, /srv and DATA_DIR's mounts stay
        assertThat(d).containsExactly(Path.of("/dev/pts"), Path.of("/dev/shm"), Path.of("/mnt/my data"),
                Path.of("/run"), Path.of("/sys"));
    }

    @Test
    void keepsWhatHoldsOrIsInsideDataDir() {
        List<Path> d = TrimmedMounts.toDetach(TrimmedMounts.mountPoints(MOUNTINFO), List.of(Path.of("/run/user/1000/code-exec")));
        // /run holds DATA_DIR, and so does /run/user/1000: both stay
        assertThat(d).doesNotContain(Path.of("/run"), Path.of("/run/user/1000")).contains(Path.of("/sys"));
        List<Path> e = TrimmedMounts.toDetach(TrimmedMounts.mountPoints(MOUNTINFO), List.of(Path.of("/run")));
        assertThat(e).doesNotContain(Path.of("/run"), Path.of("/run/user/1000"));
        assertThat(TrimmedMounts.toDetach(List.of(Path.of("/"), Path.of("/proc")), List.of(Path.of("/data")))).isEmpty();
    }

    @Test
    void bindSourcesAreEveryBindsHostSideUpToTheProgram() {
        List<String> argv = List.of("/usr/bin/bwrap", "--unshare-all", "--setenv", "X", "--bind", "--ro-bind", "/usr", "/usr",
                "--symlink", "usr/bin", "/bin", "--ro-bind", "/data/etc", "/etc", "--proc", "/proc", "--dev", "/dev",
                "--bind", "/run/ws/a", "/work", "--perms", "0444", "--ro-bind-data", "4", "/work/f",
                "--ro-bind-try", "/opt/x", "/opt/x", "--dev-bind", "/mnt/d", "/d", "--chdir", "/work", "--",
                "/bin/sh", "--bind", "/not/a/source", "/x");
        assertThat(BwrapSandbox.bindSources(argv)).containsExactly(Path.of("/usr"), Path.of("/data/etc"),
                Path.of("/run/ws/a"), Path.of("/opt/x"), Path.of("/mnt/d"));
    }
}
