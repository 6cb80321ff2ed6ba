package dev.codeexec.workspace;

import dev.codeexec.testing.Requires;
import dev.codeexec.testing.Trees;
import dev.codeexec.workspace.WorkspaceException.Kind;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

class WorkspaceFsTest {

    @TempDir
    Path tmp;
    Workspaces workspaces;
    Workspace ws;
    Path dir;
    Path secret;

    @BeforeEach
    void setUp() throws IOException {
        Files.setPosixFilePermissions(tmp, java.nio.file.attribute.PosixFilePermissions.fromString("rwx--x--x"));
        workspaces = new Workspaces(tmp.resolve("root"), 1 << 20, Duration.ofHours(24), 65534, 65534);
        ws = workspaces.open("alice", "proj", true);
        dir = ws.fs().root();
        secret = tmp.resolve("secret.txt");
        Files.writeString(secret, "TOP SECRET");
    }

    @AfterEach
    void removeDeepTrees() throws Exception {
        Trees.clear(tmp);
    }

    private static InputStream text(String s) {
        return new ByteArrayInputStream(s.getBytes(StandardCharsets.UTF_8));
    }

    private String read(String path) throws IOException {
        try (InputStream in = ws.fs().openRead(RelPath.parse(path))) {
            return new String(in.readAllBytes(), StandardCharsets.UTF_8);
        }
    }

    @Test
    void writeReadListNestedFiles() throws IOException {
        ws.write(RelPath.parse("a/b/c.txt"), text("hello"), 1000);
        assertThat(read("a/b/c.txt")).isEqualTo("hello");
        assertThat(ws.fs().list(RelPath.parse("a"), 100)).extracting(WorkspaceFs.Entry::name).containsExactly("b");
        assertThat(ws.fs().stat(RelPath.parse("a/b/c.txt")).size()).isEqualTo(5);
        assertThat(Files.readString(dir.resolve("a/b/c.txt"))).isEqualTo("hello");
    }

    @ParameterizedTest
    @ValueSource(strings = {"../secret.txt", "a/../../secret.txt", "/etc/passwd", "a/./../..", "..", "a\\..\\b",
            "a//b", "x\u0000y", "a/\n/b", "..%2f"})
    void lexicalTraversalIsRefused(String raw) {
        if (raw.equals("..%2f")) { // a literal name, not a traversal: allowed, and stays inside
            assertThat(RelPath.parse(raw).parts()).containsExactly("..%2f");
            return;
        }
        assertThatThrownBy(() -> RelPath.parse(raw)).isInstanceOf(WorkspaceException.class)
                .extracting(e -> ((WorkspaceException) e).kind()).isEqualTo(Kind.BAD_PATH);
    }

    @Test
    void unicodeIsNormalisedToNfc() {
        assertThat(RelPath.parse("cafe\u0301.txt")).isEqualTo(RelPath.parse("caf\u00e9.txt"));
    }

    @Test
    void overlongPathsAreRefused() {
        assertThatThrownBy(() -> RelPath.parse("a".repeat(300))).hasMessageContaining("longer than 255");
        assertThatThrownBy(() -> RelPath.parse("a/".repeat(40))).hasMessageContaining("deeper than");
    }

    @Test
    void symlinkAsLastComponentIsNeverFollowed() throws IOException {
        Files.createSymbolicLink(dir.resolve("link"), secret);
        assertThatThrownBy(() -> read("link")).isInstanceOf(WorkspaceException.class).hasMessageContaining("symbolic link");
        // writing through it replaces the link itself, never the target
        ws.write(RelPath.parse("link"), text("mine"), 1000);
        assertThat(Files.readString(secret)).isEqualTo("TOP SECRET");
        assertThat(Files.isSymbolicLink(dir.resolve("link"))).isFalse();
    }

