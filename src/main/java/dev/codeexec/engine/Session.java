package dev.codeexec.engine;

import dev.codeexec.sandbox.Limits;
import dev.codeexec.engine.ExecutionResult.Figure;
import dev.codeexec.engine.ExecutionResult.SessionOutput;
import dev.codeexec.sandbox.ControlChannel;
import dev.codeexec.sandbox.SandboxException;
import dev.codeexec.sandbox.SandboxProcess;
import dev.codeexec.sandbox.SandboxSpec;
import dev.codeexec.workspace.RelPath;
import dev.codeexec.workspace.Workspace;
import dev.codeexec.workspace.WorkspaceException;
import dev.codeexec.workspace.WorkspaceFs;
import dev.codeexec.workspace.Workspaces;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import tools.jackson.core.JacksonException;
import tools.jackson.databind.JsonNode;
import tools.jackson.databind.json.JsonMapper;

import java.io.IOException;
import java.security.SecureRandom;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Base64;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalDouble;
import java.util.OptionalLong;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.ReentrantLock;

/**
 * One stateful session: an interpreter (session_python.py / session_node.js) in a sandbox that lives across
 * calls, spoken to over the control channel (docs/interpreter-protocol.md). Calls are serialized by a fair lock.
 * The sandbox's memory and process limits hold for the interpreter's whole life (its cgroup); each call gets a
 * fresh CPU budget and file-size cap ({@link SandboxProcess#limitProgramSoft}: soft limits, which can rise again
 * for the next call; the hard limits bound the whole life, see {@link #LIFETIME_CPU_CALLS}) and its own
 * wall-clock timeout.
 *
 * <p>A call that must stop (timeout, cancel, output over the cap) is interrupted with SIGINT, repeated every
 * {@link #INTERRUPT_EVERY} because a single one can be lost; if the runner has not answered within
 * {@link #INTERRUPT_GRACE} the interpreter is killed. <b>Output over MAX_OUTPUT_KB interrupts the call</b> as a cold
 * run is killed there: a loop printing forever would otherwise run on to its timeout for output nobody receives;
 * the interrupt keeps the session's state, which killing would not.
 *
 * <p>An interpreter that dies (memory limit, crash, {@code process.exit()}) ends the session: the call in progress
 * ends with the reason; if it died between calls, the next call is told once why (without running its code), and
 * the call after that starts a new session.
 */
final class Session {

    static final Duration INTERRUPT_GRACE = Duration.ofSeconds(2);
    static final Duration INTERRUPT_EVERY = Duration.ofMillis(100);
    /** How long the interpreter may take to start and say it is ready. */
    static final Duration START_TIMEOUT = Duration.ofSeconds(30);
    /** The runner writes its markers before its response; this much lag of our pipe readers means something broke. */
    private static final Duration MARKER_WAIT = Duration.ofSeconds(2);
    /** CPU seconds the interpreter may spend starting, on top of the limit the calls get. */
    static final int START_CPU_SECONDS = 30;
    /**
     * A session's interpreter may use this many times the per-call CPU limit over its whole life (the hard
     * RLIMIT_CPU, which cannot be raised again without privileges); each call is cut at the per-call limit by the
     * soft limit, moved at every call.
     */
    static final int LIFETIME_CPU_CALLS = 20;

    private static final Logger log = LoggerFactory.getLogger(Session.class);
    private static final SecureRandom RANDOM = new SecureRandom();
    private static final JsonMapper JSON = JsonMapper.shared();
    private static final Object END = new Object();
    private static final java.util.concurrent.ThreadFactory READERS =
            Thread.ofPlatform().name("session-io-", 0).daemon(true).factory();

    private final Sessions owner;
    final SessionRef ref;
    final Language language;
    final Optional<Workspace> workspace;
    private final Limits launchLimits;
    private final ReentrantLock lock = new ReentrantLock(true);
    volatile Instant created = Instant.now();
    volatile Instant lastUsed = created;
    final AtomicLong calls = new AtomicLong();
    volatile boolean busy;
    /** The running interpreter; null before the first call and after it ended. Written under the lock. */
    private volatile Interpreter proc;
    /** Set under the lock when the session was forgotten; a call that then gets the lock asks for a new one. */
    private boolean closed;
    /** Set by close before it waits for the lock, so calls queued behind it do not start a new interpreter here. */
    private volatile boolean closing;

