package dev.codeexec.warm;

import dev.codeexec.config.Ids;
import dev.codeexec.lang.Language;
import dev.codeexec.lang.Placeholders;
import dev.codeexec.run.EgressStart;
import dev.codeexec.run.PackageInstalls;
import dev.codeexec.sandbox.Limits;
import dev.codeexec.sandbox.ControlChannel;
import dev.codeexec.sandbox.Sandbox;
import dev.codeexec.sandbox.SandboxException;
import dev.codeexec.sandbox.SandboxProcess;
import dev.codeexec.codemode.CodeTools;
import dev.codeexec.egress.EgressChannels;
import dev.codeexec.egress.EgressPolicy;
import dev.codeexec.sandbox.SandboxSpec;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.Deque;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Function;

/**
 * Pre-started single-use sandboxes (WARM_POOL), each with its interpreter already running and waiting for its
 * code on the control channel (docs/interpreter-protocol.md). A run takes one, sends its code and is then served
 * exactly like a cold run; the sandbox is never reused, and a replacement starts in the background.
 *
 * <p>Decisions:
 * <ul>
 * <li>Workspace-agnostic, bound late: a warm sandbox's working directory is an empty mount point; when a run
 * takes it, the server mounts a fresh tmpfs (stateless run) or the run's workspace on it, and the interpreter
 * changes into it again. So one pool serves every tenant and workspace, and nothing of one run can be seen by
 * another (single use; no fork()-based zygote, whose children would share random seeds and memory state).</li>
 * <li>Same limits as a cold run: the cgroup (memory, processes) is made and joined when the sandbox starts;
 * once the interpreter is ready its CPU budget restarts at the run's limit (it started with room for its
 * preload; waiting costs it nothing), at hand-out its file-size cap becomes the run's (the space left in a
 * workspace); the run's timeout starts when the code is sent. A sandbox whose control channel is its stdin and
 * stdout (gVisor, {@link Sandbox#controlOverStdio()}) is the exception: its limit holds the whole sandbox from
 * the start, as a cold gVisor run's does, it gets no preload, and its working directory is its own (stateless
 * runs only).</li>
 * <li>Only requests the pool can serve exactly take from it: a pooled language, no extra environment variables
 * (they must exist when the interpreter starts), the server's default memory/CPU/process limits. Everything else,
 * and any request that finds the pool empty, runs cold: the pool never makes a run fail or wait.</li>
 * <li>Bounded: at most WARM_POOL sandboxes idle per language, each inside its run's memory limit; one sandbox is
 * started at a time (the refill's CPU is one interpreter start, the same work a cold run would have done).</li>
 * </ul>
 */
public final class WarmPool implements AutoCloseable {

    private static final Logger log = LoggerFactory.getLogger(WarmPool.class);
    /** CPU seconds an interpreter may spend before its code arrives (start-up and preload). */
    static final int PRELOAD_CPU_SECONDS = 30;
    /** How long a sandbox may take to say it is ready (a heavy preload on a busy machine). */
    static final Duration READY_TIMEOUT = Duration.ofSeconds(60);
    private static final Duration MAX_BACKOFF = Duration.ofSeconds(30);
    /**
     * How long a sandbox over stdio (gVisor) waits before it is replaced: its CPU limit counts from its start and
     * gVisor's kernel spends a little while idle (~0.25 ms/s measured here), which would come off the run's budget
     * and, over a day or so, reach it. Ten minutes cost a run ~0.15 s at most; the replacement ~0.2 s of CPU.
     */
    public static final Duration STDIO_MAX_IDLE = Duration.ofMinutes(10);

    /** The run message of a sandbox whose init waits for its command (any language without a warm interpreter). */
    static final String EXEC = "exec";

