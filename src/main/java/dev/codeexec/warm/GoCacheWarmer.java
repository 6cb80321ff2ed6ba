package dev.codeexec.warm;

import dev.codeexec.config.DataDir;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

/**
 * Fills the shared Go build cache once, so that {@code go run hello.go} in a sandbox only compiles and links the
 * user's own package (about 0.2 s) instead of the standard library (about 8 s on this machine).
 *
 * <p>Sandboxed runs get the cache bound read-only. Go mostly tolerates that: cache reads work and failed cache
 * writes (the user's own package, trim.txt) are ignored silently, so nothing a run does can poison the cache for
 * the next one. One trap, measured with Go 1.23: Go keeps an index of each standard package's directory in the
 * cache, and with a read-only cache a package whose index entry is missing fails with "package archive/zip is not
 * in std". {@code GODEBUG=goindex=0} avoids it but costs about 100 ms per build; instead the warm-up also runs
 * {@code go list std} (0.3 s), which writes the index entry of every standard package. The warm-up is our own
 * fixed program, built outside the sandbox with the exact Go environment of the languages table (same GOFLAGS,
 * CGO_ENABLED, ...: the cache key depends on them). It runs in the background at executor start. A marker file
 * holding the Go version, the environment and the package list makes later starts skip it, and makes a Go upgrade
 * or a table change warm again.
 *
 * <p>A Go run that arrives before the warm-up has ended waits for it (LocalExecutor, outside the queue, holding no
 * slot) instead of racing it. Measured on a fresh DATA_DIR with the default limits (MAX_DISK_MB 512, 30 s timeout;
 * Go 1.23, 2 busy cores, where the warm-up took 95-125 s), a hello world that did not wait: submitted at once,
 * failed with "failed to initialize build cache ... mkdir go-cache/00: read-only file system" (the warm-up had not
 * made the cache's directories yet); submitted 3 to 36 s in, built the standard library itself and hit the 30 s
 * timeout; in a workspace with 16 MB left (a workspace run's /tmp is capped at what its quota has left) failed with
 * "compile: writing output: write $WORK/b027/_pkg_.a: no space left on device" (fmt's dependencies compiled
 * cold write 29 MB to GOTMPDIR, runtime's archive alone 12.8 MB); with the directories but not the index written,
 * Go says "package fmt is not in std". Only from about 50-70 s in did it work. A bigger /tmp or a writable cache
 * area would mend only the disk case, and a run building the standard library competes with the warm-up for the
 * same cores. Waiting costs the first Go runs of a fresh DATA_DIR the rest of the warm-up, once; after a failed
 * warm-up runs go on cold, as before.
 *
 * <p>Servers sharing DATA_DIR share the cache: the warm-up runs under a lock, so the second server to start waits
 * and then finds the marker written (8 s of CPU saved per extra server), and every file this class writes there
 * (marker, trim stamp) is replaced atomically, never truncated while a sandboxed build reads it.
 */
public final class GoCacheWarmer {

    enum State { COLD, WARMING, WARM }

    private static final Logger log = LoggerFactory.getLogger(GoCacheWarmer.class);
    static final String MARKER = ".code-exec-warm";

    /** Standard packages user code commonly imports; each one compiled here saves seconds in a run. */
    static final List<String> PACKAGES = List.of("bufio", "bytes", "container/heap", "container/list", "context",
            "crypto/md5", "crypto/sha256", "encoding/base64", "encoding/csv", "encoding/hex", "encoding/json",
            "errors", "flag", "fmt", "io", "math", "math/big", "math/bits", "math/rand", "net/http", "net/url",
            "os", "os/exec", "path/filepath", "reflect", "regexp", "slices", "maps", "sort", "strconv", "strings",
            "sync", "sync/atomic", "text/tabwriter", "time", "unicode", "unicode/utf8");

    private final List<String> packages;
    private final DataDir data;
    private final Path cacheDir;
    private final Path scratchDir;
    private final String goBinary;
    private final Map<String, String> goEnv;
    private volatile State state;
    private final StartupProcesses processes;
    /** Set once a run waits for the warm-up ({@link #hurry}). */
    private volatile boolean awaited;
    /** The process of the step running now, if any. */
    private volatile Process current;

    GoCacheWarmer(DataDir data, String goBinary, Map<String, String> goEnv, StartupProcesses processes) {
        this(data, goBinary, goEnv, PACKAGES, processes);
    }