    @Test
    void symlinkAsMiddleComponentIsRefusedOnEveryOperation() throws IOException {
        Path other = workspaces.open("bob", "proj", true).fs().root();
        Files.writeString(other.resolve("bobs.txt"), "bob's data");
        Files.createSymbolicLink(dir.resolve("mid"), other);
        Files.createSymbolicLink(dir.resolve("etc"), Path.of("/etc"));
        assertThatThrownBy(() -> read("mid/bobs.txt")).hasMessageContaining("symbolic link");
        assertThatThrownBy(() -> read("etc/passwd")).hasMessageContaining("symbolic link");
        assertThatThrownBy(() -> ws.fs().list(RelPath.parse("mid"), 10)).hasMessageContaining("symbolic link");
        assertThatThrownBy(() -> ws.write(RelPath.parse("mid/new.txt"), text("x"), 10)).hasMessageContaining("symbolic link");
        assertThatThrownBy(() -> ws.fs().delete(RelPath.parse("mid/bobs.txt"), false)).hasMessageContaining("symbolic link");
        assertThatThrownBy(() -> ws.fs().rename(RelPath.parse("mid/bobs.txt"), RelPath.parse("stolen.txt")))
                .hasMessageContaining("symbolic link");
        assertThat(Files.readString(other.resolve("bobs.txt"))).isEqualTo("bob's data");
        assertThat(Files.exists(other.resolve("new.txt"))).isFalse();
        // deleting the link removes the link, not what it points to
        ws.fs().delete(RelPath.parse("mid"), true);
        assertThat(Files.readString(other.resolve("bobs.txt"))).isEqualTo("bob's data");
    }

    @Test
    void recursiveWalksDoNotDescendIntoLinks() throws IOException {
        Files.createSymbolicLink(dir.resolve("root-link"), Path.of("/"));
        Files.writeString(dir.resolve("f.txt"), "12345");
        List<String> seen = new ArrayList<>();
        ws.fs().walkTree(RelPath.ROOT, 1000, e -> seen.add(e.path() + ":" + e.type()));
        assertThat(seen).containsExactly("f.txt:file", "root-link:symlink");
        assertThat(ws.usage().bytes()).isEqualTo(5);
    }

    @Test
    void fifoPlantedByUserCodeDoesNotHangARead() throws Exception {
        new ProcessBuilder("mkfifo", dir.resolve("pipe").toString()).start().waitFor();
        assertThatThrownBy(() -> read("pipe")).hasMessageContaining("not a regular file");
    }

    @Test
    void quotaRefusesAWriteAndKeepsTheOldFile() throws IOException {
        ws.write(RelPath.parse("keep.bin"), new ByteArrayInputStream(new byte[600_000]), 10 << 20);
        ws.write(RelPath.parse("big.txt"), text("old"), 10 << 20);
        assertThatThrownBy(() -> ws.write(RelPath.parse("big.txt"), new ByteArrayInputStream(new byte[500_000]), 10 << 20))
                .isInstanceOf(WorkspaceException.class)
                .extracting(e -> ((WorkspaceException) e).kind()).isEqualTo(Kind.QUOTA_EXCEEDED);
        assertThat(read("big.txt")).isEqualTo("old");
        try (var s = Files.list(dir)) {
            assertThat(s.map(p -> p.getFileName().toString())).containsExactlyInAnyOrder("keep.bin", "big.txt");
        }
        // replacing a file may reuse its own space
        ws.write(RelPath.parse("keep.bin"), new ByteArrayInputStream(new byte[900_000]), 10 << 20);
    }

    @Test
    void uploadLimitIsSeparateFromQuota() {
        assertThatThrownBy(() -> ws.write(RelPath.parse("x.bin"), new ByteArrayInputStream(new byte[2000]), 1000))
                .extracting(e -> ((WorkspaceException) e).kind()).isEqualTo(Kind.TOO_LARGE);
    }

    @Test
    void renameCreatesParentsAndRefusesToOverwrite() throws IOException {
        ws.write(RelPath.parse("a.txt"), text("A"), 100);
        ws.write(RelPath.parse("b.txt"), text("B"), 100);
        ws.fs().rename(RelPath.parse("a.txt"), RelPath.parse("x/y/a2.txt"));
        assertThat(read("x/y/a2.txt")).isEqualTo("A");
        assertThatThrownBy(() -> ws.fs().rename(RelPath.parse("b.txt"), RelPath.parse("x/y/a2.txt")))
                .extracting(e -> ((WorkspaceException) e).kind()).isEqualTo(Kind.CONFLICT);
        assertThat(read("x/y/a2.txt")).isEqualTo("A");
        assertThatThrownBy(() -> ws.fs().rename(RelPath.parse("x"), RelPath.parse("x/y/z")))
                .hasMessageContaining("into itself");
    }

