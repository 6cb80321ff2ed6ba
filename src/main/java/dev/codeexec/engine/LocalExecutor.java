package dev.codeexec.engine;

import dev.codeexec.config.Config;
import dev.codeexec.sandbox.Sandbox;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.attribute.PosixFilePermission;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.Semaphore;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * Runs code on this machine, in the configured sandbox, at most MAX_CONCURRENT runs at once with a bounded
 * queue of QUEUE_SIZE waiters. One {@link LocalRun} per request holds the steps of a run.
 *
 * <p>Threads: waiting in the queue and reading pipes happen on virtual threads from one named factory. The part
 * of a run that starts the sandbox and waits for it runs on one of MAX_CONCURRENT long-lived platform threads:
 * bwrap's {@code --die-with-parent} (PR_SET_PDEATHSIG) follows the OS thread that spawned it, and a virtual
 * thread's carrier can retire mid-run, which would kill a healthy sandbox. Platform threads that live as long as
 * the executor make "parent died" mean "server died".
 *
 * <p>At start it prepares DATA_DIR (staging area, engine helper files, shared Go build cache) and, in the
 * background, warms the Go build cache ({@link GoCacheWarmer}), runs the languages' warm-ups
 * ({@link LanguageWarmup}: TypeScript code cache, Java AOT cache) and probes language and tool versions ({@link RuntimeProbe}); none delays a request
 * but a Go run that arrives before the Go build cache is warm, which waits for it.
 */
public final class LocalExecutor implements Executor {

    /** Working directory of every run inside the sandbox: a fresh tmpfs per run. */
    public static final String WORK_DIR = "/work";
    static final String BASE_PATH = "/usr/local/bin:/usr/bin:/bin";

    private static final Logger log = LoggerFactory.getLogger(LocalExecutor.class);

    /**
     * Engine helper files copied to DATA_DIR/runtime (bound read-only into sandboxes): the TypeScript loader and
     * the interpreters of warm sandboxes and sessions (docs/interpreter-protocol.md).
     */
    static final List<String> RUNTIME_FILES = List.of("ts-loader.js", "run_python.py", "warm_python.py",
            "warm_node.js", "session_python.py", "session_node.js", "codeexec_site.py", "codeexec_run.py",
            "codeexec_main.py", "codeexec_mpl.py", "codeexec_node.js");

    final Config config;
    final Sandbox sandbox;
    final Languages languages;
    final Path stagingDir;
    private final Path scratchDir;
    final Map<String, String> placeholders;
    private final Semaphore slots;
    private final int maxConcurrent;
    private final int queueSize;
    private final long queueTimeoutMs;
    private final AtomicInteger running = new AtomicInteger();
    private final AtomicInteger queued = new AtomicInteger();
    private final AtomicBoolean closing = new AtomicBoolean();
    private final Set<LocalRun> runs = ConcurrentHashMap.newKeySet();
    final ThreadFactory virtualThreads = Thread.ofVirtual().name("exec-", 0).factory();
    private final ExecutorService sandboxThreads;
    private final Optional<GoCacheWarmer> goWarmer;
    private final CompletableFuture<Void> goWarmed;
    private final List<CompletableFuture<Boolean>> warmups;
    private final StartupProcesses startupProcesses = new StartupProcesses();
    private final RuntimeProbe probe;
    final Sessions sessions;
    /** Pre-started sandboxes (WARM_POOL), when configured and the sandbox supports them. */
    final Optional<WarmPool> warmPool;
    /** Why there is no warm pool, when there is none. */
    private final String warmPoolOff;
    private final List<StartListener> startListeners = new CopyOnWriteArrayList<>();

    /** The executor for a configuration and sandbox, with the languages table shipped in the jar. */
    public static LocalExecutor create(Config config, Sandbox sandbox) {
        return new LocalExecutor(config, sandbox, Languages.load());
    }