    Session(Sessions owner, SessionRef ref, Language language, Optional<Workspace> workspace, Limits launchLimits) {
        this.owner = owner;
        this.ref = ref;
        this.language = language;
        this.workspace = workspace;
        this.launchLimits = launchLimits;
    }

    /** The interpreter and its readers. */
    private final class Interpreter {
        final SandboxProcess process;
        final ControlChannel control;
        final MarkerSplitter out;
        final MarkerSplitter err;
        final LinkedBlockingQueue<Object> messages = new LinkedBlockingQueue<>();
        volatile boolean ended;
        /** Keeps the session's workspace from expiring while the interpreter has it as its working directory. */
        volatile Workspaces.Hold workspaceHold;
        /** Why the server killed it on purpose (reset, close, idle, shutdown); null when it died by itself. */
        volatile String killedBecause;

        Interpreter(SandboxProcess process, ControlChannel control) {
            this.process = process;
            this.control = control;
            long cap = launchLimits.outputBytes();
            this.out = new MarkerSplitter(process.stdout(), cap);
            this.err = new MarkerSplitter(process.stderr(), cap);
        }

        /**
         * Platform threads: these block in reads of pipes and FIFOs for the session's whole life, and such reads
         * pin a virtual thread's carrier; a few idle sessions would starve every other virtual thread.
         */
        void startReaders() {
            READERS.newThread(out).start();
            READERS.newThread(err).start();
            READERS.newThread(this::readControl).start();
        }

        private void readControl() {
            try {
                String line;
                while ((line = control.receive()) != null) {
                    try {
                        JsonNode n = JSON.readTree(line);
                        if (n.isObject()) messages.add(n);
                    } catch (JacksonException e) {
                        // the user's code can write to the channel too: a line that is not JSON is ignored
                    }
                }
            } catch (IOException e) {
                // closed when discarded, or a line over the maximum: either way the interpreter is unusable
            }
            ended = true;
            messages.add(END);
            owner.threads().newThread(() -> endedByItself(this)).start();
        }

        void kill(String because) {
            killedBecause = because;
            process.kill();
        }

        /** Why it ended, in words for a client (after it ended). */
        String why() {
            waitQuietly(process, Duration.ofSeconds(5));
            if (process.memoryLimitHit()) return "its memory limit of " + launchLimits.memoryMb() + " MB was exceeded";
            if (process.cpuLimitHit()) return "its CPU time limit was exceeded";
            int code = exitCodeOf(process);
            if (code > 128 && code <= 128 + 64) return "its interpreter was killed by signal " + (code - 128);
            return "its interpreter exited with code " + code;
        }

        void discard() {
            control.close();
            process.kill();
            process.close();
            Workspaces.Hold h = workspaceHold;
            workspaceHold = null;
            if (h != null) h.close();
        }
    }

    /** Memory of the session's sandbox now. */
    OptionalLong memoryBytes() {
        Interpreter ip = proc;
        return ip == null || ip.ended ? OptionalLong.empty() : ip.process.memoryBytes();
    }

    boolean matches(Language lang, Optional<Workspace> ws) {
        return lang.id().equals(language.id()) && ws.map(Workspace::name).equals(workspace.map(Workspace::name));
    }

    String describe() {
        return "session '" + ref.name() + "' runs " + language.id() + " in " + workspace.map(w -> "workspace '" + w.name() + "'")
                .orElse("no workspace");
    }

