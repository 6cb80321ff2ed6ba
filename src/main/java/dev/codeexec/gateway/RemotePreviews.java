package dev.codeexec.gateway;

import dev.codeexec.config.Config;
import dev.codeexec.config.DataDir;
import dev.codeexec.engine.ExecutionException;
import dev.codeexec.engine.PreviewAddress;
import dev.codeexec.engine.PreviewControl;
import dev.codeexec.engine.SessionRef;
import dev.codeexec.wire.WireFormat;
import dev.codeexec.wire.v1.ExposePortRequest;
import dev.codeexec.wire.v1.GetPreviewRequest;
import dev.codeexec.wire.v1.ListPreviewsRequest;
import dev.codeexec.wire.v1.PreviewFrame;
import dev.codeexec.wire.v1.PreviewInfo;
import dev.codeexec.wire.v1.PreviewOpen;
import dev.codeexec.wire.v1.UnexposePortRequest;
import dev.codeexec.wire.v1.WorkerGrpc;
import com.google.protobuf.ByteString;
import io.grpc.Channel;
import io.grpc.Metadata;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.stub.ClientCallStreamObserver;
import io.grpc.stub.ClientResponseObserver;
import io.grpc.stub.MetadataUtils;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.io.IOException;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * A gateway's port previews, kept by the workers that hold the sandboxes (each worker's own registry). expose_port,
 * unexpose_port and listings go to the worker of the session (the session ring, as session calls) or of the job (the
 * instance its id names). A preview's token starts with its worker's instance id, so any gateway replica finds the
 * worker of a request ({@code GetPreview}, remembered for a second). The preview listener connects to a unix socket
 * of this gateway's per preview (a bridge in DATA_DIR/previews/gw, the gateway's alone), which carries each
 * connection to the worker over the authenticated gRPC connection ({@code Preview}, a stream of bytes each way).
 */
final class RemotePreviews implements PreviewControl {

    private static final Logger LOG = LoggerFactory.getLogger(RemotePreviews.class);
    static final Duration CALL_DEADLINE = Duration.ofSeconds(10);
    /** How long a GetPreview answer is used for the requests of a preview. */
    static final Duration REMEMBER = Duration.ofSeconds(1);
    /** A bridge nobody has used this long is closed (the next request opens it again). */
    static final Duration BRIDGE_IDLE = Duration.ofMinutes(10);

    private final WorkerDirectory directory;
    private final Channel sessionChannel;
    private final Path bridges;
    private final PreviewAddress address;
    private final Map<String, Remembered> remembered = new ConcurrentHashMap<>();
    private final Map<String, Bridge> open = new ConcurrentHashMap<>();
    private volatile boolean closed;

    private record Remembered(Optional<Preview> preview, Instant at) {
    }

    RemotePreviews(Config config, WorkerDirectory directory, Channel sessionChannel) {
        this.directory = directory;
        this.sessionChannel = sessionChannel;
        this.bridges = DataDir.of(config).previews().resolve("gw");
        this.address = new PreviewAddress(Optional.of(config.get(Config.PREVIEW_DOMAIN)),
                config.get(Config.PREVIEWS).equals("off") ? "port previews are off on this server (PREVIEWS=off)" : null);
    }

    @Override
    public PreviewAddress address() {
        return address;
    }

    // ---- routing ----

    /** A stub to the worker of {@code sandbox}: the session's (by the ring, as its calls go) or the job's. */
    private WorkerGrpc.WorkerBlockingStub workerOf(String tenant, Sandbox sandbox) {
        Channel ch;
        if (sandbox.kind() == Kind.SESSION) {
            Metadata md = new Metadata();
            md.put(WorkerChannels.SESSION_KEY, RemoteExecutor.sessionKey(new SessionRef(tenant, sandbox.name())));
            ch = io.grpc.ClientInterceptors.intercept(sessionChannel, MetadataUtils.newAttachHeadersInterceptor(md));
        } else {
            String instance = RemoteJobs.instanceOf(sandbox.name()).orElseThrow(() -> new ExecutionException.InvalidRequest(
                    "no running job '" + sandbox.name() + "' (a preview needs a job that runs: job_list shows yours)"));
            ch = nodeOf(instance).map(n -> (Channel) n.channel).orElseThrow(() -> new ExecutionException.InvalidRequest(
                    "no running job '" + sandbox.name() + "': its worker is gone"));
        }
        return WorkerGrpc.newBlockingStub(ch).withDeadlineAfter(CALL_DEADLINE.toMillis(), TimeUnit.MILLISECONDS);
    }

