package dev.codeexec.config;

import dev.codeexec.testing.Poll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.FileTime;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;

import static org.assertj.core.api.Assertions.assertThat;

class DataDirTest {

    private static String mode(Path p) throws Exception {
        return PosixFilePermissions.toString(Files.getPosixFilePermissions(p));
    }

    @Test
    void eachDirectoryGetsTheModeItsReadersNeed(@TempDir Path parent) throws Exception {
        DataDir data = DataDir.at(parent.resolve("data"));
        assertThat(mode(data.prepareRoot())).isEqualTo("rwx--x--x");
        assertThat(mode(data.prepareRuntime())).isEqualTo("rwxr-xr-x");
        assertThat(mode(data.prepareGoCache())).isEqualTo("rwxr-xr-x");
        assertThat(mode(data.prepareStaging())).isEqualTo("rwx--x--x");
        assertThat(mode(data.prepareScratch())).isEqualTo("rwxr-xr-x");
        assertThat(mode(data.scratch().getParent())).isEqualTo("rwx------");
        assertThat(mode(data.prepareHelperDir())).isEqualTo("rwxr-xr-x");
        assertThat(mode(data.prepareControl())).isEqualTo("rwx------");
        assertThat(mode(data.prepareLate())).isEqualTo("rwx--x--x");
        assertThat(mode(data.prepareLateFor("t0"))).isEqualTo("rwx--x--x");
    }

