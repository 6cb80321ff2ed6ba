package dev.codeexec.gateway;

import dev.codeexec.config.Config;
import dev.codeexec.config.Ids;
import dev.codeexec.engine.ExecutionException;
import dev.codeexec.engine.ExecutionRequest;
import dev.codeexec.engine.ExecutionResult;
import dev.codeexec.engine.Executor;
import dev.codeexec.engine.ExecutorStatus;
import dev.codeexec.lang.Language;
import dev.codeexec.lang.Languages;
import dev.codeexec.engine.Outcome;
import dev.codeexec.engine.OutputListener;
import dev.codeexec.engine.RunHandle;
import dev.codeexec.engine.SessionControl;
import dev.codeexec.engine.SessionRef;
import dev.codeexec.engine.WorkerStatus;
import dev.codeexec.wire.WireFormat;
import dev.codeexec.wire.v1.ExecuteEvent;
import dev.codeexec.wire.v1.ExecuteInput;
import dev.codeexec.wire.v1.ExecuteRequest;
import dev.codeexec.wire.v1.ListSessionsRequest;
import dev.codeexec.wire.v1.ListSessionsResponse;
import dev.codeexec.wire.v1.SessionRequest;
import dev.codeexec.wire.v1.WorkerGrpc;
import com.google.common.util.concurrent.ListenableFuture;
import io.grpc.CallOptions;
import io.grpc.Channel;
import io.grpc.ClientInterceptors;
import io.grpc.ClientCall;
import io.grpc.ConnectivityState;
import io.grpc.ManagedChannel;
import io.grpc.Metadata;
import io.grpc.StatusRuntimeException;
import io.grpc.stub.ClientCalls;
import io.grpc.stub.MetadataUtils;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import tools.jackson.core.type.TypeReference;
import tools.jackson.databind.json.JsonMapper;

import java.net.URLEncoder;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.time.Instant;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalDouble;
import java.util.OptionalLong;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * The gateway's executor: every run goes to a gRPC worker (WORKERS), which runs it on its own local engine.
 * Stateless runs are spread by load over healthy workers; session calls are pinned by consistent hashing on the
 * session key; a run that never started is retried elsewhere by grpc, a run lost after it started ends WORKER_LOST.
 */
public final class RemoteExecutor implements Executor, ExecutorStatus {

    private static final Logger LOG = LoggerFactory.getLogger(RemoteExecutor.class);
    private static final JsonMapper JSON = JsonMapper.builder().build();

    /** Beyond a run's own timeout and its wait for a slot: compiling, reporting, network. */
    static final Duration DEADLINE_SLACK = Duration.ofSeconds(15);
    private static final Duration SESSION_CALL_DEADLINE = Duration.ofSeconds(10);
    private static final Duration RUNTIME_INFO_TTL = Duration.ofSeconds(5);
    /**
     * A worker whose status polls have failed this long (it is not draining: a draining worker answers) is taken for
     * hung: calls on it, or pinned to it, end instead of waiting out their deadline. Five missed polls.
     */
    static final Duration UNRESPONSIVE = Duration.ofSeconds(10);
    /** How long {@link #connectOnceHealthy} waits for every worker to be healthy before it connects to those that are. */
    static final Duration CONNECT_ANYWAY = Duration.ofSeconds(30);

    private final WorkerChannels channels;
    private final ManagedChannel stateless;
    /** Whether {@link #connectOnceHealthy} has connected the stateless channel; when this executor was made. */
    private final AtomicBoolean connected = new AtomicBoolean();
    private final Instant created = Instant.now();
    private final ManagedChannel sessionChannel;
    private final WorkerDirectory directory;
    /** The background jobs, kept by the workers (created with the directory, closed with this executor). */
    private final RemoteJobs jobs;
    /** The port previews, kept by the workers. */
    private final RemotePreviews previews;
    private final Languages languages;
    private final Duration queueTimeout;
    private final Duration slack;
    /** INSTALL_TIMEOUT_MS: how much longer a call with packages may take (the workers' setting should be the same). */
    private final Duration installTimeout;
    private final Duration shutdownGrace;
    private final Set<RemoteRun> inFlight = ConcurrentHashMap.newKeySet();
    /** Session → the worker process (instance id) it was last seen on; what session_worker sends. */
    private final Map<SessionRef, Pin> pins = new ConcurrentHashMap<>();
    /** The workers' SESSION_IDLE_SECONDS (set alike on both roles): a pin older than that names a session gone idle. */
    private final Duration sessionIdle;

