package dev.codeexec.gateway;

import com.google.common.util.concurrent.ListenableFuture;
import dev.codeexec.engine.WorkerStatus;
import dev.codeexec.wire.v1.RuntimeInfoRequest;
import dev.codeexec.wire.v1.StatusRequest;
import dev.codeexec.wire.v1.StatusResponse;
import dev.codeexec.wire.v1.WorkerGrpc;
import io.grpc.ManagedChannel;
import io.grpc.Status;
import io.grpc.health.v1.HealthCheckRequest;
import io.grpc.health.v1.HealthCheckResponse;
import io.grpc.health.v1.HealthGrpc;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.net.InetAddress;
import java.net.UnknownHostException;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/**
 * The gateway's list of workers and their last known state. Every poll resolves WORKERS again (for
 * {@code dns:///} each A record is a worker: pods that are gone are dropped, new ones added), then asks each worker
 * its health and its Status over a channel of its own. Runs do not depend on this: the balanced channels have their
 * own health checks; this is what runtime_info, /healthz, /metrics and the console show, and where slot and session
 * counts come from.
 */
final class WorkerDirectory implements AutoCloseable {

    private static final Logger LOG = LoggerFactory.getLogger(WorkerDirectory.class);

    static final Duration POLL_PERIOD = Duration.ofSeconds(2);
    static final Duration POLL_DEADLINE = Duration.ofMillis(1500);
    /** The first poll also connects (and, first in a JVM, loads and initialises Netty): it gets longer. */
    static final Duration FIRST_POLL_DEADLINE = Duration.ofSeconds(5);

    /** One worker: its channel and what its last poll said. */
    static final class Node {
        final WorkersTarget.HostPort address;
        final ManagedChannel channel;
        volatile WorkerStatus status;
        volatile Optional<StatusResponse> lastStatus = Optional.empty();

        Node(WorkersTarget.HostPort address, ManagedChannel channel) {
            this.address = address;
            this.channel = channel;
            this.status = new WorkerStatus(address.toString(), Optional.empty(), Optional.empty(), false, false, 0, 0,
                    0, 0, Map.of(), Optional.empty(), Optional.of("not polled yet"));
        }
    }

    private final WorkerChannels channels;
    private final Runnable onRecovered;
    private final Runnable afterPoll;
    private final Map<String, Node> nodes = new ConcurrentHashMap<>();
    private final ScheduledExecutorService poller;
    private volatile boolean closed;

    /**
     * @param onRecovered told (on the poll thread) when a worker that was not healthy is healthy again
     * @param afterPoll   told (on the poll thread) after each round, with every worker's status updated
     */
    WorkerDirectory(WorkerChannels channels, Runnable onRecovered, Runnable afterPoll) {
        this.channels = channels;
        this.onRecovered = onRecovered;
        this.afterPoll = afterPoll;
        this.poller = Executors.newSingleThreadScheduledExecutor(r -> {
            Thread t = new Thread(r, "worker-directory");
            t.setDaemon(true);
            return t;
        });
    }

    /** Polls once now (so a fresh gateway knows its workers before its first request), then every period. */
    void start() {
        poll(FIRST_POLL_DEADLINE);
        poller.scheduleWithFixedDelay(this::pollSafely, POLL_PERIOD.toMillis(), POLL_PERIOD.toMillis(),
                TimeUnit.MILLISECONDS);
    }

    private void pollSafely() {
        try {
            poll();
        } catch (RuntimeException e) {
            LOG.warn("worker poll failed: {}", e.toString());
        }
    }

    void poll() {
        poll(POLL_DEADLINE);
    }

