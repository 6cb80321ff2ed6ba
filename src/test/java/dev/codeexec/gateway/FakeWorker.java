package dev.codeexec.gateway;

import dev.codeexec.wire.v1.Accepted;
import dev.codeexec.wire.v1.ExecuteEvent;
import dev.codeexec.wire.v1.ExecuteInput;
import dev.codeexec.wire.v1.ExecuteRequest;
import dev.codeexec.wire.v1.ListSessionsRequest;
import dev.codeexec.wire.v1.ListSessionsResponse;
import dev.codeexec.wire.v1.Output;
import dev.codeexec.wire.v1.Result;
import dev.codeexec.wire.v1.SessionInfo;
import dev.codeexec.wire.v1.SessionOutput;
import dev.codeexec.wire.v1.SessionRequest;
import dev.codeexec.wire.v1.SessionResponse;
import dev.codeexec.wire.v1.StatusRequest;
import dev.codeexec.wire.v1.StatusResponse;
import dev.codeexec.wire.v1.WorkerGrpc;
import io.grpc.ForwardingServerCall;
import io.grpc.Metadata;
import io.grpc.Server;
import io.grpc.ServerCall;
import io.grpc.ServerCredentials;
import io.grpc.ServerCallHandler;
import io.grpc.ServerInterceptor;
import io.grpc.ServerInterceptors;
import io.grpc.Status;
import io.grpc.netty.shaded.io.grpc.netty.NettyServerBuilder;
import io.grpc.protobuf.services.HealthStatusManager;
import io.grpc.health.v1.HealthCheckResponse.ServingStatus;
import io.grpc.health.v1.HealthGrpc;
import io.grpc.stub.ServerCallStreamObserver;
import io.grpc.stub.StreamObserver;

import java.io.IOException;
import java.net.InetSocketAddress;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * A worker as worker.proto describes it, on a loopback Netty server, with the run's behaviour replaceable so tests
 * can stage refusals, hangs and deaths. Counters tell what happened: {@code calls} (Execute reached it), {@code ran}
 * (it sent {@code accepted}), {@code cancelled} (a call of it was cancelled by the gateway).
 */
final class FakeWorker implements AutoCloseable {

    /** What Execute does; the default accepts, prints the worker's name and answers exit 0. */
    interface Behaviour {
        void execute(FakeWorker w, ExecuteRequest req, ServerCallStreamObserver<ExecuteEvent> out);
    }

    /** Like a real worker: accepts, runs only once the gateway's start arrives, prints its name, exits 0. */
    static final Behaviour NORMAL = (w, req, out) -> {
        w.accept(out);
        w.afterStart(out, () -> {
            out.onNext(ExecuteEvent.newBuilder().setOutput(Output.newBuilder().setText("hello from " + w.name + "\n"))
                    .build());
            out.onNext(ExecuteEvent.newBuilder().setResult(w.result(req, "hello from " + w.name + "\n")).build());
            out.onCompleted();
        });
    };

    static final Metadata.Key<String> AUTH = Metadata.Key.of("authorization", Metadata.ASCII_STRING_MARSHALLER);

    final String name;
    volatile String instanceId = UUID.randomUUID().toString();
    final int port;
    volatile Behaviour behaviour = NORMAL;
    volatile String requiredToken;
    final AtomicInteger calls = new AtomicInteger();
    final AtomicInteger ran = new AtomicInteger();
    final AtomicInteger cancelled = new AtomicInteger();
    /** Execute calls whose handler started here (the call reached the worker, with or without its request). */
    final AtomicInteger opened = new AtomicInteger();
    /** Execute calls whose client sent start (it saw accepted). */
    final AtomicInteger starts = new AtomicInteger();
    private final Map<Object, java.util.concurrent.CompletableFuture<Void>> startSignals = new ConcurrentHashMap<>();

    /** Runs {@code then} when this call's client sends start (on the thread that receives it). */
    void afterStart(StreamObserver<ExecuteEvent> out, Runnable then) {
        startSignals.get(out).thenRun(then);
    }
    final AtomicInteger statusCalls = new AtomicInteger();
    /**
     * Answers sent on health Watch streams: a balanced channel with health checking (the gateway's stateless one)
     * watches each worker once its connection is up, so a first answer here means that connection can take calls.
     */
    final AtomicInteger healthWatchAnswers = new AtomicInteger();
    /** Like a SIGSTOPped process: the connection stays up, status questions get no answer. */
    volatile boolean hung;
    final List<String> authHeaders = new CopyOnWriteArrayList<>();
    final List<ExecuteRequest> requests = new CopyOnWriteArrayList<>();
    /** Sessions living here: tenant + "/" + name. */
    final Set<String> sessions = ConcurrentHashMap.newKeySet();
    private final HealthStatusManager health = new HealthStatusManager();
    private final ServerCredentials credentials;
    private volatile Server server;