    /** Where a session was last seen, and when. */
    private record Pin(String instanceId, Instant seen) {
        /** Older than the session idle time: the session has ended on its worker by itself since. */
        boolean expired(Duration idle, Instant now) {
            return seen.plus(idle).isBefore(now);
        }
    }
    private final RemoteSessions sessions = new RemoteSessions();
    private volatile boolean closed;
    private volatile CachedInfo cachedInfo;

    private record CachedInfo(Instant at, Map<String, Object> info) {
    }

    private RemoteExecutor(WorkerChannels channels, Languages languages, Config config, Duration slack) {
        this.channels = channels;
        this.languages = languages;
        this.queueTimeout = Duration.ofMillis(config.get(Config.QUEUE_TIMEOUT_MS));
        this.shutdownGrace = Duration.ofSeconds(config.get(Config.SHUTDOWN_GRACE_SECONDS));
        this.sessionIdle = Duration.ofSeconds(config.get(Config.SESSION_IDLE_SECONDS));
        this.slack = slack;
        this.installTimeout = Duration.ofMillis(config.get(Config.INSTALL_TIMEOUT_MS));
        this.stateless = channels.stateless();
        this.sessionChannel = channels.sessions();
        // A worker back at its address (restarted, or a network partition healed) takes runs at once, rather
        // than when the balanced channels' connect backoff next lets them try.
        this.directory = new WorkerDirectory(channels, () -> {
            stateless.resetConnectBackoff();
            sessionChannel.resetConnectBackoff();
        }, this::afterPoll);
        this.jobs = new RemoteJobs(directory, stateless);
        this.previews = new RemotePreviews(config, directory, sessionChannel);
    }

    /**
     * Connects the stateless channel to every worker as soon as the directory sees all of them healthy (or any
     * of them, {@link #CONNECT_ANYWAY} after the start), and again whenever it goes IDLE (grpc's idle timeout, 30
     * minutes without calls): a channel that leaves IDLE with a burst of calls gives them all to the first worker
     * whose connection is READY (a fresh gateway sent 29 of 30 calls to one of three workers; connected first,
     * 10/10/10). After the workers are healthy rather than at construction, so that the connections do not start
     * in connect backoff against workers still starting (WorkerChannels#stateless says why weighted_round_robin
     * then needs no blackout period).
     */
    private void connectOnceHealthy(Instant now) {
        if (connected.get()) return;
        List<WorkerStatus> ws = directory.workers();
        boolean all = !ws.isEmpty() && ws.stream().allMatch(WorkerStatus::healthy);
        boolean late = ws.stream().anyMatch(WorkerStatus::healthy) && Duration.between(created, now).compareTo(CONNECT_ANYWAY) >= 0;
        if ((all || late) && connected.compareAndSet(false, true)) keepConnected(stateless);
    }

    /** The stateless channel's state, without asking it to connect (tests). */
    ConnectivityState statelessState() {
        return stateless.getState(false);
    }

    private static void keepConnected(ManagedChannel channel) {
        ConnectivityState now = channel.getState(true);
        if (now == ConnectivityState.SHUTDOWN) return;
        channel.notifyWhenStateChanged(now, () -> keepConnected(channel));
    }

    /**
     * Checks WORKERS and the TLS/plaintext/token settings (a {@link dev.codeexec.config.ConfigException} names the
     * key), builds the channels and polls the workers once before returning.
     */
    public static RemoteExecutor create(Config config, Languages languages) {
        return create(config, languages, DEADLINE_SLACK);
    }