    /**
     * How one language's warm interpreter is started.
     *
     * @param command the interpreter's argv; empty for {@link #EXEC}: the sandbox's init waits for the command
     * @param message the run message's form: {@code lengths} or {@code json} (languages.json's {@code warm.message}),
     *                or {@link #EXEC}: the run's whole command, which the init starts as a cold run's would be
     */
    public record Recipe(String language, List<String> command, Map<String, String> env, List<Path> readOnlyDirs,
            String message) {
        /** A sandbox whose init waits for the run's whole command: no interpreter of its own. */
        boolean waits() {
            return message.equals(EXEC);
        }
    }

    private final Sandbox sandbox;
    private final Map<String, Integer> targets;
    private final Map<String, Recipe> recipes;
    private final Limits limits;
    private final boolean lateWorkDir;
    private final Map<String, Deque<SandboxProcess>> ready = new LinkedHashMap<>();
    /** When each ready sandbox became ready (System.nanoTime), for {@link #retireIdle}. */
    private final Map<SandboxProcess, Long> readySince = new java.util.concurrent.ConcurrentHashMap<>();
    private volatile Duration maxIdle = STDIO_MAX_IDLE;
    /** The sandbox's control channel is the program's stdin and stdout ({@link Sandbox#controlOverStdio()}). */
    private final boolean stdio;
    /**
     * With egress on: every pooled sandbox starts with a channel to the egress proxy (serving nothing until a job
     * arms it with its policy), its socket bound in and the proxy's variables in its environment, so that a run with
     * network access can take a warm sandbox too. A run without network gets one armed with no policy: what it
     * tries is refused with "this run has no network access".
     */
    private final Optional<EgressChannels> egress;
    /** With code tools: every pooled sandbox also gets a library, written when a job arrives for its tenant. */
    private final Optional<CodeTools> codeTools;
    private final Map<SandboxProcess, EgressStart.Started> links = new ConcurrentHashMap<>();
    /** Language → the path inside its sandboxes where a run's packages are mounted at hand-out. */
    private final Map<String, String> packageMounts;
    private final Map<String, Stats> stats = new LinkedHashMap<>();
    private final Thread refiller;
    private volatile boolean closed;
    private String starting;

    private static final class Stats {
        final AtomicLong served = new AtomicLong();
        final AtomicLong missed = new AtomicLong();
        final AtomicLong started = new AtomicLong();
        final AtomicLong failed = new AtomicLong();
        volatile String lastError;
        volatile long backoffUntil;
        volatile long backoffMs;
        volatile double lastStartMs;
    }

    /**
     * @param limits      the limits every pooled sandbox gets: the server's defaults (timeout is irrelevant here)
     * @param lateWorkDir whether working directories can be mounted after start; without, the pool serves only
     *                    stateless runs (its sandboxes get bwrap's own tmpfs at start)
     */
    public WarmPool(Sandbox sandbox, Map<String, Integer> targets, Map<String, Recipe> recipes, Limits limits, boolean lateWorkDir) {
        this(sandbox, targets, recipes, limits, lateWorkDir, Optional.empty(), Optional.empty());
    }

    /**
     * @param egress    the channels, when egress is on or the server has code tools: each pooled sandbox gets one
     * @param codeTools code mode, when configured: each pooled sandbox gets a tool library
     */
    public WarmPool(Sandbox sandbox, Map<String, Integer> targets, Map<String, Recipe> recipes, Limits limits, boolean lateWorkDir,
            Optional<EgressChannels> egress, Optional<CodeTools> codeTools) {
        this(sandbox, targets, recipes, limits, lateWorkDir, egress, codeTools, Map.of());
    }

