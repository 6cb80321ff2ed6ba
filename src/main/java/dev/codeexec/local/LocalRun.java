package dev.codeexec.local;

import dev.codeexec.boot.LogContext;
import dev.codeexec.boot.LogValues;
import dev.codeexec.codemode.CodeTools;
import dev.codeexec.codemode.CodeToolsRun;
import dev.codeexec.config.Ids;
import dev.codeexec.egress.EgressChannel;
import dev.codeexec.egress.EgressChannels;
import dev.codeexec.egress.RunSecrets;
import dev.codeexec.engine.ExecutionException;
import dev.codeexec.engine.ExecutionRequest;
import dev.codeexec.engine.ExecutionResult;
import dev.codeexec.engine.OutputListener;
import dev.codeexec.engine.RunEnd;
import dev.codeexec.engine.RunHandle;
import dev.codeexec.lang.Language;
import dev.codeexec.lang.Placeholders;
import dev.codeexec.packages.PackageStore;
import dev.codeexec.run.EgressStart;
import dev.codeexec.run.ListenerDispatcher;
import dev.codeexec.run.OutputCollector;
import dev.codeexec.run.PackageInstalls;
import dev.codeexec.run.RunScope;
import dev.codeexec.run.WorkspaceDiff;
import dev.codeexec.sandbox.Limits;
import dev.codeexec.sandbox.SandboxException;
import dev.codeexec.sandbox.SandboxProcess;
import dev.codeexec.sandbox.SandboxSpec;
import dev.codeexec.sandbox.Termination;
import dev.codeexec.sandbox.WorkDirOwner;
import dev.codeexec.session.SessionCall;
import dev.codeexec.warm.WarmPool;
import dev.codeexec.workspace.RelPath;
import dev.codeexec.workspace.Workspace;
import dev.codeexec.workspace.WorkspaceException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;

/**
 * One run: QUEUED → RUNNING → FINISHED. The executor holds it in its queue and calls {@link #execute()} on a slot's
 * thread: a session call goes to its session ({@link SessionCall}); any other run takes what it needs into its
 * {@link RunScope} (its workspace held and scanned, its packages, its channel), gets a sandbox ({@link #start}: a
 * warm one from the pool when it fits, else a cold start from a staged code file), then {@link #runStarted} feeds
 * stdin, drains stdout and stderr, waits with the wall timer and hands the facts of the end to {@link RunEnd}. The
 * scope adds what the run did to the result and releases everything in one order on every path; the result future
 * is completed on every path, and {@link #finish} writes the audit line.
 */
final class LocalRun implements RunHandle {

    enum State { QUEUED, RUNNING, FINISHED }

    private static final Logger audit = LoggerFactory.getLogger("audit");
    private static final Logger log = LoggerFactory.getLogger(LocalRun.class);
    /** How long the result may wait for a slow listener to receive the last output. */
    private static final Duration LISTENER_GRACE = Duration.ofSeconds(2);