    /** One round: resolve, add and drop workers, ask each (in parallel) for health and status. */
    private void poll(Duration deadline) {
        if (closed) return;
        List<WorkersTarget.HostPort> addresses = resolve();
        Map<String, WorkersTarget.HostPort> wanted = new LinkedHashMap<>();
        for (WorkersTarget.HostPort a : addresses) wanted.put(a.toString(), a);
        for (Map.Entry<String, Node> e : nodes.entrySet()) {
            if (!wanted.containsKey(e.getKey()) && !addresses.isEmpty()) {
                LOG.info("worker {} is no longer in {}: dropped", e.getKey(), channels.target.target());
                nodes.remove(e.getKey());
                e.getValue().channel.shutdownNow();
            }
        }
        Optional<String> authority = channels.target.dns()
                ? Optional.of(channels.target.addresses().get(0).host()) : Optional.empty();
        for (WorkersTarget.HostPort a : wanted.values()) {
            nodes.computeIfAbsent(a.toString(), k -> {
                LOG.info("worker {} found in {}", k, channels.target.target());
                return new Node(a, channels.single(a, authority));
            });
        }
        record Pending(Node node, ListenableFuture<HealthCheckResponse> health,
                ListenableFuture<StatusResponse> status) {
        }
        List<Pending> pending = new ArrayList<>();
        for (Node n : nodes.values()) {
            // grpc waits longer after each failed connect (up to two minutes), and a call made meanwhile fails at
            // once: a worker that came back at the same address would be seen late. Polls set the pace of trying
            // instead; a call made while the channel connects waits for the outcome.
            if (!n.status.healthy()) n.channel.resetConnectBackoff();
            pending.add(new Pending(n,
                    HealthGrpc.newFutureStub(n.channel).withDeadlineAfter(deadline.toMillis(), TimeUnit.MILLISECONDS)
                            .check(HealthCheckRequest.newBuilder().setService(WorkerChannels.SERVICE).build()),
                    WorkerGrpc.newFutureStub(n.channel).withDeadlineAfter(deadline.toMillis(), TimeUnit.MILLISECONDS)
                            .status(StatusRequest.getDefaultInstance())));
        }
        for (Pending p : pending) update(p.node(), p.health(), p.status(), deadline);
        afterPoll.run();
    }

    private void update(Node n, ListenableFuture<HealthCheckResponse> health, ListenableFuture<StatusResponse> status,
            Duration deadline) {
        WorkerStatus before = n.status;
        Optional<String> error = Optional.empty();
        boolean serving = false;
        try {
            serving = await(health, deadline).getStatus() == HealthCheckResponse.ServingStatus.SERVING;
            if (!serving) error = Optional.of("health check says not serving");
        } catch (Failure f) {
            error = Optional.of("health check failed: " + f.getMessage());
        }
        StatusResponse s = null;
        try {
            s = await(status, deadline);
            n.lastStatus = Optional.of(s);
        } catch (Failure f) {
            if (error.isEmpty()) error = Optional.of("status failed: " + f.getMessage());
        }
        WorkerStatus now;
        if (s == null) {
            now = new WorkerStatus(n.address.toString(), before.name(), before.instanceId(), false, false, 0, 0, 0, 0,
                    Map.of(), before.lastSeen(), error);
        } else {
            if (s.getDraining() && error.isEmpty()) error = Optional.of("draining");
            Map<String, Map<String, Integer>> warm = new LinkedHashMap<>();
            s.getWarmPoolMap().forEach((lang, lvl) -> warm.put(lang, Map.of("ready", lvl.getReady(), "target", lvl.getTarget())));
            now = new WorkerStatus(n.address.toString(), Optional.of(s.getWorker()).filter(x -> !x.isEmpty()),
                    Optional.of(s.getInstanceId()).filter(x -> !x.isEmpty()), serving && !s.getDraining(),
                    s.getDraining(), s.getRunning(), s.getQueued(), s.getSlots(), s.getSessions(), warm,
                    Optional.of(Instant.now()), error);
        }
        n.status = now;
        if (before.healthy() != now.healthy()) {
            if (now.healthy()) {
                LOG.info("worker {} ({}) is healthy", now.address(), now.name().orElse("?"));
                onRecovered.run();
            } else {
                LOG.warn("worker {} ({}) is not healthy: {}", now.address(), now.name().orElse("?"),
                        now.error().orElse("?"));
            }
        }
    }

