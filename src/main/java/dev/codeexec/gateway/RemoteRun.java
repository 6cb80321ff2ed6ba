package dev.codeexec.gateway;

import dev.codeexec.engine.ExecutionException;
import dev.codeexec.engine.ExecutionRequest;
import dev.codeexec.engine.CapturedText;
import dev.codeexec.engine.ExecutionResult;
import dev.codeexec.engine.RunEnd;
import dev.codeexec.engine.OutputListener;
import dev.codeexec.engine.RunHandle;
import dev.codeexec.engine.SessionRef;
import dev.codeexec.wire.WireFormat;
import dev.codeexec.wire.v1.Accepted;
import dev.codeexec.wire.v1.ExecuteEvent;
import dev.codeexec.wire.v1.ExecuteInput;
import dev.codeexec.wire.v1.Start;
import dev.codeexec.wire.v1.Output;
import io.grpc.Status;
import io.grpc.stub.ClientCallStreamObserver;
import io.grpc.stub.ClientResponseObserver;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.util.List;
import java.util.Optional;
import java.util.OptionalDouble;
import java.util.OptionalLong;
import java.util.concurrent.CompletableFuture;

/**
 * One run sent to a worker: the Execute call's events turned into the engine's contract. The line that matters is
 * {@code accepted}: before it nothing ran, so a failure is a refusal (an exception, after grpc's own retries on other
 * workers); after it the run may have done anything, so a failure is a WORKER_LOST result and never a re-run.
 */
final class RemoteRun implements RunHandle, ClientResponseObserver<ExecuteInput, ExecuteEvent> {

    private static final Logger LOG = LoggerFactory.getLogger(RemoteRun.class);

    private final String id;
    private final ExecutionRequest request;
    private final OutputListener listener;
    private final RemoteExecutor owner;
    private final CompletableFuture<ExecutionResult> result = new CompletableFuture<>();
    /** What streamed, for the result of a run whose worker was lost: head and tail like a worker's result. */
    private final CapturedText stdout;
    private final CapturedText stderr;

    private ClientCallStreamObserver<ExecuteInput> call;
    private volatile boolean accepted;
    private volatile String worker = "";
    private volatile String instanceId = "";
    private volatile long acceptedNanos;
    private volatile boolean cancelled;
    /** The run's workspace, marked in use at this gateway until the run ends; null for stateless runs. */
    volatile dev.codeexec.workspace.Workspaces.Hold hold;
    /** Why the gateway gave up on the worker (it stopped answering), when it did. */
    private volatile String abandoned;

    RemoteRun(String id, ExecutionRequest request, OutputListener listener, RemoteExecutor owner) {
        this.id = id;
        this.request = request;
        this.listener = listener;
        this.owner = owner;
        this.stdout = new CapturedText(request.limits().outputBytes());
        this.stderr = new CapturedText(request.limits().outputBytes());
    }

    @Override
    public String id() {
        return id;
    }

    @Override
    public CompletableFuture<ExecutionResult> result() {
        return result;
    }

    boolean accepted() {
        return accepted;
    }

    /** The worker process that accepted the run; empty before {@code accepted}. */
    String instanceId() {
        return instanceId;
    }

    /** The worker stopped answering (see RemoteExecutor): the call ends now rather than at its deadline. */
    void abandon(String why) {
        if (result.isDone()) return;
        abandoned = why;
        ClientCallStreamObserver<ExecuteInput> c = call;
        if (c != null) c.cancel("worker " + why, null);
    }

    Optional<SessionRef> session() {
        return request.session();
    }

    /** Cancelling the call reaches the worker, which kills the run's process tree (or drops it from its queue). */
    @Override
    public void cancel() {
        if (result.isDone()) return;
        cancelled = true;
        ClientCallStreamObserver<ExecuteInput> c = call;
        if (c != null) c.cancel("cancelled by the client", null);
    }

    @Override
    public void beforeStart(ClientCallStreamObserver<ExecuteInput> requestStream) {
        call = requestStream;
    }

    @Override
    public void onNext(ExecuteEvent event) {
        switch (event.getEventCase()) {
            case ACCEPTED -> accept(event.getAccepted());
            case OUTPUT -> output(event.getOutput());
            case RESULT -> {
                ExecutionResult r = WireFormat.fromProto(event.getResult());
                if (r.worker().isEmpty() && !worker.isEmpty()) r = r.withWorker(worker);
                owner.sessionAnswered(this, instanceId);
                finish(r);
            }
            case EVENT_NOT_SET -> LOG.debug("run {}: empty event from worker {}", id, worker);
        }
    }

    /**
     * From here grpc never retries this call (it has a response), so the worker may start the run: {@code start}
     * tells it so. A worker that never gets it (it died, the connection broke) drops the run unstarted.
     */
    private void accept(Accepted a) {
        worker = a.getWorker();
        instanceId = a.getInstanceId();
        acceptedNanos = System.nanoTime();
        accepted = true;
        ClientCallStreamObserver<ExecuteInput> c = call;
        if (c != null && !cancelled && abandoned == null) {
            c.onNext(ExecuteInput.newBuilder().setStart(Start.getDefaultInstance()).build());
            c.onCompleted();
        }
        owner.sessionAnswered(this, instanceId);
        try {
            listener.onStart(id); // the gateway's own listeners only take note; the worker already holds the slot
        } catch (RuntimeException e) {
            LOG.warn("run {}: start listener failed: {}", id, e.toString());
        }
    }

