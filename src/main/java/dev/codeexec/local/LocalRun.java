package dev.codeexec.local;

import dev.codeexec.engine.ExecutionException;
import dev.codeexec.engine.ExecutionRequest;
import dev.codeexec.engine.ExecutionResult;
import dev.codeexec.engine.OutputListener;
import dev.codeexec.engine.RunHandle;
import dev.codeexec.lang.Language;
import dev.codeexec.lang.Placeholders;
import dev.codeexec.run.EgressStart;
import dev.codeexec.run.ListenerDispatcher;
import dev.codeexec.boot.LogContext;
import dev.codeexec.run.OutputCollector;
import dev.codeexec.run.PackageInstalls;
import dev.codeexec.engine.RunEnd;
import dev.codeexec.run.Waiter;
import dev.codeexec.run.WorkspaceDiff;
import dev.codeexec.session.SessionCall;
import dev.codeexec.warm.WarmPool;
import dev.codeexec.sandbox.WorkDirOwner;
import dev.codeexec.boot.LogValues;
import dev.codeexec.sandbox.Limits;
import dev.codeexec.sandbox.SandboxException;
import dev.codeexec.sandbox.SandboxProcess;
import dev.codeexec.codemode.CodeTools;
import dev.codeexec.codemode.CodeToolsRun;
import dev.codeexec.codemode.ToolCall;
import dev.codeexec.egress.EgressChannel;
import dev.codeexec.egress.EgressChannels;
import dev.codeexec.egress.NetworkReport;
import dev.codeexec.packages.PackageStore;
import dev.codeexec.sandbox.SandboxSpec;
import dev.codeexec.sandbox.Termination;
import dev.codeexec.workspace.RelPath;
import dev.codeexec.workspace.Workspace;
import dev.codeexec.workspace.WorkspaceException;
import dev.codeexec.workspace.Workspaces;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.io.IOException;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.security.SecureRandom;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;

/**
 * One run: QUEUED → RUNNING → FINISHED. The executor holds it in its queue and calls {@link #execute()} on a slot's
 * thread: a session call goes to its session ({@link SessionCall}); any other run picks its code file's name
 * ({@link #runInWorkspace} first scans its workspace, {@link WorkspaceDiff}), gets a sandbox ({@link #start}: a
 * warm one from the pool when it fits, else a cold start from a staged code file), then {@link #runInSandbox}
 * feeds stdin, drains stdout and stderr, waits with the wall timer and hands the facts of the end to
 * {@link RunEnd}. Cleanup is structural: the sandbox process is closed by try-with-resources and the staged file is
 * deleted in {@code finally}; the result future is completed on every path, and {@link #finish} writes the audit
 * line.
 */
final class LocalRun implements RunHandle {

    enum State { QUEUED, RUNNING, FINISHED }

    private static final Logger audit = LoggerFactory.getLogger("audit");
    private static final Logger log = LoggerFactory.getLogger(LocalRun.class);
    private static final SecureRandom RANDOM = new SecureRandom();
    /** How long readers may take to reach end of stream after the program ended before we kill the rest. */
    private static final Duration DRAIN_GRACE = Duration.ofSeconds(2);
    /** How long the result may wait for a slow listener to receive the last output. */
    private static final Duration LISTENER_GRACE = Duration.ofSeconds(2);