    @Test
    void anExistingPrivateDataDirBecomesSearchableButNotListable(@TempDir Path parent) throws Exception {
        Path root = Files.createDirectory(parent.resolve("data"),
                PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rwx------")));
        DataDir.at(root).prepareRoot();
        assertThat(mode(root)).isEqualTo("rwx--x--x");
    }

    @Test
    void scratchOfServersThatNoLongerRunIsRemovedAndALiveOnesStays(@TempDir Path parent) throws Exception {
        DataDir data = DataDir.at(parent);
        Path dead = Files.createDirectories(data.scratch().resolveSibling("999999999").resolve("go-warm1"));
        Path live = Files.createDirectories(data.scratch().resolveSibling("1"));
        data.prepareScratch();
        assertThat(dead.getParent()).doesNotExist();
        assertThat(live).as("pid 1 always runs").exists();
        assertThat(data.scratch()).isDirectory();
    }

    @Test
    void temporaryFilesOfServersThatNoLongerRunAreRemovedAndALiveOnesStay(@TempDir Path parent) throws Exception {
        DataDir data = DataDir.at(parent);
        Path runtime = data.prepareRuntime();
        Path deadAot = Files.createFile(runtime.resolve(".java-source.aot.999999999-0123abcd.tmp"));
        Path deadConfig = Files.createFile(runtime.resolve(".java-source.aot.999999999-0123abcd.tmp.config"));
        Path mine = Files.createFile(DataDir.tempFor(runtime.resolve("typescript.v8cache")));
        Path installed = Files.createFile(runtime.resolve("ts-loader.js"));
        data.prepareRuntime();
        assertThat(deadAot).doesNotExist();
        assertThat(deadConfig).doesNotExist();
        assertThat(mine).as("this server may be writing it").exists();
        assertThat(installed).exists();
    }

    @Test
    void controlEntriesOlderThanAMinuteAreRemovedAndRecentOnesStay(@TempDir Path parent) throws Exception {
        DataDir data = DataDir.at(parent);
        Path old = Files.createDirectories(data.control().resolve("run-old"));
        Files.setLastModifiedTime(old, FileTime.fromMillis(System.currentTimeMillis() - 120_000));
        Path recent = Files.createDirectories(data.control().resolve("run-starting"));
        data.prepareControl();
        assertThat(old).doesNotExist();
        assertThat(recent).as("another server's run, mid-start").exists();
    }

    @Test
    void writeReplacesTheTargetWithItsModeAndLeavesNoTemporaryFile(@TempDir Path dir) throws Exception {
        Path target = dir.resolve("seccomp.bpf");
        Files.writeString(target, "old");
        DataDir.write(target, new byte[] {1, 2, 3}, "rw-------");
        assertThat(Files.readAllBytes(target)).containsExactly(1, 2, 3);
        assertThat(mode(target)).isEqualTo("rw-------");
        try (var files = Files.list(dir)) {
            assertThat(files).containsExactly(target);
        }
    }

    @Test
    void temporaryNamesLieBesideTheTargetAndNeverRepeat(@TempDir Path dir) {
        Path target = dir.resolve("java-source.aot");
        Set<Path> names = new HashSet<>();
        for (int i = 0; i < 1000; i++) {
            Path t = DataDir.tempFor(target);
            assertThat(t.getParent()).isEqualTo(dir);
            assertThat(t.getFileName().toString()).startsWith(".java-source.aot." + ProcessHandle.current().pid() + "-")
                    .endsWith(".tmp");
            names.add(t);
        }
        assertThat(names).hasSize(1000);
    }

    @Test
    void lockedWorkOfTwoThreadsNeverOverlaps(@TempDir Path dir) throws Exception {
        DataDir data = DataDir.at(dir);
        AtomicInteger inside = new AtomicInteger();
        AtomicInteger most = new AtomicInteger();
        CountDownLatch release = new CountDownLatch(1);
        List<Thread> threads = new CopyOnWriteArrayList<>();
        try (ExecutorService pool = Executors.newThreadPerTaskExecutor(r -> {
            Thread t = Thread.ofPlatform().unstarted(r);
            threads.add(t);
            return t;
        })) {
            List<Future<Integer>> all = new java.util.ArrayList<>();
            for (int i = 0; i < 8; i++) {
                all.add(pool.submit(() -> data.locked("x", () -> {
                    most.accumulateAndGet(inside.incrementAndGet(), Math::max);
                    release.await(); // the first one in holds the lock until all eight are there
                    return inside.decrementAndGet();
                })));
            }
            // one holds the lock, seven wait for it: every thread of the eight is parked, one of them inside
            Poll.until("one thread inside, seven waiting for the lock", () -> threads.size() == 8 && inside.get() == 1
                    && threads.stream().allMatch(t -> t.getState() == Thread.State.WAITING));
            release.countDown();
            for (Future<Integer> f : all) f.get();
        }
        assertThat(most.get()).isEqualTo(1);
        assertThat(mode(dir.resolve("locks"))).as("no sandbox can reach a lock").isEqualTo("rwx------");
    }

    /** Another server is another process: its lock (an fcntl lock, like the JVM's) keeps this one waiting. */
    @Test
    void lockedWorkWaitsWhileAnotherProcessHoldsTheLock(@TempDir Path dir) throws Exception {
        DataDir data = DataDir.at(dir);
        data.locked("x", () -> null); // creates locks/x.lock
        Path lock = dir.resolve("locks/x.lock");
        long inode = (Long) Files.getAttribute(lock, "unix:ino");
        Process other = new ProcessBuilder("/usr/bin/python3", "-c", String.join("\n",
                "import fcntl, sys",
                "f = open(sys.argv[1], 'w')",
                "fcntl.lockf(f, fcntl.LOCK_EX)",
                "print('locked', flush=True)",
                "sys.stdin.readline()"), lock.toString()).redirectErrorStream(true).start();
        AtomicBoolean released = new AtomicBoolean();
        try (var out = new BufferedReader(new InputStreamReader(other.getInputStream(), StandardCharsets.UTF_8));
             ExecutorService pool = Executors.newVirtualThreadPerTaskExecutor()) {
            assertThat(out.readLine()).isEqualTo("locked");
            Future<Boolean> mine = pool.submit(() -> data.locked("x", released::get));
            // the kernel lists this server's request as blocked behind the other process's lock
            Poll.until("this server's lock request is blocked (/proc/locks)", () -> Files.readAllLines(Path.of("/proc/locks"))
                    .stream().anyMatch(l -> l.contains("->") && l.contains(":" + inode + " ")));
            assertThat(mine).isNotDone();
            released.set(true);
            other.getOutputStream().write('\n'); // the other process ends, and its lock with it
            other.getOutputStream().flush();
            assertThat(mine.get()).as("the work ran only once the other process let go").isTrue();
        } finally {
            other.destroyForcibly();
        }
    }
}