    static RemoteExecutor create(Config config, Languages languages, Duration slack) {
        // Before any lookup: the JDK reads its DNS cache policy once, at the first.
        WorkerChannels.shortDnsCache();
        WorkerChannels channels = new WorkerChannels(config);
        if (config.get(Config.WORKER_TOKEN).isEmpty() && !channels.target.allLoopback()) {
            LOG.warn("WARNING: WORKERS {} without WORKER_TOKEN: workers on other hosts refuse such a gateway",
                    channels.target.target());
        }
        RemoteExecutor e = new RemoteExecutor(channels, languages, config, slack);
        e.directory.start();
        LOG.info("gateway mode: runs go to {} ({}, {}, balancing {})", channels.target.target(),
                channels.tls() ? "TLS" : "plaintext", channels.token().isPresent() ? "with token" : "no token",
                config.get(Config.WORKER_BALANCING));
        return e;
    }

    /**
     * The call's deadline is the run's timeout plus QUEUE_TIMEOUT_MS (the worker may make it wait that long for a
     * slot) plus {@link #DEADLINE_SLACK}: a worker that has not answered by then is hung, and the deadline is what
     * ends the call (and, reaching the worker, the run).
     */
    @Override
    public RunHandle submit(ExecutionRequest request, OutputListener listener) {
        if (closed) throw new ExecutionException.Unavailable("the server is shutting down");
        Optional<SessionRef> session = request.session();
        ExecuteRequest proto = WireFormat.toProto(request, session.flatMap(this::pinOf));
        Duration deadline = request.limits().timeout().plus(queueTimeout).plus(slack)
                // a run with packages may first wait for their install on the worker
                .plus(request.packages().isPresent() ? installTimeout : Duration.ZERO);
        CallOptions options = CallOptions.DEFAULT.withDeadlineAfter(deadline.toMillis(), TimeUnit.MILLISECONDS);
        Channel channel = stateless;
        if (session.isPresent()) {
            Metadata md = new Metadata();
            md.put(WorkerChannels.SESSION_KEY, sessionKey(session.get()));
            channel = ClientInterceptors.intercept(sessionChannel, MetadataUtils.newAttachHeadersInterceptor(md));
        }
        RemoteRun run = new RemoteRun("run-" + Ids.hex(8), request, listener, this);
        inFlight.add(run);
        // This gateway's workspace expiry must not remove a workspace a worker is running in (the sweep skips held
        // ones; the worker's own hold is in another process).
        // Released in ended(), before the result is published.
        request.workspace().ifPresent(ws -> run.hold = ws.hold());
        ClientCall<ExecuteInput, ExecuteEvent> call = channel.newCall(WorkerGrpc.getExecuteMethod(), options);
        io.grpc.stub.StreamObserver<ExecuteInput> input = ClientCalls.asyncBidiStreamingCall(call, run);
        input.onNext(ExecuteInput.newBuilder().setRequest(proto).build());
        return run;
    }

    /**
     * The ring key of a session: tenant and name, each URL-encoded (header values must be ASCII, and the encoding
     * keeps "a/b"+"c" apart from "a"+"b/c").
     */
    static String sessionKey(SessionRef ref) {
        return URLEncoder.encode(ref.tenant(), StandardCharsets.UTF_8) + "/"
                + URLEncoder.encode(ref.name(), StandardCharsets.UTF_8);
    }

    /** After each status poll: drop pins past the session idle time (bounded map), then end calls on hung workers. */
    private void afterPoll() {
        Instant now = Instant.now();
        connectOnceHealthy(now);
        pins.values().removeIf(p -> p.expired(sessionIdle, now));
        abandonUnresponsive(now);
    }

