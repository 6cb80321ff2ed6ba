package dev.codeexec.worker;

import dev.codeexec.wire.WireFormat;
import dev.codeexec.config.Config;
import dev.codeexec.engine.ExecutionException;
import dev.codeexec.engine.ExecutionRequest;
import dev.codeexec.engine.Executor;
import dev.codeexec.lang.Languages;
import dev.codeexec.sandbox.Limits;
import dev.codeexec.engine.RequestValidator;
import dev.codeexec.engine.RunHandle;
import dev.codeexec.engine.SessionControl;
import dev.codeexec.wire.v1.ExecuteEvent;
import dev.codeexec.wire.v1.ExecuteInput;
import dev.codeexec.job.Jobs;
import dev.codeexec.wire.v1.ExecuteRequest;
import dev.codeexec.wire.v1.JobReply;
import dev.codeexec.wire.v1.JobRequest;
import dev.codeexec.wire.v1.JobScope;
import dev.codeexec.wire.v1.ListJobsReply;
import dev.codeexec.wire.v1.ListJobsRequest;
import dev.codeexec.wire.v1.ReadJobReply;
import dev.codeexec.wire.v1.ReadJobRequest;
import dev.codeexec.wire.v1.ListSessionsRequest;
import dev.codeexec.wire.v1.ListSessionsResponse;
import dev.codeexec.wire.v1.RuntimeInfoRequest;
import dev.codeexec.wire.v1.RuntimeInfoResponse;
import dev.codeexec.wire.v1.SessionRequest;
import dev.codeexec.wire.v1.SessionResponse;
import dev.codeexec.wire.v1.StatusRequest;
import dev.codeexec.wire.v1.StatusResponse;
import dev.codeexec.wire.v1.WarmLevel;
import dev.codeexec.wire.v1.WorkerGrpc;
import dev.codeexec.workspace.WorkspaceException;
import dev.codeexec.workspace.Workspaces;
import io.grpc.Status;
import io.grpc.stub.ServerCallStreamObserver;
import io.grpc.stub.StreamObserver;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import tools.jackson.databind.json.JsonMapper;

import java.time.Instant;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

/**
 * The Worker service of worker.proto over this process's local engine. It trusts the gateway no more than it has
 * to: requests are validated again and their limits clamped to this worker's own maxima, so a caller holding the
 * token cannot get more than WORKER's configuration allows.
 */
final class WorkerService extends WorkerGrpc.WorkerImplBase {

    private static final Logger log = LoggerFactory.getLogger(WorkerService.class);

    private final Config config;
    private final Executor executor;
    private final Workspaces workspaces;
    private final RequestValidator validator;
    private final Identity identity;
    private final LoadReport load;
    private final Jobs jobs;
    private final dev.codeexec.engine.PreviewControl previews;
    private final Set<ExecuteCall> calls = ConcurrentHashMap.newKeySet();
    private volatile boolean draining;

    /**
     * Who this worker is, as Status, Accepted and results tell it.
     *
     * @param name       WORKER_NAME or the host name
     * @param instanceId random per process: a restarted worker is a new instance (its sessions are gone)
     */
    record Identity(String name, String instanceId, String version, String sandbox, Instant started) {
    }

    WorkerService(Config config, Executor executor, Workspaces workspaces, Identity identity, LoadReport load, Jobs jobs,
            dev.codeexec.engine.PreviewControl previews) {
        this.config = config;
        this.jobs = jobs;
        this.previews = previews;
        this.executor = executor;
        this.workspaces = workspaces;
        this.validator = new RequestValidator(config, Languages.load());
        this.identity = identity;
        this.load = load;
    }