    LocalExecutor(Config config, Sandbox sandbox, Languages languages) {
        this.config = config;
        this.sandbox = sandbox;
        this.languages = languages;
        this.maxConcurrent = config.get(Config.MAX_CONCURRENT);
        this.queueSize = config.get(Config.QUEUE_SIZE);
        this.queueTimeoutMs = config.get(Config.QUEUE_TIMEOUT_MS);
        this.slots = new Semaphore(maxConcurrent, true);
        ThreadFactory platform = Thread.ofPlatform().name("exec-sandbox-", 0).daemon(true).factory();
        this.sandboxThreads = Executors.newFixedThreadPool(maxConcurrent, platform);

        Path dataDir = config.dataDir().toAbsolutePath();
        Path runtimeDir = dataDir.resolve("runtime");
        Path goCache = dataDir.resolve("go-cache");
        this.stagingDir = dataDir.resolve("staging");
        this.scratchDir = dataDir.resolve("tmp").resolve(Long.toString(ProcessHandle.current().pid()));
        prepareDataDir(dataDir, runtimeDir, goCache, stagingDir, scratchDir);

        Map<String, String> ph = new LinkedHashMap<>();
        ph.put("javaHome", Path.of(System.getProperty("java.home")).toAbsolutePath().toString());
        ph.put("goCache", goCache.toString());
        ph.put("runtimeDir", runtimeDir.toString());
        this.placeholders = Map.copyOf(ph);
        // before any Python run or warm sandbox: they all start from what this measures
        languages.find("python").ifPresent(py -> PythonSite.prepare(
                Placeholders.fill(py.run().getFirst(), placeholders), runtimeDir));
        this.sessions = new Sessions(sandbox, placeholders, virtualThreads, config.get(Config.MAX_SESSIONS),
                Duration.ofSeconds(config.get(Config.SESSION_IDLE_SECONDS)));

        this.goWarmer = languages.find("go").map(go -> new GoCacheWarmer(goCache, scratchDir,
                Placeholders.fill(go.compile().orElse(go.run()).getFirst(), placeholders),
                environment(go, Map.of(), placeholders), startupProcesses));
        this.goWarmed = goWarmer.map(w -> CompletableFuture.runAsync(w::warm, r -> virtualThreads.newThread(r).start()))
                .orElse(CompletableFuture.completedFuture(null));
        Map<String, String> warmupPlaceholders = new LinkedHashMap<>(placeholders);
        warmupPlaceholders.put("heapMb", heapMb(config.get(Config.MEMORY_LIMIT_MB)));
        this.warmups = languages.all().stream().filter(l -> l.warmup().isPresent())
                .map(l -> CompletableFuture.supplyAsync(
                        () -> LanguageWarmup.run(l, warmupPlaceholders, scratchDir, startupProcesses),
                        r -> virtualThreads.newThread(r).start()))
                .toList();
        this.probe = new RuntimeProbe(languages, placeholders, baseEnvironment("/tmp"), virtualThreads);

        Map<String, Integer> targets = new LinkedHashMap<>();
        config.get(Config.WARM_POOL).forEach((k, v) -> {
            if (v > 0) targets.put(k, v);
        });
        String off = targets.isEmpty() ? "WARM_POOL is empty"
                : sandbox.unavailableReason().isPresent() ? "the sandbox is unavailable"
                : !sandbox.supportsControl() ? "the '" + sandbox.name() + "' sandbox cannot keep interpreters warm (bwrap can)"
                : null;
        if (off == null) {
            Map<String, WarmPool.Recipe> recipes = WarmPool.recipes(targets, languages::find, placeholders,
                    config.get(Config.WARM_PRELOAD_PYTHON));
            targets.keySet().retainAll(recipes.keySet());
            boolean late = sandbox.lateWorkDirUnavailable().isEmpty();
            sandbox.lateWorkDirUnavailable().ifPresent(r -> log.warn("warm pool serves stateless runs only: {}", r));
            this.warmPool = Optional.of(new WarmPool(sandbox, targets, recipes,
                    RequestValidator.defaultLimits(config, Duration.ofMillis(config.get(Config.DEFAULT_TIMEOUT_MS))), late));
        } else {
            this.warmPool = Optional.empty();
        }
        this.warmPoolOff = off;

        sandbox.unavailableReason().ifPresentOrElse(
                r -> log.error("sandbox '{}' cannot run code: {}; every run will be refused", sandbox.name(), r),
                () -> log.info("executor ready: sandbox {}, {} runs at once, queue {}", sandbox.name(), maxConcurrent,
                        queueSize));
    }