    /**
     * Ends the calls that wait on a hung worker: a SIGSTOPped or wedged process keeps its TCP connection, so grpc's
     * keepalive is all that would notice for a call already on it, and a session call pinned to it (ring_hash does
     * not move a session while its worker's connection looks alive) would wait out the whole deadline — minutes
     * with a long timeout. The directory's polls see the worker stop answering; after {@link #UNRESPONSIVE} such a
     * call ends: WORKER_LOST when the worker had accepted it, else a clear refusal (a session keeps its pin, in case
     * the worker resumes).
     */
    private void abandonUnresponsive(Instant now) {
        for (RemoteRun run : List.copyOf(inFlight)) {
            String instance = run.instanceId();
            if (instance.isEmpty()) instance = run.session().flatMap(this::pinOf).orElse("");
            if (instance.isEmpty()) continue;
            Optional<WorkerStatus> w = directory.statusOfInstance(instance);
            if (w.isEmpty() || w.get().healthy() || w.get().draining() || w.get().lastSeen().isEmpty()) continue;
            Duration silent = Duration.between(w.get().lastSeen().get(), now);
            if (silent.compareTo(UNRESPONSIVE) >= 0) {
                run.abandon("has not answered for " + silent.toSeconds() + " s");
            }
        }
    }

    /**
     * The worker process a session was last seen on, unless that was longer ago than SESSION_IDLE_SECONDS: the
     * session has ended there by itself since, so a fresh one is no news to the client (and the map stays bounded
     * by the sessions used within that time).
     */
    private Optional<String> pinOf(SessionRef ref) {
        Pin p = pins.get(ref);
        if (p == null) return Optional.empty();
        if (p.expired(sessionIdle, Instant.now())) {
            pins.remove(ref, p);
            return Optional.empty();
        }
        return Optional.of(p.instanceId());
    }

    void ended(RemoteRun run) {
        inFlight.remove(run);
        dev.codeexec.workspace.Workspaces.Hold hold = run.hold;
        run.hold = null;
        if (hold != null) hold.close();
    }

    /** A session call was accepted or answered by this worker process: later calls tell the worker to expect it. */
    void sessionAnswered(RemoteRun run, String instanceId) {
        if (instanceId.isEmpty()) return;
        run.session().ifPresent(ref -> pins.put(ref, new Pin(instanceId, Instant.now())));
    }

    /**
     * The worker process that held the session is gone (the worker the ring picks now is another process and refused
     * the call): like the local engine's notice for a session that ended, the code did not run and the client is
     * told once; the pin is dropped, so the next call starts (or continues) the session living there now.
     */
    ExecutionResult sessionLost(ExecutionRequest request) {
        SessionRef ref = request.session().orElseThrow();
        String was = Optional.ofNullable(pins.remove(ref)).map(Pin::instanceId).orElse(null);
        String who = was == null ? "its worker" : directory.nameOfInstance(was).map(n -> n + ", instance " + was)
                .orElse("instance " + was);
        return sessionNotice(request, "[session lost] the session '" + ref.name() + "' was lost with its worker ("
                + who + "); its state is gone; the next call starts a new session\n");
    }

    /** A session call pinned to a worker that stopped answering: the code did not run; the session is kept. */
    ExecutionResult sessionUnreachable(ExecutionRequest request, String why) {
        SessionRef ref = request.session().orElseThrow();
        String was = pinOf(ref).orElse(null);
        String who = was == null ? "its worker" : directory.nameOfInstance(was).orElse("instance " + was);
        return sessionNotice(request, "[session unavailable] the session '" + ref.name() + "' lives on worker " + who
                + ", which " + why + "; the code did not run. The session is kept in case the worker resumes; "
                + "session_close ends it\n");
    }

    /** A session call whose code did not run: the message on stderr, failed_to_start, the session named. */
    private ExecutionResult sessionNotice(ExecutionRequest request, String message) {
        return ExecutionResult.builder(request.language(), Outcome.FAILED_TO_START).exitCode(-1).stderr(message)
                .durationMs(0).sandbox(sandboxName()).build()
                .withSession(new ExecutionResult.SessionOutput(request.session().orElseThrow().name(), false,
                        Optional.empty(), List.of()));
    }

    String sandboxName() {
        return directory.sandboxName();
    }