    /**
     * The client's side of an Execute call: {@code request} first (the run is taken on a thread of its own, because
     * the slot holder then waits for {@code start}, which arrives through this same observer), then {@code start}.
     * A half-close or error before {@code start} drops a run that waits for it.
     */
    @Override
    public StreamObserver<ExecuteInput> execute(StreamObserver<ExecuteEvent> observer) {
        ServerCallStreamObserver<ExecuteEvent> stream = (ServerCallStreamObserver<ExecuteEvent>) observer;
        ExecuteCall call = new ExecuteCall(stream, identity.name(), identity.instanceId());
        // Set before anything can be sent: with a handler, a cancelled call drops messages instead of throwing,
        // and the cancel (client gone, deadline passed) kills the run.
        stream.setOnCancelHandler(call::cancel);
        return new StreamObserver<>() {
            private boolean requested;

            @Override
            public void onNext(ExecuteInput in) {
                switch (in.getInputCase()) {
                    case REQUEST -> {
                        if (requested) {
                            call.refuse(Status.INVALID_ARGUMENT.withDescription("one request per Execute call"));
                            return;
                        }
                        requested = true;
                        ExecuteRequest req = in.getRequest();
                        Thread.ofVirtual().name("execute-call").start(() -> take(req, call));
                    }
                    case START -> call.startReceived();
                    case INPUT_NOT_SET -> call.refuse(Status.INVALID_ARGUMENT.withDescription("empty Execute input"));
                }
            }

            @Override
            public void onError(Throwable t) {
                call.cancel();
            }

            @Override
            public void onCompleted() {
                // The gateway half-closes after start; before start it means no start will come.
                call.noStart();
                if (!requested) call.refuse(Status.INVALID_ARGUMENT.withDescription("no request on the Execute call"));
            }
        };
    }

    private void take(ExecuteRequest req, ExecuteCall call) {
        load.callArrived();
        if (draining) {
            call.refuse(Status.UNAVAILABLE.withDescription("the worker is shutting down; run elsewhere"));
            return;
        }
        if (sessionIsGone(req)) {
            call.refuse(Status.FAILED_PRECONDITION.withDescription("session '" + req.getSession()
                    + "' lived on a worker that is gone; its state is lost; call again to start a new session"));
            return;
        }
        ExecutionRequest request;
        try {
            request = toRequest(req);
        } catch (WorkspaceException e) {
            call.refuse(status(e));
            return;
        } catch (ExecutionException e) {
            call.refuse(status(e));
            return;
        } catch (IllegalArgumentException e) {
            call.refuse(Status.INVALID_ARGUMENT.withDescription("bad limits: " + e.getMessage()));
            return;
        }
        calls.add(call);
        RunHandle handle;
        try {
            handle = executor.submit(request, call);
        } catch (ExecutionException e) {
            calls.remove(call);
            call.refuse(status(e));
            return;
        } catch (RuntimeException e) {
            calls.remove(call);
            log.error("execute: unexpected error", e);
            call.refuse(Status.INTERNAL.withDescription("the worker could not take the run (internal error)"));
            return;
        }
        call.submitted(handle);
        // Already refused inside submit (a full queue): no time was spent waiting, a retry elsewhere is fine.
        boolean atOnce = handle.result().isCompletedExceptionally();
        handle.result().whenComplete((r, e) -> {
            calls.remove(call);
            call.finish(r, e, atOnce);
        });
    }

    /**
     * The gateway last saw this session on another worker process: the interpreter it knew is not here. Running the
     * call would silently start a fresh one — or continue one of the same name that another gateway started here
     * after the first was lost — so the client is told its state is gone instead (once: the gateway then forgets the
     * pin, and its next call continues whatever session lives here).
     */
    private boolean sessionIsGone(ExecuteRequest req) {
        return !req.getSession().isEmpty() && !req.getSessionWorker().isEmpty()
                && !req.getSessionWorker().equals(identity.instanceId());
    }

    /** The request validated again (language, sizes, args, env) with limits clamped to this worker's maxima. */
    private ExecutionRequest toRequest(ExecuteRequest req) {
        ExecutionRequest wire = WireFormat.fromProto(req, (tenant, name) -> workspaces.open(tenant, name, false));
        boolean job = wire.background();
        Limits limits = clamp(wire.limits(), job
                ? RequestValidator.jobLimits(config, java.time.Duration.ofMillis(config.get(Config.JOB_MAX_TIMEOUT_MS)))
                : RequestValidator.defaultLimits(config, config.maxTimeout()));
        ExecutionRequest checked = validator.validate(req.getLanguage(), wire.code(), wire.stdin(),
                limits.timeout().toMillis(), wire.args(), wire.env(), wire.audit(), job);
        // the gateway decided the caller's network policy; this worker's proxy enforces it (or refuses: EGRESS=off);
        // the declared packages were checked again by fromProto, for the language the worker runs
        return ExecutionRequest.builder(checked.language(), checked.code(), limits).stdin(checked.stdin())
                .args(checked.args()).env(checked.env()).audit(wire.audit()).workspace(wire.workspace())
                .session(wire.session()).egress(wire.egress(), wire.egressAsked()).packages(wire.packages()).background(job)
                .build();
    }