    /**
     * @param packageMounts language → where its sandboxes get a run's declared packages mounted at hand-out
     *                      ({@link PackageInstalls#warmMount}); a language without one serves no run with packages
     */
    public WarmPool(Sandbox sandbox, Map<String, Integer> targets, Map<String, Recipe> recipes, Limits limits, boolean lateWorkDir,
            Optional<EgressChannels> egress, Optional<CodeTools> codeTools, Map<String, String> packageMounts) {
        this.packageMounts = lateWorkDir ? Map.copyOf(packageMounts) : Map.of();
        this.egress = egress;
        this.codeTools = codeTools;
        this.sandbox = sandbox;
        this.targets = Map.copyOf(targets);
        this.recipes = Map.copyOf(recipes);
        this.limits = limits;
        this.lateWorkDir = lateWorkDir;
        this.stdio = sandbox.controlOverStdio();
        for (String lang : targets.keySet()) {
            ready.put(lang, new ArrayDeque<>());
            stats.put(lang, new Stats());
        }
        this.refiller = Thread.ofVirtual().name("warm-pool-refill").start(this::refillLoop);
    }

    /**
     * A ready sandbox for this request, or empty (run it cold). The caller owns the process from here: it must
     * close it on every path.
     */
    public Optional<SandboxProcess> take(String language, Limits runLimits, Map<String, String> env, boolean inWorkspace) {
        return take(language, runLimits, env, inWorkspace, false);
    }

    /**
     * @param network the run needs a channel (network access, code tools): only a pooled sandbox with one serves it
     *                (the caller takes the channel and library with {@link #linkOf})
     */
    public Optional<SandboxProcess> take(String language, Limits runLimits, Map<String, String> env, boolean inWorkspace,
            boolean network) {
        return take(language, runLimits, env, inWorkspace, network, false);
    }

    /** @param packages the run declared packages: only a sandbox that can mount them later serves it */
    public Optional<SandboxProcess> take(String language, Limits runLimits, Map<String, String> env, boolean inWorkspace,
            boolean network, boolean packages) {
        Deque<SandboxProcess> q = ready.get(language);
        if (q == null || closed || (network && egress.isEmpty())) return Optional.empty();
        if (packages && !packageMounts.containsKey(language)) return Optional.empty();
        // A waiting sandbox has the egress channel's proxy variables from its start; a run without network gets
        // none cold, and a shell's tools tell "no network" (curl: connection refused, exit 7) from a proxy that
        // refuses (HTTP 403, exit 0): such runs of those languages go cold. The interpreters' runs keep the pool.
        if (!network && egress.isPresent() && recipes.get(language).waits()) return Optional.empty();
        if (!env.isEmpty() || (inWorkspace && !lateWorkDir) || !sameSandboxLimits(runLimits, inWorkspace))
            return Optional.empty();
        while (true) {
            SandboxProcess p;
            synchronized (this) {
                p = q.pollFirst();
                if (p != null) readySince.remove(p);
                notifyAll(); // the refiller replaces it
            }
            if (p == null) {
                stats.get(language).missed.incrementAndGet();
                return Optional.empty();
            }
            if (alive(p)) {
                stats.get(language).served.incrementAndGet();
                return Optional.of(p);
            }
            discard(p); // died while waiting (killed from outside, say): try the next one
        }
    }

    /** Memory, processes and CPU as the pooled sandboxes have them; disk too for stateless runs. */
    private boolean sameSandboxLimits(Limits r, boolean inWorkspace) {
        return r.memoryBytes() == limits.memoryBytes() && r.maxProcesses() == limits.maxProcesses()
                && r.cpuSeconds() == limits.cpuSeconds()
                && (inWorkspace ? r.diskBytes() <= limits.diskBytes() : r.diskBytes() == limits.diskBytes());
    }

