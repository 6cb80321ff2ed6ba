package dev.codeexec.sandbox;

import java.io.IOException;
import java.nio.file.FileVisitResult;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.SimpleFileVisitor;
import java.nio.file.attribute.BasicFileAttributes;
import java.nio.file.attribute.PosixFilePermissions;

/** Host-side per-run directories of the sandboxes that have no private mount namespace (none, gvisor). */
final class HostDirs {

    private HostDirs() {
    }

    /** A fresh root-owned directory under the system temp dir with the given mode (e.g. "rwx--x--x"). */
    static Path create(String prefix, String mode) throws IOException {
        return Files.createTempDirectory(prefix, PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString(mode)));
    }

    static void chown(Path p, int uid, int gid) throws IOException {
        Files.setAttribute(p, "unix:uid", uid, LinkOption.NOFOLLOW_LINKS);
        Files.setAttribute(p, "unix:gid", gid, LinkOption.NOFOLLOW_LINKS);
    }

    /** Copies a host file to {@code target} as a read-only (0444) file. */
    static void copyReadOnly(Path source, Path target) throws IOException {
        Files.createDirectories(target.getParent());
        Files.copy(source, target);
        Files.setPosixFilePermissions(target, PosixFilePermissions.fromString("r--r--r--"));
    }

    /** Deletes a tree without following symlinks (a sandboxed program may have planted some). */
    static void deleteTree(Path root) {
        if (root == null || !Files.exists(root, LinkOption.NOFOLLOW_LINKS)) return;
        try {
            Files.walkFileTree(root, new SimpleFileVisitor<>() {
                @Override
                public FileVisitResult visitFile(Path file, BasicFileAttributes attrs) throws IOException {
                    Files.deleteIfExists(file);
                    return FileVisitResult.CONTINUE;
                }

                @Override
                public FileVisitResult preVisitDirectory(Path dir, BasicFileAttributes attrs) throws IOException {
                    // a program may have left a directory without write permission for its owner
                    Files.setPosixFilePermissions(dir, PosixFilePermissions.fromString("rwx------"));
                    return FileVisitResult.CONTINUE;
                }

                @Override
                public FileVisitResult postVisitDirectory(Path dir, IOException exc) throws IOException {
                    Files.deleteIfExists(dir);
                    return FileVisitResult.CONTINUE;
                }
            });
        } catch (IOException e) {
            org.slf4j.LoggerFactory.getLogger(HostDirs.class).warn("could not delete {}: {}", root, e.toString());
        }
    }
}