    static Limits clamp(Limits asked, Limits max) {
        return new Limits(asked.timeout().compareTo(max.timeout()) > 0 ? max.timeout() : asked.timeout(),
                Math.min(asked.cpuSeconds(), max.cpuSeconds()), Math.min(asked.memoryBytes(), max.memoryBytes()),
                Math.min(asked.maxProcesses(), max.maxProcesses()), Math.min(asked.outputBytes(), max.outputBytes()),
                Math.min(asked.diskBytes(), max.diskBytes()), Math.min(asked.drainBytes(), max.drainBytes()));
    }

    /** The one mapping of refusals to gRPC statuses; descriptions are the exceptions' client-safe messages. */
    static Status status(Throwable t) {
        return switch (t) {
            case ExecutionException.InvalidRequest e -> Status.INVALID_ARGUMENT.withDescription(e.getMessage());
            case ExecutionException.Busy e -> Status.RESOURCE_EXHAUSTED.withDescription(e.getMessage());
            case ExecutionException.Unavailable e -> Status.UNAVAILABLE.withDescription(e.getMessage());
            case WorkspaceException e -> switch (e.kind()) {
                case NOT_FOUND -> Status.NOT_FOUND.withDescription(e.getMessage());
                case BAD_NAME, BAD_PATH -> Status.INVALID_ARGUMENT.withDescription(e.getMessage());
                default -> Status.UNAVAILABLE.withDescription(e.getMessage());
            };
            default -> Status.INTERNAL.withDescription("the worker could not run the request (internal error)");
        };
    }

    @Override
    public void listSessions(ListSessionsRequest req, StreamObserver<ListSessionsResponse> out) {
        List<SessionControl.SessionInfo> list = executor.sessions().list(req.getTenant());
        out.onNext(ListSessionsResponse.newBuilder().addAllSessions(list.stream().map(WireFormat::toProto).toList())
                .setWorker(identity.name()).setInstanceId(identity.instanceId()).build());
        out.onCompleted();
    }

    @Override
    public void resetSession(SessionRequest req, StreamObserver<SessionResponse> out) {
        SessionResponse.Builder b = SessionResponse.newBuilder().setWorker(identity.name());
        if (!req.getSetPackages()) {
            b.setFound(executor.sessions().reset(req.getTenant(), req.getName()));
        } else {
            // the set is checked again here, for the language of the session as this worker has it
            var info = executor.sessions().list(req.getTenant()).stream().filter(i -> i.name().equals(req.getName())).findFirst();
            try {
                b.setFound(info.isPresent() && executor.sessions().reset(req.getTenant(), req.getName(),
                        req.getPackagesCount() == 0 ? java.util.Optional.empty() : java.util.Optional.of(
                                dev.codeexec.packages.PackageSet.parse(info.get().language(), req.getPackagesList()))));
            } catch (IllegalArgumentException | dev.codeexec.engine.ExecutionException e) {
                b.setFound(true).setError(e.getMessage());
            }
        }
        out.onNext(b.build());
        out.onCompleted();
    }

    @Override
    public void closeSession(SessionRequest req, StreamObserver<SessionResponse> out) {
        boolean found = executor.sessions().close(req.getTenant(), req.getName());
        out.onNext(SessionResponse.newBuilder().setFound(found).setWorker(identity.name()).build());
        out.onCompleted();
    }

    @Override
    public void status(StatusRequest req, StreamObserver<StatusResponse> out) {
        StatusResponse.Builder b = StatusResponse.newBuilder()
                .setWorker(identity.name()).setInstanceId(identity.instanceId()).setVersion(identity.version())
                .setRunning(executor.status().running()).setQueued(executor.status().queued()).setSlots(executor.status().maxConcurrent())
                .setSessions(executor.sessions().count()).setDraining(draining).setSandbox(identity.sandbox())
                .setStartedEpochMs(identity.started().toEpochMilli())
                .setJobsRunning(jobs.running()).setJobsQueued(jobs.queued()).putAllJobsEnded(jobs.endedByStatus());
        executor.status().warmPoolLevels().forEach((lang, level) -> b.putWarmPool(lang, WarmLevel.newBuilder()
                .setReady(level.getOrDefault("ready", 0)).setTarget(level.getOrDefault("target", 0)).build()));
        out.onNext(b.build());
        out.onCompleted();
    }