    /**
     * Gives the taken sandbox its run: working directory (a fresh tmpfs, or the workspace), the run's own CPU and
     * file-size limits, then the code. After this the sandbox is a running program like a cold one.
     *
     * @param command  the run's whole command as a cold run would start it (the args included): what an
     *                 {@link #EXEC} sandbox starts; unused by warm interpreters
     * @param packages the host directory of the run's declared packages (what {@link PackageInstalls#warmSource}
     *                 names), mounted read-only at the language's package mount before the code arrives
     * @param js       the JavaScript made of a TypeScript run's code ahead ({@link TypeScriptStrippers}), which the warm
     *                 runner runs instead of stripping the code itself; in the JSON run message only
     */
    public void handOut(String language, SandboxProcess p, Optional<Path> workspace, Limits runLimits, String file,
            String code, List<String> args, List<String> command, Optional<Path> packages, Optional<String> js)
            throws SandboxException {
        if (packages.isPresent()) p.mountReadOnly(packages.get());
        if (lateWorkDir) {
            p.mountWorkDir(workspace, runLimits.diskBytes());
            // the code file where a cold run has it (programs read __file__); removed after a workspace run
            p.writeWorkFile(Path.of(file).getFileName().toString(), code.getBytes(StandardCharsets.UTF_8));
        }
        // the CPU budget was reset when the sandbox became ready (an idle interpreter spends none; over stdio it
        // was the run's from the start); the file-size cap of a stateless run is the launch's, a workspace run's is
        // the space left under its quota
        if (workspace.isPresent()) p.limitProgramFileSize(runLimits.diskBytes());
        ControlChannel c = p.control().orElseThrow(() -> new SandboxException("a warm sandbox without control channel"));
        try {
            String form = recipes.get(language).message();
            if (form.equals(EXEC)) {
                if (command.isEmpty()) throw new SandboxException("no command for a sandbox that waits for one");
                c.send(runMessage(EXEC, file, code, command));
            } else if (form.equals("lengths")) {
                c.send(runMessage(packages.isPresent() ? "runp" : "run", file, code, args));
            } else {
                Map<String, Object> msg = new LinkedHashMap<>();
                msg.put("code", code);
                msg.put("file", file);
                msg.put("args", args);
                js.ifPresent(j -> msg.put("js", j));
                c.send(tools.jackson.databind.json.JsonMapper.shared().writeValueAsString(msg));
            }
        } catch (IOException e) {
            throw new SandboxException("the warm sandbox did not take its code: " + e.getMessage(), e);
        } finally {
            c.closeInput();
        }
    }

    /**
     * The Python warm runner's run message, and every warm runner's over stdio (Node's is otherwise one line of
     * JSON): {@code run FILELEN CODELEN ARGLEN...\n}, then the UTF-8 bytes of the file name,
     * the code (the same bytes as the code file) and each argument. Not JSON: the runner would have to import a
     * JSON parser in every run (docs/interpreter-protocol.md).
     */
    public static byte[] runMessage(String file, String code, List<String> args) {
        return runMessage("run", file, code, args);
    }

    /**
     * @param verb {@code run}, or {@code runp}: the run has declared packages (the runner puts them on sys.path);
     *             {@code exec}: {@code args} is the whole command for the sandbox's init to start
     */
    public static byte[] runMessage(String verb, String file, String code, List<String> args) {
        List<byte[]> parts = new java.util.ArrayList<>();
        parts.add(file.getBytes(StandardCharsets.UTF_8));
        parts.add(code.getBytes(StandardCharsets.UTF_8));
        for (String a : args) parts.add(a.getBytes(StandardCharsets.UTF_8));
        StringBuilder header = new StringBuilder(verb);
        for (byte[] b : parts) header.append(' ').append(b.length);
        java.io.ByteArrayOutputStream out = new java.io.ByteArrayOutputStream();
        out.writeBytes(header.append('\n').toString().getBytes(StandardCharsets.US_ASCII));
        parts.forEach(out::writeBytes);
        return out.toByteArray();
    }

    public boolean lateWorkDir() {
        return lateWorkDir;
    }

    private static boolean alive(SandboxProcess p) {
        try {
            return !p.waitFor(Duration.ZERO);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return false;
        }
    }

