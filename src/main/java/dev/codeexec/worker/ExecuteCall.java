package dev.codeexec.worker;

import dev.codeexec.wire.WireFormat;
import dev.codeexec.engine.ExecutionResult;
import dev.codeexec.engine.OutputListener;
import dev.codeexec.engine.RunHandle;
import dev.codeexec.wire.v1.Accepted;
import dev.codeexec.wire.v1.ExecuteEvent;
import dev.codeexec.wire.v1.Output;
import io.grpc.Metadata;
import io.grpc.Status;
import io.grpc.stub.ServerCallStreamObserver;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/**
 * One Execute call: the engine's listener on one side, the gRPC stream on the other. Every send happens under this
 * object's lock, because the engine calls from several threads (the slot holder for {@code onStart}, one reader per
 * pipe for output) and a gRPC stream takes one writer at a time.
 *
 * <p>The ordering promise of worker.proto lives here: nothing goes out before {@code accepted} (gRPC commits a call
 * for retry on its first response headers or message, and the gateway's retry is what makes a never-started job safe
 * to run elsewhere), {@code accepted} goes out once the run holds its slot, and the run starts only when the client's
 * {@code start} arrives — proof that the client saw {@code accepted} and so will never retry it; output follows,
 * {@code result} is last.
 */
final class ExecuteCall implements OutputListener {

    private final ServerCallStreamObserver<ExecuteEvent> stream;
    private final String worker;
    private final String instanceId;
    private RunHandle handle;
    /** gRFC A6 server pushback: a negative value means "do not retry this call". */
    static final Metadata.Key<String> NO_RETRY = Metadata.Key.of("grpc-retry-pushback-ms", Metadata.ASCII_STRING_MARSHALLER);

    /** How long a run that holds its slot waits for the client's {@code start}: a round trip, normally. */
    static final java.time.Duration START_WAIT = java.time.Duration.ofSeconds(10);
    private final java.util.concurrent.CompletableFuture<Boolean> go = new java.util.concurrent.CompletableFuture<>();
    private boolean started;
    private String runId = "";
    private boolean acceptedSent;
    private boolean bounced;
    private boolean ended;
    /** The call was cancelled before the executor returned the handle. */
    private boolean cancelRequested;
    /** Output read before {@code accepted} went out: only from an executor that never calls onStart (a test double). */
    private final List<ExecuteEvent> early = new ArrayList<>();

    ExecuteCall(ServerCallStreamObserver<ExecuteEvent> stream, String worker, String instanceId) {
        this.stream = stream;
        this.worker = worker;
        this.instanceId = instanceId;
    }

    /**
     * The run holds its slot: {@code accepted} goes out now (also when the executor calls this inside
     * {@code submit}, before the handle exists), then the slot holder waits for the client's {@code start}. No
     * {@code start} within {@link #START_WAIT} (or the call ended first): the run is dropped, having run nothing.
     */
    @Override
    public boolean onStart(String id) {
        synchronized (this) {
            if (bounced || ended) return false;
            started = true;
            runId = id;
            sendAcceptedOnceKnown();
        }
        try {
            return go.get(START_WAIT.toMillis(), TimeUnit.MILLISECONDS);
        } catch (TimeoutException e) {
            return false;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return false;
        } catch (java.util.concurrent.ExecutionException e) {
            return false;
        }
    }

    /** The client saw {@code accepted} and sent {@code start}. */
    void startReceived() {
        go.complete(true);
    }

    /** The client will not send {@code start} (it half-closed, failed or cancelled): a waiting run is dropped. */
    void noStart() {
        go.complete(false);
    }

    @Override
    public void onOutput(Stream s, String text) {
        onOutput(s, text, System.currentTimeMillis());
    }

    @Override
    public synchronized void onOutput(Stream s, String text, long atMillis) {
        ExecuteEvent e = ExecuteEvent.newBuilder().setOutput(Output.newBuilder()
                .setStream(s == Stream.STDERR ? Output.Stream.STDERR : Output.Stream.STDOUT).setText(text)
                .setAtMillis(atMillis)).build();
        if (ended) return;
        if (!acceptedSent) {
            early.add(e);
            return;
        }
        send(e);
    }

    /** The executor took the run. */
    synchronized void submitted(RunHandle h) {
        handle = h;
        if (cancelRequested) h.cancel();
        sendAcceptedOnceKnown();
    }

    /**
     * The worker is draining: a run that has not taken a slot yet is cancelled and its call ends with UNAVAILABLE,
     * so the gateway retries it on another worker. It cannot have started: cancelling a queued run makes its slot
     * holder skip it (LocalRun.execute checks the flag after onStart), and onStart after this does nothing.
     *
     * @return true when this call was bounced
     */
    synchronized boolean bounceIfQueued() {
        if (started || ended || handle == null) return false;
        bounced = true;
        handle.cancel();
        return true;
    }

    /** Kills the run (call cancelled, deadline passed, drain grace over). */
    void cancel() {
        noStart();
        RunHandle h;
        synchronized (this) {
            cancelRequested = true;
            h = handle;
        }
        if (h != null) h.cancel();
    }

    synchronized boolean accepted() {
        return acceptedSent;
    }

    /** The run ended: its result, or why it could not be attempted. */
    synchronized void finish(ExecutionResult result, Throwable error) {
        finish(result, error, false);
    }

    /**
     * @param atOnce the engine refused the run inside submit (a full queue): nothing of the call's deadline was spent
     *               waiting, so the gateway may retry it elsewhere
     */
    synchronized void finish(ExecutionResult result, Throwable error, boolean atOnce) {
        if (ended) return;
        ended = true;
        if (bounced) {
            stream.onError(Status.UNAVAILABLE.withDescription("the worker is shutting down; the run did not start")
                    .asRuntimeException());
            return;
        }
        if (error != null) {
            // A run refused after it was accepted (an internal failure) still ends with a status, never a retry.
            Throwable cause = error instanceof java.util.concurrent.CompletionException c && c.getCause() != null
                    ? c.getCause() : error;
            // A run refused here waited in the queue (up to QUEUE_TIMEOUT_MS) out of the call's one deadline: a
            // retry elsewhere would start with too little of it left and could be cut off mid-run, so grpc is told
            // not to retry (a full queue, refused at once inside submit, stays retryable).
            Metadata trailers = new Metadata();
            if (!atOnce) trailers.put(NO_RETRY, "-1");
            stream.onError(WorkerService.status(cause).asRuntimeException(trailers));
            return;
        }
        // The contract says accepted exactly once: a run that ended without taking a slot (cancelled in the queue)
        // still acknowledges, which only ever stops a retry.
        if (!acceptedSent) {
            started = true;
            sendAcceptedOnceKnown();
        }
        send(ExecuteEvent.newBuilder().setResult(WireFormat.toProto(result, worker)).build());
        stream.onCompleted();
    }

    /** Ends a call before the executor took it. */
    synchronized void refuse(Status status) {
        if (ended) return;
        ended = true;
        stream.onError(status.asRuntimeException());
    }

    private void sendAcceptedOnceKnown() {
        if (acceptedSent || !started) return;
        acceptedSent = true;
        send(ExecuteEvent.newBuilder().setAccepted(Accepted.newBuilder().setWorker(worker)
                .setInstanceId(instanceId).setRunId(runId.isEmpty() && handle != null ? handle.id() : runId)).build());
        early.forEach(this::send);
        early.clear();
    }

    /** After a cancel gRPC drops messages (an on-cancel handler is set), so sending never throws here. */
    private void send(ExecuteEvent e) {
        stream.onNext(e);
    }

}
