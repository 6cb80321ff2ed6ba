package dev.codeexec.packages;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermission;
import java.time.Clock;
import java.time.Instant;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.stream.Stream;

import dev.codeexec.testing.Poll;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

class PackageStoreTest {

    @TempDir
    Path root;

    /** A clock that moves a second per reading, so last-use order is exact. */
    static Clock ticking() {
        AtomicInteger t = new AtomicInteger();
        return new Clock() {
            @Override
            public java.time.ZoneId getZone() {
                return ZoneOffset.UTC;
            }

            @Override
            public Clock withZone(java.time.ZoneId zone) {
                return this;
            }

            @Override
            public Instant instant() {
                return Instant.ofEpochSecond(1_800_000_000L + t.incrementAndGet());
            }
        };
    }

    static PackageSet set(String... specs) {
        return PackageSet.parse("python", List.of(specs));
    }

    /** Writes a module of {@code bytes} bytes per package and counts its calls. */
    static final class FakeInstaller implements PackageStore.Installer {
        final AtomicInteger calls = new AtomicInteger();
        final int bytes;

        FakeInstaller(int bytes) {
            this.bytes = bytes;
        }

        @Override
        public Map<String, String> install(PackageSet set, Path into) throws PackageStore.InstallFailed {
            calls.incrementAndGet();
            try {
                Path pkg = Files.createDirectories(into.resolve("site").resolve(set.specs().get(0).replaceAll("[^a-z]", "")));
                Files.write(pkg.resolve("__init__.py"), new byte[bytes]);
            } catch (java.io.IOException e) {
                throw new PackageStore.InstallFailed(e.getMessage());
            }
            return Map.of(set.specs().get(0).replaceAll("[=<>~!].*", ""), "1.0.0");
        }
    }

    @Test
    void theFirstRequestInstallsSealsAndTheNextOneIsAHit() throws Exception {
        PackageStore store = new PackageStore(root, 1 << 20, ticking());
        FakeInstaller installer = new FakeInstaller(100);
        PackageStore.Lease first = store.acquire(set("tiny==1.0.0"), "3.11.2", installer);
        assertThat(first.installMs()).isPositive();
        assertThat(first.resolved()).containsEntry("tiny", "1.0.0");
        assertThat(first.dir()).isEqualTo(root.resolve(set("tiny==1.0.0").key("3.11.2")).resolve("tree"));
        try (Stream<Path> all = Files.walk(first.dir())) {
            for (Path p : all.toList())
                assertThat(Files.getPosixFilePermissions(p)).as(p.toString()).doesNotContain(PosixFilePermission.OWNER_WRITE,
                        PosixFilePermission.GROUP_WRITE, PosixFilePermission.OTHERS_WRITE).contains(PosixFilePermission.OTHERS_READ);
        }
        PackageStore.Lease second = store.acquire(set("Tiny == 1.0.0"), "3.11.2", installer);
        assertThat(second.installMs()).isZero();
        assertThat(second.dir()).isEqualTo(first.dir());
        assertThat(installer.calls).hasValue(1);
        assertThat(store.list()).singleElement().satisfies(e -> {
            assertThat(e.specs()).containsExactly("tiny==1.0.0");
            assertThat(e.inUse()).isEqualTo(2);
            assertThat(e.bytes()).isEqualTo(100);
        });
        // another interpreter version is another entry
        store.acquire(set("tiny==1.0.0"), "3.12.0", installer).close();
        assertThat(installer.calls).hasValue(2);
        assertThat(store.counts()).containsEntry("installs", 2L).containsEntry("hits", 1L).containsEntry("misses", 2L);
        first.close();
        second.close();
        assertThat(store.list()).allSatisfy(e -> assertThat(e.inUse()).isZero());
    }

