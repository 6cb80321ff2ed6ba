package dev.codeexec.sandbox;

import dev.codeexec.config.DataDir;
import dev.codeexec.config.Ids;
import dev.codeexec.linux.Posix;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;

/**
 * Working directories mounted into a sandbox after it started (warm sandboxes, see {@link SandboxSpec#lateWorkDir()}).
 *
 * <p>How: {@code DATA_DIR/late} is a small tmpfs of its own, marked shared. A warm sandbox binds an empty directory
 * {@code late/<sandbox token>/<random>} (owned by the sandbox's host uid) at its working directory; bwrap turns its copies of
 * the host's mounts into slaves, so a mount the server later makes on that directory in the host's namespace
 * propagates into the sandbox and covers its working directory: a fresh size-capped tmpfs for a stateless run, or
 * the workspace directory for a run in a workspace. The program then changes into the directory again. Only the
 * mount on the run's own directory propagates, and only into the sandboxes that bound that directory (one).
 *
 * <p>What the sandbox's mount table shows of this: a path inside that tmpfs, made of random names. A bind of a
 * directory of the host's file system would show its whole host path (DATA_DIR, the server's pid, the run's id).
 *
 * <p>Propagated mounts lack nosuid/nodev; harmless here: every sandboxed program runs with no_new_privs (set-uid
 * bits are ignored) and without the capability to create device nodes.
 *
 * <p>Needs CAP_SYS_ADMIN in the host's mount namespace (root on a host; in a container only with extra
 * privileges): {@link #prepare} says why it cannot work, and warm sandboxes are then not offered.
 */
final class WorkDirMounts {

    private static final Logger log = LoggerFactory.getLogger(WorkDirMounts.class);

    private final DataDir data;
    private final Path root;
    /** This instance's directory in late/ (one per sandbox, so that closing one never touches another's runs). */
    private final Path mine;
    private final String token;
    private final int uid;
    private final int gid;
    /** After {@link #close}, the next {@link #create} sets everything up again (one sandbox, several executors). */
    private boolean closed;
    private boolean hooked;

    private WorkDirMounts(DataDir data, int uid, int gid) {
        this.data = data;
        this.root = data.late();
        this.token = Ids.hex(8);
        this.mine = data.lateFor(token);
        this.uid = uid;
        this.gid = gid;
    }

    /** Sets up {@link DataDir#late()} as a shared mount and reaps what crashed servers left; or why it cannot. */
    static Result prepare(DataDir data, int uid, int gid) {
        WorkDirMounts m = new WorkDirMounts(data, uid, gid);
        try {
            m.setUp();
            return new Result(Optional.of(m), Optional.empty());
        } catch (IOException | Posix.Errno e) {
            return new Result(Optional.empty(), Optional.of("cannot prepare late working directories in " + m.root
                    + ": " + e.getMessage()));
        }
    }

    private synchronized void setUp() throws IOException, Posix.Errno {
        data.prepareLate();
        // Another server on this DATA_DIR may have mounted it already (a tmpfs, or a bind of itself from an older
        // version): then it is shared by both.
        if (!mountPoints().contains(root.toString()))
            Posix.mount("tmpfs", root.toString(), "tmpfs", Posix.MS_NOSUID | Posix.MS_NODEV, "size=1m,mode=0711");
        Posix.mount(null, root.toString(), null, Posix.MS_SHARED, null);
        reapStale();
        data.prepareLateFor(token);
        Files.writeString(mine.resolve(DataDir.LATE_OWNER), Long.toString(ProcessHandle.current().pid()));
        closed = false;
        if (!hooked) {
            // A JVM that ends without closing its sandbox (a test, an embedding program) must not leave the shared
            // mount behind: every mount in the host's table makes each later bwrap start slower (it parses the
            // table once per bind). Only SIGKILL leaves it; the next server on this DATA_DIR reuses it.
            Runtime.getRuntime().addShutdownHook(new Thread(this::close, "late-workdirs-unmount"));
            hooked = true;
        }
    }

    record Result(Optional<WorkDirMounts> mounts, Optional<String> unavailable) {
    }

    /** The server-wide sandbox uid (SANDBOX_UID), the owner where sandboxes have no host uid of their own. */
    int sandboxUid() {
        return uid;
    }

