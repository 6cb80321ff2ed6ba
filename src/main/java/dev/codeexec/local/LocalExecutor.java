package dev.codeexec.local;

import dev.codeexec.codemode.CodeTools;
import dev.codeexec.config.Config;
import dev.codeexec.config.ConfigException;
import dev.codeexec.config.DataDir;
import dev.codeexec.egress.EgressChannels;
import dev.codeexec.egress.EgressSecrets;
import dev.codeexec.egress.InterceptCa;
import dev.codeexec.egress.Interception;
import dev.codeexec.egress.EgressSettings;
import dev.codeexec.engine.ExecutionException;
import dev.codeexec.engine.ExecutionRequest;
import dev.codeexec.engine.ExecutionResult;
import dev.codeexec.engine.Executor;
import dev.codeexec.engine.ExecutorStatus;
import dev.codeexec.engine.OutputListener;
import dev.codeexec.engine.RequestValidator;
import dev.codeexec.engine.RunHandle;
import dev.codeexec.engine.SessionControl;
import dev.codeexec.lang.Language;
import dev.codeexec.lang.Languages;
import dev.codeexec.lang.Placeholders;
import dev.codeexec.run.PackageInstalls;
import dev.codeexec.sandbox.Sandbox;
import dev.codeexec.session.SessionCall;
import dev.codeexec.session.Sessions;
import dev.codeexec.warm.GoCacheWarmer;
import dev.codeexec.warm.StartupWork;
import dev.codeexec.warm.TypeScriptStrippers;
import dev.codeexec.warm.WarmPool;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.io.IOException;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
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
 * <p>What it does to DATA_DIR at start is {@link StartupWork}'s; what runtime_info says, {@link RuntimeInfo}'s. None
 * of the start-time work delays a request, but a Go run that arrives before the Go build cache is warm waits for it.
 */
public final class LocalExecutor implements Executor, ExecutorStatus {

    private static final Logger log = LoggerFactory.getLogger(LocalExecutor.class);

    final Config config;
    final Sandbox sandbox;
    final Languages languages;
    final Path stagingDir;
    /** DATA_DIR/previews: background jobs' and sessions' preview directories. */
    final Path previewRoot;
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
    /** Background jobs' runs: MAX_JOBS at once (the job manager queues them), each on a platform thread of its own. */
    private final Semaphore jobSlots;
    private final int maxJobs;
    private final ExecutorService jobThreads;
    private final StartupWork startup;
    private final RuntimeInfo info;
    final Sessions sessions;
    /** How long streamed output is gathered into one progress notification (PROGRESS_INTERVAL_MS). */
    final Duration progressInterval;
    /** TypeScript made JavaScript ahead of its runs, one stripper per tenant (bwrap only). */
    final Optional<TypeScriptStrippers> typescript;
    /** Pre-started sandboxes (WARM_POOL), when configured and the sandbox supports them. */
    final Optional<WarmPool> warmPool;
    /** The sandboxes' channels, when EGRESS=on or the server has code tools. */
    final Optional<EgressChannels> egress;
    /** Code mode (UPSTREAM_MCP_FILE), when configured: every run gets the tool library and endpoint. */
    final Optional<CodeTools> codeTools;
    /** Declared packages (PACKAGES=on with bwrap): the store and its installs. */
    final Optional<PackageInstalls> packages;
    /** Why runs cannot declare packages here, when they cannot. */
    private final Optional<String> packagesUnavailable;
    private final List<StartListener> startListeners = new CopyOnWriteArrayList<>();

    /** The executor for a configuration and sandbox, with the languages table shipped in the jar. */
    public static LocalExecutor create(Config config, Sandbox sandbox) {
        return create(config, sandbox, Languages.load(), Optional.empty());
    }

    /**
     * The same with the languages table the caller has already read, and code mode's upstreams (CodeTools.of; the
     * server shares them with list_code_tools).
     */
    public static LocalExecutor create(Config config, Sandbox sandbox, Languages languages, Optional<CodeTools> codeTools) {
        return new LocalExecutor(config, sandbox, languages, codeTools);
    }

    LocalExecutor(Config config, Sandbox sandbox, Languages languages) {
        this(config, sandbox, languages, Optional.empty());
    }