    @Test
    void deleteNeedsRecursiveForAFullDirectory() throws IOException {
        ws.write(RelPath.parse("d/e/f.txt"), text("x"), 100);
        assertThatThrownBy(() -> ws.fs().delete(RelPath.parse("d"), false))
                .extracting(e -> ((WorkspaceException) e).kind()).isEqualTo(Kind.CONFLICT);
        ws.fs().delete(RelPath.parse("d"), true);
        assertThat(Files.exists(dir.resolve("d"))).isFalse();
        assertThatThrownBy(() -> ws.fs().delete(RelPath.parse("d"), true))
                .extracting(e -> ((WorkspaceException) e).kind()).isEqualTo(Kind.NOT_FOUND);
    }

    @Test
    void aRootTheSandboxUidCannotReachIsRefusedAtStart() throws IOException {
        Path closed = tmp.resolve("closed");
        Files.createDirectories(closed, java.nio.file.attribute.PosixFilePermissions.asFileAttribute(
                java.nio.file.attribute.PosixFilePermissions.fromString("rwx------")));
        assertThatThrownBy(() -> new Workspaces(closed.resolve("ws"), 1, Duration.ZERO, 65534, 65534))
                .hasMessageContaining("not searchable by others").hasMessageContaining(closed.toString());
    }

    @Test
    void tenantsAreSeparateAndNamesChecked() {
        workspaces.open("bob", "proj", true);
        assertThat(workspaces.names("alice")).containsExactly("proj");
        assertThat(workspaces.find("carol", "proj")).isEmpty();
        assertThatThrownBy(() -> workspaces.open("alice", "../bob", true))
                .extracting(e -> ((WorkspaceException) e).kind()).isEqualTo(Kind.BAD_NAME);
        assertThatThrownBy(() -> workspaces.open("alice", "a".repeat(65), true)).hasMessageContaining("1-64");
    }

    @Test
    void expiryRemovesIdleWorkspacesButNotBusyOnes() throws Exception {
        Workspace busy = workspaces.open("alice", "busy", true);
        Workspace idle = workspaces.open("alice", "idle", true);
        idle.write(RelPath.parse("f.txt"), text("x"), 10);
        Instant later = Instant.now().plus(Duration.ofHours(25));
        try (AutoCloseable h = busy.hold()) {
            assertThat(workspaces.expire(later)).isEqualTo(2); // idle + proj
        }
        assertThat(workspaces.names("alice")).containsExactly("busy");
        assertThat(new Workspaces(tmp.resolve("root"), 1, Duration.ZERO, 1, 1).expire(later)).isZero();
    }

    /**
     * A second thread keeps swapping a directory for a symlink to a secret directory while reads go on: no read
     * may ever return the secret.
     */
    @Test
    void symlinkSwapRaceNeverLeaksTheTarget() throws Exception {
        Path outside = tmp.resolve("outside");
        Files.createDirectories(outside);
        Files.writeString(outside.resolve("f.txt"), "SECRET");
        Files.createDirectories(dir.resolve("d"));
        Files.writeString(dir.resolve("d/f.txt"), "fine");
        AtomicBoolean stop = new AtomicBoolean();
        AtomicInteger leaks = new AtomicInteger();
        AtomicInteger okReads = new AtomicInteger();
        ExecutorService pool = Executors.newFixedThreadPool(3);
        Future<?> swapper = pool.submit(() -> {
            Path real = dir.resolve("d");
            Path aside = dir.resolve("d.real");
            while (!stop.get()) {
                try {
                    Files.move(real, aside);
                    Files.createSymbolicLink(real, outside);
                    Files.delete(real);
                    Files.move(aside, real);
                    Thread.yield(); // leave the real directory in place for a moment too
                } catch (IOException ignored) {
                    // contention with ourselves is fine
                }
            }
            return null;
        });
        List<Future<?>> readers = new ArrayList<>();
        for (int r = 0; r < 2; r++) {
            readers.add(pool.submit(() -> {
                // At least 3000 reads, and on until some were served (a slow machine can schedule the swapper so
                // that every one of the first 3000 lands mid-swap): the race must have been run both ways.
                long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(40);
                for (int i = 0; i < 3000 || (okReads.get() < 20 && System.nanoTime() < deadline); i++) {
                    try {
                        String s = read("d/f.txt");
                        if (s.contains("SECRET")) leaks.incrementAndGet();
                        else okReads.incrementAndGet();
                    } catch (WorkspaceException expected) {
                        // refused or not found mid-swap
                    }
                }
                return null;
            }));
        }
        for (Future<?> f : readers) f.get(60, TimeUnit.SECONDS);
        stop.set(true);
        swapper.get(10, TimeUnit.SECONDS);
        pool.shutdown();
        assertThat(leaks.get()).isZero();
        assertThat(okReads.get()).isPositive();
    }