    @Test
    void identicalRequestsArrivingTogetherShareOneInstall() throws Exception {
        PackageStore store = new PackageStore(root, 1 << 20, Clock.systemUTC());
        CountDownLatch release = new CountDownLatch(1);
        AtomicInteger calls = new AtomicInteger();
        PackageStore.Installer slow = (s, into) -> {
            calls.incrementAndGet();
            try {
                assertThat(release.await(20, TimeUnit.SECONDS)).isTrue();
                Files.writeString(into.resolve("m.py"), "x = 1\n");
            } catch (Exception e) {
                throw new PackageStore.InstallFailed(e.toString());
            }
            return Map.of("m", "1");
        };
        ExecutorService pool = Executors.newVirtualThreadPerTaskExecutor();
        List<Future<PackageStore.Lease>> all = new ArrayList<>();
        for (int i = 0; i < 8; i++) all.add(pool.submit(() -> store.acquire(set("m"), "3.11.2", slow)));
        Poll.until("eight requests wait for the install", () -> store.waiting(set("m"), "3.11.2") == 8);
        release.countDown();
        List<Long> ms = new ArrayList<>();
        for (Future<PackageStore.Lease> f : all) ms.add(f.get(20, TimeUnit.SECONDS).installMs());
        assertThat(calls).hasValue(1);
        assertThat(ms.stream().filter(x -> x > 0)).hasSize(1);
        assertThat(store.list()).singleElement().satisfies(e -> assertThat(e.inUse()).isEqualTo(8));
    }

    @Test
    void aFailedInstallStoresNothingAndTheNextRequestTriesAgain() throws Exception {
        PackageStore store = new PackageStore(root, 1 << 20, Clock.systemUTC());
        AtomicInteger calls = new AtomicInteger();
        PackageStore.Installer failing = (s, into) -> {
            calls.incrementAndGet();
            try {
                Files.writeString(into.resolve("half.py"), "x");
            } catch (java.io.IOException e) {
                throw new PackageStore.InstallFailed(e.toString());
            }
            throw new PackageStore.InstallFailed("ERROR: No matching distribution found for nope==9");
        };
        // many times over: a request right after a failure once joined the finished build instead of a new one
        int tries = 200;
        for (int i = 0; i < tries; i++)
            assertThatThrownBy(() -> store.acquire(set("nope==9"), "3.11.2", failing))
                    .isInstanceOf(PackageStore.InstallFailed.class).hasMessageContaining("No matching distribution");
        assertThat(calls).hasValue(tries);
        assertThat(store.list()).isEmpty();
        try (Stream<Path> left = Files.list(root)) {
            assertThat(left).isEmpty();
        }
        assertThat(store.counts()).containsEntry("failures", (long) tries).containsEntry("installs", 0L);
    }

    @Test
    void theLeastRecentlyUsedEntryGoesFirstButNeverOneInUse() throws Exception {
        PackageStore store = new PackageStore(root, 250, ticking());
        FakeInstaller installer = new FakeInstaller(100);
        store.acquire(set("a"), "3", installer).close();
        PackageStore.Lease b = store.acquire(set("b"), "3", installer);
        store.acquire(set("a"), "3", installer).close(); // a is now more recent than b
        store.acquire(set("c"), "3", installer).close(); // 300 bytes: one must go; b is older but held
        assertThat(store.list()).extracting(e -> e.specs().get(0)).containsExactlyInAnyOrder("b", "c");
        b.close();
        store.acquire(set("d"), "3", installer).close(); // now b (least recent, free) goes
        assertThat(store.list()).extracting(e -> e.specs().get(0)).containsExactlyInAnyOrder("c", "d");
        assertThat(store.counts()).containsEntry("evictions", 2L).containsEntry("bytes", 200L);
    }