    /**
     * @param data      its go-cache is filled; its scratch directory holds the warm-up's temporary directory
     * @param processes where its processes are registered, so that closing the executor stops them
     */
    GoCacheWarmer(DataDir data, String goBinary, Map<String, String> goEnv, List<String> packages,
            StartupProcesses processes) {
        this.processes = processes;
        this.packages = List.copyOf(packages);
        this.data = data;
        this.scratchDir = data.scratch();
        this.cacheDir = data.goCache();
        this.goBinary = goBinary;
        this.goEnv = Map.copyOf(goEnv);
        this.state = State.COLD;
    }

    State state() {
        return state;
    }

    /** Builds the warm-up program into the cache unless the marker says it is done. Blocking; run it off-thread. */
    void warm() {
        if (!Files.isExecutable(Path.of(goBinary))) {
            log.info("Go not found at {}: build cache stays cold", goBinary);
            return;
        }
        stampTrim();
        Thread.ofVirtual().name("go-trim-stamp").start(this::keepTrimStampFresh);
        try {
            String marker = markerText();
            if (warmFor(marker)) {
                state = State.WARM;
                return;
            }
            state = State.WARMING;
            data.locked("go-cache", () -> {
                warmUnlessDone(marker);
                return null;
            });
        } catch (IOException e) {
            log.warn("Go build cache warm-up failed: {}", e.toString());
            state = State.COLD;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            state = State.COLD;
        }
    }

    private boolean warmFor(String marker) throws IOException {
        Path markerFile = cacheDir.resolve(MARKER);
        return Files.exists(markerFile) && Files.readString(markerFile).equals(marker);
    }

    /** Under the lock: another server may have warmed the cache while this one waited. */
    private void warmUnlessDone(String marker) throws IOException, InterruptedException {
        if (warmFor(marker)) {
            state = State.WARM;
            return;
        }
        if (processes.stopped()) {
            state = State.COLD;
            return;
        }
        Path work = null;
        try {
            Files.createDirectories(scratchDir);
            work = Files.createTempDirectory(scratchDir, "go-warm");
            Files.writeString(work.resolve("warm.go"), program(packages));
            Map<String, String> env = new HashMap<>(goEnv);
            env.put("GOCACHE", cacheDir.toString());
            env.put("GOPATH", work.resolve("gopath").toString());
            env.put("GOTMPDIR", work.toString());
            env.put("HOME", work.toString());
            long t0 = System.nanoTime();
            for (List<String> step : List.of(List.of(goBinary, "build", "-o", work.resolve("warm").toString(), "warm.go"),
                    List.of(goBinary, "list", "std"))) {
                String failure = run(step, work, env);
                if (failure != null) {
                    log.warn("Go build cache warm-up failed ({}): {}", String.join(" ", step.subList(1, step.size())),
                            failure);
                    state = State.COLD;
                    return;
                }
            }
            makeWorldReadable(cacheDir);
            DataDir.write(cacheDir.resolve(MARKER), marker.getBytes(StandardCharsets.UTF_8), "rw-r--r--");
            state = State.WARM;
            log.info("Go build cache warm in {} ms ({} packages) at {}", (System.nanoTime() - t0) / 1_000_000,
                    packages.size(), cacheDir);
        } finally {
            if (work != null) deleteScratch(work);
        }
    }