    /** Runs one call; null when the session was forgotten before the call got its turn (the caller asks anew). */
    ExecutionResult call(SessionCall call) {
        try {
            lock.lockInterruptibly();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return call.cancelledBeforeStart();
        }
        try {
            if (closed || closing) return null;
            busy = true;
            lastUsed = Instant.now();
            if (call.cancelled) return call.cancelledBeforeStart();
            Interpreter ip = proc;
            if (ip != null && ip.ended && ip.killedBecause == null) {
                String why = ip.why();
                forget(ip);
                return call.notice("session '" + ref.name() + "' ended while idle: " + why
                        + ". Its state is gone; the next call starts a new session.");
            }
            boolean created = false;
            if (ip == null || ip.ended) {
                if (ip != null) ip.discard();
                proc = null;
                try {
                    ip = start();
                } catch (SandboxException e) {
                    closed = true;
                    owner.forget(this);
                    return call.failedToStart("the session's interpreter could not be started: " + e.getMessage());
                }
                proc = ip;
                calls.set(0);
                created = true;
            }
            calls.incrementAndGet();
            return run(ip, call, created);
        } finally {
            busy = false;
            lastUsed = Instant.now();
            lock.unlock();
        }
    }

    private Interpreter start() throws SandboxException {
        Map<String, String> ph = owner.placeholders();
        String runtime = ph.get("runtimeDir");
        List<String> command = language.id().equals("python")
                ? List.of("/usr/bin/python3", "-S", "-u", runtime + "/session_python.py")
                : List.of("/usr/bin/node", runtime + "/session_node.js");
        Map<String, String> env = language.environment(Map.of(), ph);
        if (language.id().equals("python")) env.put("MPLBACKEND", "module://codeexec_mpl");
        Limits limits = new Limits(launchLimits.timeout(),
                launchLimits.cpuSeconds() * LIFETIME_CPU_CALLS + START_CPU_SECONDS,
                launchLimits.memoryBytes(), launchLimits.maxProcesses(), launchLimits.outputBytes(),
                launchLimits.diskBytes());
        SandboxSpec spec = new SandboxSpec("ses-" + hex(8), command, LocalExecutor.WORK_DIR, Map.of(),
                List.of(java.nio.file.Path.of(runtime)), env, limits, workspace.map(w -> w.fs().root()))
                .withControl(false);
        SandboxProcess p = owner.sandbox().start(spec);
        Interpreter ip;
        try {
            ip = new Interpreter(p, p.control().orElseThrow(() -> new SandboxException("no control channel")));
        } catch (SandboxException | RuntimeException e) {
            p.close();
            throw e;
        }
        ip.startReaders();
        try {
            Object first = ip.messages.poll(START_TIMEOUT.toMillis(), TimeUnit.MILLISECONDS);
            if (first instanceof JsonNode n && n.path("ready").asBoolean(false)) {
                ip.workspaceHold = workspace.map(Workspace::hold).orElse(null);
                return ip;
            }
            String why = first == null ? "it did not become ready within " + START_TIMEOUT.toSeconds() + " s"
                    : first == END ? "it ended at start: " + ip.why() : "it sent an unexpected first message";
            Thread.sleep(100);
            String err = ip.err.idleText().strip();
            if (!err.isEmpty()) log.warn("session {}: interpreter failed to start: {}", ref.name(),
                    err.length() > 2000 ? err.substring(err.length() - 2000) : err);
            ip.discard();
            throw new SandboxException(why);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            ip.discard();
            throw new SandboxException("interrupted while the interpreter started");
        }
    }