    private final LocalExecutor executor;
    private final ExecutionRequest request;
    private final Language language;
    private final OutputListener listener;
    private final String id;
    private final CompletableFuture<ExecutionResult> result = new CompletableFuture<>();
    private volatile State state = State.QUEUED;
    volatile boolean cancelled;
    /** The thread waiting for the Go cache, a slot or the run's packages, so cancel() can wake it. */
    final Waiter waiter = new Waiter();
    private volatile SandboxProcess process;
    /** The workspace watchdog found the run's workspace past its limits ({@link WorkspaceDiff#watch}). */
    private volatile boolean workspaceLimit;
    /** Set for a call in a stateful session: it runs in the session's interpreter instead of a sandbox of its own. */
    private final SessionCall sessionCall;
    /** The run got a warm sandbox (for the audit line). */
    private volatile boolean startedWarm;
    /** The run's way out through the egress proxy, when it has network access (owned and closed by the run). */
    private EgressChannel egress;
    /** What the run did with its network, once it ended. */
    private NetworkReport network;
    /** The sandbox's generated tool library, when the server has code tools (owned and closed by the run). */
    private CodeTools.LibraryFiles library;
    /** The run's code tools endpoint, armed on its channel; its report goes into the result. */
    private CodeToolsRun codeRun;
    /** The store entry of the run's declared packages, held until the run has ended. */
    private PackageStore.Lease packages;

    LocalRun(LocalExecutor executor, ExecutionRequest request, Language language, OutputListener listener) {
        this(executor, request, language, listener, null);
    }

    LocalRun(LocalExecutor executor, ExecutionRequest request, Language language, OutputListener listener,
            SessionCall sessionCall) {
        this.sessionCall = sessionCall;
        this.executor = executor;
        this.request = request;
        this.language = language;
        this.listener = listener;
        this.id = "run-" + hex(8);
    }

    private static String hex(int bytes) {
        byte[] b = new byte[bytes];
        RANDOM.nextBytes(b);
        return HexFormat.of().formatHex(b);
    }

    @Override
    public String id() {
        return id;
    }

    @Override
    public CompletableFuture<ExecutionResult> result() {
        return result;
    }

    boolean isQueued() {
        return state == State.QUEUED;
    }

    @Override
    public void cancel() {
        cancelled = true;
        waiter.interrupt();
        SandboxProcess p = process;
        if (p != null) p.kill();
        if (sessionCall != null) sessionCall.cancel();
    }

    /** The run could not be attempted (queue full, queue timeout, shutting down). */
    void refuse(ExecutionException e) {
        state = State.FINISHED;
        try (LogContext.Scope ignored = LogContext.requestId(request.audit().httpRequestId())) {
            audit.info("run id={} language={} outcome=refused reason=\"{}\" codeBytes={}{}", id, language.id(),
                    LogValues.escapeQuoted(e.getMessage()), codeBytes(), who());
        }
        result.completeExceptionally(e);
    }

    void finishCancelledInQueue() {
        finish(cancelledInQueue());
    }

    private ExecutionResult cancelledInQueue() {
        return RunEnd.of(new RunEnd.CancelledBeforeStart(), request.limits())
                .result(language.id(), executor.sandbox.name(), "");
    }

    /** The run holds its slot now; its listener hears of it before anything of the program starts. */
    void markRunning() {
        state = State.RUNNING;
        boolean go;
        try {
            go = listener.onStart(id);
        } catch (RuntimeException e) {
            log.warn("run {}: start listener failed: {}", id, e.toString());
            go = false;
        }
        // execute() checks the flag first: a run its listener declined ends cancelled without having started.
        if (!go) cancelled = true;
    }

    /**
     * Runs on a long-lived platform thread holding a slot (see {@link LocalExecutor} on why) and returns the
     * result after every cleanup step; the executor releases the slot and then publishes it with {@link #finish}.
     */
    ExecutionResult execute() {
        if (cancelled) return cancelledInQueue();
        if (sessionCall != null) return sessionCall.execute();
        Optional<Workspace> ws = request.workspace();
        String name;
        try {
            name = ws.map(LocalRun::unusedName).orElseGet(() -> "code_" + hex(4));
        } catch (WorkspaceException e) {
            return failedToStart("the workspace cannot be used: " + e.getMessage());
        }
        String fileName = name + "." + language.fileExtension();
        Path staged = executor.stagingDir.resolve(id + "-" + fileName);
        try {
            if (ws.isEmpty()) return runInSandbox(name, fileName, staged, request.limits(), Optional.empty());
            return runInWorkspace(ws.get(), name, fileName, staged);
        } catch (WorkspaceException e) {
            return failedToStart("the workspace cannot be used: " + e.getMessage());
        } catch (RuntimeException e) {
            log.error("run {}: unexpected error", id, e);
            return failedToStart("the server could not run the program (internal error)");
        } finally {
            try {
                Files.deleteIfExists(staged);
            } catch (IOException e) {
                log.warn("run {}: cannot delete staged file {}: {}", id, staged, e.toString());
            }
        }
    }