    @Test
    void listingWhileFilesComeAndGoShowsWhatExistsAndNeverFails() throws Exception {
        // A run deletes its code file (and programs their temp files) while the API or another run lists the
        // directory: an entry gone between readdir and stat must not turn into "directory not found".
        for (int i = 0; i < 50; i++) Files.writeString(dir.resolve("keep" + i), "x");
        java.util.concurrent.atomic.AtomicBoolean stop = new java.util.concurrent.atomic.AtomicBoolean();
        Thread churn = Thread.ofPlatform().start(() -> {
            for (int n = 0; !stop.get(); n++) {
                Path p = dir.resolve("tmp" + (n % 64));
                try {
                    Files.writeString(p, "y");
                    Files.deleteIfExists(p);
                } catch (IOException e) {
                    return;
                }
            }
        });
        try {
            for (int i = 0; i < 3000; i++) {
                java.util.List<WorkspaceFs.Entry> entries = ws.fs().list(RelPath.ROOT, Integer.MAX_VALUE);
                assertThat(entries.stream().filter(e -> e.name().startsWith("keep")).count()).isEqualTo(50);
            }
        } finally {
            stop.set(true);
            churn.join();
        }
    }

    // ---- names that are not UTF-8 ------------------------------------------------------------------------------

    /** Two files whose names differ only in a byte that is not UTF-8 used to list as one name ("a\uFFFD"). */
    @Test
    void namesThatAreNotUtf8ListAsDifferentEscapedNamesWithTheirOwnSizes() throws Exception {
        Trees.file(dir, new byte[]{'a', (byte) 0xff}, "1".getBytes());
        Trees.file(dir, new byte[]{'a', (byte) 0xfe}, "22".getBytes());
        assertThat(ws.fs().list(RelPath.ROOT, 100)).extracting(e -> e.name() + "=" + e.size())
                .containsExactly("a\\xfe=2", "a\\xff=1");
        List<String> walked = new ArrayList<>();
        ws.fs().walkTree(RelPath.ROOT, 100, e -> walked.add(e.path().toString()));
        assertThat(walked).containsExactly("a\\xfe", "a\\xff");
        assertThat(ws.info().files()).isEqualTo(2);
        assertThat(ws.info().sizeBytes()).isEqualTo(3);
    }

    // ---- deep trees ------------------------------------------------------------------------------------------

    /**
     * A chain of 25,000 directories (a program doing {@code mkdir d; cd d} in a loop) overflowed the recursive walks:
     * listing, size, deletion. Now listings stop at MAX_WALK_DEPTH levels and say so, and counting and deleting go
     * all the way down.
     */
    @Test
    @Tag("slow")
    void aChainOf25000DirectoriesIsListedCountedAndDeleted() throws Exception {
        Trees.chain(dir, "d", 25_000);
        List<String> seen = new ArrayList<>();
        WorkspaceFs.Walked walked = ws.fs().walkTree(RelPath.ROOT, 100_000, e -> seen.add(e.path().toString()));
        assertThat(seen).hasSize(WorkspaceFs.MAX_WALK_DEPTH);
        assertThat(walked.tooDeep()).isTrue();
        assertThat(walked.complete()).isFalse();
        Workspace.Info info = ws.info();
        assertThat(info.directories()).isEqualTo(25_000);
        assertThat(info.complete()).isTrue();

        ws.fs().delete(RelPath.parse("d/d"), true);
        assertThat(ws.fs().list(RelPath.parse("d"), 10)).isEmpty();
        Trees.chain(dir.resolve("d"), "e", 25_000);
        workspaces.delete("alice", "proj");
        assertThat(workspaces.names("alice")).isEmpty();
    }