    /** The node of the worker process whose instance id starts with {@code prefix}. */
    private Optional<WorkerDirectory.Node> nodeOf(String prefix) {
        return directory.nodes().stream()
                .filter(n -> n.status.instanceId().filter(id -> id.startsWith(prefix)).isPresent()).findFirst();
    }

    private static RuntimeException refusal(StatusRuntimeException e, String what) {
        String d = Optional.ofNullable(e.getStatus().getDescription()).orElse(e.getStatus().getCode().toString());
        return switch (e.getStatus().getCode()) {
            case INVALID_ARGUMENT, NOT_FOUND, FAILED_PRECONDITION -> new ExecutionException.InvalidRequest(d);
            case UNAVAILABLE -> d.contains("PREVIEWS=off") ? new ExecutionException.Unavailable(d)
                    : new ExecutionException.Unavailable("the worker of " + what + " could not be reached; try again");
            default -> new ExecutionException.Unavailable("the worker of " + what + " could not be reached ("
                    + e.getStatus().getCode() + "); try again");
        };
    }

    // ---- PreviewControl ----

    @Override
    public Preview expose(String tenant, Sandbox sandbox, int port, boolean key) {
        Optional<String> unavailable = address.unavailableReason();
        if (unavailable.isPresent()) throw new ExecutionException.Unavailable(unavailable.get());
        if (port < 1 || port > 65535) throw new ExecutionException.InvalidRequest("'port' must be 1 to 65535");
        try {
            PreviewInfo p = workerOf(tenant, sandbox).exposePort(ExposePortRequest.newBuilder().setTenant(tenant)
                    .setSandbox(WireFormat.toProto(sandbox)).setPort(port).setKey(key).build());
            return WireFormat.fromProto(p, bridgePath(p.getToken()));
        } catch (StatusRuntimeException e) {
            throw refusal(e, "the " + sandbox.label());
        }
    }

    @Override
    public int unexpose(String tenant, Optional<Sandbox> sandbox, Optional<String> token, Optional<Integer> port) {
        UnexposePortRequest.Builder b = UnexposePortRequest.newBuilder().setTenant(tenant);
        sandbox.ifPresent(s -> b.setSandbox(WireFormat.toProto(s)));
        token.ifPresent(b::setToken);
        port.ifPresent(b::setPort);
        try {
            WorkerGrpc.WorkerBlockingStub stub;
            if (token.isPresent()) {
                Optional<WorkerDirectory.Node> n = nodeOf(token.get().substring(0, Math.min(16, token.get().length())));
                if (n.isEmpty()) return 0;
                stub = WorkerGrpc.newBlockingStub(n.get().channel).withDeadlineAfter(CALL_DEADLINE.toMillis(), TimeUnit.MILLISECONDS);
            } else if (sandbox.isPresent()) {
                stub = workerOf(tenant, sandbox.get());
            } else {
                return 0;
            }
            int ended = stub.unexposePort(b.build()).getEnded();
            token.ifPresent(this::forget);
            return ended;
        } catch (StatusRuntimeException e) {
            throw refusal(e, sandbox.map(Sandbox::label).orElse("the preview"));
        }
    }

    @Override
    public List<Preview> list(String tenant, Sandbox sandbox) {
        try {
            List<Preview> out = new ArrayList<>();
            for (PreviewInfo p : workerOf(tenant, sandbox).listPreviews(ListPreviewsRequest.newBuilder().setTenant(tenant)
                    .setSandbox(WireFormat.toProto(sandbox)).build()).getPreviewsList())
                out.add(WireFormat.fromProto(p, bridgePath(p.getToken())));
            return out;
        } catch (StatusRuntimeException | ExecutionException e) {
            return List.of(); // its worker is gone or does not answer: no preview of it is reachable now
        }
    }

