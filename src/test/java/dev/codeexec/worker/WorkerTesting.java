package dev.codeexec.worker;

import dev.codeexec.local.LocalEngine;
import dev.codeexec.config.Config;
import dev.codeexec.testing.Requires;
import dev.codeexec.wire.v1.ExecuteEvent;
import dev.codeexec.wire.v1.ExecuteInput;
import dev.codeexec.wire.v1.ExecuteRequest;
import dev.codeexec.wire.v1.Start;
import dev.codeexec.wire.v1.Limits;
import dev.codeexec.wire.v1.WorkerGrpc;
import dev.codeexec.workspace.Workspace;
import io.grpc.CallOptions;
import io.grpc.ClientCall;
import io.grpc.ClientInterceptors;
import io.grpc.ManagedChannel;
import io.grpc.Metadata;
import io.grpc.Status;
import io.grpc.health.v1.HealthCheckRequest;
import io.grpc.health.v1.HealthCheckResponse;
import io.grpc.health.v1.HealthGrpc;
import io.grpc.netty.shaded.io.grpc.netty.NettyChannelBuilder;
import io.grpc.stub.MetadataUtils;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;


/** Shared helpers of the worker tests: configuration, a real engine, channels and a recording Execute call. */
final class WorkerTesting {

    /** The engine tests' DATA_DIR, so the Go build cache and warm-ups are shared with them. */
    static final String DATA_DIR = "/tmp/code-exec-engine-test";

    private WorkerTesting() {
    }

    static Config config(Path workspaceRoot, String... pairs) {
        List<String> all = new ArrayList<>(List.of("DATA_DIR", DATA_DIR, "WARM_POOL", "off", "WORKER_PORT", "0",
                "WORKSPACE_ROOT", workspaceRoot.toString(), "SHUTDOWN_GRACE_SECONDS", "20"));
        all.addAll(List.of(pairs));
        return Config.of(all.toArray(String[]::new));
    }

    /** The production engine for the configuration; the test is skipped where the sandbox cannot run code. */
    static LocalEngine realEngine(Config config) {
        LocalEngine e = LocalEngine.create(config);
        if (e.sandbox().unavailableReason().isPresent()) {
            e.executor().close();
            Requires.that(false, "a sandbox that can run code here (" + e.sandbox().unavailableReason().get() + ")");
        }
        return e;
    }

    static ManagedChannel plaintext(int port) {
        return NettyChannelBuilder.forAddress("127.0.0.1", port).usePlaintext().build();
    }

    static WorkerGrpc.WorkerBlockingStub blocking(ManagedChannel ch, String token) {
        WorkerGrpc.WorkerBlockingStub s = WorkerGrpc.newBlockingStub(ch);
        return token == null ? s : s.withInterceptors(MetadataUtils.newAttachHeadersInterceptor(bearer(token)));
    }

    static Metadata bearer(String token) {
        Metadata m = new Metadata();
        m.put(TokenInterceptor.AUTHORIZATION, "Bearer " + token);
        return m;
    }

    static HealthCheckResponse.ServingStatus health(ManagedChannel ch, String service) {
        return HealthGrpc.newBlockingStub(ch).withDeadlineAfter(10, TimeUnit.SECONDS)
                .check(HealthCheckRequest.newBuilder().setService(service).build()).getStatus();
    }

    static ExecuteRequest.Builder request(String language, String code) {
        return ExecuteRequest.newBuilder().setLanguage(language).setCode(code).setTenant("alice")
                .setLimits(Limits.newBuilder().setTimeoutMs(30_000).setCpuSeconds(30).setMemoryBytes(512L << 20)
                        .setMaxProcesses(64).setOutputBytes(256 << 10).setDiskBytes(64L << 20));
    }

    /**
     * An Execute call through the raw ClientCall API, recording everything: when headers came, each message, and
     * the closing status with its trailers. The raw API shows what a gateway sees before the first message.
     */
    static final class Recorded extends ClientCall.Listener<ExecuteEvent> {
        final List<ExecuteEvent> events = new CopyOnWriteArrayList<>();
        volatile boolean headers;
        final CompletableFuture<Status> closed = new CompletableFuture<>();
        volatile Metadata trailers;
        final ClientCall<ExecuteInput, ExecuteEvent> call;
        /** Answer accepted with start, as a gateway does; false: stay silent (the worker must not start the run). */
        private final boolean sendStart;

        Recorded(ManagedChannel ch, String token, CallOptions options, ExecuteRequest req) {
            this(ch, token, options, req, true);
        }

        Recorded(ManagedChannel ch, String token, CallOptions options, ExecuteRequest req, boolean sendStart) {
            this.sendStart = sendStart;
            io.grpc.Channel channel = token == null ? ch
                    : ClientInterceptors.intercept(ch, MetadataUtils.newAttachHeadersInterceptor(bearer(token)));
            call = channel.newCall(WorkerGrpc.getExecuteMethod(), options);
            call.start(this, new Metadata());
            call.sendMessage(ExecuteInput.newBuilder().setRequest(req).build());
            call.request(Integer.MAX_VALUE);
        }

        @Override
        public void onHeaders(Metadata h) {
            headers = true;
        }

        @Override
        public void onMessage(ExecuteEvent e) {
            events.add(e);
            if (e.hasAccepted() && sendStart) {
                call.sendMessage(ExecuteInput.newBuilder().setStart(Start.getDefaultInstance()).build());
                call.halfClose();
            }
        }

        @Override
        public void onClose(Status status, Metadata t) {
            trailers = t;
            closed.complete(status);
        }

        Status await() throws Exception {
            return closed.get(120, TimeUnit.SECONDS);
        }

        boolean accepted() {
            return events.stream().anyMatch(ExecuteEvent::hasAccepted);
        }

        /** Standard output as streamed (not the result's copy). */
        String stdout() {
            StringBuilder sb = new StringBuilder();
            events.stream().filter(e -> e.hasOutput()
                            && e.getOutput().getStream() == dev.codeexec.wire.v1.Output.Stream.STDOUT)
                    .forEach(e -> sb.append(e.getOutput().getText()));
            return sb.toString();
        }

        dev.codeexec.wire.v1.Result result() {
            return events.stream().filter(ExecuteEvent::hasResult).findFirst().orElseThrow().getResult();
        }
    }

    static Recorded execute(ManagedChannel ch, String token, ExecuteRequest req) {
        return new Recorded(ch, token, CallOptions.DEFAULT, req);
    }

    /**
     * A run that holds its slot until the test {@linkplain #release releases} it: bash that prints "holding", waits
     * for the file "release" in its workspace, then prints "released". Whatever the test does meanwhile happens while
     * it runs, however slow the machine.
     */
    static ExecuteRequest holding(Workspace ws) {
        ExecuteRequest.Builder b = request("bash",
                "echo holding; while [ ! -e release ]; do sleep 0.05; done; echo released").setWorkspace(ws.name());
        return b.setLimits(b.getLimits().toBuilder().setTimeoutMs(120_000)).build();
    }

    static void release(Workspace ws) throws java.io.IOException {
        java.nio.file.Files.writeString(ws.fs().root().resolve("release"), "");
    }
}