    private void refillLoop() {
        while (!closed) {
            if (stdio) retireIdle();
            String lang = nextToStart();
            if (lang == null) continue;
            Stats s = stats.get(lang);
            long t0 = System.nanoTime();
            try {
                SandboxProcess p = start(recipes.get(lang));
                s.started.incrementAndGet();
                s.lastStartMs = (System.nanoTime() - t0) / 1e6;
                s.backoffMs = 0;
                s.lastError = null;
                synchronized (this) {
                    starting = null;
                    if (closed) discard(p);
                    else {
                        readySince.put(p, System.nanoTime());
                        ready.get(lang).addLast(p);
                    }
                    notifyAll();
                }
            } catch (SandboxException | RuntimeException e) {
                s.failed.incrementAndGet();
                s.lastError = e.getMessage();
                s.backoffMs = Math.min(MAX_BACKOFF.toMillis(), Math.max(1000, s.backoffMs * 2));
                s.backoffUntil = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(s.backoffMs);
                log.warn("warm {} sandbox failed to start (retrying in {} ms): {}", lang, s.backoffMs, e.getMessage());
                synchronized (this) {
                    starting = null;
                }
            }
        }
    }

    /** Blocks until some language is below its target (and not backing off); null when woken for nothing. */
    private synchronized String nextToStart() {
        long wait = 1000;
        for (Map.Entry<String, Integer> t : targets.entrySet()) {
            Stats s = stats.get(t.getKey());
            if (ready.get(t.getKey()).size() >= t.getValue()) continue;
            long left = s.backoffUntil - System.nanoTime();
            if (left > 0) {
                wait = Math.min(wait, Math.max(1, TimeUnit.NANOSECONDS.toMillis(left)));
                continue;
            }
            starting = t.getKey();
            return starting;
        }
        try {
            wait(wait);
        } catch (InterruptedException e) {
            closed = true;
        }
        return null;
    }

    /**
     * Discards the ready sandboxes that waited longer than {@link #maxIdle} (over stdio only: see
     * {@link #STDIO_MAX_IDLE}); the refill replaces them.
     */
    private void retireIdle() {
        long limit = maxIdle.toNanos();
        long now = System.nanoTime();
        List<SandboxProcess> old = new java.util.ArrayList<>();
        synchronized (this) {
            for (Deque<SandboxProcess> q : ready.values()) {
                q.removeIf(p -> {
                    Long since = readySince.get(p);
                    boolean stale = since != null && now - since > limit;
                    if (stale) {
                        old.add(p);
                        readySince.remove(p);
                    }
                    return stale;
                });
            }
        }
        old.forEach(this::discard);
    }

    /** Tests: a shorter wait before a sandbox over stdio is replaced. */
    public void retireIdleAfter(Duration d) {
        maxIdle = d;
        synchronized (this) {
            notifyAll();
        }
    }

    /** The channel and library of a sandbox {@link #take}n from the pool, if it has them; the caller closes them. */
    public Optional<EgressStart.Started> linkOf(SandboxProcess p) {
        return Optional.ofNullable(links.remove(p));
    }

    private void discard(SandboxProcess p) {
        readySince.remove(p);
        p.close();
        EgressStart.Started link = links.remove(p);
        if (link != null) link.closeLink();
    }