    /**
     * A run in a persistent workspace: the directory is bound read-write as the working directory; each file the
     * program writes is capped (RLIMIT_FSIZE) at the space left under the quota; the code file gets a name no user
     * file has and is removed afterwards; what the run created or changed is listed.
     */
    private ExecutionResult runInWorkspace(Workspace ws, String name, String fileName, Path staged) {
        try (Workspaces.Hold hold = ws.hold()) {
            WorkspaceDiff diff = WorkspaceDiff.before(ws);
            Limits limits = request.limits().withDiskBytes(Math.min(request.limits().diskBytes(), diff.spaceLeft()));
            ExecutionResult r;
            try (Workspace.Watch watch = diff.watch(this::stopForWorkspaceLimit)) {
                r = runInSandbox(name, fileName, staged, limits, Optional.of(ws));
            } finally {
                removeQuietly(ws, fileName);
            }
            WorkspaceDiff.Changes changes = diff.after();
            return r.withFiles(changes.files(), changes.truncated());
        }
    }

    private void stopForWorkspaceLimit() {
        workspaceLimit = true;
        SandboxProcess p = process;
        if (p != null) p.kill();
    }

    /** A code file name that no entry of the workspace has (neither the source nor a compiled binary). */
    private static String unusedName(Workspace ws) {
        while (true) {
            String candidate = "code_" + hex(4);
            if (!ws.fs().hasNameStartingWith(candidate)) return candidate;
        }
    }

    private void removeQuietly(Workspace ws, String fileName) {
        try {
            ws.fs().delete(RelPath.parse(fileName), false);
        } catch (WorkspaceException e) {
            if (e.kind() != WorkspaceException.Kind.NOT_FOUND)
                log.warn("run {}: cannot remove {} from workspace {}: {}", id, fileName, ws.name(), e.getMessage());
        }
    }

    /** The placeholders of this run's commands (languages.json). */
    private Map<String, String> placeholders(String name, String fileName, Limits limits) {
        Map<String, String> ph = new LinkedHashMap<>(executor.placeholders);
        ph.put("file", Placeholders.WORK_DIR + "/" + fileName);
        ph.put("dir", Placeholders.WORK_DIR);
        ph.put("name", name);
        ph.put("heapMb", Placeholders.heapMb(limits.memoryMb()));
        return ph;
    }

    private SandboxSpec spec(String name, String fileName, Path staged, Limits limits, Optional<Workspace> ws) {
        String file = Placeholders.WORK_DIR + "/" + fileName;
        Map<String, String> ph = placeholders(name, fileName, limits);
        List<Path> binds = new ArrayList<>();
        for (String b : language.binds()) {
            Path p = Path.of(Placeholders.fill(b, ph));
            if (Files.isDirectory(p)) binds.add(p);
        }
        Map<String, Path> files = new LinkedHashMap<>(Map.of(file, staged));
        Map<String, String> env = language.environment(request.env(), ph);
        return new SandboxSpec(id, command(ph), Placeholders.WORK_DIR, files, binds, env, limits,
                ws.map(w -> w.fs().root())).withWorkDirOwner(ws.isPresent() ? ws.get()::handOver : WorkDirOwner.NONE);
    }

