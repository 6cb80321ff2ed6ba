package dev.codeexec.sandbox;

import dev.codeexec.config.DataDir;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;

import static org.assertj.core.api.Assertions.assertThat;

class EtcSnapshotTest {

    /**
     * Sandboxes bind the snapshot directory itself (warm ones for minutes): a rebuild must neither empty it nor
     * replace it when nothing changed.
     */
    @Test
    void aRebuildKeepsTheDirectoryRunningSandboxesHaveBound() throws Exception {
        Path root = Files.createTempDirectory("etc-test-");
        try {
            Path etc = Files.createDirectories(root.resolve("hostetc"));
            Files.writeString(etc.resolve("passwd"), "root:x:0:0::/root:/bin/sh\n");
            Path data = Files.createDirectories(root.resolve("data"));
            DataDir dataDir = DataDir.at(data);
            Path snap = EtcSnapshot.build(etc, dataDir);
            Object inode = Files.readAttributes(snap, java.nio.file.attribute.BasicFileAttributes.class).fileKey();
            EtcSnapshot.build(etc, dataDir);
            assertThat(Files.readAttributes(snap, java.nio.file.attribute.BasicFileAttributes.class).fileKey())
                    .as("unchanged /etc: the same directory stays").isEqualTo(inode);
            Files.writeString(etc.resolve("passwd"), "root:x:0:0::/root:/bin/bash\n");
            EtcSnapshot.build(etc, dataDir);
            assertThat(data.resolve("etc/passwd")).hasContent("root:x:0:0::/root:/bin/bash\n");
            try (var olds = Files.list(data)) {
                Path old = olds.filter(p -> p.getFileName().toString().startsWith("etc.old-")).findFirst().orElseThrow();
                assertThat(old.resolve("passwd")).as("the old snapshot is set aside, not emptied")
                        .hasContent("root:x:0:0::/root:/bin/sh\n");
                assertThat(Files.readAttributes(old, java.nio.file.attribute.BasicFileAttributes.class).fileKey())
                        .isEqualTo(inode);
            }
        } finally {
            DataDir.deleteTree(root);
        }
    }

    @Test
    void copiesOnlyWhitelistedWorldReadableEntriesAndKeepsLinks() throws Exception {
        Path root = Files.createTempDirectory("etc-test-");
        try {
            Path etc = Files.createDirectories(root.resolve("hostetc"));
            Files.writeString(etc.resolve("passwd"), "root:x:0:0::/root:/bin/sh\n");
            Files.writeString(etc.resolve("shadow"), "root:secret\n");
            Files.writeString(etc.resolve("gitconfig"), "[user]\n");
            Path ssl = Files.createDirectories(etc.resolve("ssl/certs"));
            Files.writeString(ssl.resolve("ca.crt"), "CERT");
            Path priv = Files.createDirectories(etc.resolve("ssl/private"));
            Files.writeString(priv.resolve("key.pem"), "KEY");
            Files.setPosixFilePermissions(priv, PosixFilePermissions.fromString("rwx------"));
            Files.writeString(etc.resolve("hosts"), "127.0.0.1 localhost\n");
            Files.setPosixFilePermissions(etc.resolve("hosts"), PosixFilePermissions.fromString("rw-------"));
            Files.createSymbolicLink(etc.resolve("localtime"), Path.of("/usr/share/zoneinfo/Etc/UTC"));
            Path data = Files.createDirectories(root.resolve("data"));
            DataDir dataDir = DataDir.at(data);

            Path snap = EtcSnapshot.build(etc, dataDir);
            assertThat(snap).isEqualTo(data.resolve("etc"));
            try (var s = Files.list(snap)) {
                assertThat(s.map(p -> p.getFileName().toString()).sorted().toList())
                        .containsExactly("localtime", "passwd", "ssl");
            }
            assertThat(Files.readSymbolicLink(snap.resolve("localtime"))).isEqualTo(Path.of("/usr/share/zoneinfo/Etc/UTC"));
            assertThat(snap.resolve("ssl/certs/ca.crt")).hasContent("CERT");
            assertThat(snap.resolve("ssl/private")).doesNotExist();

            Files.writeString(etc.resolve("passwd"), "changed\n");
            EtcSnapshot.build(etc, dataDir);
            assertThat(snap.resolve("passwd")).hasContent("changed");
            try (var s = Files.list(data)) {
                // the previous snapshot is set aside for sandboxes still bound to it, removed after a day
                assertThat(s.map(p -> p.getFileName().toString()).filter(n -> n.startsWith("etc")).sorted().toList())
                        .hasSize(2).first().isEqualTo("etc");
            }
        } finally {
            DataDir.deleteTree(root);
        }
    }

