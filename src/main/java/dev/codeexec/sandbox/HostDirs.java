package dev.codeexec.sandbox;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
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
}