    @Override
    public void runtimeInfo(RuntimeInfoRequest req, StreamObserver<RuntimeInfoResponse> out) {
        String json = JsonMapper.shared().writeValueAsString(executor.runtimeInfo());
        out.onNext(RuntimeInfoResponse.newBuilder().setJson(json).build());
        out.onCompleted();
    }

    // ---- background jobs: kept here, found by id (which carries this instance's id) ----

    /** The longest GetJob / CancelJob wait. */
    static final long MAX_JOB_WAIT_MS = 60_000;
    /** The most one ReadJob returns. */
    static final int MAX_READ_BYTES = 1 << 20;

    @Override
    public void startJob(ExecuteRequest req, StreamObserver<JobReply> out) {
        load.callArrived();
        if (draining) {
            out.onError(Status.UNAVAILABLE.withDescription("the worker is shutting down; start the job elsewhere").asRuntimeException());
            return;
        }
        if (!req.getBackground() || !req.getSession().isEmpty()) {
            out.onError(Status.INVALID_ARGUMENT.withDescription("a job's request is a background one, without a session").asRuntimeException());
            return;
        }
        try {
            reply(out, jobs.start(toRequest(req)).state());
        } catch (IllegalArgumentException e) {
            out.onError(Status.INVALID_ARGUMENT.withDescription("bad limits: " + e.getMessage()).asRuntimeException());
        } catch (RuntimeException e) {
            if (!(e instanceof ExecutionException) && !(e instanceof WorkspaceException)) log.error("start job: unexpected error", e);
            out.onError(status(e).asRuntimeException());
        }
    }

    @Override
    public void getJob(JobRequest req, StreamObserver<JobReply> out) {
        withJob(req.getScope(), req.getId(), out, job -> reply(out, job.await(Math.clamp(req.getWaitMs(), 0, MAX_JOB_WAIT_MS))));
    }

    @Override
    public void cancelJob(JobRequest req, StreamObserver<JobReply> out) {
        withJob(req.getScope(), req.getId(), out, job -> reply(out, job.cancel(Math.clamp(req.getWaitMs(), 0, MAX_JOB_WAIT_MS))));
    }

    @Override
    public void readJob(ReadJobRequest req, StreamObserver<ReadJobReply> out) {
        withJob(req.getScope(), req.getId(), out, job -> {
            dev.codeexec.engine.LogChunk c = job.read(req.getStderr() ? dev.codeexec.engine.OutputListener.Stream.STDERR
                    : dev.codeexec.engine.OutputListener.Stream.STDOUT, Math.max(0, req.getOffset()),
                    Math.clamp(req.getMaxBytes(), 0, MAX_READ_BYTES));
            out.onNext(ReadJobReply.newBuilder().setFrom(c.from()).setNext(c.next()).setSkipped(c.skipped())
                    .setData(com.google.protobuf.ByteString.copyFrom(c.bytes())).setTotal(c.total()).build());
            out.onCompleted();
        });
    }

    @Override
    public void listJobs(ListJobsRequest req, StreamObserver<ListJobsReply> out) {
        ListJobsReply.Builder b = ListJobsReply.newBuilder().setWorker(identity.name());
        for (dev.codeexec.engine.JobState s : jobs.list(scope(req.getScope())))
            b.addStateJson(JsonMapper.shared().writeValueAsString(s.toWire()));
        out.onNext(b.build());
        out.onCompleted();
    }

    private interface JobCall {
        void run(dev.codeexec.job.Job job) throws Exception;
    }

    private static java.util.Optional<String> scope(JobScope scope) {
        return scope.getAllTenants() ? java.util.Optional.empty() : java.util.Optional.of(scope.getTenant());
    }

    /** Runs {@code call} on the scope's job of that id, or answers NOT_FOUND. */
    private void withJob(JobScope scope, String id, StreamObserver<?> out, JobCall call) {
        java.util.Optional<dev.codeexec.job.Job> job = jobs.find(scope(scope), id);
        if (job.isEmpty()) {
            out.onError(Status.NOT_FOUND.withDescription("no such job").asRuntimeException());
            return;
        }
        try {
            call.run(job.get());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            out.onError(Status.CANCELLED.withDescription("the worker is stopping").asRuntimeException());
        } catch (java.io.IOException e) {
            out.onError(Status.UNAVAILABLE.withDescription("the job's output cannot be read: " + e.getMessage()).asRuntimeException());
        } catch (Exception e) {
            log.error("job call: unexpected error", e);
            out.onError(Status.INTERNAL.withDescription("the worker could not answer (internal error)").asRuntimeException());
        }
    }