    FakeWorker(String name) throws IOException {
        this(name, 0);
    }

    FakeWorker(String name, int port) throws IOException {
        this(name, port, null);
    }

    /** With server credentials (TLS, mTLS); null for plaintext. */
    FakeWorker(String name, int port, ServerCredentials credentials) throws IOException {
        this.name = name;
        this.credentials = credentials;
        this.server = start(port);
        this.port = server.getPort();
    }

    private Server start(int p) throws IOException {
        health.setStatus("", ServingStatus.SERVING);
        health.setStatus(WorkerChannels.SERVICE, ServingStatus.SERVING);
        ServerInterceptor auth = new ServerInterceptor() {
            @Override
            public <Q, R> ServerCall.Listener<Q> interceptCall(ServerCall<Q, R> call, Metadata headers,
                    ServerCallHandler<Q, R> next) {
                String got = headers.get(AUTH);
                authHeaders.add(got == null ? "" : got);
                String want = requiredToken;
                if (want != null && !("Bearer " + want).equals(got)) {
                    call.close(Status.UNAUTHENTICATED.withDescription("missing or wrong worker token"), new Metadata());
                    return new ServerCall.Listener<>() { };
                }
                return next.startCall(call, headers);
            }
        };
        InetSocketAddress at = new InetSocketAddress("127.0.0.1", p);
        NettyServerBuilder b = credentials == null ? NettyServerBuilder.forAddress(at)
                : NettyServerBuilder.forAddress(at, credentials);
        return b
                .permitKeepAliveTime(1, TimeUnit.SECONDS)
                .permitKeepAliveWithoutCalls(true)
                .addService(ServerInterceptors.intercept(new Service(), auth))
                .addService(ServerInterceptors.intercept(health.getHealthService(), countWatchAnswers()))
                .build().start();
    }

    private ServerInterceptor countWatchAnswers() {
        return new ServerInterceptor() {
            @Override
            public <Q, R> ServerCall.Listener<Q> interceptCall(ServerCall<Q, R> call, Metadata headers,
                    ServerCallHandler<Q, R> next) {
                if (!call.getMethodDescriptor().getFullMethodName().equals(HealthGrpc.getWatchMethod().getFullMethodName()))
                    return next.startCall(call, headers);
                return next.startCall(new ForwardingServerCall.SimpleForwardingServerCall<>(call) {
                    @Override
                    public void sendMessage(R message) {
                        super.sendMessage(message);
                        healthWatchAnswers.incrementAndGet();
                    }
                }, headers);
            }
        };
    }

    String address() {
        return "127.0.0.1:" + port;
    }

    void serving(boolean yes) {
        health.setStatus(WorkerChannels.SERVICE, yes ? ServingStatus.SERVING : ServingStatus.NOT_SERVING);
    }

    void accept(ServerCallStreamObserver<ExecuteEvent> out) {
        ran.incrementAndGet();
        out.onNext(ExecuteEvent.newBuilder().setAccepted(Accepted.newBuilder().setWorker(name)
                .setInstanceId(instanceId).setRunId(UUID.randomUUID().toString())).build());
    }

    Result result(ExecuteRequest req, String stdout) {
        Result.Builder b = Result.newBuilder().setLanguage(req.getLanguage()).setExitCode(0).setStdout(stdout)
                .setOutcome("exited").setSandbox("fake").setWorker(name).setDurationMs(1);
        if (!req.getSession().isEmpty()) {
            b.setSession(SessionOutput.newBuilder().setName(req.getSession()).setCreated(false));
        }
        return b.build();
    }

    /** The process dies: every connection and stream breaks at once. */
    void kill() {
        server.shutdownNow();
    }