    @Override
    public Map<String, Object> runtimeInfo() {
        CachedInfo c = cachedInfo;
        if (c != null && c.at().plus(RUNTIME_INFO_TTL).isAfter(Instant.now())) return c.info();
        Map<String, Object> info = new LinkedHashMap<>();
        Optional<String> json = directory.runtimeInfoJson();
        if (json.isPresent()) {
            try {
                info.putAll(JSON.readValue(json.get(), new TypeReference<LinkedHashMap<String, Object>>() { }));
            } catch (Exception e) {
                LOG.warn("runtime info from a worker is not JSON: {}", e.toString());
                json = Optional.empty();
            }
        }
        if (json.isEmpty()) {
            Map<String, Object> langs = new LinkedHashMap<>();
            for (Language l : languages.all()) {
                Map<String, Object> m = new LinkedHashMap<>();
                m.put("available", false);
                m.put("version", "unknown (no worker answered)");
                m.put("aliases", l.aliases());
                m.put("compiled", l.compiled());
                langs.put(l.id(), m);
            }
            info.put("languages", langs);
            info.put("note", "no worker answered: languages, tools and limits are those this gateway knows of; "
                    + "runs fail until a worker is healthy");
        }
        info.put("mode", "gateway");
        Map<String, Object> result = Collections.unmodifiableMap(info);
        if (json.isPresent()) cachedInfo = new CachedInfo(Instant.now(), result);
        return result;
    }

    /** Runs that a worker has accepted and not yet finished, from this gateway. */
    /** This executor reports its own status. */
    @Override
    public ExecutorStatus status() {
        return this;
    }

    @Override
    public int running() {
        return (int) inFlight.stream().filter(RemoteRun::accepted).count();
    }

    /** Runs sent from this gateway that no worker has accepted yet (waiting for a slot there, or being retried). */
    @Override
    public int queued() {
        return (int) inFlight.stream().filter(r -> !r.accepted()).count();
    }

    /** Slots of the healthy workers at their last status poll. */
    @Override
    public int maxConcurrent() {
        return directory.workers().stream().filter(WorkerStatus::healthy).mapToInt(WorkerStatus::slots).sum();
    }

    @Override
    public Map<String, Map<String, Integer>> warmPoolLevels() {
        Map<String, Map<String, Integer>> sum = new LinkedHashMap<>();
        for (WorkerStatus w : directory.workers()) {
            if (!w.healthy()) continue;
            w.warmPool().forEach((lang, lvl) -> {
                Map<String, Integer> m = sum.computeIfAbsent(lang, k -> new LinkedHashMap<>());
                lvl.forEach((k, v) -> m.merge(k, v, Integer::sum));
            });
        }
        return sum;
    }

    /** Always: even before the first status poll or with every worker gone, this server runs no code itself. */
    @Override
    public boolean remote() {
        return true;
    }

    @Override
    public List<WorkerStatus> workers() {
        return directory.workers();
    }

    @Override
    public SessionControl sessions() {
        return sessions;
    }

    @Override
    public Optional<dev.codeexec.engine.JobControl<?>> jobs() {
        return Optional.of(jobs);
    }

    @Override
    public Optional<dev.codeexec.engine.PreviewControl> previews() {
        return Optional.of(previews);
    }

    /** Polls the workers now (tests; the directory polls by itself every two seconds). */
    void pollNow() {
        directory.poll();
    }

    /**
     * Stops taking runs and polling, lets runs in flight finish for SHUTDOWN_GRACE_SECONDS, then cancels the rest
     * (their results say cancelled, and the workers kill them), then closes the channels.
     */
    @Override
    public void close() {
        if (closed) return;
        closed = true;
        jobs.close();
        previews.close();
        directory.close();
        long until = System.nanoTime() + shutdownGrace.toNanos();
        while (!inFlight.isEmpty() && System.nanoTime() < until) {
            try {
                Thread.sleep(50);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                break;
            }
        }
        if (!inFlight.isEmpty()) LOG.info("shutting down: cancelling {} runs still on workers", inFlight.size());
        for (RemoteRun r : List.copyOf(inFlight)) r.cancel();
        for (RemoteRun r : List.copyOf(inFlight)) {
            try {
                r.result().get(2, TimeUnit.SECONDS);
            } catch (Exception ignored) {
                // ended either way: its caller sees the cancelled result or the refusal
            }
        }
        stateless.shutdown();
        sessionChannel.shutdown();
        try {
            if (!stateless.awaitTermination(2, TimeUnit.SECONDS)) stateless.shutdownNow();
            if (!sessionChannel.awaitTermination(2, TimeUnit.SECONDS)) sessionChannel.shutdownNow();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            stateless.shutdownNow();
            sessionChannel.shutdownNow();
        }
    }