    @Override
    public Optional<Preview> find(String token) {
        if (token == null || !PreviewAddress.TOKEN.matcher(token).matches() || closed) return Optional.empty();
        Instant now = Instant.now();
        Remembered r = remembered.get(token);
        if (r == null || Duration.between(r.at(), now).compareTo(REMEMBER) >= 0) {
            r = new Remembered(ask(token), now);
            remembered.put(token, r);
            if (remembered.size() > 10_000) remembered.values().removeIf(x -> Duration.between(x.at(), now).compareTo(REMEMBER) >= 0);
        }
        if (r.preview().isEmpty()) {
            forget(token);
            return Optional.empty();
        }
        try {
            bridge(token);
        } catch (IOException e) {
            LOG.warn("preview bridge for a token cannot be made: {}", e.toString());
            return Optional.empty();
        }
        Preview p = r.preview().get();
        return Optional.of(new Preview(p.token(), p.tenant(), p.sandbox(), p.port(), p.key(), p.createdAt(),
                p.expiresAt(), bridgePath(token)));
    }

    /** The worker's answer for a token: its preview, or empty (none, or its worker is gone). */
    private Optional<Preview> ask(String token) {
        Optional<WorkerDirectory.Node> n = nodeOf(token.substring(0, 16));
        if (n.isEmpty()) return Optional.empty();
        try {
            PreviewInfo p = WorkerGrpc.newBlockingStub(n.get().channel)
                    .withDeadlineAfter(CALL_DEADLINE.toMillis(), TimeUnit.MILLISECONDS)
                    .getPreview(GetPreviewRequest.newBuilder().setToken(token).build());
            return Optional.of(WireFormat.fromProto(p, bridgePath(token)));
        } catch (StatusRuntimeException e) {
            return Optional.empty();
        }
    }

    private void forget(String token) {
        remembered.remove(token);
        Bridge b = open.remove(token);
        if (b != null) b.close();
    }

    /** Closes every bridge. */
    void close() {
        closed = true;
        for (String t : List.copyOf(open.keySet())) forget(t);
    }

    // ---- bridges: a unix socket per preview, carried to the worker ----

    /** Bridges get short names: a unix socket's path has at most 107 bytes, and DATA_DIR may be long already. */
    private final java.util.concurrent.atomic.AtomicLong nextPath = new java.util.concurrent.atomic.AtomicLong();

    /**
     * Where the listener connects for a token: its bridge once {@link #find} has opened one; before that (a preview
     * as expose_port and the listings show it, never connected to) the bridges' directory.
     */
    private Path bridgePath(String token) {
        Bridge b = open.get(token);
        return b == null ? bridges : b.path;
    }

    private void bridge(String token) throws IOException {
        if (open.containsKey(token)) {
            open.get(token).used = Instant.now();
            return;
        }
        synchronized (open) {
            if (open.containsKey(token)) return;
            if (!Files.isDirectory(bridges)) {
                Files.createDirectories(bridges);
                Files.setPosixFilePermissions(bridges, PosixFilePermissions.fromString("rwx------"));
            }
            sweepIdle();
            open.put(token, new Bridge(token, bridges.resolve(Long.toString(nextPath.incrementAndGet(), 36) + ".sock")));
        }
    }

    private void sweepIdle() {
        Instant now = Instant.now();
        for (Map.Entry<String, Bridge> e : List.copyOf(open.entrySet()))
            if (Duration.between(e.getValue().used, now).compareTo(BRIDGE_IDLE) > 0) forget(e.getKey());
    }

    /** One preview's bridge: each connection the listener opens becomes a Preview call to the worker. */
    private final class Bridge {
        private final String token;
        private final Path path;
        private final ServerSocketChannel server;
        volatile Instant used = Instant.now();

        Bridge(String token, Path path) throws IOException {
            this.token = token;
            this.path = path;
            Files.deleteIfExists(path);
            server = ServerSocketChannel.open(StandardProtocolFamily.UNIX);
            server.bind(UnixDomainSocketAddress.of(path));
            Thread.ofVirtual().name("preview-bridge").start(this::accept);
        }

        private void accept() {
            while (server.isOpen()) {
                try {
                    SocketChannel c = server.accept();
                    used = Instant.now();
                    Thread.ofVirtual().name("preview-bridge-conn").start(() -> carry(c));
                } catch (IOException e) {
                    return; // closed
                }
            }
        }