    private final LocalExecutor executor;
    private final ExecutionRequest request;
    private final Language language;
    private final OutputListener listener;
    private final String id;
    private final CompletableFuture<ExecutionResult> result = new CompletableFuture<>();
    private volatile State state = State.QUEUED;
    /**
     * What the run holds, from the waits before its slot (the Go cache, the slot itself, its packages) to its
     * result; {@link #cancel} reaches it at every step.
     */
    final RunScope scope;
    /** Set for a call in a stateful session: it runs in the session's interpreter instead of a sandbox of its own. */
    private final SessionCall sessionCall;
    /** The run got a warm sandbox (for the audit line). */
    private volatile boolean startedWarm;

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
        this.id = "run-" + Ids.hex(8);
        this.scope = new RunScope(id);
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
        scope.cancel();
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
        // execute() checks first: a run its listener declined ends cancelled without having started.
        if (!go) scope.cancel();
    }

    /**
     * Runs on a long-lived platform thread holding a slot (see {@link LocalExecutor} on why) and returns the
     * result after every cleanup step; the executor releases the slot and then publishes it with {@link #finish}.
     */
    ExecutionResult execute() {
        if (scope.cancelled()) return cancelledInQueue();
        if (sessionCall != null) return sessionCall.execute();
        Optional<Workspace> ws = request.workspace();
        try (RunScope s = scope) {
            String name = ws.map(LocalRun::unusedName).orElseGet(() -> "code_" + Ids.hex(4));
            String fileName = name + "." + language.fileExtension();
            Path staged = executor.stagingDir.resolve(id + "-" + fileName);
            s.beforeFiles(() -> deleteStaged(staged));
            Limits limits = request.limits();
            if (ws.isPresent()) {
                // the directory is bound read-write as the working directory; each file the program writes is capped
                // (RLIMIT_FSIZE) at the space left under the quota; the code file gets a name no user file has and
                // is removed before the run's files are listed
                WorkspaceDiff diff = s.holdWorkspace(ws.get());
                limits = limits.withDiskBytes(Math.min(limits.diskBytes(), diff.spaceLeft()));
                s.watchWorkspace(() -> { });
                s.beforeFiles(() -> removeQuietly(ws.get(), fileName));
            }
            if (request.packages().isPresent()) {
                // waiting for an install holds the run's slot: cancel() interrupts the wait, which frees it at once
                try {
                    s.holdPackages(s.await(() -> executor.packages.orElseThrow().acquire(request.packages().get(),
                            request.limits(), tenant())));
                } catch (PackageStore.InstallFailed e) {
                    return s.complete(failedToStart("the packages could not be installed: " + e.getMessage()));
                } catch (InterruptedException e) {
                    // cancelled while it waited, or interrupted by the server
                }
                if (s.cancelled()) return s.complete(cancelledInQueue());
                if (s.packages().isEmpty())
                    return s.complete(failedToStart("the wait for the packages was interrupted by the server"));
            }
            return s.complete(runStarted(name, fileName, staged, limits, ws));
        } catch (WorkspaceException e) {
            return failedToStart("the workspace cannot be used: " + e.getMessage());
        } catch (RuntimeException e) {
            log.error("run {}: unexpected error", id, e);
            return failedToStart("the server could not run the program (internal error)");
        }
    }

    private void deleteStaged(Path staged) {
        try {
            Files.deleteIfExists(staged);
        } catch (IOException e) {
            log.warn("run {}: cannot delete staged file {}: {}", id, staged, e.toString());
        }
    }

    /** A code file name that no entry of the workspace has (neither the source nor a compiled binary). */
    private static String unusedName(Workspace ws) {
        while (true) {
            String candidate = "code_" + Ids.hex(4);
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

    /** Where a cold TypeScript run finds the JavaScript made of its code ahead (ts-loader.js reads CODE_EXEC_TS_JS). */
    static final String PREPARED_JS = "/tmp/.codeexec-ts/prepared.js";

    /** @param preparedJs the host file of the JavaScript a TypeScript stripper made of the code, if any */
    private SandboxSpec spec(String name, String fileName, Path staged, Limits limits, Optional<Workspace> ws,
            Optional<Path> preparedJs) {
        String file = Placeholders.WORK_DIR + "/" + fileName;
        Map<String, String> ph = placeholders(name, fileName, limits);
        List<Path> binds = new ArrayList<>();
        for (String b : language.binds()) {
            Path p = Path.of(Placeholders.fill(b, ph));
            if (Files.isDirectory(p)) binds.add(p);
        }
        Map<String, Path> files = new LinkedHashMap<>(Map.of(file, staged));
        Map<String, String> env = new LinkedHashMap<>(language.environment(request.env(), ph));
        if (preparedJs.isPresent()) {
            files.put(PREPARED_JS, preparedJs.get());
            env.put("CODE_EXEC_TS_JS", PREPARED_JS);
        }
        return SandboxSpec.builder(id, command(ph), Placeholders.WORK_DIR, limits).readOnlyFiles(files)
                .readOnlyDirs(binds).env(env).workDirSource(ws.map(w -> w.fs().root())).background(request.background())
                // a background job's servers can be previewed: its sandbox gets a preview directory (named by the run)
                .previewDir(request.background() ? Optional.of(executor.previewRoot.resolve(id)) : Optional.empty()).build()
                .withWorkDirOwner(ws.isPresent() ? ws.get()::handOver : WorkDirOwner.NONE);
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
            String line = shellQuote(Placeholders.fill(language.compile()
                    .get(), ph)) + " && exec " + shellQuote(run) + " \"$@\"";
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
        Optional<PackageStore.Lease> packages = scope.packages();
        // placeholder secrets go into the environment at the start: a run that gets any starts cold
        RunSecrets secrets = executor.egress.map(c -> c.secretsFor(request.egress(), tenant())).orElse(RunSecrets.NONE);
        // TypeScript: the JavaScript made ahead by the tenant's stripper, so that the run loads no stripper itself
        Optional<String> js = language.id().equals("typescript") ? executor.typescript.flatMap(t -> t.prepare(tenant(),
                Placeholders.WORK_DIR + "/" + fileName, request.code())) : Optional.empty();
        // a background job starts cold: a warm sandbox was started at an interactive run's CPU limit and weight
        if (executor.warmPool.isPresent() && !request.background() && secrets.isEmpty()) {
            WarmPool pool = executor.warmPool.get();
            // a run with packages takes a sandbox that can mount its set's entry at hand-out
            Optional<SandboxProcess> warm = pool.take(language.id(), limits, request.env(), ws.isPresent(), needsChannel,
                    packages.isPresent());
            if (warm.isPresent()) {
                try {
                    Optional<EgressStart.Started> link = pool.linkOf(warm.get());
                    EgressChannel channel = link.map(EgressStart.Started::channel).orElse(null);
                    CodeTools.LibraryFiles library = link.map(EgressStart.Started::library).orElse(null);
                    CodeToolsRun codeRun = null;
                    scope.channel(channel, library, null, true);
                    if (library != null) {
                        library.write(tenant());
                        codeRun = executor.codeTools.orElseThrow().open(tenant(), id);
                        scope.channel(channel, library, codeRun, true);
                    }
                    if (channel != null) channel.arm(request.egress(), tenant(), id, codeRun);
                    // the workspace is mounted into the running sandbox: given to its uid before the code arrives
                    if (ws.isPresent()) warm.get().hostUid().ifPresent(ws.get()::handOver);
                    pool.handOut(language.id(), warm.get(), ws.map(w -> w.fs()
                            .root()), limits, Placeholders.WORK_DIR + "/" + fileName,
                            request.code(), request.args(), command(placeholders(name, fileName, limits)),
                            packages.flatMap(l -> PackageInstalls.warmSource(request.packages().get().ecosystem(), l)), js);
                    startedWarm = true;
                    return warm.get();
                } catch (SandboxException | IOException | RuntimeException e) {
                    warm.get().close();
                    scope.closeChannel();
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
        Optional<Path> preparedJs = Optional.empty();
        if (js.isPresent()) {
            Path f = staged.resolveSibling(id + "-prepared.js");
            scope.beforeFiles(() -> deleteStaged(f));
            try {
                Files.writeString(f, js.get(), StandardCharsets.UTF_8);
                preparedJs = Optional.of(f);
            } catch (IOException e) {
                // the run strips its code itself
                log.warn("run {}: cannot stage the prepared JavaScript: {}", id, e.toString());
            }
        }
        CodeToolsRun codeRun = executor.codeTools.map(t -> t.open(tenant(), id)).orElse(null);
        SandboxSpec spec = spec(name, fileName, staged, limits, ws, preparedJs);
        if (packages.isPresent()) spec = PackageInstalls.mount(spec, request.packages().get()
                .ecosystem(), packages.get());
        EgressStart.Started started = EgressStart.start(executor.sandbox, spec,
                channels, request.egress(), tenant(), executor.codeTools.orElse(null), codeRun, secrets);
        scope.channel(started.channel(), started.library(), codeRun, true);
        return started.process();
    }

    /** A background job's run (its own slots and threads). */
    boolean background() {
        return request.background();
    }

    private String tenant() {
        return request.audit().tenant().orElse("-");
    }

    /**
     * Starts the program, feeds stdin, drains stdout and stderr, waits with the wall timer, and hands the facts of
     * the end to {@link RunEnd}; the scope adds what the run did and ends the rest in its order.
     */
    private ExecutionResult runStarted(String name, String fileName, Path staged, Limits limits, Optional<Workspace> ws) {
        SandboxProcess p;
        long startingAt = System.nanoTime();
        try {
            p = scope.program(start(name, fileName, staged, limits, ws), true);
        } catch (SandboxException e) {
            return failedToStart(e.getMessage());
        }
        executor.sandboxStarted(language.id(), startedWarm, Duration.ofNanos(System.nanoTime() - startingAt));
        ListenerDispatcher progress = scope.progress(listener, executor.virtualThreads, executor.progressInterval);
        try {
            long t0 = System.nanoTime(); // the wall timer starts when the program does, not when it was queued
            OutputCollector.Drain drain = new OutputCollector.Drain(request.limits().drainBytes(), p::kill);
            long cap = request.limits().outputBytes();
            // a job's listener writes its log, which keeps JOB_LOG_MB of head and tail and counts every byte itself
            long streamCap = request.background() ? Long.MAX_VALUE : cap;
            OutputCollector out = new OutputCollector(p.stdout(), cap, streamCap, OutputListener.Stream.STDOUT, progress, drain);
            OutputCollector err = new OutputCollector(p.stderr(), cap, streamCap, OutputListener.Stream.STDERR, progress, drain);
            scope.readOutput(out, err, request.stdin().getBytes(StandardCharsets.UTF_8), executor.virtualThreads);

            boolean exited = p.waitFor(request.limits().timeout());
            // Snapshot: a cancel that arrives after the program ended by itself does not change how it ended.
            RunEnd.Stop stop = scope.stopReason(drain.exceeded(), !exited);
            if (!exited) scope.stopProgram();
            long durationMs = (System.nanoTime() - t0) / 1_000_000;
            scope.joinOutput();
            RunEnd end = RunEnd.of(new RunEnd.ProgramEnded(stop, termination(p), p.memoryLimitHit(), p.cpuLimitHit()),
                    request.limits());
            ExecutionResult r = end.result(language.id(), out.captured(), err.captured(), durationMs,
                    p.peakMemoryBytes(), p.cpuTimeMs(), executor.sandbox.name(), progress);
            scope.finishProgress(LISTENER_GRACE);
            return r;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return failedToStart("the run was interrupted by the server");
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
        return RunEnd.of(new RunEnd.NotStarted(message), request.limits())
                .result(language.id(), executor.sandbox.name(), message);
    }

    void finish(ExecutionResult r) {
        state = State.FINISHED;
        try (LogContext.Scope ignored = LogContext.requestId(request.audit().httpRequestId())) {
            audit.info("run id={} language={} outcome={} exitCode={} durationMs={} start={} codeBytes={} truncated={}{} code=\"{}\"",
                    id, r.language(), r.outcome()
                            .wireName(), r.exitCode(), r.durationMs(), startedWarm ? "warm" : "cold",
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
