package dev.codeexec.sandbox;

import dev.codeexec.config.DataDir;

import java.io.IOException;
import java.nio.file.FileVisitResult;
import java.nio.file.FileVisitor;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.SimpleFileVisitor;
import java.nio.file.StandardCopyOption;
import java.nio.file.attribute.BasicFileAttributes;
import java.nio.file.attribute.PosixFilePermission;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.List;
import java.util.Set;
import java.util.regex.Pattern;

/**
 * The sandbox's /etc: a copy of the whitelisted host /etc entries, made once when the server starts and bound
 * read-only as one directory. One bind instead of ~35 saves about 5 ms per run (each bind mount costs ~0.15 ms
 * in bwrap). Symlinks are copied as links (they point into /usr, which the sandbox sees), and only what the
 * sandbox uid could read on the host anyway is copied: /etc/ssl/private and the like stay out.
 *
 * <p>Changes to host /etc reach sandboxes at the next server start.
 */
final class EtcSnapshot {

    /**
     * /etc entries programs need to start and behave (dynamic linker, certificates, users for getpwuid, time zone,
     * MIME and font config, the Python/Java config dirs). Everything else stays invisible; shadow, sudoers and
     * friends in particular.
     */
    static final List<Pattern> WHITELIST = List.of(
            "ld\\.so\\.cache", "ld\\.so\\.conf", "ld\\.so\\.conf\\.d", "alternatives", "ssl", "ca-certificates",
            "ca-certificates\\.conf", "passwd", "group", "nsswitch\\.conf", "hosts", "host\\.conf", "gai\\.conf",
            "localtime", "timezone", "mime\\.types", "fonts", "matplotlibrc", "python3.*", "java-.*", "os-release",
            "debian_version", "protocols", "services", "networks", "terminfo", "magic", "magic\\.mime",
            "locale\\.alias", "bash\\.bashrc", "inputrc")
            .stream().map(Pattern::compile).toList();

    /** Never copied, whatever a whitelist pattern matches. */
    static final Set<String> NEVER = Set.of("shadow", "gshadow", "shadow-", "gshadow-", "sudoers", "sudoers.d");

    private EtcSnapshot() {
    }

    static boolean wanted(String name) {
        return !NEVER.contains(name) && WHITELIST.stream().anyMatch(p -> p.matcher(name).matches());
    }

    /**
     * Builds {@link DataDir#etc()} from {@code hostEtc}, replacing an earlier snapshot. Under a lock: two servers
     * starting on one DATA_DIR would otherwise both set the old snapshot aside and both move theirs into place, and
     * the loser's move fails (the target is no longer empty), which leaves its sandbox unavailable.
     */
    static Path build(Path hostEtc, DataDir data) throws IOException {
        try {
            return data.locked("etc", () -> replace(hostEtc, data.root(), data.etc()));
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new java.io.InterruptedIOException("interrupted while waiting for another server's /etc snapshot");
        }
    }

    private static Path replace(Path hostEtc, Path dataDir, Path target) throws IOException {
        // A start on a used DATA_DIR compares before it copies: the copy was ~0.3 s of every start here (some 800
        // links in /etc/ssl/certs and /etc/alternatives, each a file system write), for a snapshot that nearly
        // always stays.
        if (Files.isDirectory(target, LinkOption.NOFOLLOW_LINKS) && sameAsHost(hostEtc, target)) return target;
        Path fresh = Files.createTempDirectory(dataDir, "etc.new-");
        try {
            walk(hostEtc, new Selection() {
                @Override
                public boolean enter(Path rel, Path dir) throws IOException {
                    Files.createDirectory(fresh.resolve(rel));
                    return true;
                }

                @Override
                public boolean entry(Path rel, Path file) throws IOException {
                    Files.copy(file, fresh.resolve(rel), LinkOption.NOFOLLOW_LINKS, StandardCopyOption.COPY_ATTRIBUTES);
                    return true;
                }

                @Override
                public boolean leave(Path rel, Path dir) throws IOException {
                    Files.setPosixFilePermissions(fresh.resolve(rel), permissions(dir));
                    return true;
                }
            });
            Files.setPosixFilePermissions(fresh, ROOT_MODE);
            if (Files.exists(target, LinkOption.NOFOLLOW_LINKS)) {
                // Set aside, not deleted: sandboxes that started before (warm ones wait for minutes; another
                // server may share DATA_DIR) have the old directory bound as their /etc. Old ones go after a day.
                // named by the time (removeOldSnapshots reads it), made unique: two rebuilds can fall in one
                // millisecond, and a rename onto a set-aside directory fails (ENOTEMPTY)
                long stamp = System.currentTimeMillis();
                while (Files.exists(dataDir.resolve("etc.old-" + stamp), LinkOption.NOFOLLOW_LINKS)) stamp++;
                Files.move(target, dataDir.resolve("etc.old-" + stamp), StandardCopyOption.ATOMIC_MOVE);
            }
            removeOldSnapshots(dataDir, System.currentTimeMillis() - 24 * 3600_000L);
            Files.move(fresh, target, StandardCopyOption.ATOMIC_MOVE);
            return target;
        } finally {
            DataDir.deleteTree(Files.exists(fresh) ? fresh : null);
        }
    }