    /** Starts again on the same port as a new process (new instance id, no sessions). */
    void restart() throws InterruptedException {
        kill();
        try {
            server.awaitTermination(5, TimeUnit.SECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        instanceId = UUID.randomUUID().toString();
        sessions.clear();
        // Another socket may hold the port for a moment: the gateway keeps connecting to this address while nothing
        // listens, and a connect whose ephemeral source port happens to be this one connects to itself (TCP
        // simultaneous open) until gRPC drops it. TIME_WAIT is not the cause: gRPC's Netty server sets SO_REUSEADDR
        // (WorkerHealthTest). Try again for a few seconds before giving up.
        dev.codeexec.testing.Poll.until("port " + port + " bound again", java.time.Duration.ofSeconds(10), () -> {
            try {
                server = start(port);
                return true;
            } catch (IOException busy) {
                return false;
            }
        });
    }

    @Override
    public void close() {
        server.shutdownNow();
        try {
            server.awaitTermination(5, TimeUnit.SECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    private final class Service extends WorkerGrpc.WorkerImplBase {
        /** The gateway's side: the request, then (after accepted) start, then half-close; starts are counted. */
        @Override
        public StreamObserver<ExecuteInput> execute(StreamObserver<ExecuteEvent> obs) {
            opened.incrementAndGet();
            ((ServerCallStreamObserver<ExecuteEvent>) obs).setOnCancelHandler(() -> {
                cancelled.incrementAndGet();
                startSignals.remove(obs);
            });
            java.util.concurrent.CompletableFuture<Void> start = new java.util.concurrent.CompletableFuture<>();
            startSignals.put(obs, start);
            return new StreamObserver<>() {
                @Override
                public void onNext(ExecuteInput in) {
                    if (in.hasRequest()) {
                        take(in.getRequest(), obs);
                    } else if (in.hasStart()) {
                        starts.incrementAndGet();
                        startSignals.remove(obs);
                        start.complete(null);
                    }
                }

                @Override
                public void onError(Throwable t) {
                }

                @Override
                public void onCompleted() {
                }
            };
        }

        private void take(ExecuteRequest req, StreamObserver<ExecuteEvent> obs) {
            calls.incrementAndGet();
            requests.add(req);
            ServerCallStreamObserver<ExecuteEvent> out = (ServerCallStreamObserver<ExecuteEvent>) obs;
            if (!req.getSession().isEmpty()) {
                String key = req.getTenant() + "/" + req.getSession();
                if (!req.getSessionWorker().isEmpty() && !req.getSessionWorker().equals(instanceId)) {
                    out.onError(Status.FAILED_PRECONDITION.withDescription("session lives on another worker")
                            .asRuntimeException());
                    return;
                }
                sessions.add(key);
            }
            behaviour.execute(FakeWorker.this, req, out);
        }

        @Override
        public void listSessions(ListSessionsRequest req, StreamObserver<ListSessionsResponse> obs) {
            ListSessionsResponse.Builder b = ListSessionsResponse.newBuilder().setWorker(name).setInstanceId(instanceId);
            for (String s : sessions) {
                String[] parts = s.split("/", 2);
                if (parts[0].equals(req.getTenant())) {
                    b.addSessions(SessionInfo.newBuilder().setName(parts[1]).setLanguage("python")
                            .setCreatedEpochMs(1000).setLastUsedEpochMs(2000).setCalls(1));
                }
            }
            obs.onNext(b.build());
            obs.onCompleted();
        }

        @Override
        public void resetSession(SessionRequest req, StreamObserver<SessionResponse> obs) {
            obs.onNext(SessionResponse.newBuilder().setWorker(name)
                    .setFound(sessions.contains(req.getTenant() + "/" + req.getName())).build());
            obs.onCompleted();
        }

        @Override
        public void closeSession(SessionRequest req, StreamObserver<SessionResponse> obs) {
            obs.onNext(SessionResponse.newBuilder().setWorker(name)
                    .setFound(sessions.remove(req.getTenant() + "/" + req.getName())).build());
            obs.onCompleted();
        }

        @Override
        public void status(StatusRequest req, StreamObserver<StatusResponse> obs) {
            statusCalls.incrementAndGet();
            if (hung) return;
            obs.onNext(StatusResponse.newBuilder().setWorker(name).setInstanceId(instanceId).setSlots(4)
                    .setSessions(sessions.size()).setSandbox("fake")
                    .putWarmPool("python", dev.codeexec.wire.v1.WarmLevel.newBuilder().setReady(1).setTarget(2).build())
                    .build());
            obs.onCompleted();
        }

        @Override
        public void runtimeInfo(dev.codeexec.wire.v1.RuntimeInfoRequest req,
                StreamObserver<dev.codeexec.wire.v1.RuntimeInfoResponse> obs) {
            obs.onNext(dev.codeexec.wire.v1.RuntimeInfoResponse.newBuilder()
                    .setJson("{\"languages\":{\"python\":{\"available\":true}},\"sandbox\":{\"name\":\"fake\"}}").build());
            obs.onCompleted();
        }
    }
}