    /**
     * DATA_DIR must be traversable (not listable) by the sandbox uid, for the read-only binds of runtime/ and
     * go-cache/. Staging is 0711 so no one else can list the staged code files. tmp/&lt;pid&gt; holds this server's
     * start-time work; directories of servers that are no longer running (killed, say) are removed at start.
     */
    private static void prepareDataDir(Path dataDir, Path runtimeDir, Path goCache, Path staging, Path scratch) {
        try {
            Files.createDirectories(dataDir);
            Set<PosixFilePermission> perms = Files.getPosixFilePermissions(dataDir);
            if (!perms.contains(PosixFilePermission.OTHERS_EXECUTE)) {
                perms.add(PosixFilePermission.OTHERS_EXECUTE);
                perms.add(PosixFilePermission.GROUP_EXECUTE);
                Files.setPosixFilePermissions(dataDir, perms);
            }
            for (Path d : List.of(runtimeDir, goCache)) {
                Files.createDirectories(d);
                Files.setPosixFilePermissions(d, PosixFilePermissions.fromString("rwxr-xr-x"));
            }
            Files.createDirectories(staging);
            Files.setPosixFilePermissions(staging, PosixFilePermissions.fromString("rwx--x--x"));
            Path scratchRoot = scratch.getParent();
            Files.createDirectories(scratchRoot);
            Files.setPosixFilePermissions(scratchRoot, PosixFilePermissions.fromString("rwx------"));
            try (var others = Files.list(scratchRoot)) {
                others.filter(d -> !isLiveServer(d.getFileName().toString())).forEach(GoCacheWarmer::deleteTree);
            }
            Files.createDirectories(scratch);
            for (String f : RUNTIME_FILES) installResource("/engine/" + f, runtimeDir.resolve(f));
        } catch (IOException e) {
            throw new UncheckedIOException("cannot prepare DATA_DIR " + dataDir + ": " + e.getMessage(), e);
        }
    }

    private static boolean isLiveServer(String pidName) {
        try {
            return ProcessHandle.of(Long.parseLong(pidName)).map(ProcessHandle::isAlive).orElse(false);
        } catch (NumberFormatException e) {
            return false;
        }
    }