    LocalExecutor(Config config, Sandbox sandbox, Languages languages, Optional<CodeTools> codeTools) {
        this.codeTools = codeTools;
        this.config = config;
        this.sandbox = sandbox;
        this.languages = languages;
        this.maxConcurrent = config.get(Config.MAX_CONCURRENT);
        this.queueSize = config.get(Config.QUEUE_SIZE);
        this.queueTimeoutMs = config.get(Config.QUEUE_TIMEOUT_MS);
        this.slots = new Semaphore(maxConcurrent, true);
        ThreadFactory platform = Thread.ofPlatform().name("exec-sandbox-", 0).daemon(true).factory();
        this.sandboxThreads = Executors.newFixedThreadPool(maxConcurrent, platform);
        this.maxJobs = config.get(Config.MAX_JOBS);
        this.jobSlots = new Semaphore(maxJobs);
        // as long-lived as the sandbox threads, for the same reason (--die-with-parent follows the forking thread)
        this.jobThreads = Executors.newFixedThreadPool(Math.max(1, maxJobs),
                Thread.ofPlatform().name("exec-job-", 0).daemon(true).factory());

        DataDir data = DataDir.of(config);
        this.stagingDir = data.staging();
        this.previewRoot = data.previews();
        this.placeholders = Placeholders.ofServer(data);
        this.startup = StartupWork.start(data, languages, placeholders, config.get(Config.MEMORY_LIMIT_MB),
                virtualThreads);
        this.progressInterval = Duration.ofMillis(config.get(Config.PROGRESS_INTERVAL_MS));
        this.egress = egressChannels(config, data, codeTools.isPresent());
        // installs need a channel even where runs get none (EGRESS=off, no code tools): then one for them only, so
        // that runs' sandboxes stay without any (no socket, no proxy variables)
        boolean wantsPackages = config.get(Config.PACKAGES).equals("on") && sandbox.name().equals("bwrap");
        Optional<EgressChannels> installChannels = egress.isPresent() || !wantsPackages ? egress
                : installChannels(config, data);
        this.packagesUnavailable = PackageInstalls.unavailable(config, sandbox, installChannels);
        this.packages = PackageInstalls.create(config, sandbox, data, installChannels);
        this.sessions = new Sessions(sandbox, placeholders, virtualThreads, config.get(Config.MAX_SESSIONS),
                Duration.ofSeconds(config.get(Config.SESSION_IDLE_SECONDS)), (long) config.get(Config.SESSIONS_MEMORY_MB) << 20,
                languages.all().stream().filter(l -> l.session().isPresent()).map(Language::id).toList(),
                progressInterval, egress, codeTools, packages);
        sessions.previewsIn(previewRoot);
        this.typescript = TypeScriptStrippers.create(sandbox, languages.find("typescript"), placeholders,
                RequestValidator.defaultLimits(config, Duration.ofMillis(config.get(Config.DEFAULT_TIMEOUT_MS))));
        PoolChoice pool = warmPool(config, sandbox, languages, placeholders, egress, codeTools, packages.isPresent());
        this.warmPool = pool.pool();
        this.info = new RuntimeInfo(config, sandbox, languages, placeholders, virtualThreads, startup, sessions,
                warmPool, pool.whyNone(), typescript.isPresent());
        info.warnAboutMissing(log);

        sandbox.unavailableReason().ifPresentOrElse(
                r -> log.error("sandbox '{}' cannot run code: {}; every run will be refused", sandbox.name(), r),
                () -> log.info("executor ready: sandbox {}, {} runs at once, queue {}", sandbox.name(), maxConcurrent,
                        queueSize));
    }

    /** A warm pool, or why there is none. */
    private record PoolChoice(Optional<WarmPool> pool, String whyNone) {
    }

    /** The egress proxy's channels when EGRESS=on; a bad egress setting stops the start. */
    private static Optional<EgressChannels> egressChannels(Config config, DataDir data, boolean codeTools) {
        try {
            EgressSettings settings = EgressSettings.of(config);
            EgressSecrets secrets = EgressSecrets.of(config);
            Interception interception = null;
            if (!secrets.isEmpty() && settings.enabled()) {
                InterceptCa ca = data.locked("secrets-ca", () -> InterceptCa.loadOrCreate(data.prepareSecretsCa()));
                String upstreamCa = config.get(Config.EGRESS_UPSTREAM_CA_FILE);
                interception = Interception.of(ca, upstreamCa.isBlank() ? Optional.empty() : Optional.of(Path.of(upstreamCa)));
            }
            return EgressChannels.of(settings, data.egress(), data.runtime().resolve("codeexec_egress_node.js"), codeTools,
                    secrets, interception);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new ConfigException("interrupted while the egress secrets CA was prepared");
        } catch (IOException e) {
            throw new ConfigException("EGRESS=on, but the egress proxy cannot be prepared: " + e.getMessage());
        }
    }

