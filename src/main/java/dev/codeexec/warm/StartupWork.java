package dev.codeexec.warm;

import dev.codeexec.lang.Languages;
import dev.codeexec.lang.Placeholders;
import dev.codeexec.config.DataDir;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/**
 * What the engine does to DATA_DIR when it starts. Before the first run, because every run reads it: the engine's
 * helper files in runtime/ and Python's start-up ({@link PythonSite}). Then in the background, so that no request
 * waits for it: the Go build cache ({@link GoCacheWarmer}) and the languages' warm-ups ({@link LanguageWarmup}:
 * TypeScript code cache, Java AOT cache). Each makes runs faster; none is needed for a run to work.
 */
public final class StartupWork {

    /**
     * Engine helper files copied to DATA_DIR/runtime (bound read-only into sandboxes): the TypeScript loader (and
     * its use of Node's own type stripping, also the server's stripper's, {@link TypeScriptStrippers}) and
     * the interpreters of warm sandboxes and sessions (docs/interpreter-protocol.md).
     */
    public static final List<String> RUNTIME_FILES = List.of("ts-loader.js", "ts-strip.js", "ts-strip-server.js", "run_python.py", "warm_python.py",
            "warm_node.js", "session_python.py", "session_node.js", "session_bash.py", "codeexec_site.py", "codeexec_run.py",
            "codeexec_main.py", "codeexec_mpl.py", "codeexec_node.js", "codeexec_egress_node.js");

    private final DataDir data;
    private final StartupProcesses processes = new StartupProcesses();
    private final Optional<GoCacheWarmer> goWarmer;
    private final CompletableFuture<Void> goWarmed;
    private final List<CompletableFuture<Boolean>> warmups;

    /**
     * Prepares DATA_DIR (throws when it cannot: no run could work) and Python's start-up, then starts the
     * background work on {@code threads}.
     *
     * @param memoryLimitMb the runs' memory limit: the Java warm-up must use the heap size runs use
     */
    public static StartupWork start(DataDir data, Languages languages, Map<String, String> placeholders, long memoryLimitMb,
            ThreadFactory threads) {
        prepare(data);
        // before any Python run or warm sandbox: they all start from what this measures
        languages.find("python").ifPresent(py -> PythonSite.prepare(
                Placeholders.fill(py.run().getFirst(), placeholders), data));
        return new StartupWork(data, languages, placeholders, memoryLimitMb, threads);
    }

    private StartupWork(DataDir data, Languages languages, Map<String, String> placeholders, long memoryLimitMb,
            ThreadFactory threads) {
        this.data = data;
        this.goWarmer = languages.find("go").map(go -> new GoCacheWarmer(data,
                Placeholders.fill(go.compile().orElse(go.run()).getFirst(), placeholders),
                go.environment(Map.of(), placeholders), processes));
        this.goWarmed = goWarmer.map(w -> CompletableFuture.runAsync(w::warm, r -> threads.newThread(r).start()))
                .orElse(CompletableFuture.completedFuture(null));
        Map<String, String> warmupPlaceholders = new java.util.LinkedHashMap<>(placeholders);
        warmupPlaceholders.put("heapMb", Placeholders.heapMb(memoryLimitMb));
        this.warmups = languages.all().stream().filter(l -> l.warmup().isPresent())
                .map(l -> CompletableFuture.supplyAsync(
                        () -> LanguageWarmup.run(l, warmupPlaceholders, data.scratch(), processes),
                        r -> threads.newThread(r).start()))
                .toList();
    }

    /** The directories runs and warm-ups use, with the engine's helper files installed fresh from the jar. */
    private static void prepare(DataDir data) {
        try {
            data.prepareRoot();
            data.prepareRuntime();
            data.prepareGoCache();
            data.prepareStaging();
            data.prepareScratch();
            for (String f : RUNTIME_FILES) {
                try (InputStream in = StartupWork.class.getResourceAsStream("/engine/" + f)) {
                    if (in == null) throw new IOException("/engine/" + f + " is missing from the classpath");
                    DataDir.write(data.runtime().resolve(f), in, "rw-r--r--");
                }
            }
        } catch (IOException e) {
            throw new UncheckedIOException("cannot prepare DATA_DIR " + data.root() + ": " + e.getMessage(), e);
        }
    }

    /** "warm", "warming" or "cold" ("cold" too when Go is not in the table). */
    /** Completes when the Go build cache's warm-up has ended (however it ended); at once without Go. */
    public CompletableFuture<Void> goWarmed() {
        return goWarmed;
    }

    /** A run waits for the Go cache warm-up: it goes on at the default priority (see {@link GoCacheWarmer#hurry}). */
    public void hurryGo() {
        goWarmer.ifPresent(GoCacheWarmer::hurry);
    }

    public String goCacheState() {
        return goWarmer.map(w -> w.state().name().toLowerCase()).orElse("cold");
    }

    /** Blocks until the warm-ups (languages, then the Go build cache) have ended. */
    public void await(Duration max) throws InterruptedException {
        long end = System.nanoTime() + max.toNanos();
        for (CompletableFuture<Boolean> w : warmups) {
            try {
                w.get(Math.max(0, end - System.nanoTime()), TimeUnit.NANOSECONDS);
            } catch (TimeoutException | java.util.concurrent.ExecutionException e) {
                // A warm-up that did not finish only makes runs slower.
            }
        }
        awaitGoCache(Duration.ofNanos(Math.max(0, end - System.nanoTime())));
    }

    /** Blocks until the Go build cache warm-up has ended. */
    public void awaitGoCache(Duration max) throws InterruptedException {
        try {
            goWarmed.get(max.toMillis(), TimeUnit.MILLISECONDS);
        } catch (TimeoutException | java.util.concurrent.ExecutionException e) {
            // The state says what happened; callers check goCacheState().
        }
    }

    /** Stops the warm-ups' processes: a closing server must not wait for them. */
    public void stop() {
        processes.stopAll();
    }

    /** After {@link #stop()}: the stopped warm-ups delete their temporary directories, then the scratch goes. */
    public void cleanUp() throws InterruptedException {
        await(Duration.ofSeconds(10));
        DataDir.deleteTree(data.scratch());
    }
}