    /**
     * Removes the warm-up's directory. After a stop, go's killed compiler processes can still be writing into it
     * for a moment (SIGKILL is delivered asynchronously): a directory that refills while it is walked is tried again.
     */
    private static void deleteScratch(Path work) {
        for (int attempt = 0; attempt < 40 && Files.exists(work); attempt++) {
            if (attempt > 0) {
                try {
                    Thread.sleep(50);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            }
            DataDir.deleteTree(work);
        }
    }

    /**
     * Go trims its build cache once a day, and when it cannot record that in {@code trim.txt} — always, with the
     * cache read-only in the sandbox — it fails the whole build with "failed to trim cache" (measured with Go 1.23:
     * with a missing or day-old trim.txt every run exits 1). So the server records the trim for Go: before the
     * warm-up (a cold cache must still build) and every hour after. The cache is read-only for runs and never
     * grows, so it needs no trimming.
     */
    void stampTrim() {
        try {
            data.prepareGoCache();
            DataDir.write(cacheDir.resolve("trim.txt"),
                    Long.toString(System.currentTimeMillis() / 1000).getBytes(StandardCharsets.UTF_8), "rw-r--r--");
            writeTelemetryOff(cacheDir);
        } catch (IOException e) {
            log.warn("Go build cache trim stamp cannot be written: {}", e.toString());
        }
    }

    /** Where the languages table's XDG_CONFIG_HOME for Go points, inside the (read-only bound) cache directory. */
    static final String CONFIG_DIR = "config";

    /**
     * Turns Go's telemetry off for the sandboxed builds (issue 42). {@code GOTELEMETRY=off} in the environment does
     * not: Go reads the mode only from {@code $XDG_CONFIG_HOME/go/telemetry/mode} (else {@code $HOME/.config}), and
     * a sandbox's HOME is a new, empty /tmp at every run. So every sandboxed {@code go build} ran in mode "local":
     * it wrote counter files for go, compile, asm and link there, took the day's upload token (always free in a new
     * /tmp) and started a second go process, its telemetry sidecar, beside the build (measured: 4 counter files,
     * 36 KiB, one extra exec of the 15 MB go binary, ~25 ms more CPU in go build itself). The table points
     * XDG_CONFIG_HOME at this directory, read-only in the sandbox like the rest of the cache; with the mode "off"
     * Go writes nothing there and starts no sidecar.
     */
    static void writeTelemetryOff(Path cacheDir) throws IOException {
        Path dir = cacheDir.resolve(CONFIG_DIR);
        for (Path d : List.of(dir, dir.resolve("go"), dir.resolve("go/telemetry"))) {
            Files.createDirectories(d);
            Files.setPosixFilePermissions(d, PosixFilePermissions.fromString("rwxr-xr-x"));
        }
        Path mode = dir.resolve("go/telemetry/mode");
        if (!Files.exists(mode) || !Files.readString(mode).equals("off"))
            DataDir.write(mode, "off".getBytes(StandardCharsets.UTF_8), "rw-r--r--");
    }

    private void keepTrimStampFresh() {
        try {
            while (true) {
                Thread.sleep(java.time.Duration.ofHours(1));
                stampTrim();
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    /** Runs one warm-up step; returns null on success, else what went wrong. */
    private String run(List<String> argv, Path dir, Map<String, String> env) throws IOException, InterruptedException {
        ProcessBuilder pb = new ProcessBuilder(StartupProcesses.background(argv, !awaited)).directory(dir.toFile())
                .redirectErrorStream(true);
        pb.environment().clear();
        pb.environment().putAll(env);
        Process p = pb.start();
        if (!processes.add(p)) return "stopped: the executor is closing";
        current = p;
        if (awaited) StartupProcesses.raise(p); // hurry() came between the choice above and now
        try {
            byte[] out = p.getInputStream().readAllBytes();
            if (!p.waitFor(10, TimeUnit.MINUTES)) {
                p.destroyForcibly();
                return "timed out";
            }
            if (processes.stopped()) return "stopped: the executor is closing";
            return p.exitValue() == 0 ? null : "exit " + p.exitValue() + ": " + new String(out).strip();
        } finally {
            current = null;
            processes.remove(p);
        }
    }

    /**
     * A run waits for the warm-up: its current step and the ones after it run at the default priority of a
     * scheduler group instead of the lowest (see {@link StartupProcesses#raise}).
     */
    void hurry() {
        awaited = true;
        Process p = current;
        if (p != null) StartupProcesses.raise(p);
    }

    /** What the cache was warmed for: when any of it changes, the cache is warmed again. */
    private String markerText() throws IOException, InterruptedException {
        ProcessBuilder pb = new ProcessBuilder(goBinary, "version").redirectErrorStream(true);
        pb.environment().clear();
        pb.environment().putAll(goEnv);
        Process p = pb.start();
        String version = new String(p.getInputStream().readAllBytes()).strip();
        p.waitFor();
        return version + "\n" + new java.util.TreeMap<>(goEnv) + "\n" + String.join(" ", packages) + "\nlist std\n";
    }

    static String program(List<String> packages) {
        StringBuilder s = new StringBuilder("package main\n\nimport (\n");
        for (String p : packages) s.append("\t_ \"").append(p).append("\"\n");
        return s.append(")\n\nfunc main() {}\n").toString();
    }

    /** Sandboxed code runs as another uid: directories 0755, files 0644. */
    private static void makeWorldReadable(Path root) throws IOException {
        List<Path> paths = new ArrayList<>();
        try (Stream<Path> s = Files.walk(root)) {
            s.forEach(paths::add);
        }
        for (Path p : paths) {
            Files.setPosixFilePermissions(p, PosixFilePermissions.fromString(
                    Files.isDirectory(p) ? "rwxr-xr-x" : "rw-r--r--"));
        }
    }
}