    /** Servers sharing DATA_DIR start together: each rebuild of a changed /etc must succeed, none may fail the other. */
    @Test
    void twoServersRebuildingAChangedSnapshotAtOnceBothSucceed() throws Exception {
        Path root = Files.createTempDirectory("etc-test-");
        try (var servers = java.util.concurrent.Executors.newFixedThreadPool(2)) {
            Path etc = Files.createDirectories(root.resolve("hostetc"));
            DataDir data = DataDir.at(Files.createDirectories(root.resolve("data")));
            for (int round = 0; round < 20; round++) {
                Files.writeString(etc.resolve("passwd"), "round " + round + "\n");
                var first = servers.submit(() -> EtcSnapshot.build(etc, data));
                var second = servers.submit(() -> EtcSnapshot.build(etc, data));
                assertThat(first.get()).isEqualTo(second.get()).isEqualTo(data.etc());
                assertThat(data.etc().resolve("passwd")).hasContent("round " + round);
            }
        } finally {
            DataDir.deleteTree(root);
        }
    }

    /** Set-aside snapshots are named by the millisecond; a rebuild in a millisecond that already has one still succeeds. */
    @Test
    void aRebuildWhoseSetAsideNameIsTakenPicksTheNextOne(@TempDir Path root) throws Exception {
        Path etc = Files.createDirectories(root.resolve("hostetc"));
        DataDir data = DataDir.at(Files.createDirectories(root.resolve("data")));
        Files.writeString(etc.resolve("passwd"), "before\n");
        EtcSnapshot.build(etc, data);
        Files.writeString(etc.resolve("passwd"), "after\n");
        long now = System.currentTimeMillis();
        for (long t = now; t < now + 2000; t++) {
            Files.writeString(Files.createDirectory(data.root().resolve("etc.old-" + t)).resolve("x"), "taken");
        }
        assertThat(EtcSnapshot.build(etc, data)).isEqualTo(data.etc());
        assertThat(data.etc().resolve("passwd")).hasContent("after");
        try (var s = Files.list(data.root())) {
            assertThat(s.filter(p -> p.getFileName().toString().startsWith("etc.old-"))
                    .filter(p -> Files.exists(p.resolve("passwd")))).singleElement()
                    .satisfies(p -> assertThat(p.resolve("passwd")).hasContent("before"));
        }
    }

    /** A start on a used DATA_DIR keeps the snapshot without copying /etc; any difference from the host rebuilds it. */
    @Test
    void theSnapshotInPlaceIsKeptOnlyWhenItMatchesTheHostExactly(@TempDir Path root) throws Exception {
        Path etc = Files.createDirectories(root.resolve("hostetc"));
        Files.writeString(etc.resolve("passwd"), "root:x:0:0::/root:/bin/sh\n");
        Files.createDirectories(etc.resolve("ssl/certs"));
        Files.writeString(etc.resolve("ssl/certs/a.pem"), "A");
        Files.createSymbolicLink(etc.resolve("ssl/certs/abc.0"), Path.of("a.pem"));
        Files.writeString(etc.resolve("gitconfig"), "[user]\n");
        DataDir data = DataDir.at(Files.createDirectories(root.resolve("data")));
        Path snap = EtcSnapshot.build(etc, data);
        assertThat(EtcSnapshot.sameAsHost(etc, snap)).isTrue();

        Files.writeString(etc.resolve("gitconfig"), "[core]\n");
        assertThat(EtcSnapshot.sameAsHost(etc, snap)).as("entries the snapshot leaves out do not count").isTrue();

        java.util.Map<String, ThrowingStep> changes = new java.util.LinkedHashMap<>();
        changes.put("same length, other bytes", () -> Files.writeString(etc.resolve("ssl/certs/a.pem"), "B"));
        changes.put("a mode", () -> Files.setPosixFilePermissions(etc.resolve("passwd"), PosixFilePermissions.fromString("rw-rw-r--")));
        changes.put("a new file", () -> Files.writeString(etc.resolve("ssl/certs/b.pem"), "B"));
        changes.put("a removed file", () -> Files.delete(etc.resolve("ssl/certs/a.pem")));
        changes.put("a link's target", () -> {
            Files.delete(etc.resolve("ssl/certs/abc.0"));
            Files.createSymbolicLink(etc.resolve("ssl/certs/abc.0"), Path.of("b.pem"));
        });
        changes.put("a new whitelisted entry", () -> Files.writeString(etc.resolve("hosts"), "127.0.0.1 localhost\n"));
        changes.put("a directory's mode", () -> Files.setPosixFilePermissions(etc.resolve("ssl/certs"), PosixFilePermissions.fromString("rwxr-x--x")));
        for (var change : changes.entrySet()) {
            change.getValue().run();
            assertThat(EtcSnapshot.sameAsHost(etc, snap)).as(change.getKey()).isFalse();
            EtcSnapshot.build(etc, data);
            assertThat(EtcSnapshot.sameAsHost(etc, snap)).as("rebuilt after " + change.getKey()).isTrue();
        }
        Files.writeString(snap.resolve("extra"), "x");
        assertThat(EtcSnapshot.sameAsHost(etc, snap)).as("an entry only the snapshot has").isFalse();
    }

    private interface ThrowingStep {
        void run() throws Exception;
    }
}