    /**
     * Channels for installs alone (runs have none): a server that cannot prepare them still starts, and runs that
     * declare packages are refused with the reason (runtime_info shows it).
     */
    private static Optional<EgressChannels> installChannels(Config config, DataDir data) {
        try {
            return EgressChannels.of(EgressSettings.of(config), data.egress(),
                    data.runtime().resolve("codeexec_egress_node.js"), true);
        } catch (IOException e) {
            log.warn("declared packages are unavailable: the install's channel cannot be prepared: {}", e.toString());
            return Optional.empty();
        }
    }

    private static PoolChoice warmPool(Config config, Sandbox sandbox, Languages languages,
            Map<String, String> placeholders, Optional<EgressChannels> egress, Optional<CodeTools> codeTools,
            boolean packages) {
        Map<String, Integer> targets = new LinkedHashMap<>();
        // Every language of the table can be pooled: by a warm interpreter where it has one, else by a sandbox
        // whose init waits for the run's command (bwrap with codeexec-helper; elsewhere those are left out).
        config.get(Config.WARM_POOL).forEach((k, v) -> {
            Optional<Language> lang = languages.find(k);
            if (lang.isEmpty())
                throw new ConfigException("WARM_POOL: '" + k + "' is not a language; languages: "
                        + String.join(", ", languages.ids()));
            if (v > 0) targets.put(lang.get().id(), v);
        });
        String off = targets.isEmpty() ? "WARM_POOL is empty"
                : sandbox.unavailableReason().isPresent() ? "the sandbox is unavailable"
                : !sandbox.supportsControl() && !sandbox.controlOverStdio()
                        ? "the '" + sandbox.name() + "' sandbox cannot keep interpreters warm (bwrap can)"
                : null;
        if (off != null) return new PoolChoice(Optional.empty(), off);
        boolean stdio = sandbox.controlOverStdio();
        Map<String, WarmPool.Recipe> recipes = WarmPool.recipes(targets, languages::find, placeholders,
                config.get(Config.WARM_PRELOAD_PYTHON), sandbox.awaitsCommands(), stdio);
        if (!recipes.keySet().containsAll(targets.keySet()))
            log.warn("warm pool: {} cannot be kept warm here ({})", String.join(", ", targets.keySet().stream()
                    .filter(l -> !recipes.containsKey(l)).toList()), stdio
                    ? "the '" + sandbox.name() + "' sandbox keeps only interpreters that can take their run over stdin warm"
                    : "no warm interpreter, and the sandbox cannot wait for a command without codeexec-helper");
        // A sandbox over stdio (gVisor) takes no egress channel: its pooled sandboxes get none, and runs that need
        // one start cold, where that sandbox refuses them as before (without late working directories the pool
        // mounts no declared packages either).
        if (stdio) {
            egress = Optional.empty();
            codeTools = Optional.empty();
        }
        targets.keySet().retainAll(recipes.keySet());
        boolean late = sandbox.lateWorkDirUnavailable().isEmpty();
        sandbox.lateWorkDirUnavailable().ifPresent(r -> log.warn("warm pool serves stateless runs only: {}", r));
        return new PoolChoice(Optional.of(new WarmPool(sandbox, targets, recipes,
                RequestValidator.defaultLimits(config, Duration.ofMillis(config.get(Config.DEFAULT_TIMEOUT_MS))), late, egress,
                codeTools, packageMounts(targets.keySet(), packages, !config.get(Config.WARM_PRELOAD_PYTHON).isEmpty()))),
                null);
    }

    /** Language → where its warm sandboxes get a run's packages; none without declared packages. */
    private static Map<String, String> packageMounts(java.util.Collection<String> languages, boolean packages, boolean preload) {
        Map<String, String> m = new LinkedHashMap<>();
        if (packages) for (String l : languages) PackageInstalls.warmMount(l, preload).ifPresent(p -> m.put(l, p));
        return m;
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
        Optional<String> missing = info.notInstalled(lang.id());
        if (missing.isPresent()) throw new ExecutionException.InvalidRequest(missing.get());
        if (!request.egress().isOff() && (egress.isEmpty() || !egress.get().settings().enabled()))
            throw new ExecutionException.InvalidRequest("network access is off on this server (EGRESS=off); run without 'network'");
        if (request.packages().isPresent() && packages.isEmpty())
            throw new ExecutionException.InvalidRequest("'packages' cannot be used on this server: "
                    + packagesUnavailable.orElse("declared packages are unavailable") + "; run without 'packages'");
        OutputListener out = listener == null ? OutputListener.NONE : listener;
        SessionCall call = request.session().isPresent() ? sessions.prepare(request, lang, out) : null;
        LocalRun run = new LocalRun(this, request, lang, out, call);
        runs.add(run);
        run.result().whenComplete((r, e) -> runs.remove(run));
        if (lang.id().equals("go") && !startup.goWarmed().isDone()) virtualThreads.newThread(() -> waitForGoCache(run)).start();
        else enqueue(run);
        return run;
    }