    private SandboxProcess start(Recipe r) throws SandboxException {
        // Over stdio (gVisor) the CPU limit holds the whole sandbox (gVisor's kernel included) from its start, as it
        // does for a cold run there, and cannot be moved later: no start-up allowance.
        Limits launch = new Limits(limits.timeout(), limits.cpuSeconds() + (stdio ? 0 : PRELOAD_CPU_SECONDS),
                limits.memoryBytes(), limits.maxProcesses(), limits.outputBytes(), limits.diskBytes());
        String runId = "warm-" + r.language() + "-" + Ids.hex(6);
        SandboxSpec spec = SandboxSpec.builder(runId, r.command(), Placeholders.WORK_DIR, launch)
                .readOnlyDirs(r.readOnlyDirs()).env(r.env()).control(true).lateWorkDir(lateWorkDir).build();
        String packageMount = packageMounts.get(r.language());
        if (packageMount != null) spec = spec.withLateReadOnlyDir(packageMount);
        // with a channel, every pooled sandbox gets one serving nothing until a job arms it
        EgressStart.Started started = EgressStart.start(sandbox, spec, egress.orElse(null), EgressPolicy.OFF, null,
                codeTools.orElse(null), null);
        SandboxProcess p = started.process();
        if (started.channel() != null) links.put(p, started);
        try {
            ControlChannel c = p.control().orElseThrow();
            CompletableFuture<String> line = CompletableFuture.supplyAsync(() -> {
                try {
                    return c.receive();
                } catch (IOException e) {
                    return null;
                }
            }, task -> Thread.ofVirtual().name("warm-ready").start(task));
            String msg;
            try {
                msg = line.get(READY_TIMEOUT.toMillis(), TimeUnit.MILLISECONDS);
            } catch (TimeoutException e) {
                throw new SandboxException("the interpreter was not ready within " + READY_TIMEOUT.toSeconds() + " s");
            } catch (java.util.concurrent.ExecutionException e) {
                throw new SandboxException("the interpreter did not start: " + e.getCause());
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new SandboxException("interrupted");
            }
            if (msg == null || !msg.replace(" ", "").equals("{\"ready\":true}"))
                throw new SandboxException("the interpreter ended before it was ready" + exitNote(p));
            // Off the request path: from here on the interpreter has the CPU budget of a cold run (it spends
            // none while it waits), the start-up and preload allowance is gone.
            if (r.waits()) p.limitCommandCpu(limits.cpuSeconds());
            else if (!stdio) p.limitProgramCpu(limits.cpuSeconds());
            return p;
        } catch (SandboxException | RuntimeException e) {
            discard(p);
            throw e;
        }
    }

    private static String exitNote(SandboxProcess p) {
        try {
            return p.waitFor(Duration.ofMillis(200)) ? " (exit code " + p.exitCode() + ")" : "";
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return "";
        }
    }

    /** Levels and counters per language, for runtime_info and /healthz. */
    public synchronized Map<String, Object> info() {
        Map<String, Object> m = new LinkedHashMap<>();
        for (Map.Entry<String, Integer> t : targets.entrySet()) {
            Stats s = stats.get(t.getKey());
            Map<String, Object> l = new LinkedHashMap<>();
            l.put("target", t.getValue());
            l.put("ready", ready.get(t.getKey()).size());
            l.put("starting", t.getKey().equals(starting) ? 1 : 0);
            l.put("served", s.served.get());
            l.put("missed", s.missed.get());
            l.put("started", s.started.get());
            l.put("failed", s.failed.get());
            l.put("servesPackages", packageMounts.containsKey(t.getKey()));
            l.put("kind", recipes.get(t.getKey()).waits() ? "waiting sandbox" : "interpreter");
            // what the idle sandboxes hold now (their cgroups' memory.current), where it can be measured
            long memory = 0;
            boolean measured = false;
            for (SandboxProcess p : ready.get(t.getKey())) {
                java.util.OptionalLong used = p.memoryBytes();
                if (used.isPresent()) {
                    memory += used.getAsLong();
                    measured = true;
                }
            }
            if (measured) l.put("idleMemoryBytes", memory);
            if (s.lastStartMs > 0) l.put("lastStartMs", Math.round(s.lastStartMs * 10) / 10.0);
            if (s.lastError != null) l.put("lastError", s.lastError);
            m.put(t.getKey(), l);
        }
        return m;
    }

    /** Ready and target per language (/healthz, metrics). */
    public synchronized Map<String, Map<String, Integer>> levels() {
        Map<String, Map<String, Integer>> m = new LinkedHashMap<>();
        targets.forEach((lang, target) -> m.put(lang, Map.of("ready", ready.get(lang).size(), "target", target)));
        return m;
    }