    @Test
    void anAdminRemovesFreeEntriesOnlyAndAStoreReopensWithItsEntries() throws Exception {
        PackageStore store = new PackageStore(root, 1 << 20, Clock.systemUTC());
        FakeInstaller installer = new FakeInstaller(10);
        PackageStore.Lease held = store.acquire(set("held"), "3", installer);
        store.acquire(set("free"), "3", installer).close();
        String heldKey = set("held").key("3"), freeKey = set("free").key("3");
        assertThat(store.remove(heldKey)).isFalse();
        assertThat(store.remove(freeKey)).isTrue();
        assertThat(store.remove("../../etc")).isFalse();
        assertThat(store.list()).extracting(PackageStore.Entry::key).containsExactly(heldKey);
        held.close();
        Files.createDirectory(root.resolve(".building-x-1")); // a server that stopped mid-install
        PackageStore again = new PackageStore(root, 1 << 20, Clock.systemUTC());
        assertThat(again.list()).extracting(PackageStore.Entry::key).containsExactly(heldKey);
        assertThat(root.resolve(".building-x-1")).doesNotExist();
        assertThat(again.acquire(set("held"), "3", installer).installMs()).isZero();
        assertThat(installer.calls).hasValue(2);
    }

    @Test
    void aCancelledWaitFreesItsCallerAndTheLastOneToLeaveStopsTheInstall() throws Exception {
        PackageStore store = new PackageStore(root, 1 << 20, Clock.systemUTC());
        CountDownLatch release = new CountDownLatch(1);
        CountDownLatch stopped = new CountDownLatch(1);
        AtomicInteger calls = new AtomicInteger();
        PackageStore.Installer blocking = (s, into) -> {
            calls.incrementAndGet();
            try {
                release.await(); // an install that hangs (finding 5): only an interrupt ends it
            } catch (InterruptedException e) {
                stopped.countDown();
                throw new PackageStore.InstallFailed("stopped");
            }
            throw new PackageStore.InstallFailed("released");
        };
        ExecutorService pool = Executors.newVirtualThreadPerTaskExecutor();
        Future<PackageStore.Lease> a = pool.submit(() -> store.acquire(set("hang"), "3", blocking));
        Future<PackageStore.Lease> b = pool.submit(() -> store.acquire(set("hang"), "3", blocking));
        Poll.until("both wait", () -> store.waiting(set("hang"), "3") == 2);
        a.cancel(true); // the run of the first request was cancelled: its thread is interrupted
        assertThatThrownBy(a::get).isInstanceOf(java.util.concurrent.CancellationException.class);
        Poll.until("one waits", () -> store.waiting(set("hang"), "3") == 1);
        assertThat(stopped.getCount()).as("the install goes on for the other request").isEqualTo(1);
        b.cancel(true);
        assertThat(stopped.await(20, TimeUnit.SECONDS)).as("the last request gone, the install is stopped").isTrue();
        Poll.until("no build left", () -> store.waiting(set("hang"), "3") == 0);
        Poll.until("its directory removed", () -> {
            try (Stream<Path> left = Files.list(root)) {
                return left.findAny().isEmpty();
            }
        });
        assertThat(calls).hasValue(1);
        // the next request installs anew
        release.countDown();
        assertThatThrownBy(() -> store.acquire(set("hang"), "3", blocking)).hasMessageContaining("released");
        assertThat(calls).hasValue(2);
    }