    /**
     * A Go run that arrives while the shared build cache is being warmed waits, outside the queue and holding no
     * slot, until the warm-up has ended (see {@link GoCacheWarmer} on why); cancelling the run ends the wait.
     */
    private void waitForGoCache(LocalRun run) {
        try {
            run.scope.await(() -> {
                startup.hurryGo();
                return startup.goWarmed().get();
            });
        } catch (InterruptedException | java.util.concurrent.ExecutionException e) {
            // cancel() interrupts the wait; a warm-up that failed leaves the cache cold and the run goes on cold
        }
        if (run.scope.cancelled()) run.finishCancelledInQueue();
        else enqueue(run);
    }

    private void enqueue(LocalRun run) {
        if (run.background()) {
            startJob(run);
            return;
        }
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
        try {
            acquired = run.scope.await(() -> slots.tryAcquire(queueTimeoutMs, TimeUnit.MILLISECONDS));
        } catch (InterruptedException e) {
            // cancel() interrupts a waiting run; handled below.
        } finally {
            queued.decrementAndGet();
        }
        if (run.scope.cancelled()) {
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

    /**
     * A background job's run: it takes one of MAX_JOBS job slots at once, or is refused (the job manager in front
     * queues jobs; a gateway's may send more than this worker has room for), and never one of MAX_CONCURRENT's.
     */
    private void startJob(LocalRun run) {
        if (!jobSlots.tryAcquire()) {
            run.refuse(new ExecutionException.Busy("this server runs " + maxJobs + " background jobs at once (MAX_JOBS), "
                    + "and they are all running; try again later"));
            return;
        }
        run.markRunning();
        try {
            jobThreads.execute(() -> {
                ExecutionResult r = null;
                try {
                    r = run.execute();
                } finally {
                    jobSlots.release();
                    if (r != null) run.finish(r);
                    else run.refuse(new ExecutionException.Unavailable("the run failed inside the server"));
                }
            });
        } catch (RejectedExecutionException e) {
            jobSlots.release();
            run.refuse(new ExecutionException.Unavailable("the server is shutting down; no new runs are accepted"));
        }
    }

    @Override
    public Map<String, Object> runtimeInfo() {
        Map<String, Object> m = info.snapshot(running(), queued());
        Map<String, Object> p = new LinkedHashMap<>();
        p.put("available", packages.isPresent());
        packagesUnavailable.ifPresent(r -> p.put("reason", r));
        if (packages.isPresent()) {
            p.put("languages", List.of("python (pip requirements, wheels only)", "nodejs", "typescript (npm packages)"));
            p.put("indexPython", config.get(Config.PACKAGE_INDEX_PYTHON));
            p.put("registryNpm", config.get(Config.PACKAGE_REGISTRY_NPM));
            p.put("note", "declare what the code needs in execute_code's `packages`; a set is installed once, "
                    + "then reused by every run that declares it");
        }
        m.put("packages", p);
        return m;
    }

    /** Per language: target, ready, starting, served, missed (ran cold), ...; or why there is no pool. */
    public Map<String, Object> warmPoolInfo() {
        return info.warmPool();
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
        return startup.goCacheState();
    }

    /** Blocks until the start-time warm-ups (languages, then the Go build cache) have ended (tests, benchmarks). */
    void awaitWarmups(Duration max) throws InterruptedException {
        startup.await(max);
    }

    /** Blocks until the Go build cache warm-up has ended (tests, benchmarks). */
    void awaitGoCache(Duration max) throws InterruptedException {
        startup.awaitGoCache(max);
    }

    @Override
    public Optional<dev.codeexec.packages.PackageStore> packageStore() {
        return packages.map(PackageInstalls::store);
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

    /** This executor reports its own status. */
    @Override
    public ExecutorStatus status() {
        return this;
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
        startup.stop();
        warmPool.ifPresent(WarmPool::close);
        typescript.ifPresent(TypeScriptStrippers::close);
        List<LocalRun> all = new ArrayList<>(runs);
        // background jobs too: they cannot outlive the server whatever the grace (their manager records them lost)
        all.stream().filter(r -> r.isQueued() || r.background()).forEach(LocalRun::cancel);
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
        jobThreads.shutdown();
        try {
            if (!sandboxThreads.awaitTermination(30, TimeUnit.SECONDS) || !jobThreads.awaitTermination(5, TimeUnit.SECONDS))
                log.warn("shutdown: runs did not clean up within 30 s");
            startup.cleanUp();
            sandbox.close();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