    /** A fresh empty directory for one sandbox, owned by the sandbox's host uid. */
    synchronized Path create(String runId, int ownerUid) throws SandboxException {
        // a random name, not the run's id: the sandbox sees it in its mount table
        Path d = mine.resolve(Ids.hex(8));
        try {
            if (closed || !Files.isDirectory(mine)) setUp();
            Files.createDirectory(d, PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rwx------")));
            HostDirs.chown(d, ownerUid, gid);
            return d;
        } catch (IOException | Posix.Errno e) {
            throw new SandboxException("cannot create a working directory mount point: " + e.getMessage(), e);
        }
    }

    /** Mounts the workspace (bind) or a fresh tmpfs of {@code bytes}, owned by {@code ownerUid}, on {@code dir}. */
    void mount(Path dir, Optional<Path> workspace, long bytes, int ownerUid) throws SandboxException {
        try {
            if (workspace.isPresent()) {
                Posix.mount(workspace.get().toString(), dir.toString(), null, Posix.MS_BIND, null);
            } else {
                Posix.mount("tmpfs", dir.toString(), "tmpfs", Posix.MS_NOSUID | Posix.MS_NODEV,
                        "size=" + bytes + ",mode=0755,uid=" + ownerUid + ",gid=" + gid);
            }
        } catch (Posix.Errno e) {
            throw new SandboxException("cannot mount the working directory: " + e.getMessage(), e);
        }
    }

    /**
     * Binds {@code source} read-only on {@code dir} (a late read-only directory: a run's declared packages). The bind
     * is made read-only on a staging point first, one no sandbox binds, and only then bound onto {@code dir}: what
     * propagates into the sandbox is a copy of a mount as it is at that moment, flags included, and a later remount
     * of the host's copy does not propagate, so binding on {@code dir} and then remounting it read-only would leave
     * the sandbox's copy writable.
     */
    void mountReadOnly(Path dir, Path source) throws SandboxException {
        Path stage = null;
        try {
            stage = create("stage", 0);
            Posix.mount(source.toString(), stage.toString(), null, Posix.MS_BIND, null);
            Posix.mount(null, stage.toString(), null, Posix.MS_BIND | Posix.MS_REMOUNT | Posix.MS_RDONLY
                    | Posix.MS_NOSUID | Posix.MS_NODEV, null);
            Posix.mount(stage.toString(), dir.toString(), null, Posix.MS_BIND, null);
        } catch (Posix.Errno e) {
            unmountAll(dir);
            throw new SandboxException("cannot mount the read-only directory: " + e.getMessage(), e);
        } finally {
            if (stage != null) release(stage);
        }
    }

    /**
     * Unmounts whatever is on {@code dir} and removes it. Never deletes contents: a workspace may still be
     * mounted there if unmounting failed, and its files must survive.
     */
    void release(Path dir) {
        unmountAll(dir);
        try {
            Files.deleteIfExists(dir);
        } catch (IOException e) {
            log.warn("cannot remove the mount point {}: {}", dir, e.toString());
        }
    }

    private static void unmountAll(Path dir) {
        // a tmpfs, a workspace or a read-only bind is mounted here; loop for safety against stacked mounts
        for (int i = 0; i < 4; i++) {
            try {
                Posix.umount2(dir.toString(), Posix.MNT_DETACH);
            } catch (Posix.Errno e) {
                return; // EINVAL: not a mount point (any more)
            }
        }
    }

    /** Mount points and directories of servers that are no longer running. */
    private void reapStale() throws IOException {
        List<String> points = mountPoints();
        try (var servers = Files.list(root)) {
            for (Path server : servers.toList()) {
                if (!server.equals(mine) && ownerAlive(server)) continue;
                for (String p : points) if (p.startsWith(server + "/")) unmountAll(Path.of(p));
                try (var dirs = Files.list(server)) {
                    for (Path d : dirs.toList()) Files.deleteIfExists(d);
                } catch (IOException e) {
                    log.warn("cannot clean {}: {}", server, e.toString());
                }
                Files.deleteIfExists(server);
            }
        }
    }

    /**
     * Whether the server that made this directory still runs: its pid is in {@link DataDir#LATE_OWNER} (or, from an
     * older version, the directory's name).
     */
    private static boolean ownerAlive(Path server) {
        String name = server.getFileName().toString();
        String pid = name.matches("\\d+") ? name : null;
        try {
            pid = Files.readString(server.resolve(DataDir.LATE_OWNER)).trim();
        } catch (IOException e) {
            // no owner file: an older server's directory, or one being made right now (kept: it has a run dir soon)
            if (pid == null) return true;
        }
        try {
            return ProcessHandle.of(Long.parseLong(pid)).map(ProcessHandle::isAlive).orElse(false);
        } catch (NumberFormatException e) {
            return false;
        }
    }

    /** Unmounts the shared root when no other server uses it (tests make many DATA_DIRs; each must go away). */
    synchronized void close() {
        closed = true;
        try {
            reapStale();
            Files.deleteIfExists(mine);
            try (var left = Files.list(root)) {
                if (left.findAny().isEmpty()) Posix.umount2(root.toString(), Posix.MNT_DETACH);
            }
        } catch (IOException | Posix.Errno e) {
            log.debug("late working directories: {}", e.toString());
        }
    }

    /** Mount points of this mount namespace, from /proc/self/mountinfo (octal escapes decoded). */
    static List<String> mountPoints() throws IOException {
        List<String> out = new ArrayList<>();
        for (String line : Files.readAllLines(Path.of("/proc/self/mountinfo"))) {
            String[] f = line.split(" ");
            if (f.length > 4) out.add(unescape(f[4]));
        }
        return out;
    }

    private static String unescape(String s) {
        StringBuilder b = new StringBuilder(s.length());
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            if (c == '\\' && i + 3 < s.length()) {
                try {
                    b.append((char) Integer.parseInt(s.substring(i + 1, i + 4), 8));
                    i += 3;
                    continue;
                } catch (NumberFormatException e) {
                    // not an escape
                }
            }
            b.append(c);
        }
        return b.toString();
    }
}