    @Test
    void anErrorInsideAnInstallWakesEveryWaiterAndLeavesNothing() throws Exception {
        // finding 6: an OutOfMemoryError skipped the code that woke waiters and removed the build directory
        PackageStore store = new PackageStore(root, 1 << 20, Clock.systemUTC());
        CountDownLatch release = new CountDownLatch(1);
        PackageStore.Installer exploding = (s, into) -> {
            try {
                Files.writeString(into.resolve("half.py"), "x");
                release.await();
            } catch (Exception e) {
                throw new PackageStore.InstallFailed(e.toString());
            }
            throw new OutOfMemoryError("Java heap space");
        };
        ExecutorService pool = Executors.newVirtualThreadPerTaskExecutor();
        List<Future<PackageStore.Lease>> all = new ArrayList<>();
        for (int i = 0; i < 3; i++) all.add(pool.submit(() -> store.acquire(set("boom"), "3", exploding)));
        Poll.until("three wait", () -> store.waiting(set("boom"), "3") == 3);
        release.countDown();
        for (Future<PackageStore.Lease> f : all)
            assertThatThrownBy(() -> f.get(20, TimeUnit.SECONDS)).hasCauseInstanceOf(PackageStore.InstallFailed.class)
                    .hasMessageContaining("failed inside the server").hasMessageNotContaining("heap");
        try (Stream<Path> left = Files.list(root)) {
            assertThat(left).isEmpty();
        }
        assertThat(store.counts()).containsEntry("failures", 1L);
    }

    @Test
    void theManifestIsWrittenBesideTheTreeWhateverTheInstallLeftInIt(@TempDir Path host) throws Exception {
        // finding 1: a link the install placed where the server used to write its manifest, to a file of the host's
        Path victim = Files.writeString(host.resolve("victim"), "root-only\n");
        Files.setPosixFilePermissions(victim, java.nio.file.attribute.PosixFilePermissions.fromString("rw-------"));
        PackageStore store = new PackageStore(root, 1 << 20, Clock.systemUTC());
        PackageStore.Installer planting = (s, into) -> {
            try {
                Files.createDirectories(into.resolve("site/x"));
                Files.writeString(into.resolve("site/x/__init__.py"), "x = 1\n");
                Files.createSymbolicLink(into.resolve(".entry.json"), victim);
                Files.createSymbolicLink(into.resolve("entry.json"), victim);
                Files.createSymbolicLink(into.resolve("site/created"), host.resolve("new-file"));
            } catch (java.io.IOException e) {
                throw new PackageStore.InstallFailed(e.toString());
            }
            return Map.of("x", "1");
        };
        try (PackageStore.Lease l = store.acquire(set("x"), "3", planting)) {
            assertThat(Files.readString(victim)).isEqualTo("root-only\n");
            assertThat(host.resolve("new-file")).doesNotExist();
            assertThat(l.resolved()).containsExactly(Map.entry("x", "1"));
            assertThat(Files.isSymbolicLink(l.dir().resolve(".entry.json"))).as("links stay links, untouched").isTrue();
        }
        assertThat(store.list()).singleElement().satisfies(e -> assertThat(e.resolved()).containsEntry("x", "1"));
    }

    @Test
    void aTreeWithASpecialFileIsRefusedAndNothingIsStored() throws Exception {
        PackageStore store = new PackageStore(root, 1 << 20, Clock.systemUTC());
        PackageStore.Installer fifo = (s, into) -> {
            try {
                Files.createDirectories(into.resolve("node_modules/evil"));
                dev.codeexec.linux.Posix.mkfifo(into.resolve("node_modules/evil/package.json").toString(), 0644);
            } catch (Exception e) {
                throw new PackageStore.InstallFailed(e.toString());
            }
            return Map.of();
        };
        assertThatThrownBy(() -> store.acquire(set("evil"), "3", fifo)).isInstanceOf(PackageStore.InstallFailed.class)
                .hasMessageContaining("a FIFO at 'node_modules/evil/package.json'");
        try (Stream<Path> left = Files.list(root)) {
            assertThat(left).isEmpty();
        }
    }

    @Test
    void entriesOfTheOlderLayoutAreRemovedAtStart() throws Exception {
        Path old = Files.createDirectories(root.resolve("pip-0123456789abcdef0123456789abcdef/site"));
        Files.writeString(old.getParent().resolve(".entry.json"), "{}");
        PackageStore store = new PackageStore(root, 1 << 20, Clock.systemUTC());
        assertThat(store.list()).isEmpty();
        assertThat(old.getParent()).doesNotExist();
    }
}
