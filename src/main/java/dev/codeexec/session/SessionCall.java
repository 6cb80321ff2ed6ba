package dev.codeexec.session;

import dev.codeexec.codemode.CodeToolsRun;
import dev.codeexec.config.Ids;
import dev.codeexec.egress.EgressPolicy;
import dev.codeexec.engine.ExecutionRequest;
import dev.codeexec.engine.ExecutionResult.Figure;
import dev.codeexec.engine.ExecutionResult.SessionOutput;
import dev.codeexec.engine.ExecutionResult;
import dev.codeexec.engine.OutputListener;
import dev.codeexec.engine.RunEnd;
import dev.codeexec.engine.SessionRef;
import dev.codeexec.lang.Language;
import dev.codeexec.packages.PackageStore;
import dev.codeexec.run.ListenerDispatcher;
import dev.codeexec.run.OutputCollector;
import dev.codeexec.run.RunScope;
import dev.codeexec.run.WorkspaceDiff;
import dev.codeexec.sandbox.Limits;
import dev.codeexec.sandbox.SandboxException;
import dev.codeexec.workspace.Workspace;
import dev.codeexec.workspace.WorkspaceException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import tools.jackson.databind.JsonNode;

import java.io.IOException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Base64;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalDouble;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * One call in a session: it waits for a slot and then for its session like a run ({@link #execute()}), and is then
 * handed to the session's interpreter ({@link #run}). What happens then is a small state machine:
 * <pre>
 *   SENT ──answer──▶ ANSWERED                       the session lives on
 *     │  ╲──channel closed──▶ LOST                   the interpreter died, or the server ended the session
 *     │ cancel / timeout / output flood
 *     ▼
 *   INTERRUPTING (SIGINT every 100 ms) ──answer──▶ ANSWERED (interrupted; the session kept its state)
 *     │  ╲──channel closed──▶ LOST
 *     └──no answer within the grace──▶ KILLED        the interpreter is killed; the session ends
 * </pre>
 * A call that could not be handed over at all ends NOT_HANDED_OVER. {@link RunEnd} turns the final state into the
 * result. A single SIGINT can be lost (it may arrive while the runner is between calls), hence the repetition.
 */
public final class SessionCall {
    static final Duration INTERRUPT_EVERY = Duration.ofMillis(100);
    /** The runner writes its markers before its answer; this much lag of our pipe readers means something broke. */
    private static final Duration MARKER_WAIT = Duration.ofSeconds(2);
    private static final Duration POLL = Duration.ofMillis(20);

    private static final Logger log = LoggerFactory.getLogger(SessionCall.class);

    enum State { SENT, INTERRUPTING, ANSWERED, LOST, KILLED, NOT_HANDED_OVER }

    /**
     * What a call did to its session, besides its result.
     *
     * @param interpreterGone the interpreter is no longer usable (it died, was killed, or the server ended it)
     * @param sessionEnds     the session ends with it (anything but the server ending it on purpose, which then
     *                        decides itself whether a new interpreter follows)
     */
    record Done(ExecutionResult result, boolean interpreterGone, boolean sessionEnds) {
    }

    private final Sessions sessions;
    private final ExecutionRequest request;
    private final Language language;
    private final OutputListener listener;
    /** The call's id: its marker in the interpreter's streams. */
    private final String id = Ids.hex(16);
    /**
     * What the call holds from its wait for the session's packages to its result (its workspace, the session's
     * channel for the call's duration, its output dispatch); the interpreter is the session's, borrowed.
     */
    private final RunScope scope = new RunScope("ses-call-" + id);

    SessionCall(Sessions sessions, ExecutionRequest request, Language language, OutputListener listener) {
        this.sessions = sessions;
        this.request = request;
        this.language = language;
        this.listener = listener;
    }

    ExecutionRequest request() {
        return request;
    }

    Language language() {
        return language;
    }

    SessionRef ref() {
        return request.session().orElseThrow();
    }

    /** Runs on a slot's thread; see {@link Sessions#execute}. */
    public ExecutionResult execute() {
        return sessions.execute(this);
    }

    /** Cancels the call: a wait for the session's packages ends at once; a call in its interpreter is interrupted. */
    public void cancel() {
        scope.cancel();
    }

    boolean cancelled() {
        return scope.cancelled();
    }

    /**
     * Waits for an install, cancellable by {@link #cancel}.
     *
     * @throws InterruptedException the call was cancelled meanwhile (the lease, if it came, is given back)
     */
    PackageStore.Lease whileInstalling(Install install) throws PackageStore.InstallFailed, InterruptedException {
        PackageStore.Lease lease = scope.await(install::acquire);
        if (scope.cancelled()) {
            lease.close();
            throw new InterruptedException("cancelled");
        }
        return lease;
    }

    @FunctionalInterface
    interface Install {
        PackageStore.Lease acquire() throws PackageStore.InstallFailed, InterruptedException;
    }

    ExecutionResult cancelledBeforeStart() {
        return plain(RunEnd.of(new RunEnd.CancelledBeforeStart(), request.limits()), "");
    }

    ExecutionResult failedToStart(String message) {
        return plain(RunEnd.of(new RunEnd.NotStarted(message), request.limits()), message);
    }

    /** The code did not run: the client is told what happened to its session (once). */
    ExecutionResult notice(String message) {
        return failedToStart(message);
    }

    private ExecutionResult plain(RunEnd end, String message) {
        return end.result(language.id(), sessions.sandbox().name(), message)
                .withSession(new SessionOutput(ref().name(), false, Optional.empty(), List.of()));
    }

    /**
     * Runs the call in the interpreter (the session's lock held): its workspace scanned before and after, its own
     * CPU budget and file-size cap, its output cut from the interpreter's streams by the call's marker.
     *
     * @param created the interpreter was started for this call (its state was empty)
     * @param egress  what the call may reach: the session's channel serves it for the call's duration only
     */
    Done run(SessionInterpreter ip, boolean created, Optional<Workspace> workspace, EgressPolicy egress) {
        Limits l = request.limits();
        try (RunScope s = scope) {
            WorkspaceDiff diff = workspace.isPresent() ? s.holdWorkspace(workspace.get()) : null;
            // the API or another run may have added files since the last call: the session's uid gets them all
            if (workspace.isPresent()) ip.process.hostUid().ifPresent(workspace.get()::handOver);
            long fileCap = diff == null ? l.diskBytes() : Math.min(l.diskBytes(), diff.spaceLeft());
            AtomicBoolean flood = new AtomicBoolean();
            ListenerDispatcher progress = s.progress(listener, sessions.threads(), sessions.progressInterval());
            OutputCollector.Drain drain = new OutputCollector.Drain(l.drainBytes(), () -> flood.set(true));
            OutputCollector out = new OutputCollector(l.outputBytes(), OutputListener.Stream.STDOUT, progress, drain);
            OutputCollector err = new OutputCollector(l.outputBytes(), OutputListener.Stream.STDERR, progress, drain);
            CodeToolsRun codeRun = ip.egress == null ? null
                    : sessions.codeTools().map(t -> t.open(ref().tenant(), s.id())).orElse(null);
            if (ip.egress != null) ip.egress.arm(egress, ref().tenant(), s.id(), codeRun, ip.secrets);
            // the session's channel serves this call only; the session keeps it (and its interpreter) for the next
            s.channel(ip.egress, null, codeRun, false);
            s.program(ip.process, false);
            long t0 = System.nanoTime();
            CompletableFuture<Boolean> outDone = ip.out.begin(id, out);
            CompletableFuture<Boolean> errDone = ip.err.begin(id, err);

            Exchange x = new Exchange(ip, id, err);
            s.watchWorkspace(() -> { }); // past the limits the exchange interrupts the call (the interpreter lives on)
            x.run(fileCap, t0 + l.timeout().toNanos(), flood);
            long durationMs = (System.nanoTime() - t0) / 1_000_000;

            if (x.state != State.ANSWERED) {
                try {
                    s.stopProgram(); // the interpreter is killed: the session ends with the call
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            }
            // a call's connections end with the call, and until the next call the channel refuses new ones
            s.endNetwork();
            awaitMarker(outDone);
            awaitMarker(errDone);
            if (!ip.out.detach(out)) out.end();
            if (!ip.err.detach(err)) err.end();

            ExecutionResult r = s.complete(RunEnd.of(x.facts(), l).result(language.id(), out.captured(), err.captured(),
                    durationMs, ip.process.peakMemoryBytes(), OptionalDouble.empty(), sessions.sandbox()
                            .name(), progress)
                    .withSession(x.sessionOutput(ref().name(), created)));
            s.finishProgress(Duration.ofSeconds(2));
            boolean gone = x.state != State.ANSWERED;
            return new Done(r, gone, gone && !x.endedByServer());
        } catch (WorkspaceException e) {
            return new Done(failedToStart("the workspace cannot be used: " + e.getMessage()), false, false);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return new Done(failedToStart("the call was interrupted by the server"), false, false);
        }
    }

    /** One exchange with the interpreter: the call handed over, then its states until it is decided. */
    private final class Exchange {
        private final SessionInterpreter ip;
        private final String id;
        /** The call's stderr, where a note from the server goes before the code's own output. */
        private final OutputCollector err;
        State state;
        RunEnd.Stop stop;
        JsonNode answer;

        Exchange(SessionInterpreter ip, String id, OutputCollector err) {
            this.ip = ip;
            this.id = id;
            this.err = err;
        }

        void run(long fileCap, long deadline, AtomicBoolean flood) {
            try {
                long cap = ip.process.limitProgramSoft(request.limits().cpuSeconds(), fileCap);
                if (cap < fileCap) note("[session] files written by this call are capped at " + RunEnd.mb(cap)
                        + ", below the " + RunEnd.mb(fileCap) + " it may write: an earlier call lowered the "
                        + "session's file-size limit and this server cannot raise it again; session_reset gives a "
                        + "fresh interpreter with the full room\n");
                Map<String, String> msg = new LinkedHashMap<>();
                msg.put("id", id);
                msg.put("code", request.code());
                msg.put("stdin", request.stdin());
                ip.send(msg);
                state = State.SENT;
            } catch (SandboxException | IOException e) {
                // usually the interpreter died just now (an end like any other); if not, it is unusable
                boolean died = ip.ended || ip.process.memoryLimitHit();
                if (!died) log.warn("session {}: the call could not be handed to the interpreter: {}", ref()
                        .name(), e.toString());
                state = died ? State.LOST : State.NOT_HANDED_OVER;
                return;
            }
            try {
                long graceEnd = 0;
                long nextInterrupt = 0;
                while (state == State.SENT || state == State.INTERRUPTING) {
                    long now = System.nanoTime();
                    if (state == State.INTERRUPTING && now - nextInterrupt >= 0) {
                        ip.process.interrupt();
                        nextInterrupt = now + INTERRUPT_EVERY.toNanos();
                    }
                    Object m = ip.messages.poll(POLL.toMillis(), TimeUnit.MILLISECONDS);
                    if (m == SessionInterpreter.END) {
                        state = State.LOST;
                    } else if (m instanceof JsonNode n && id.equals(n.path("id").asString(""))) {
                        answer = n;
                        state = State.ANSWERED;
                    } else if (state == State.SENT) {
                        stop = scope.stopReason(flood.get(), System.nanoTime() - deadline > 0);
                        if (stop != null) {
                            state = State.INTERRUPTING;
                            graceEnd = System.nanoTime() + RunEnd.SESSION_INTERRUPT_GRACE.toNanos();
                            nextInterrupt = System.nanoTime();
                        }
                    } else if (System.nanoTime() - graceEnd > 0) {
                        ip.kill("interrupt grace over");
                        state = State.KILLED;
                    }
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                stop = RunEnd.Stop.CANCELLED;
                ip.kill("the server stopped the call");
                state = State.KILLED;
            }
        }

        private void note(String text) {
            byte[] b = text.getBytes(java.nio.charset.StandardCharsets.UTF_8);
            err.feed(b, 0, b.length);
        }

        boolean endedByServer() {
            return state == State.LOST && ip.killedBecause != null;
        }

        RunEnd.Facts facts() {
            return switch (state) {
                case ANSWERED -> new RunEnd.SessionAnswered(stop, answer.path("exitCode").isInt()
                        ? answer.path("exitCode").asInt() : answer.path("error").isString() ? 1 : 0);
                case NOT_HANDED_OVER -> lost(RunEnd.Loss.NOT_HANDED_OVER);
                case KILLED -> lost(RunEnd.Loss.IGNORED_INTERRUPT);
                case LOST -> lost(endedByServer() ? RunEnd.Loss.ENDED_BY_SERVER : RunEnd.Loss.DIED);
                case SENT, INTERRUPTING -> throw new IllegalStateException("the call is not decided yet");
            };
        }

        private RunEnd.Facts lost(RunEnd.Loss loss) {
            return new RunEnd.InterpreterLost(loss, stop, ip.killedBecause, ip.termination(),
                    ip.process.memoryLimitHit(), ip.process.cpuLimitHit());
        }

        /** What an answer carries besides the output: the final expression's value and the figures. */
        SessionOutput sessionOutput(String name, boolean created) {
            if (answer == null) return new SessionOutput(name, created, Optional.empty(), List.of());
            Optional<String> value = answer.path("result").isString()
                    ? Optional.of(answer.path("result").asString()) : Optional.empty();
            List<Figure> figures = new ArrayList<>();
            for (JsonNode f : answer.path("figures").values()) {
                try {
                    figures.add(new Figure(f.path("mimeType").asString("image/png"),
                            Base64.getDecoder().decode(f.path("data").asString(""))));
                } catch (IllegalArgumentException e) {
                    // not base64: dropped
                }
            }
            java.util.OptionalInt count = answer.path("executionCount").isInt()
                    ? java.util.OptionalInt.of(answer.path("executionCount").asInt()) : java.util.OptionalInt.empty();
            JsonNode e = answer.path("errorInfo");
            Optional<ExecutionResult.CellError> error = e.isObject()
                    ? Optional.of(new ExecutionResult.CellError(e.path("name").asString(""), e.path("value")
                            .asString(""),
                            e.path("traceback").asString("")))
                    : Optional.empty();
            List<ExecutionResult.RichOutput> outputs = new ArrayList<>();
            for (JsonNode o : answer.path("outputs").values()) {
                java.util.Map<String, String> data = new java.util.LinkedHashMap<>();
                o.path("data").properties().forEach(en -> {
                    if (en.getValue().isString()) data.put(en.getKey(), en.getValue().asString());
                });
                if (data.containsKey("text/plain")) outputs.add(new ExecutionResult.RichOutput(o.path("kind")
                        .asString("display"), data));
            }
            return new SessionOutput(name, created, value, figures, count, error, outputs);
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
}