    private static void installResource(String resource, Path target) throws IOException {
        try (InputStream in = LocalExecutor.class.getResourceAsStream(resource)) {
            if (in == null) throw new IOException(resource + " is missing from the classpath");
            Path tmp = Files.createTempFile(target.getParent(), ".install", ".tmp");
            Files.copy(in, tmp, StandardCopyOption.REPLACE_EXISTING);
            Files.setPosixFilePermissions(tmp, PosixFilePermissions.fromString("rw-r--r--"));
            Files.move(tmp, target, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
        }
    }

    /** The whitelist every run starts from; nothing comes from the server's own environment. */
    static Map<String, String> baseEnvironment(String home) {
        Map<String, String> env = new LinkedHashMap<>();
        env.put("PATH", BASE_PATH);
        env.put("HOME", home);
        env.put("LANG", "C.UTF-8");
        env.put("TMPDIR", "/tmp");
        env.put("PYTHONUNBUFFERED", "1");
        env.put("MPLBACKEND", "Agg");
        return env;
    }

    /** Base whitelist, then the language's extras, then the request's own variables (which win). */
    static Map<String, String> environment(Language lang, Map<String, String> requestEnv, Map<String, String> ph) {
        // HOME is the run's /tmp, not the working directory: tools' caches (fontconfig, matplotlib, pip, npm) must
        // not litter a persistent workspace or count against its quota.
        Map<String, String> env = baseEnvironment("/tmp");
        lang.env().forEach((k, v) -> env.put(k, Placeholders.fill(v, ph)));
        env.putAll(requestEnv);
        return env;
    }

    @Override
    public RunHandle submit(ExecutionRequest request, OutputListener listener) {
        if (closing.get()) throw new ExecutionException.Unavailable("the server is shutting down; no new runs are accepted");
        Optional<String> unavailable = sandbox.unavailableReason();
        if (unavailable.isPresent())
            throw new ExecutionException.Unavailable("the sandbox '" + sandbox.name() + "' cannot run code on this server: "
                    + unavailable.get());
        Language lang = languages.find(request.language()).orElseThrow(() -> new ExecutionException.InvalidRequest(
                "unknown language '" + request.language() + "'; supported: " + String.join(", ", languages.ids())));
        OutputListener out = listener == null ? OutputListener.NONE : listener;
        SessionCall call = request.session().isPresent() ? sessions.prepare(request, lang, out) : null;
        LocalRun run = new LocalRun(this, request, lang, out, call);
        runs.add(run);
        run.result().whenComplete((r, e) -> runs.remove(run));
        if (lang.id().equals("go") && !goWarmed.isDone()) virtualThreads.newThread(() -> waitForGoCache(run)).start();
        else enqueue(run);
        return run;
    }

    /**
     * A Go run that arrives while the shared build cache is being warmed waits, outside the queue and holding no
     * slot, until the warm-up has ended (see {@link GoCacheWarmer} on why); cancelling the run ends the wait.
     */
    private void waitForGoCache(LocalRun run) {
        run.waiter = Thread.currentThread();
        try {
            if (!run.cancelled) goWarmed.get();
        } catch (InterruptedException | java.util.concurrent.ExecutionException e) {
            // cancel() interrupts the wait; a warm-up that failed leaves the cache cold and the run goes on cold
        } finally {
            run.waiter = null;
        }
        if (run.cancelled) run.finishCancelledInQueue();
        else enqueue(run);
    }

    private void enqueue(LocalRun run) {
        // Take a free slot at once only when nobody is waiting: queued runs keep their order.
        if (queued.get() == 0 && slots.tryAcquire()) {
            startRunning(run);
        } else if (queued.incrementAndGet() > queueSize) {
            queued.decrementAndGet();
            run.refuse(new ExecutionException.Busy("the server is busy: " + maxConcurrent + " runs are executing and "
                    + queueSize + " are waiting; try again later"));
        } else {
            virtualThreads.newThread(() -> waitForSlot(run)).start();
        }
    }

    private void waitForSlot(LocalRun run) {
        boolean acquired = false;
        run.waiter = Thread.currentThread();
        try {
            if (!run.cancelled) acquired = slots.tryAcquire(queueTimeoutMs, TimeUnit.MILLISECONDS);
        } catch (InterruptedException e) {
            // cancel() interrupts a waiting run; handled below.
        } finally {
            run.waiter = null;
            queued.decrementAndGet();
        }
        if (run.cancelled) {
            if (acquired) slots.release();
            run.finishCancelledInQueue();
        } else if (!acquired) {
            run.refuse(new ExecutionException.Busy("no execution slot became free within " + queueTimeoutMs
                    + " ms (" + maxConcurrent + " runs at once); try again later"));
        } else {
            startRunning(run);
        }
    }

    /** The slot is held from here until the run's result is known; counters change before the result is published. */
    private void startRunning(LocalRun run) {
        running.incrementAndGet();
        run.markRunning();
        try {
            sandboxThreads.execute(() -> {
                ExecutionResult r = null;
                try {
                    r = run.execute();
                } finally {
                    running.decrementAndGet();
                    slots.release();
                    if (r != null) run.finish(r);
                    else run.refuse(new ExecutionException.Unavailable("the run failed inside the server"));
                }
            });
        } catch (RejectedExecutionException e) {
            running.decrementAndGet();
            slots.release();
            run.refuse(new ExecutionException.Unavailable("the server is shutting down; no new runs are accepted"));
        }
    }

    @Override
    public Map<String, Object> runtimeInfo() {
        Map<String, Object> info = new LinkedHashMap<>();
        Map<String, RuntimeProbe.Found> langVersions = probed(probe.languagesFuture());
        Map<String, Object> langs = new LinkedHashMap<>();
        for (Language l : languages.all()) {
            RuntimeProbe.Found f = langVersions.get(l.id());
            Map<String, Object> m = new LinkedHashMap<>();
            m.put("available", f != null && f.available());
            m.put("version", f == null ? "unknown (still probing)" : f.version() == null ? "unknown" : f.version());
            m.put("aliases", l.aliases());
            m.put("compiled", l.compiled());
            langs.put(l.id(), m);
        }
        info.put("languages", langs);
        Map<String, Object> tools = new LinkedHashMap<>();
        probed(probe.toolsFuture()).forEach((k, v) -> tools.put(k, v.toMap()));
        info.put("tools", tools);

        Map<String, Object> sb = new LinkedHashMap<>();
        sb.put("name", sandbox.name());
        sb.putAll(sandbox.info());
        Optional<String> reason = sandbox.unavailableReason();
        sb.put("available", reason.isEmpty());
        reason.ifPresent(r -> sb.put("unavailableReason", r));
        info.put("sandbox", sb);

        Map<String, Object> limits = new LinkedHashMap<>();
        limits.put("defaultTimeoutMs", config.get(Config.DEFAULT_TIMEOUT_MS));
        limits.put("maxTimeoutMs", config.get(Config.MAX_TIMEOUT_MS));
        limits.put("cpuSeconds", config.get(Config.CPU_LIMIT_SECONDS));
        limits.put("memoryMb", config.get(Config.MEMORY_LIMIT_MB));
        limits.put("maxProcesses", config.get(Config.MAX_PROCESSES));
        limits.put("maxOutputKb", config.get(Config.MAX_OUTPUT_KB));
        limits.put("maxDiskMb", config.get(Config.MAX_DISK_MB));
        info.put("limits", limits);

        Map<String, Object> conc = new LinkedHashMap<>();
        conc.put("maxConcurrent", maxConcurrent);
        conc.put("queueSize", queueSize);
        conc.put("queueTimeoutMs", queueTimeoutMs);
        conc.put("running", running());
        conc.put("queued", queued());
        info.put("concurrency", conc);
        info.put("goCache", goCacheState());
        info.put("sessions", Map.of("count", sessions.count(), "maxPerTenant", sessions.maxPerTenant(),
                "idleSeconds", sessions.idleTimeout().toSeconds(), "languages", List.of("python", "nodejs"),
                "available", sandbox.supportsControl() && sessions.maxPerTenant() > 0));
        info.put("warmPool", warmPoolInfo());
        return info;
    }

    /** Per language: target, ready, starting, served, missed (ran cold), ...; or why there is no pool. */
    public Map<String, Object> warmPoolInfo() {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("enabled", warmPool.isPresent());
        warmPool.ifPresentOrElse(p -> {
            m.put("workspaces", p.lateWorkDir());
            m.put("preloadPython", config.get(Config.WARM_PRELOAD_PYTHON));
            m.put("languages", p.info());
        }, () -> m.put("reason", warmPoolOff));
        return m;
    }

    @Override
    public Map<String, Map<String, Integer>> warmPoolLevels() {
        return warmPool.map(WarmPool::levels).orElse(Map.of());
    }

    /** Blocks until the warm pool is at its targets (tests, benchmarks); true when there is no pool. */
    public boolean awaitWarmPool(Duration max) throws InterruptedException {
        return warmPool.isEmpty() || warmPool.get().awaitFull(max);
    }

    /** "warm", "warming" or "cold" ("cold" too when Go is not in the table). */
    public String goCacheState() {
        return goWarmer.map(w -> w.state().name().toLowerCase()).orElse("cold");
    }

    /** The JVM heap cap of a run: the JVM would size its heap from host memory when it cannot see the cgroup limit. */
    static String heapMb(long memoryMb) {
        return Long.toString(Math.max(32, memoryMb / 2));
    }

    /** Blocks until the start-time warm-ups (languages, then the Go build cache) have ended (tests, benchmarks). */
    void awaitWarmups(Duration max) throws InterruptedException {
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

    /** Blocks until the Go build cache warm-up has ended (tests, benchmarks). */
    void awaitGoCache(Duration max) throws InterruptedException {
        try {
            goWarmed.get(max.toMillis(), TimeUnit.MILLISECONDS);
        } catch (TimeoutException | java.util.concurrent.ExecutionException e) {
            // The state says what happened; callers check goCacheState().
        }
    }

    private static Map<String, RuntimeProbe.Found> probed(CompletableFuture<Map<String, RuntimeProbe.Found>> f) {
        try {
            return f.get(10, TimeUnit.SECONDS);
        } catch (TimeoutException | java.util.concurrent.ExecutionException e) {
            return Map.of();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return Map.of();
        }
    }

    @Override
    public SessionControl sessions() {
        return sessions;
    }

    @Override
    public void addStartListener(StartListener listener) {
        startListeners.add(listener);
    }

    /** A run's sandbox is running its program: tells the listeners (a failing listener never fails the run). */
    void sandboxStarted(String language, boolean warm, Duration elapsed) {
        for (StartListener l : startListeners) {
            try {
                l.started(language, warm, elapsed);
            } catch (RuntimeException e) {
                log.warn("start listener {} failed: {}", l.getClass().getSimpleName(), e.toString());
            }
        }
    }

    @Override
    public int running() {
        return running.get();
    }

    @Override
    public int queued() {
        return queued.get();
    }

    @Override
    public int maxConcurrent() {
        return maxConcurrent;
    }

    /**
     * Queued runs are cancelled at once (they have not started); running runs get SHUTDOWN_GRACE_SECONDS to end,
     * then are cancelled, which kills their process trees; returns when every run has cleaned up.
     */
    @Override
    public void close() {
        if (!closing.compareAndSet(false, true)) return;
        startupProcesses.stopAll();
        warmPool.ifPresent(WarmPool::close);
        List<LocalRun> all = new ArrayList<>(runs);
        all.stream().filter(LocalRun::isQueued).forEach(LocalRun::cancel);
        long graceEnd = System.nanoTime() + TimeUnit.SECONDS.toNanos(config.get(Config.SHUTDOWN_GRACE_SECONDS));
        for (LocalRun r : all) {
            long left = graceEnd - System.nanoTime();
            if (left <= 0) break;
            try {
                r.result().get(left, TimeUnit.NANOSECONDS);
            } catch (TimeoutException | java.util.concurrent.ExecutionException | java.util.concurrent.CancellationException e) {
                // Either it ended with a refusal or the grace is over: both are handled below.
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                break;
            }
        }
        List<LocalRun> left = new ArrayList<>(runs);
        if (!left.isEmpty()) log.info("shutdown: cancelling {} runs still going after the grace period", left.size());
        left.forEach(LocalRun::cancel);
        sessions.closeAll();
        sandboxThreads.shutdown();
        try {
            if (!sandboxThreads.awaitTermination(30, TimeUnit.SECONDS))
                log.warn("shutdown: runs did not clean up within 30 s");
            // The stopped warm-ups delete their temporary directories on the way out.
            awaitWarmups(Duration.ofSeconds(10));
            GoCacheWarmer.deleteTree(scratchDir);
            sandbox.close();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
