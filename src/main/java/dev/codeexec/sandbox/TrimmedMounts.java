package dev.codeexec.sandbox;

import dev.codeexec.linux.Posix;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.TimeUnit;

/**
 * The mount namespace sandboxes start in: the host's, without the mounts no sandbox uses. bubblewrap copies the
 * mount table of the namespace it starts in and reads all of it (/proc/self/mountinfo) once per bind — about
 * sixteen times per run — so every host mount costs every run (~0.5 ms per run measured with this machine's 23;
 * container and Kubernetes hosts often have many more).
 *
 * <p>Made once, by {@code codeexec-helper mntns} as root: a private namespace, a recursive slave of the host's (a
 * workspace mounted later under DATA_DIR still reaches running sandboxes), with the mounts under {@link #PREFIXES}
 * detached — sysfs and the cgroup file systems (the launcher joins its cgroups before it enters this namespace),
 * /run, /mnt, /media and /dev's own sub-mounts (bwrap's {@code --dev} binds device nodes from /dev itself, and
 * mounts its own devpts and /dev/shm). Mounts that contain DATA_DIR are kept. The server keeps the namespace
 * alive through a descriptor; the launcher enters it ({@code --mntns /proc/SERVER/fd/N}) before dropping its
 * privileges. A run that binds anything under a detached mount (a workspace root or language directory under
 * /run, say) starts in the host's namespace instead ({@link #covers}). What a sandbox sees does not change:
 * bwrap builds its root from binds either way.
 */
final class TrimmedMounts implements AutoCloseable {

    /** Mount points at or under these are detached, unless they hold DATA_DIR. */
    static final List<String> PREFIXES = List.of("/sys", "/run", "/mnt", "/media", "/dev/pts", "/dev/shm",
            "/dev/mqueue", "/dev/hugepages");

    private final int fd;
    private final String path;
    private final List<Path> detached;
    private final int hostMounts;
    private final int mounts;

    private TrimmedMounts(int fd, List<Path> detached, int hostMounts, int mounts) {
        this.fd = fd;
        this.path = "/proc/" + ProcessHandle.current().pid() + "/fd/" + fd;
        this.detached = List.copyOf(detached);
        this.hostMounts = hostMounts;
        this.mounts = mounts;
    }

    /**
     * Makes the namespace, or says why not (empty when there is nothing to detach: then nothing is gained).
     *
     * @param helper  codeexec-helper
     * @param keep    paths whose mounts stay (DATA_DIR)
     */
    static Result create(Path helper, Collection<Path> keep) {
        List<Path> mountPoints;
        try {
            mountPoints = mountPoints(Files.readString(Path.of("/proc/self/mountinfo")));
        } catch (IOException e) {
            return new Result(Optional.empty(), "cannot read /proc/self/mountinfo: " + e.getMessage());
        }
        List<Path> detach = toDetach(mountPoints, keep);
        if (detach.isEmpty()) return new Result(Optional.empty(), "no host mount to leave out");
        List<String> cmd = new ArrayList<>(List.of(helper.toString(), "mntns"));
        for (Path p : detach) cmd.addAll(List.of("--umount", p.toString()));
        Process p = null;
        try {
            p = new ProcessBuilder(cmd).redirectError(ProcessBuilder.Redirect.DISCARD).start();
            String line = new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8)).readLine();
            if (!"ready".equals(line)) {
                p.waitFor(5, TimeUnit.SECONDS);
                return new Result(Optional.empty(), "codeexec-helper mntns failed" + (p.isAlive() ? "" : " (exit " + p.exitValue() + ")"));
            }
            int left = mountPoints(Files.readString(Path.of("/proc/" + p.pid() + "/mountinfo"))).size();
            int fd = Posix.openat(Posix.AT_FDCWD, "/proc/" + p.pid() + "/ns/mnt", Posix.O_RDONLY);
            return new Result(Optional.of(new TrimmedMounts(fd, detach, mountPoints.size(), left)), "");
        } catch (IOException | Posix.Errno e) {
            return new Result(Optional.empty(), "cannot make the sandboxes' mount namespace: " + e.getMessage());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return new Result(Optional.empty(), "interrupted");
        } finally {
            if (p != null) {
                try {
                    p.getOutputStream().close();
                    if (!p.waitFor(5, TimeUnit.SECONDS)) p.destroyForcibly();
                } catch (IOException e) {
                    p.destroyForcibly();
                } catch (InterruptedException e) {
                    p.destroyForcibly();
                    Thread.currentThread().interrupt();
                }
            }
        }
    }

    record Result(Optional<TrimmedMounts> mounts, String note) {
    }

    /** Mount points of a mountinfo text, octal escapes decoded, in the order listed. */
    static List<Path> mountPoints(String mountinfo) {
        List<Path> out = new ArrayList<>();
        for (String line : mountinfo.split("\n")) {
            String[] f = line.split(" ");
            if (f.length > 4) out.add(Path.of(unescape(f[4])));
        }
        return out;
    }

    private static String unescape(String s) {
        StringBuilder b = new StringBuilder();
        for (int i = 0; i < s.length(); i++) {
            if (s.charAt(i) == '\\' && i + 4 <= s.length() && s.substring(i + 1, i + 4).matches("[0-7]{3}")) {
                b.append((char) Integer.parseInt(s.substring(i + 1, i + 4), 8));
                i += 3;
            } else {
                b.append(s.charAt(i));
            }
        }
        return b.toString();
    }

    /**
     * The mount points to detach: under {@link #PREFIXES}, holding no kept path, not inside one, and not inside
     * another one detached (that one takes them along). Sorted, parents first.
     */
    static List<Path> toDetach(List<Path> mountPoints, Collection<Path> keep) {
        List<Path> candidates = mountPoints.stream().distinct()
                .filter(m -> PREFIXES.stream().anyMatch(pre -> m.startsWith(pre)))
                .filter(m -> keep.stream().noneMatch(k -> k.startsWith(m) || m.startsWith(k)))
                .sorted().toList();
        List<Path> out = new ArrayList<>();
        for (Path m : candidates)
            if (out.stream().noneMatch(m::startsWith)) out.add(m);
        return out;
    }

    /** Whether all these host paths are the same in this namespace (none is at or under a detached mount). */
    boolean covers(Collection<Path> hostPaths) {
        for (Path p : hostPaths)
            for (Path d : detached)
                if (p.startsWith(d)) return false;
        return true;
    }

    /** What the launcher opens to enter the namespace. */
    String path() {
        return path;
    }

    List<Path> detached() {
        return detached;
    }

    /** For {@link Sandbox#info()}: how many of the host's mounts the sandboxes start with. */
    String describe() {
        return mounts + " of the host's " + hostMounts + " mounts";
    }

    @Override
    public void close() {
        Posix.close(fd);
    }
}