    /** A failed worker call, with a short reason fit for logs and status views. */
    private static final class Failure extends Exception {
        Failure(String message) {
            super(message, null, false, false);
        }
    }

    private static <T> T await(ListenableFuture<T> f, Duration deadline) throws Failure {
        try {
            return f.get(deadline.toMillis() + 1000, TimeUnit.MILLISECONDS);
        } catch (ExecutionException e) {
            throw new Failure(brief(Status.fromThrowable(e.getCause()), deadline));
        } catch (TimeoutException e) {
            f.cancel(true);
            throw new Failure("no answer");
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new Failure("interrupted");
        }
    }

    /** A status in a few words: grpc's descriptions can carry long connection diagnostics in brackets. */
    static String brief(Status s, Duration deadline) {
        if (s.getCode() == Status.Code.DEADLINE_EXCEEDED) return "no answer within " + deadline.toMillis() + " ms";
        return s.getCode() + RemoteRun.description(s).map(d -> " " + d).orElse("");
    }

    /** The addresses WORKERS names now; for a DNS name, one per address it resolves to (empty when it does not). */
    private List<WorkersTarget.HostPort> resolve() {
        if (!channels.target.dns()) return channels.target.addresses();
        WorkersTarget.HostPort name = channels.target.addresses().get(0);
        try {
            List<WorkersTarget.HostPort> out = new ArrayList<>();
            for (InetAddress a : InetAddress.getAllByName(name.host())) {
                out.add(new WorkersTarget.HostPort(a.getHostAddress(), name.port()));
            }
            return out;
        } catch (UnknownHostException e) {
            LOG.warn("WORKERS {}: {} does not resolve now", channels.target.target(), name.host());
            return List.of();
        }
    }

    List<WorkerStatus> workers() {
        return nodes.values().stream().map(n -> n.status).sorted(Comparator.comparing(WorkerStatus::address)).toList();
    }

    List<Node> nodes() {
        return nodes.values().stream().sorted(Comparator.comparing(n -> n.address.toString())).toList();
    }

    /** The worker name of a worker process, for messages; empty when no poll has seen it. */
    Optional<String> nameOfInstance(String instanceId) {
        return statusOfInstance(instanceId).flatMap(WorkerStatus::name);
    }

    /**
     * The status of the worker whose last answer came from that process; empty when no worker has it (never seen,
     * or its address now answers as another process).
     */
    Optional<WorkerStatus> statusOfInstance(String instanceId) {
        return nodes.values().stream().map(n -> n.status)
                .filter(s -> s.instanceId().filter(instanceId::equals).isPresent())
                .findFirst();
    }

    /** The sandbox the workers use, as their last status said; "unknown" before any answered. */
    String sandboxName() {
        return nodes().stream().map(n -> n.lastStatus).flatMap(Optional::stream).map(StatusResponse::getSandbox)
                .filter(s -> !s.isEmpty()).findFirst().orElse("unknown");
    }

    /** The runtime info JSON of a healthy worker, or empty when none answers. */
    Optional<String> runtimeInfoJson() {
        for (Node n : nodes()) {
            if (!n.status.healthy()) continue;
            try {
                return Optional.of(WorkerGrpc.newBlockingStub(n.channel)
                        .withDeadlineAfter(POLL_DEADLINE.toMillis(), TimeUnit.MILLISECONDS)
                        .runtimeInfo(RuntimeInfoRequest.getDefaultInstance()).getJson());
            } catch (RuntimeException e) {
                LOG.debug("runtime info from {} failed: {}", n.address, e.toString());
            }
        }
        return Optional.empty();
    }

    @Override
    public void close() {
        closed = true;
        poller.shutdownNow();
        for (Node n : nodes.values()) n.channel.shutdown();
        for (Node n : nodes.values()) {
            try {
                if (!n.channel.awaitTermination(1, TimeUnit.SECONDS)) n.channel.shutdownNow();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                n.channel.shutdownNow();
            }
        }
        nodes.clear();
    }
}