    /**
     * Interpreted: the run argv plus the request's args. Compiled: one shell line "compile && exec run", so both
     * steps share the sandbox, a failing compile ends the run with the compiler's output and exit code, and the
     * program still receives the args unquoted via "$@".
     */
    private List<String> command(Map<String, String> ph) {
        List<String> run = Placeholders.fill(language.run(), ph);
        List<String> cmd = new ArrayList<>();
        if (language.compile().isEmpty()) {
            cmd.addAll(run);
        } else {
            String line = shellQuote(Placeholders.fill(language.compile().get(), ph)) + " && exec " + shellQuote(run) + " \"$@\"";
            cmd.addAll(List.of("/bin/sh", "-c", line, "sh"));
        }
        cmd.addAll(request.args());
        return cmd;
    }

    static String shellQuote(List<String> argv) {
        StringBuilder s = new StringBuilder();
        for (String a : argv) {
            if (!s.isEmpty()) s.append(' ');
            s.append('\'').append(a.replace("'", "'\\''")).append('\'');
        }
        return s.toString();
    }

    /**
     * A warm sandbox from the pool when it has one for this request, else a cold start. A warm sandbox that
     * fails its hand-out is discarded and the run starts cold: the pool never makes a run fail.
     */
    private SandboxProcess start(String name, String fileName, Path staged, Limits limits, Optional<Workspace> ws)
            throws SandboxException {
        // a channel for network access, or for code mode's tool calls (every run when the server has code tools)
        boolean needsChannel = !request.egress().isOff() || executor.codeTools.isPresent();
        if (executor.warmPool.isPresent()) {
            WarmPool pool = executor.warmPool.get();
            // a run with packages takes a sandbox that can mount its set's entry at hand-out
            Optional<SandboxProcess> warm = pool.take(language.id(), limits, request.env(), ws.isPresent(), needsChannel,
                    packages != null);
            if (warm.isPresent()) {
                try {
                    pool.linkOf(warm.get()).ifPresent(link -> {
                        egress = link.channel();
                        library = link.library();
                    });
                    if (library != null) {
                        library.write(tenant());
                        codeRun = executor.codeTools.orElseThrow().open(tenant(), id);
                    }
                    if (egress != null) egress.arm(request.egress(), tenant(), id, codeRun);
                    // the workspace is mounted into the running sandbox: given to its uid before the code arrives
                    if (ws.isPresent()) warm.get().hostUid().ifPresent(ws.get()::handOver);
                    pool.handOut(language.id(), warm.get(), ws.map(w -> w.fs().root()), limits, Placeholders.WORK_DIR + "/" + fileName,
                            request.code(), request.args(), command(placeholders(name, fileName, limits)),
                            packages == null ? Optional.empty()
                                    : PackageInstalls.warmSource(request.packages().get().ecosystem(), packages));
                    startedWarm = true;
                    return warm.get();
                } catch (SandboxException | IOException | RuntimeException e) {
                    warm.get().close();
                    closeEgress();
                    codeRun = null;
                    log.warn("run {}: warm sandbox hand-out failed, starting cold: {}", id, e.getMessage());
                }
            }
        }
        EgressChannels channels = needsChannel ? executor.egress.orElseThrow(() -> new SandboxException(
                "network access is off on this server (EGRESS=off)")) : null;
        // A cold start only: a warm sandbox gets its code over the control channel.
        try {
            Files.writeString(staged, request.code(), StandardCharsets.UTF_8);
            Files.setPosixFilePermissions(staged, PosixFilePermissions.fromString("rw-r--r--"));
        } catch (IOException e) {
            log.warn("run {}: cannot stage the code file: {}", id, e.toString());
            throw new SandboxException("the server could not prepare the run (staging the code file failed)");
        }
        codeRun = executor.codeTools.map(t -> t.open(tenant(), id)).orElse(null);
        SandboxSpec spec = spec(name, fileName, staged, limits, ws);
        if (packages != null) spec = PackageInstalls.mount(spec, request.packages().get().ecosystem(), packages);
        EgressStart.Started started = EgressStart.start(executor.sandbox, spec,
                channels, request.egress(), tenant(), executor.codeTools.orElse(null), codeRun);
        egress = started.channel();
        library = started.library();
        return started.process();
    }