    /** The old sweep ended at the first workspace it could not remove (a deep one overflowed the stack): none expired. */
    @Test
    @Tag("slow")
    void expiryRemovesADeepWorkspaceAndGoesOnPastOneItCannotRemove() throws Exception {
        Requires.that(isRoot(), "root: mounting");
        Workspace deep = workspaces.open("a-deep", "chain", true);
        Trees.chain(deep.fs().root(), "d", 25_000);
        Workspace busy = workspaces.open("b-mount", "busy", true);
        Path mountPoint = busy.fs().root().resolve("mnt");
        Files.createDirectory(mountPoint);
        Workspace idle = workspaces.open("c-idle", "idle", true);
        assertThat(new ProcessBuilder("mount", "-t", "tmpfs", "none", mountPoint.toString()).start().waitFor()).isZero();
        try {
            Instant later = Instant.now().plus(Duration.ofHours(25));
            assertThat(workspaces.expire(later)).isEqualTo(3); // the deep one, alice's proj, the idle one
            assertThat(workspaces.names("a-deep")).isEmpty();
            assertThat(workspaces.names("c-idle")).isEmpty();
            assertThat(workspaces.names("b-mount")).containsExactly("busy"); // a mount point cannot be removed (EBUSY)
        } finally {
            new ProcessBuilder("umount", "-l", mountPoint.toString()).start().waitFor();
        }
        assertThat(idle.fs().root()).doesNotExist();
    }

    /** The admin view, the REST list and workspace_info all go through infos(): one deep workspace fails none of them. */
    @Test
    @Tag("slow")
    void infosOfATenantWithADeepWorkspaceListEveryWorkspace() throws Exception {
        Trees.chain(workspaces.open("alice", "deep", true).fs().root(), "d", 25_000);
        ws.write(RelPath.parse("f.txt"), text("x"), 10);
        assertThat(workspaces.infos("alice")).extracting(i -> i.name() + ":" + i.directories() + ":" + i.files()
                + ":" + i.error().isPresent()).containsExactly("deep:25000:0:false", "proj:0:1:false");
    }

    // ---- the entry limit ---------------------------------------------------------------------------------------

    @Test
    void theEntryLimitRefusesApiWritesThatWouldGoPastItAndChangesNothing() throws Exception {
        Workspaces three = new Workspaces(tmp.resolve("three"), 1 << 20, 3, Duration.ZERO, 65534, 65534);
        Workspace w = three.open("alice", "w", true);
        w.write(RelPath.parse("a/b.txt"), text("b"), 100); // a and a/b.txt
        w.write(RelPath.parse("c.txt"), text("c"), 100);
        assertThatThrownBy(() -> w.write(RelPath.parse("d.txt"), text("d"), 100))
                .isInstanceOf(WorkspaceException.class).hasMessageContaining("WORKSPACE_MAX_ENTRIES")
                .extracting(e -> ((WorkspaceException) e).kind()).isEqualTo(Kind.QUOTA_EXCEEDED);
        assertThatThrownBy(() -> w.write(RelPath.parse("x/y.txt"), text("y"), 100))
                .extracting(e -> ((WorkspaceException) e).kind()).isEqualTo(Kind.QUOTA_EXCEEDED);
        assertThatThrownBy(() -> w.checkRoom(List.of(RelPath.parse("a/new.txt")), 1))
                .extracting(e -> ((WorkspaceException) e).kind()).isEqualTo(Kind.QUOTA_EXCEEDED);
        w.write(RelPath.parse("c.txt"), text("replaced"), 100); // replacing adds no entry
        try (var s = Files.list(w.fs().root())) {
            assertThat(s.map(p -> p.getFileName().toString())).containsExactlyInAnyOrder("a", "c.txt");
        }
        assertThat(w.usage()).isEqualTo(new Workspace.Usage(9, 3, true));
    }

    /** workspace_info on 200,000 files took seconds: the count now stops past the limit and says "more than". */
    @Test
    void infoStopsCountingPastTheEntryLimitAndSaysSo() throws Exception {
        Workspaces ten = new Workspaces(tmp.resolve("ten"), 1 << 20, 10, Duration.ZERO, 65534, 65534);
        Workspace w = ten.open("alice", "many", true);
        for (int i = 0; i < 25; i++) Files.writeString(w.fs().root().resolve("f" + i), "x");
        Workspace.Info info = w.info();
        assertThat(info.complete()).isFalse();
        assertThat(info.entries()).isEqualTo(11);
        assertThat(info.maxEntries()).isEqualTo(10);
        assertThat(w.usage().exact()).isFalse();
        assertThatThrownBy(w::checkCanRun).hasMessageContaining("more than 10 files and directories");
    }

    private static boolean isRoot() {
        return "root".equals(System.getProperty("user.name"));
    }
}