    private ExecutionResult run(Interpreter ip, SessionCall call, boolean created) {
        Limits l = call.request().limits();
        Workspaces.Hold hold = workspace.map(Workspace::hold).orElse(null);
        ListenerDispatcher progress = new ListenerDispatcher(call.listener(), owner.threads());
        try {
            Map<String, WorkspaceFs.Entry> before = new HashMap<>();
            boolean scanTruncated = false;
            long fileCap = l.diskBytes();
            if (workspace.isPresent()) {
                Workspace ws = workspace.get();
                scanTruncated = !ws.fs().walkTree(RelPath.ROOT, LocalRun.SCAN_LIMIT, e -> before.put(e.path().toString(), e));
                long used = 0;
                for (WorkspaceFs.Entry e : before.values()) used += e.size();
                fileCap = Math.min(fileCap, Math.max(LocalRun.MIN_WORKSPACE_DISK, ws.quotaBytes() - used));
            }
            AtomicBoolean overCap = new AtomicBoolean();
            OutputCollector out = new OutputCollector(l.outputBytes(), OutputListener.Stream.STDOUT, progress,
                    () -> overCap.set(true));
            OutputCollector err = new OutputCollector(l.outputBytes(), OutputListener.Stream.STDERR, progress,
                    () -> overCap.set(true));
            String id = hex(16);
            long t0 = System.nanoTime();
            CompletableFuture<Boolean> outDone = ip.out.begin(id, out);
            CompletableFuture<Boolean> errDone = ip.err.begin(id, err);
            JsonNode response = null;
            Outcome stoppedFor = null;
            boolean killedAfterGrace = false;
            String sendFailure = null;
            try {
                ip.process.limitProgramSoft(l.cpuSeconds(), fileCap);
                Map<String, String> msg = new LinkedHashMap<>();
                msg.put("id", id);
                msg.put("code", call.request().code());
                msg.put("stdin", call.request().stdin());
                ip.control.send(JSON.writeValueAsString(msg));
                long deadline = t0 + l.timeout().toNanos();
                while (true) {
                    Object m = ip.messages.poll(20, TimeUnit.MILLISECONDS);
                    if (m == END) break;
                    if (m instanceof JsonNode n && id.equals(n.path("id").asString(""))) {
                        response = n;
                        break;
                    }
                    if (call.cancelled) stoppedFor = Outcome.CANCELLED;
                    else if (overCap.get()) stoppedFor = Outcome.OUTPUT_LIMIT;
                    else if (System.nanoTime() > deadline) stoppedFor = Outcome.TIMEOUT;
                    if (stoppedFor != null) break;
                }
                if (stoppedFor != null) {
                    long graceEnd = System.nanoTime() + INTERRUPT_GRACE.toNanos();
                    long nextInterrupt = 0;
                    while (true) {
                        long now = System.nanoTime();
                        if (now - nextInterrupt >= 0) {
                            ip.process.interrupt();
                            nextInterrupt = now + INTERRUPT_EVERY.toNanos();
                        }
                        Object m = ip.messages.poll(20, TimeUnit.MILLISECONDS);
                        if (m == END) break;
                        if (m instanceof JsonNode n && id.equals(n.path("id").asString(""))) {
                            response = n;
                            break;
                        }
                        if (System.nanoTime() - graceEnd > 0) {
                            killedAfterGrace = true;
                            ip.kill("interrupt grace over");
                            break;
                        }
                    }
                }
            } catch (SandboxException | IOException e) {
                // usually the interpreter died just now (handled below as an end); if not, it is unusable
                if (!ip.ended && !ip.process.memoryLimitHit()) {
                    sendFailure = e.getMessage();
                    log.warn("session {}: the call could not be handed to the interpreter: {}", ref.name(), e.toString());
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                stoppedFor = Outcome.CANCELLED;
                killedAfterGrace = true;
                ip.kill("the server stopped the call");
            }
            long durationMs = (System.nanoTime() - t0) / 1_000_000;

            if (response != null) {
                awaitMarker(outDone);
                awaitMarker(errDone);
            } else {
                ip.process.kill();
                waitQuietly(ip.process, Duration.ofSeconds(10));
                awaitMarker(outDone);
                awaitMarker(errDone);
            }
            if (!ip.out.detach(out)) out.end();
            if (!ip.err.detach(err)) err.end();

            ExecutionResult r;
            if (response != null) {
                r = answered(call, response, stoppedFor, out, err, durationMs, created, ip, progress);
            } else {
                r = ended(call, ip, stoppedFor, killedAfterGrace, sendFailure, out, err, durationMs, created, progress);
            }
            if (workspace.isPresent()) {
                Map<String, WorkspaceFs.Entry> after = new HashMap<>();
                boolean truncatedAfter = !workspace.get().fs().walkTree(RelPath.ROOT, LocalRun.SCAN_LIMIT,
                        e -> after.put(e.path().toString(), e));
                workspace.get().fs().touch();
                r = r.withFiles(LocalRun.changedFiles(before, after), scanTruncated || truncatedAfter);
            }
            progress.finish(Duration.ofSeconds(2));
            return r;
        } catch (WorkspaceException e) {
            return call.failedToStart("the workspace cannot be used: " + e.getMessage());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return call.failedToStart("the call was interrupted by the server");
        } finally {
            progress.abandon();
            if (hold != null) hold.close();
        }
    }

    private static void awaitMarker(CompletableFuture<Boolean> f) {
        try {
            f.get(MARKER_WAIT.toMillis(), TimeUnit.MILLISECONDS);
        } catch (TimeoutException | java.util.concurrent.ExecutionException e) {
            // late or lost (the user's code closed its stdout): the output so far is the call's
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    /** The runner answered: the session lives on, whatever happened to the call. */
    private ExecutionResult answered(SessionCall call, JsonNode response, Outcome stoppedFor, OutputCollector out,
            OutputCollector err, long durationMs, boolean created, Interpreter ip, ListenerDispatcher progress) {
        JsonNode error = response.path("error");
        int exitCode = error.isString() ? 1 : 0;
        Optional<String> result = response.path("result").isString()
                ? Optional.of(response.path("result").asString()) : Optional.empty();
        List<Figure> figures = new ArrayList<>();
        for (JsonNode f : response.path("figures").values()) {
            try {
                figures.add(new Figure(f.path("mimeType").asString("image/png"),
                        Base64.getDecoder().decode(f.path("data").asString(""))));
            } catch (IllegalArgumentException e) {
                // not base64: dropped
            }
        }
        Outcome outcome = stoppedFor == null ? Outcome.EXITED : stoppedFor;
        String line = stoppedFor == null ? "" : "[interrupted] " + reason(stoppedFor, call.request().limits())
                + "; the call was interrupted and the session kept its state\n";
        return result(call, exitCode, out, err, line, durationMs, outcome, ip, progress)
                .withSession(new SessionOutput(ref.name(), created, result, figures));
    }

    /** The interpreter is gone: the session ends with it (unless the server killed it on purpose). */
    private ExecutionResult ended(SessionCall call, Interpreter ip, Outcome stoppedFor, boolean killedAfterGrace,
            String sendFailure, OutputCollector out, OutputCollector err, long durationMs, boolean created, ListenerDispatcher progress) {
        Limits l = call.request().limits();
        String purpose = ip.killedBecause;
        Outcome outcome;
        String line;
        int exitCode = exitCodeOf(ip.process);
        String after = "; the session was killed (its state is gone) and the next call starts a new one\n";
        if (sendFailure != null) {
            outcome = Outcome.FAILED_TO_START;
            line = "[terminated] the server could not hand the call to the session's interpreter" + after;
        } else if (killedAfterGrace) {
            outcome = stoppedFor;
            line = "[terminated] " + reason(stoppedFor, l) + "; the call did not stop within "
                    + INTERRUPT_GRACE.toMillis() + " ms of being interrupted" + after;
        } else if (purpose != null) {
            outcome = Outcome.CANCELLED;
            line = "[terminated] the session was " + purpose + " while the call ran\n";
        } else if (ip.process.memoryLimitHit()) {
            outcome = Outcome.MEMORY_LIMIT;
            line = "[terminated] memory limit " + l.memoryMb() + " MB exceeded" + after;
        } else if (ip.process.cpuLimitHit()) {
            outcome = Outcome.CPU_LIMIT;
            line = "[terminated] CPU time limit " + l.cpuSeconds() + " s exceeded" + after;
        } else if (exitCode > 128 && exitCode <= 128 + 64) {
            outcome = Outcome.KILLED_BY_SIGNAL;
            line = "[terminated] the session's interpreter was killed by signal " + (exitCode - 128) + after;
        } else {
            outcome = Outcome.EXITED;
            line = "[session ended] the interpreter exited with code " + exitCode
                    + "; the session's state is gone and the next call starts a new one\n";
        }
        if (purpose == null || killedAfterGrace || sendFailure != null) forget(ip);
        else {
            ip.discard();
            proc = null;
        }
        return result(call, exitCode, out, err, line, durationMs, outcome, ip, progress)
                .withSession(new SessionOutput(ref.name(), created, Optional.empty(), List.of()));
    }

    private ExecutionResult result(SessionCall call, int exitCode, OutputCollector out, OutputCollector err,
            String line, long durationMs, Outcome outcome, Interpreter ip, ListenerDispatcher progress) {
        String stderr = err.text();
        if (!line.isEmpty()) {
            String sep = stderr.isEmpty() || stderr.endsWith("\n") ? "" : "\n";
            stderr = stderr + sep + line;
            progress.onOutput(OutputListener.Stream.STDERR, sep + line);
        }
        return new ExecutionResult(language.id(), exitCode, out.text(), stderr, durationMs, outcome,
                out.truncated() || err.truncated(), ip.process.peakMemoryBytes(), OptionalDouble.empty(),
                owner.sandbox().name());
    }

    private static String reason(Outcome o, Limits l) {
        return switch (o) {
            case TIMEOUT -> "timeout after " + l.timeout().toMillis() + " ms";
            case CANCELLED -> "cancelled";
            case OUTPUT_LIMIT -> "output limit " + (l.outputBytes() / 1024) + " KB exceeded";
            default -> o.wireName();
        };
    }

    /** Under the lock: the interpreter ended by itself; the session is removed. */
    private void forget(Interpreter ip) {
        ip.discard();
        proc = null;
        closed = true;
        owner.forget(this);
    }

    /** Called when an interpreter's control channel closed: if no call is running, the session ends now. */
    private void endedByItself(Interpreter ip) {
        if (ip.killedBecause != null || !lock.tryLock()) return;
        try {
            if (closed || proc != ip) return;
            String why = ip.why();
            forget(ip);
            owner.endedWhileIdle(ref, "session '" + ref.name() + "' ended while idle: " + why
                    + ". Its state is gone; the next call starts a new session.");
        } finally {
            lock.unlock();
        }
    }

    /**
     * Kills the interpreter (a running call ends at once) for {@code because}, then, with the lock, either starts a
     * fresh one (reset) or marks the session closed. Returns false when it was already closed.
     */
    boolean stop(String because, boolean restart) {
        if (!restart) closing = true;
        Interpreter running = proc;
        if (running != null) running.kill(because);
        lock.lock();
        try {
            if (closed) return false;
            Interpreter ip = proc;
            if (ip != null) {
                ip.killedBecause = because;
                ip.discard();
            }
            proc = null;
            calls.set(0);
            if (!restart) {
                closed = true;
                return true;
            }
            created = Instant.now();
            try {
                proc = start();
            } catch (SandboxException e) {
                log.warn("session {}: restart after reset failed: {}", ref.name(), e.getMessage());
            }
            return true;
        } finally {
            lock.unlock();
        }
    }

    /** Ends the session if it is idle and past its idle time; true when it did. */
    boolean expireIfIdle(Instant cutoff) {
        if (busy || !lastUsed.isBefore(cutoff) || !lock.tryLock()) return false;
        try {
            if (closed || busy || !lastUsed.isBefore(cutoff)) return false;
            Interpreter ip = proc;
            if (ip != null) ip.kill("closed after being idle");
            if (ip != null) ip.discard();
            proc = null;
            closed = true;
            return true;
        } finally {
            lock.unlock();
        }
    }

    private static int exitCodeOf(SandboxProcess p) {
        try {
            return p.exitCode();
        } catch (RuntimeException e) {
            return -1;
        }
    }

    private static void waitQuietly(SandboxProcess p, Duration d) {
        try {
            p.waitFor(d);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    static String hex(int bytes) {
        byte[] b = new byte[bytes];
        RANDOM.nextBytes(b);
        return HexFormat.of().formatHex(b);
    }
}