    private String tenant() {
        return request.audit().tenant().orElse("-");
    }

    /** Ends the run's network: open connections closed, the channel closed, its report kept for the result. */
    private void endNetwork() {
        EgressChannel c = egress;
        if (c == null) return;
        network = c.finish(); // also ends the code tools endpoint: calls in flight are cancelled upstream
        closeEgress();
    }

    private ExecutionResult withNetwork(ExecutionResult r) {
        endNetwork();
        ExecutionResult out = network == null ? r : r.withNetwork(network);
        return codeRun == null ? out : out.withToolCalls(codeRun.report());
    }

    private void closeEgress() {
        EgressChannel c = egress;
        egress = null;
        if (c != null) c.close();
        CodeTools.LibraryFiles l = library;
        library = null;
        if (l != null) l.close();
    }

    private ExecutionResult runInSandbox(String name, String fileName, Path staged, Limits limits,
            Optional<Workspace> ws) {
        if (request.packages().isPresent()) {
            // waiting for an install holds the run's slot: cancel() interrupts the wait, which frees it at once
            waiter.begin();
            try {
                if (!cancelled) packages = executor.packages.orElseThrow().acquire(request.packages().get(), limits, tenant());
            } catch (PackageStore.InstallFailed e) {
                return failedToStart("the packages could not be installed: " + e.getMessage());
            } catch (InterruptedException e) {
                // cancelled while it waited (handled below), or interrupted by the server
            } finally {
                waiter.end();
            }
            if (cancelled || packages == null) {
                PackageStore.Lease l = packages;
                packages = null;
                if (l != null) l.close();
                return cancelled ? cancelledInQueue() : failedToStart("the wait for the packages was interrupted by the server");
            }
        }
        try {
            return withPackages(runStarted(name, fileName, staged, limits, ws));
        } finally {
            PackageStore.Lease l = packages;
            packages = null;
            if (l != null) l.close();
        }
    }

    private ExecutionResult withPackages(ExecutionResult r) {
        PackageStore.Lease l = packages;
        return l == null ? r : r.withPackages(new ExecutionResult.PackagesUsed(l.resolved(), l.installMs()));
    }

    private ExecutionResult runStarted(String name, String fileName, Path staged, Limits limits, Optional<Workspace> ws) {
        SandboxProcess started;
        long startingAt = System.nanoTime();
        try {
            started = start(name, fileName, staged, limits, ws);
        } catch (SandboxException e) {
            return failedToStart(e.getMessage());
        }
        executor.sandboxStarted(language.id(), startedWarm, Duration.ofNanos(System.nanoTime() - startingAt));
        ListenerDispatcher progress = new ListenerDispatcher(listener, executor.virtualThreads, executor.progressInterval);
        try (SandboxProcess p = started) {
            long t0 = System.nanoTime(); // the wall timer starts when the program does, not when it was queued
            process = p;
            if (cancelled || workspaceLimit) p.kill();
            OutputCollector.Drain drain = new OutputCollector.Drain(request.limits().drainBytes(), p::kill);
            long cap = request.limits().outputBytes();
            OutputCollector out = new OutputCollector(p.stdout(), cap, OutputListener.Stream.STDOUT, progress, drain);
            OutputCollector err = new OutputCollector(p.stderr(), cap, OutputListener.Stream.STDERR, progress, drain);
            Thread outReader = executor.virtualThreads.newThread(out);
            Thread errReader = executor.virtualThreads.newThread(err);
            outReader.start();
            errReader.start();
            executor.virtualThreads.newThread(() -> feedStdin(p.stdin())).start();

            boolean exited = p.waitFor(request.limits().timeout());
            // Snapshot: a cancel that arrives after the program ended by itself does not change how it ended.
            RunEnd.Stop stop = cancelled ? RunEnd.Stop.CANCELLED : workspaceLimit ? RunEnd.Stop.WORKSPACE_LIMIT
                    : drain.exceeded() ? RunEnd.Stop.OUTPUT_FLOOD : exited ? null : RunEnd.Stop.TIMEOUT;
            if (!exited) {
                p.kill();
                endNetwork(); // its connections close with it, not after the wait for the tree to go
                p.waitFor(Duration.ofSeconds(10));
            }
            long durationMs = (System.nanoTime() - t0) / 1_000_000;
            joinReaders(p, outReader, errReader);
            RunEnd end = RunEnd.of(new RunEnd.ProgramEnded(stop, termination(p), p.memoryLimitHit(), p.cpuLimitHit()),
                    request.limits());
            ExecutionResult r = withNetwork(end.result(language.id(), out.captured(), err.captured(), durationMs,
                    p.peakMemoryBytes(), p.cpuTimeMs(), executor.sandbox.name(), progress));
            progress.finish(LISTENER_GRACE);
            return r;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return failedToStart("the run was interrupted by the server");
        } finally {
            process = null;
            progress.abandon();
            closeEgress();
        }
    }

