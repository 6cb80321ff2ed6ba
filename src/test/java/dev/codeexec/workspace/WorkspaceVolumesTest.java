package dev.codeexec.workspace;

import dev.codeexec.testing.Requires;
import dev.codeexec.workspace.WorkspaceException.Kind;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * WORKSPACE_ROOT on file systems of its own, made here as loop-mounted images (root, mkfs.xfs and mkfs.ext4
 * needed, else skipped): XFS with project quotas where the kernel has them (the kernel's limits), XFS without
 * them (measured, and the reason said), and a small ext4 whose inodes run out there instead of on the host.
 */
@Tag("slow")
class WorkspaceVolumesTest {

    static Path base;
    static final List<String> loops = new ArrayList<>();
    static final List<Path> mounts = new ArrayList<>();
    static Path xfs;
    static boolean xfsQuota;
    static Path small;

    @BeforeAll
    static void mountVolumes() throws Exception {
        Requires.that("root".equals(System.getProperty("user.name")), "root: loop mounts");
        Requires.that(Files.isExecutable(Path.of("/usr/sbin/mkfs.xfs")) || Files.isExecutable(Path.of("/sbin/mkfs.xfs")),
                "mkfs.xfs (xfsprogs, which install-deps.sh --test installs)");
        base = Files.createTempDirectory("ws-volumes");
        Files.setPosixFilePermissions(base, PosixFilePermissions.fromString("rwx--x--x"));
        xfs = volume("xfs", "320M", List.of("mkfs.xfs", "-q"), "prjquota");
        xfsQuota = xfs != null;
        if (!xfsQuota) xfs = volume("xfs-plain", "320M", List.of("mkfs.xfs", "-q"), null);
        small = volume("small", "64M", List.of("mkfs.ext4", "-q", "-F", "-N", "2000"), null);
    }

    /** A loop-mounted image (sparse) with {@code options}; null when it cannot be mounted with them. */
    private static Path volume(String name, String size, List<String> mkfs, String options) throws Exception {
        Path image = base.resolve(name + ".img");
        run(List.of("truncate", "-s", size, image.toString()));
        List<String> cmd = new ArrayList<>(mkfs);
        cmd.add(image.toString());
        run(cmd);
        String loop = output(List.of("losetup", "--find", "--show", image.toString())).strip();
        loops.add(loop);
        Path mnt = Files.createDirectory(base.resolve(name));
        List<String> mount = new ArrayList<>(List.of("mount", loop, mnt.toString()));
        if (options != null) mount.addAll(List.of("-o", options));
        if (new ProcessBuilder(mount).redirectErrorStream(true).start().waitFor() != 0) return null;
        mounts.add(mnt);
        Files.setPosixFilePermissions(mnt, PosixFilePermissions.fromString("rwx--x--x"));
        return mnt;
    }

    @AfterAll
    static void unmountVolumes() throws Exception {
        for (Path m : mounts) new ProcessBuilder("umount", "-l", m.toString()).start().waitFor();
        for (String l : loops) new ProcessBuilder("losetup", "-d", l).start().waitFor();
        if (base != null) new ProcessBuilder("rm", "-rf", "--one-file-system", base.toString()).start().waitFor();
    }

    private static void run(List<String> cmd) throws Exception {
        Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes());
        if (p.waitFor() != 0) throw new IllegalStateException(cmd + " failed: " + out);
    }

    private static String output(List<String> cmd) throws Exception {
        Process p = new ProcessBuilder(cmd).start();
        String out = new String(p.getInputStream().readAllBytes());
        if (p.waitFor() != 0) throw new IllegalStateException(cmd + " failed");
        return out;
    }

    /** Runs {@code sh -c script} in {@code dir} as {@code uid} in the group 65534 only; its output and exit code. */
    private static String as(int uid, Path dir, String script) throws Exception {
        Process p = new ProcessBuilder("setpriv", "--reuid=" + uid, "--regid=65534", "--clear-groups", "sh", "-c", script)
                .directory(dir.toFile()).redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes());
        return p.waitFor() + ":" + out;
    }

    @Test
    void onXfsWithoutQuotaSupportTheLimitsAreMeasuredAndTheReasonIsSaid() {
        Requires.onlyWhere(!xfsQuota, "a kernel that cannot mount XFS with prjquota (here the kernel enforces the limits)");
        Workspaces w = new Workspaces(xfs.resolve("ws"), 1 << 20, 100, Duration.ZERO, 65534, 65534);
        assertThat(w.enforcement()).isEqualTo("measured");
        assertThat((String) w.describe().get("enforcementNote")).contains("XFS")
                .containsAnyOf("CONFIG_XFS_QUOTA", "without prjquota");
    }

    /** Where the kernel has XFS project quotas, a program gets EDQUOT at the entry limit, whatever its uid. */
    @Test
    void onXfsWithProjectQuotasTheKernelRefusesEntriesAndBytesPastTheLimits() throws Exception {
        Requires.onlyWhere(xfsQuota, "a kernel that mounts XFS with prjquota (CONFIG_XFS_QUOTA)");
        Workspaces w = new Workspaces(xfs.resolve("ws"), 1 << 20, 5, Duration.ZERO, 65534, 65534);
        assertThat(w.enforcement()).isEqualTo("xfs-project-quota");
        Workspace ws = w.open("alice", "proj", true);
        String out = as(65534, ws.fs().root(), "for i in 1 2 3 4 5 6; do : > f$i || exit 3; done");
        assertThat(out).startsWith("3:").contains("Disk quota exceeded");
        assertThat(ws.usage()).isEqualTo(new Workspace.Usage(0, 5, true));
        assertThat(ws.info().entries()).isEqualTo(5);
        assertThatThrownBy(() -> ws.write(RelPath.parse("f6"), new ByteArrayInputStream(new byte[1]), 10))
                .extracting(e -> ((WorkspaceException) e).kind()).isEqualTo(Kind.QUOTA_EXCEEDED);
        ws.write(RelPath.parse("f1"), new ByteArrayInputStream(new byte[600_000]), 1 << 20); // a replace fits
        assertThat(as(65534, ws.fs().root(), "head -c 900000 /dev/zero > f2")).contains("Disk quota exceeded");
        ws.fs().delete(RelPath.parse("f2"), false);
        ws.write(RelPath.parse("f1"), new ByteArrayInputStream(new byte[900_000]), 1 << 20); // reuses its own space
    }

    /** On a file system of its own, a flood of files runs out of that file system's inodes, never the host's. */
    @Test
    void aWorkspaceRootOnItsOwnFileSystemRunsOutOfInodesThereAndApiWritesSaySo() throws Exception {
        Requires.that(small != null, "a loop-mounted ext4 (root and a loop device)");
        Workspaces w = new Workspaces(small.resolve("ws"), 1 << 20, 100_000, Duration.ZERO, 65534, 65534);
        Workspace ws = w.open("alice", "flood", true);
        long hostFreeBefore = Files.getFileStore(Path.of("/")).getUsableSpace();
        int made = 0;
        try {
            while (made < 10_000) Files.createFile(ws.fs().root().resolve("f" + made++));
        } catch (IOException full) {
            assertThat(full.getMessage()).containsIgnoringCase("no space");
        }
        assertThat(made).isLessThan(2000);
        assertThatThrownBy(() -> ws.write(RelPath.parse("one-more"), new ByteArrayInputStream(new byte[1]), 10))
                .isInstanceOf(WorkspaceException.class).hasMessageContaining("no space left on the workspace volume");
        assertThat(Files.getFileStore(Path.of("/")).getUsableSpace()).isGreaterThan(hostFreeBefore / 2);
    }
}