    private void output(Output o) {
        OutputListener.Stream stream = o.getStream() == Output.Stream.STDERR ? OutputListener.Stream.STDERR
                : OutputListener.Stream.STDOUT;
        (stream == OutputListener.Stream.STDERR ? stderr : stdout).append(o.getText());
        try {
            if (o.getAtMillis() > 0) listener.onOutput(stream, o.getText(), o.getAtMillis());
            else listener.onOutput(stream, o.getText());
        } catch (RuntimeException e) {
            LOG.warn("run {}: output listener failed: {}", id, e.toString());
        }
    }

    @Override
    public void onError(Throwable t) {
        if (result.isDone()) return;
        Status s = Status.fromThrowable(t);
        String gaveUp = abandoned;
        if (cancelled && s.getCode() == Status.Code.CANCELLED) {
            finish(cancelledResult());
        } else if (gaveUp != null && accepted) {
            finish(workerLost(gaveUp));
        } else if (gaveUp != null && request.session().isPresent()) {
            finish(owner.sessionUnreachable(request, gaveUp));
        } else if (gaveUp != null) {
            fail(new ExecutionException.Unavailable("no worker could take the run: the worker it was sent to " + gaveUp));
        } else if (accepted) {
            finish(workerLost(reason(s)));
        } else if (s.getCode() == Status.Code.FAILED_PRECONDITION && request.session().isPresent()) {
            finish(owner.sessionLost(request));
        } else {
            fail(refusal(s));
        }
    }

    @Override
    public void onCompleted() {
        if (result.isDone()) return;
        if (accepted) finish(workerLost("ended the call without a result"));
        else fail(new ExecutionException.Unavailable("no worker could take the run: a worker ended the call "
                + "without accepting it"));
    }

    /** Before {@code accepted}: the run never started; grpc has already retried where that was safe. */
    private static ExecutionException refusal(Status s) {
        String detail = description(s).orElse(s.getCode().toString());
        return switch (s.getCode()) {
            case INVALID_ARGUMENT -> new ExecutionException.InvalidRequest(detail);
            case RESOURCE_EXHAUSTED -> new ExecutionException.Busy("all workers are busy: " + detail);
            case UNAUTHENTICATED, PERMISSION_DENIED -> new ExecutionException.Unavailable(
                    "no worker could take the run: the workers refused this gateway's credentials "
                            + "(WORKER_TOKEN or certificate)");
            case DEADLINE_EXCEEDED -> new ExecutionException.Unavailable(
                    "no worker could take the run: none accepted it before its deadline");
            default -> new ExecutionException.Unavailable("no worker could take the run: " + detail);
        };
    }

    private String reason(Status s) {
        return switch (s.getCode()) {
            case DEADLINE_EXCEEDED -> "did not finish the run within its deadline (timeout + queue wait + slack)";
            case UNAVAILABLE -> "connection lost" + description(s).map(d -> " (" + d + ")").orElse("");
            case CANCELLED -> "the call was cancelled" + description(s).map(d -> " (" + d + ")").orElse("");
            default -> s.getCode() + description(s).map(d -> " " + d).orElse("");
        };
    }

    /**
     * A status description fit for a client: grpc appends connection diagnostics in brackets (timings, addresses)
     * to some; those stay out, and a long text is cut.
     */
    static Optional<String> description(Status s) {
        String d = s.getDescription();
        if (d == null) return Optional.empty();
        int bracket = d.indexOf(" [");
        if (bracket >= 0) d = d.substring(0, bracket);
        if (d.length() > 200) d = d.substring(0, 200) + "...";
        return d.isBlank() ? Optional.empty() : Optional.of(d);
    }

    /**
     * After {@code accepted}: what streamed so far, and a last line saying what is (not) known. A session call keeps
     * its session's pin: if the worker process is really gone, the next call is refused by whichever worker the ring
     * picks now and the client gets the explicit lost-session notice instead of a silently fresh interpreter; if
     * the connection only broke, the session goes on where it was.
     */
    ExecutionResult workerLost(String why) {
        String who = worker.isEmpty() ? "?" : worker;
        return partial(new RunEnd.RemoteEnded(false, who + (instanceId.isEmpty() ? "" : " (instance " + instanceId + ")")
                + " " + why));
    }

    private ExecutionResult cancelledResult() {
        return partial(new RunEnd.RemoteEnded(true, ""));
    }

    private ExecutionResult partial(RunEnd.Facts facts) {
        long durationMs = accepted ? (System.nanoTime() - acceptedNanos) / 1_000_000 : 0;
        ExecutionResult r = RunEnd.of(facts, request.limits()).result(request.language(), stdout.captured(),
                stderr.captured(), durationMs, OptionalLong.empty(), OptionalDouble.empty(), owner.sandboxName(), null);
        if (request.session().isPresent()) {
            r = r.withSession(new ExecutionResult.SessionOutput(request.session().get().name(), false,
                    Optional.empty(), List.of()));
        }
        return worker.isEmpty() ? r : r.withWorker(worker);
    }

    private void finish(ExecutionResult r) {
        owner.ended(this);
        result.complete(r);
    }

    private void fail(ExecutionException e) {
        owner.ended(this);
        result.completeExceptionally(e);
    }
}