        /** init's protocol on the listener's side, the Preview call on the worker's. */
        private void carry(SocketChannel c) {
            try (c) {
                ByteBuffer port = ByteBuffer.allocate(2);
                while (port.hasRemaining()) if (c.read(port) < 0) return;
                Optional<WorkerDirectory.Node> n = nodeOf(token.substring(0, 16));
                if (n.isEmpty()) {
                    c.write(ByteBuffer.wrap(new byte[] {1}));
                    return;
                }
                relay(c, n.get(), ((port.get(0) & 0xff) << 8) | (port.get(1) & 0xff));
            } catch (IOException | RuntimeException e) {
                LOG.debug("preview bridge connection ended: {}", e.toString());
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }

        private void relay(SocketChannel c, WorkerDirectory.Node node, int port) throws IOException, InterruptedException {
            CountDownLatch answered = new CountDownLatch(1);
            AtomicBoolean connected = new AtomicBoolean();
            CountDownLatch done = new CountDownLatch(1);
            Object ready = new Object();
            @SuppressWarnings("unchecked")
            ClientCallStreamObserver<PreviewFrame>[] requests = new ClientCallStreamObserver[1];
            ClientResponseObserver<PreviewFrame, PreviewFrame> responses = new ClientResponseObserver<>() {
                @Override
                public void beforeStart(ClientCallStreamObserver<PreviewFrame> r) {
                    requests[0] = r;
                    r.setOnReadyHandler(() -> {
                        synchronized (ready) {
                            ready.notifyAll();
                        }
                    });
                }

                @Override
                public void onNext(PreviewFrame f) {
                    if (f.getFrameCase() == PreviewFrame.FrameCase.CONNECTED) {
                        connected.set(f.getConnected());
                        answered.countDown();
                        return;
                    }
                    try {
                        ByteBuffer b = f.getData().asReadOnlyByteBuffer();
                        while (b.hasRemaining()) c.write(b);
                    } catch (IOException e) {
                        requests[0].cancel("the preview listener's connection closed", null);
                    }
                }

                @Override
                public void onError(Throwable t) {
                    answered.countDown();
                    done.countDown();
                    try {
                        c.close();
                    } catch (IOException ignored) {
                        // closing
                    }
                }

                @Override
                public void onCompleted() {
                    answered.countDown();
                    try {
                        c.shutdownOutput(); // the program's half-close
                    } catch (IOException ignored) {
                        // closed already
                    }
                    done.countDown();
                }
            };
            io.grpc.stub.StreamObserver<PreviewFrame> out = WorkerGrpc.newStub(node.channel).preview(responses);
            out.onNext(PreviewFrame.newBuilder().setOpen(PreviewOpen.newBuilder().setToken(token).setPort(port)).build());
            if (!answered.await(CALL_DEADLINE.toMillis(), TimeUnit.MILLISECONDS) || !connected.get()) {
                requests[0].cancel("no answer", null);
                c.write(ByteBuffer.wrap(new byte[] {1}));
                return;
            }
            c.write(ByteBuffer.wrap(new byte[] {0}));
            ByteBuffer buf = ByteBuffer.allocate(64 * 1024);
            try {
                while (true) {
                    buf.clear();
                    int n = c.read(buf);
                    if (n < 0) {
                        out.onCompleted(); // the client's half-close
                        break;
                    }
                    synchronized (ready) {
                        while (!requests[0].isReady() && done.getCount() > 0) ready.wait(1000);
                    }
                    if (done.getCount() == 0) return;
                    out.onNext(PreviewFrame.newBuilder().setData(ByteString.copyFrom(buf.array(), 0, n)).build());
                }
            } catch (IOException e) {
                requests[0].cancel("the preview listener's connection closed", null);
                return;
            }
            // until the program's side ends too (or the call fails); a program that never ends its side after the
            // listener's close is not waited for past the idle bound
            if (!done.await(BRIDGE_IDLE.toMillis(), TimeUnit.MILLISECONDS)) requests[0].cancel("idle", null);
        }

        void close() {
            try {
                server.close();
                Files.deleteIfExists(path);
            } catch (IOException ignored) {
                // closing
            }
        }
    }
}