    private static final Set<PosixFilePermission> ROOT_MODE = PosixFilePermissions.fromString("rwxr-xr-x");

    /**
     * Whether {@code target} is exactly what a copy of {@code hostEtc} would be now: the same entries (and no
     * other), types, link targets, modes and bytes. Any doubt (an entry that cannot be read) is a difference.
     */
    static boolean sameAsHost(Path hostEtc, Path target) {
        try {
            if (!permissions(target).equals(ROOT_MODE)) return false;
            long[] entries = {0};
            boolean same = walk(hostEtc, new Selection() {
                @Override
                public boolean enter(Path rel, Path dir) {
                    entries[0]++;
                    return Files.isDirectory(target.resolve(rel), LinkOption.NOFOLLOW_LINKS);
                }

                @Override
                public boolean entry(Path rel, Path file) throws IOException {
                    entries[0]++;
                    Path copy = target.resolve(rel);
                    if (Files.isSymbolicLink(file))
                        return Files.isSymbolicLink(copy) && Files.readSymbolicLink(copy).equals(Files.readSymbolicLink(file));
                    return Files.isRegularFile(copy, LinkOption.NOFOLLOW_LINKS) && permissions(copy).equals(permissions(file))
                            && Files.mismatch(copy, file) == -1;
                }

                @Override
                public boolean leave(Path rel, Path dir) throws IOException {
                    return permissions(target.resolve(rel)).equals(permissions(dir));
                }
            });
            if (!same) return false;
            try (var all = Files.walk(target)) {
                return all.count() - 1 == entries[0];
            }
        } catch (IOException | java.io.UncheckedIOException e) {
            return false;
        }
    }

    /**
     * What the snapshot holds of {@code hostEtc}, in order: the whitelisted entries; directories only where the
     * sandbox uid could enter them on the host, regular files only where it could read them, links as links
     * (they point into /usr, which the sandbox sees); nothing else. Each directory is entered before its entries
     * and left after them; paths are relative to {@code hostEtc}. The walk stops at the first {@code false}, and
     * says whether it went to the end.
     */
    private static boolean walk(Path hostEtc, Selection selection) throws IOException {
        boolean[] complete = {true};
        FileVisitor<Path> visitor = new SimpleFileVisitor<>() {
            private FileVisitResult go(boolean more) {
                if (more) return FileVisitResult.CONTINUE;
                complete[0] = false;
                return FileVisitResult.TERMINATE;
            }

            @Override
            public FileVisitResult preVisitDirectory(Path dir, BasicFileAttributes attrs) throws IOException {
                if (!worldAccessible(dir, PosixFilePermission.OTHERS_EXECUTE)) return FileVisitResult.SKIP_SUBTREE;
                return go(selection.enter(hostEtc.relativize(dir), dir));
            }

            @Override
            public FileVisitResult visitFile(Path file, BasicFileAttributes attrs) throws IOException {
                if (!attrs.isSymbolicLink() && !(attrs.isRegularFile() && worldAccessible(file, PosixFilePermission.OTHERS_READ)))
                    return FileVisitResult.CONTINUE;
                return go(selection.entry(hostEtc.relativize(file), file));
            }

            @Override
            public FileVisitResult visitFileFailed(Path file, IOException exc) {
                return FileVisitResult.CONTINUE;
            }

            @Override
            public FileVisitResult postVisitDirectory(Path dir, IOException exc) throws IOException {
                return go(selection.leave(hostEtc.relativize(dir), dir));
            }
        };
        try (var entries = Files.list(hostEtc)) {
            for (Path e : entries.sorted().toList()) {
                if (!wanted(e.getFileName().toString())) continue;
                Files.walkFileTree(e, visitor);
                if (!complete[0]) return false;
            }
        }
        return true;
    }

    /** One step of {@link #walk}; false stops it. */
    private interface Selection {
        boolean enter(Path rel, Path dir) throws IOException;

        boolean entry(Path rel, Path file) throws IOException;

        boolean leave(Path rel, Path dir) throws IOException;
    }

    private static Set<PosixFilePermission> permissions(Path p) throws IOException {
        return Files.getPosixFilePermissions(p, LinkOption.NOFOLLOW_LINKS);
    }

    static void removeOldSnapshots(Path dataDir, long before) throws IOException {
        try (var entries = Files.list(dataDir)) {
            for (Path e : entries.toList()) {
                String n = e.getFileName().toString();
                if (!n.startsWith("etc.old-")) continue;
                try {
                    if (Long.parseLong(n.substring("etc.old-".length())) < before) DataDir.deleteTree(e);
                } catch (NumberFormatException ignored) {
                    DataDir.deleteTree(e); // not a name this class gives
                }
            }
        }
    }

    private static boolean worldAccessible(Path p, PosixFilePermission perm) throws IOException {
        return permissions(p).contains(perm);
    }
}