    private void feedStdin(OutputStream stdin) {
        try (stdin) {
            stdin.write(request.stdin().getBytes(StandardCharsets.UTF_8));
        } catch (IOException e) {
            // The program exited or closed its stdin without reading it all: not an error.
        }
    }

    /**
     * After the program ended its pipes reach end of stream unless something it left behind still holds them;
     * the sandbox kills the whole tree on kill(), after which the readers finish.
     */
    private static void joinReaders(SandboxProcess p, Thread... readers) throws InterruptedException {
        for (Thread t : readers) {
            if (!t.join(DRAIN_GRACE)) {
                p.kill();
                t.join(DRAIN_GRACE);
            }
        }
    }

    /** The program's wait status, or null when it did not end even after a kill (the sandbox's close deals with it). */
    private static Termination termination(SandboxProcess p) {
        try {
            return p.termination();
        } catch (RuntimeException e) {
            return null;
        }
    }

    private ExecutionResult failedToStart(String message) {
        return RunEnd.of(new RunEnd.NotStarted(message), request.limits()).result(language.id(), executor.sandbox.name(), message);
    }

    void finish(ExecutionResult r) {
        state = State.FINISHED;
        try (LogContext.Scope ignored = LogContext.requestId(request.audit().httpRequestId())) {
            audit.info("run id={} language={} outcome={} exitCode={} durationMs={} start={} codeBytes={} truncated={}{} code=\"{}\"",
                    id, r.language(), r.outcome().wireName(), r.exitCode(), r.durationMs(), startedWarm ? "warm" : "cold",
                    codeBytes(), r.truncated(), who(), codePreview(request.code()));
        }
        result.complete(r);
    }

    private int codeBytes() {
        return request.code().getBytes(StandardCharsets.UTF_8).length;
    }

    /**
     * Who asked, as fields of the audit line. The JSON-RPC id and the MCP session come from the client: each value
     * is written by {@link LogValues#value}, so an id like {@code 7 tenant=other} stays one quoted field.
     */
    private String who() {
        ExecutionRequest.AuditInfo a = request.audit();
        StringBuilder s = new StringBuilder();
        a.tenant().ifPresent(t -> s.append(" tenant=").append(LogValues.value(t)));
        a.session().ifPresent(t -> s.append(" session=").append(LogValues.value(t)));
        a.requestId().ifPresent(t -> s.append(" requestId=").append(LogValues.value(t)));
        a.httpRequestId().ifPresent(t -> s.append(" httpRequestId=").append(LogValues.value(t)));
        return s.toString();
    }

    /** First 200 characters on one line, for inside double quotes: newlines, quotes and control characters escaped. */
    static String codePreview(String code) {
        String head = code.length() > 200 ? code.substring(0, 200) : code;
        return LogValues.escapeQuoted(head) + (code.length() > 200 ? "..." : "");
    }
}