    /**
     * Sessions live on workers: listing asks every worker, reset and close go where the ring puts the session,
     * the count is the workers' own as last polled.
     */
    private final class RemoteSessions implements SessionControl {

        @Override
        public int count() {
            return directory.workers().stream().mapToInt(WorkerStatus::sessions).sum();
        }

        @Override
        public List<SessionInfo> list(String tenant) {
            record Pending(WorkerDirectory.Node node, ListenableFuture<ListSessionsResponse> f) {
            }
            List<Pending> pending = directory.nodes().stream().map(n -> new Pending(n,
                    WorkerGrpc.newFutureStub(n.channel)
                            .withDeadlineAfter(WorkerDirectory.POLL_DEADLINE.toMillis(), TimeUnit.MILLISECONDS)
                            .listSessions(ListSessionsRequest.newBuilder().setTenant(tenant)
                                    .build()))).toList();
            // One entry per name: a session that moved (its worker restarted) may briefly exist twice.
            Map<String, SessionInfo> byName = new TreeMap<>();
            for (Pending p : pending) {
                try {
                    for (dev.codeexec.wire.v1.SessionInfo s : p.f().get(WorkerDirectory.POLL_DEADLINE.toMillis() + 1000,
                            TimeUnit.MILLISECONDS).getSessionsList()) {
                        SessionInfo info = WireFormat.fromProto(s);
                        byName.merge(info.name(), info, (a, b) -> a.lastUsed().isAfter(b.lastUsed()) ? a : b);
                    }
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    break;
                } catch (Exception e) {
                    LOG.debug("session list from {} failed: {}", p.node().address, e.toString());
                }
            }
            return List.copyOf(byName.values());
        }

        @Override
        public boolean reset(String tenant, String name) {
            return call(tenant, name, true, null);
        }

        @Override
        public boolean reset(String tenant, String name, Optional<dev.codeexec.packages.PackageSet> packages) {
            return call(tenant, name, true, packages);
        }

        @Override
        public boolean close(String tenant, String name) {
            boolean found = call(tenant, name, false, null);
            pins.remove(new SessionRef(tenant, name));
            return found;
        }

        /** @param packages a reset's new packages (empty: none); null: the session keeps its set */
        private boolean call(String tenant, String name, boolean reset, Optional<dev.codeexec.packages.PackageSet> packages) {
            Metadata md = new Metadata();
            md.put(WorkerChannels.SESSION_KEY, sessionKey(new SessionRef(tenant, name)));
            WorkerGrpc.WorkerBlockingStub stub = WorkerGrpc.newBlockingStub(sessionChannel)
                    .withInterceptors(MetadataUtils.newAttachHeadersInterceptor(md))
                    .withDeadlineAfter(SESSION_CALL_DEADLINE.plus(packages != null && packages.isPresent()
                            ? installTimeout : Duration.ZERO).toMillis(), TimeUnit.MILLISECONDS);
            SessionRequest.Builder rb = SessionRequest.newBuilder().setTenant(tenant).setName(name);
            if (packages != null) rb.setSetPackages(true).addAllPackages(packages.map(dev.codeexec.packages.PackageSet::specs).orElse(List.of()));
            SessionRequest req = rb.build();
            try {
                dev.codeexec.wire.v1.SessionResponse r = reset ? stub.resetSession(req) : stub.closeSession(req);
                if (!r.getError().isEmpty()) throw new ExecutionException.InvalidRequest(r.getError());
                return r.getFound();
            } catch (StatusRuntimeException e) {
                throw new ExecutionException.Unavailable("the worker of session '" + name + "' could not be reached: "
                        + e.getStatus().getCode());
            }
        }
    }
}
