package dev.codeexec.testing;

import dev.codeexec.linux.Posix;

import java.nio.file.Path;

/**
 * Trees a program in a sandbox can make but the JDK's file API cannot: names that are not UTF-8 (the JDK decodes
 * and re-encodes names) and directory chains deeper than PATH_MAX (the JDK works by path). Made with the raw
 * {@code *at} calls, one level at a time.
 */
public final class Trees {

    private Trees() {
    }

    /** A regular file named by raw bytes in {@code dir}, holding {@code content}. */
    public static void file(Path dir, byte[] name, byte[] content) throws Exception {
        int d = Posix.openat(Posix.AT_FDCWD, dir.toString(), Posix.O_PATH | Posix.O_DIRECTORY);
        try {
            int fd = Posix.openat(d, name, Posix.O_WRONLY | Posix.O_CREAT | Posix.O_EXCL, 0644);
            try (var out = new java.io.FileOutputStream("/proc/self/fd/" + fd)) {
                out.write(content);
            } finally {
                Posix.close(fd);
            }
        } finally {
            Posix.close(d);
        }
    }

    /** A chain of {@code depth} directories named {@code name} below {@code dir} (as {@code mkdir d; cd d} would). */
    public static void chain(Path dir, String name, int depth) throws Exception {
        byte[] n = name.getBytes();
        int cur = Posix.openat(Posix.AT_FDCWD, dir.toString(), Posix.O_PATH | Posix.O_DIRECTORY);
        try {
            for (int i = 0; i < depth; i++) {
                Posix.mkdirat(cur, n, 0755);
                int next = Posix.openat(cur, n, Posix.O_PATH | Posix.O_DIRECTORY | Posix.O_NOFOLLOW, 0);
                Posix.close(cur);
                cur = next;
            }
        } finally {
            Posix.close(cur);
        }
    }

    /**
     * Removes what is in {@code dir} however deep (JUnit's {@code @TempDir} cleanup works by path and gives up below
     * PATH_MAX); {@code rm -rf} walks with descriptors.
     */
    public static void clear(Path dir) throws Exception {
        try (var s = java.nio.file.Files.list(dir)) {
            for (Path p : s.toList()) {
                Process rm = new ProcessBuilder("rm", "-rf", "--one-file-system", p.toString()).inheritIO().start();
                if (rm.waitFor() != 0) throw new IllegalStateException("rm -rf " + p + " failed");
            }
        }
    }
}