    /** Blocks until every language is at its target or the time is up (tests, benchmarks). */
    public boolean awaitFull(Duration max) throws InterruptedException {
        long end = System.nanoTime() + max.toNanos();
        synchronized (this) {
            while (true) {
                boolean full = targets.entrySet().stream().allMatch(t -> ready.get(t.getKey()).size() >= t.getValue());
                if (full) return true;
                long left = TimeUnit.NANOSECONDS.toMillis(end - System.nanoTime());
                if (left <= 0) return false;
                wait(Math.min(left, 100));
            }
        }
    }

    @Override
    public void close() {
        List<SandboxProcess> all;
        synchronized (this) {
            closed = true;
            notifyAll();
            all = ready.values().stream().flatMap(Deque::stream).toList();
            ready.values().forEach(Deque::clear);
        }
        all.forEach(this::discard);
        try {
            refiller.join(Duration.ofSeconds(70));
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    /**
     * The recipes for the languages of WARM_POOL that can be kept warm here.
     *
     * @param awaitCommands whether the sandbox can wait for its command ({@link Sandbox#awaitsCommands()}): then a
     *                      language without a warm interpreter gets an {@link #EXEC} recipe — a sandbox set up
     *                      with the language's environment and read-only directories, its init waiting
     * @param stdio the sandbox's control channel is the program's stdin and stdout ({@link Sandbox#controlOverStdio()}):
     *              only warm interpreters that can speak over them (their row's {@code warm.stdio}) get a recipe,
     *              started with those arguments added
     */
    public static Map<String, Recipe> recipes(Map<String, Integer> targets, Function<String, Optional<Language>> languages,
            Map<String, String> placeholders, List<String> pythonPreload, boolean awaitCommands, boolean stdio) {
        String runtime = placeholders.get("runtimeDir");
        Map<String, Recipe> out = new LinkedHashMap<>();
        for (String id : targets.keySet()) {
            Optional<Language> lang = languages.apply(id);
            if (lang.isEmpty()) continue;
            if (lang.get().warm().isEmpty()) {
                if (awaitCommands && !stdio) out.put(id, execRecipe(lang.get(), placeholders));
                continue;
            }
            Language.Interpreter warm = lang.get().warm().get();
            if (stdio && warm.stdio().isEmpty()) continue;
            Map<String, String> env = new LinkedHashMap<>(lang.get().environment(Map.of(), placeholders));
            warm.env().forEach((k, v) -> env.put(k, Placeholders.fill(v, placeholders)));
            // No preload over stdio (gVisor): the sandbox's CPU limit cannot be reset after it, so the imports would
            // spend the run's own budget, and a preload dearer than the budget would kill every refill.
            if (!warm.preload().isEmpty() && !pythonPreload.isEmpty() && !stdio)
                env.put(warm.preload(), String.join(",", pythonPreload));
            List<String> argv = new java.util.ArrayList<>(Placeholders.fill(warm.argv(), placeholders));
            if (stdio) argv.addAll(Placeholders.fill(warm.stdio(), placeholders));
            // over stdio the user's input follows the message on the same pipe: only a length-prefixed message lets
            // the runner take exactly its own bytes
            out.put(id, new Recipe(id, List.copyOf(argv), env, List.of(Path.of(runtime)),
                    stdio ? "lengths" : warm.message()));
        }
        return out;
    }

    /** A waiting sandbox with what a cold run of the language gets at start: its environment and directories. */
    private static Recipe execRecipe(Language lang, Map<String, String> placeholders) {
        List<Path> dirs = new java.util.ArrayList<>();
        for (String b : lang.binds()) {
            Path p = Path.of(Placeholders.fill(b, placeholders));
            if (java.nio.file.Files.isDirectory(p) && !dirs.contains(p)) dirs.add(p);
        }
        return new Recipe(lang.id(), List.of(), lang.environment(Map.of(), placeholders), List.copyOf(dirs), EXEC);
    }
}