    private void reply(StreamObserver<JobReply> out, dev.codeexec.engine.JobState state) {
        out.onNext(JobReply.newBuilder().setStateJson(JsonMapper.shared().writeValueAsString(state.toWire()))
                .setWorker(identity.name()).build());
        out.onCompleted();
    }

    // ---- port previews of this worker's sandboxes ----

    @Override
    public void exposePort(dev.codeexec.wire.v1.ExposePortRequest req, StreamObserver<dev.codeexec.wire.v1.PreviewInfo> out) {
        try {
            out.onNext(WireFormat.toProto(previews.expose(req.getTenant(), WireFormat.fromProto(req.getSandbox()),
                    req.getPort(), req.getKey())));
            out.onCompleted();
        } catch (IllegalArgumentException e) {
            out.onError(Status.INVALID_ARGUMENT.withDescription(e.getMessage()).asRuntimeException());
        } catch (RuntimeException e) {
            out.onError(status(e).asRuntimeException());
        }
    }

    @Override
    public void unexposePort(dev.codeexec.wire.v1.UnexposePortRequest req, StreamObserver<dev.codeexec.wire.v1.UnexposePortReply> out) {
        java.util.Optional<dev.codeexec.engine.PreviewControl.Sandbox> sandbox = req.hasSandbox()
                ? java.util.Optional.of(WireFormat.fromProto(req.getSandbox())) : java.util.Optional.empty();
        int ended = previews.unexpose(req.getTenant(), sandbox,
                req.getToken().isEmpty() ? java.util.Optional.empty() : java.util.Optional.of(req.getToken()),
                req.getPort() == 0 ? java.util.Optional.empty() : java.util.Optional.of(req.getPort()));
        out.onNext(dev.codeexec.wire.v1.UnexposePortReply.newBuilder().setEnded(ended).build());
        out.onCompleted();
    }

    @Override
    public void listPreviews(dev.codeexec.wire.v1.ListPreviewsRequest req, StreamObserver<dev.codeexec.wire.v1.ListPreviewsReply> out) {
        var b = dev.codeexec.wire.v1.ListPreviewsReply.newBuilder();
        try {
            for (var p : previews.list(req.getTenant(), WireFormat.fromProto(req.getSandbox()))) b.addPreviews(WireFormat.toProto(p));
        } catch (IllegalArgumentException e) {
            out.onError(Status.INVALID_ARGUMENT.withDescription(e.getMessage()).asRuntimeException());
            return;
        }
        out.onNext(b.build());
        out.onCompleted();
    }

    @Override
    public void getPreview(dev.codeexec.wire.v1.GetPreviewRequest req, StreamObserver<dev.codeexec.wire.v1.PreviewInfo> out) {
        var p = previews.find(req.getToken());
        if (p.isEmpty()) {
            out.onError(Status.NOT_FOUND.withDescription("no such preview").asRuntimeException());
            return;
        }
        out.onNext(WireFormat.toProto(p.get()));
        out.onCompleted();
    }

    @Override
    public StreamObserver<dev.codeexec.wire.v1.PreviewFrame> preview(StreamObserver<dev.codeexec.wire.v1.PreviewFrame> out) {
        return new PreviewRelay((ServerCallStreamObserver<dev.codeexec.wire.v1.PreviewFrame>) out, previews);
    }

    /** From now on Execute answers UNAVAILABLE; returns how many queued calls were sent back to be run elsewhere. */
    int startDraining() {
        draining = true;
        return bounceQueued();
    }

    /** Sends back calls whose runs have not taken a slot (the gateway retries them elsewhere). */
    int bounceQueued() {
        int n = 0;
        for (ExecuteCall c : calls) {
            if (c.bounceIfQueued()) n++;
        }
        return n;
    }

    boolean draining() {
        return draining;
    }

    /** Calls whose result has not been sent yet. */
    int inFlight() {
        return calls.size();
    }

    /** Kills every run still going (the drain grace is over). */
    int cancelAll() {
        int n = calls.size();
        calls.forEach(ExecuteCall::cancel);
        return n;
    }
}
