package dev.codeexec.gateway;

import dev.codeexec.engine.ExecutionException;
import dev.codeexec.engine.ExecutionRequest;
import dev.codeexec.engine.JobControl;
import dev.codeexec.engine.JobHandle;
import dev.codeexec.engine.JobState;
import dev.codeexec.engine.LogChunk;
import dev.codeexec.engine.OutputListener;
import dev.codeexec.engine.WorkerStatus;
import dev.codeexec.wire.WireFormat;
import dev.codeexec.wire.v1.JobReply;
import dev.codeexec.wire.v1.JobRequest;
import dev.codeexec.wire.v1.JobScope;
import dev.codeexec.wire.v1.ListJobsReply;
import dev.codeexec.wire.v1.ListJobsRequest;
import dev.codeexec.wire.v1.ReadJobReply;
import dev.codeexec.wire.v1.ReadJobRequest;
import dev.codeexec.wire.v1.StatusResponse;
import dev.codeexec.wire.v1.WorkerGrpc;
import dev.codeexec.workspace.Workspaces;
import com.google.common.util.concurrent.ListenableFuture;
import io.grpc.Channel;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import tools.jackson.core.type.TypeReference;
import tools.jackson.databind.json.JsonMapper;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.CharBuffer;
import java.nio.charset.CharsetDecoder;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * A gateway's background jobs, kept by the workers that run them. A job is started on a worker chosen like a
 * stateless run's; its id ({@code job-<worker instance>-<random>}) routes every later call, from any gateway replica,
 * to that worker process. The gateway keeps nothing a replica would need: only, per job it has seen, its last state
 * (bounded), so that a job whose worker went away can still be answered {@code lost} with that worker's name.
 *
 * <p>A worker "went away" when its address now answers as another process (restarted), it left the worker list, or
 * it has not answered for {@link RemoteExecutor#UNRESPONSIVE}. A restarted worker on the same volume reads its jobs
 * back (they are {@code lost} there too, with their output): a job whose instance is unknown is looked for on every
 * worker before it is given up.
 */
final class RemoteJobs implements JobControl<RemoteJobs.RemoteJob> {

    private static final Logger LOG = LoggerFactory.getLogger(RemoteJobs.class);
    private static final JsonMapper JSON = JsonMapper.shared();
    /** A job id as a worker makes it: its instance id, then its own random part. */
    private static final Pattern ID = Pattern.compile("^job-([0-9a-f]{8,64})-[0-9a-f]{8,64}$");
    /** A call about one job (besides its wait). */
    static final Duration CALL_DEADLINE = Duration.ofSeconds(10);
    /** How often a watched job's output, and a followed job's status, are asked for. */
    static final Duration POLL = Duration.ofMillis(300);
    static final Duration FOLLOW_EVERY = Duration.ofSeconds(1);
    /** The jobs whose last state this gateway remembers. */
    static final int KNOWN_MAX = 10_000;

    private final WorkerDirectory directory;
    private final Channel balanced;
    private final Map<String, Known> known = java.util.Collections.synchronizedMap(new LinkedHashMap<>(16, 0.75f, true) {
        @Override
        protected boolean removeEldestEntry(Map.Entry<String, Known> eldest) {
            return size() > KNOWN_MAX;
        }
    });
    /** Jobs whose changes of status are told to the listeners (started or looked at here, not ended yet). */
    private final Map<String, Followed> followed = new ConcurrentHashMap<>();
    private final List<Consumer<JobHandle>> listeners = new CopyOnWriteArrayList<>();
    /** Names of worker processes seen, kept after they go (for the message of a lost job). */
    private final Map<String, String> names = java.util.Collections.synchronizedMap(new LinkedHashMap<>(16, 0.75f, true) {
        @Override
        protected boolean removeEldestEntry(Map.Entry<String, String> eldest) {
            return size() > 1000;
        }
    });
    private final ScheduledExecutorService follower;
    private volatile boolean closed;

    /** What this gateway last learnt of a job, and from which worker process. */
    private record Known(JobState state, String instance) {
    }

    /** A job whose status changes are told; {@code hold} keeps its workspace from this gateway's expiry. */
    private record Followed(RemoteJob job, String lastStatus, Optional<Workspaces.Hold> hold) {
    }

    RemoteJobs(WorkerDirectory directory, Channel balanced) {
        this.directory = directory;
        this.balanced = balanced;
        this.follower = Executors.newSingleThreadScheduledExecutor(Thread.ofPlatform().name("remote-jobs").daemon(true)
                .factory());
        follower.scheduleWithFixedDelay(this::followQuietly, FOLLOW_EVERY.toMillis(), FOLLOW_EVERY.toMillis(),
                TimeUnit.MILLISECONDS);
    }

    // ---- JobControl ----

    @Override
    public RemoteJob start(ExecutionRequest request) {
        if (!request.background()) throw new IllegalArgumentException("not a background request");
        if (closed) throw new ExecutionException.Unavailable("the server is shutting down; no new jobs are accepted");
        JobReply reply;
        try {
            reply = WorkerGrpc.newBlockingStub(balanced).withWaitForReady()
                    .withDeadlineAfter(CALL_DEADLINE.toMillis(), TimeUnit.MILLISECONDS)
                    .startJob(WireFormat.toProto(request, Optional.empty()));
        } catch (StatusRuntimeException e) {
            throw refusal(e);
        }
        JobState state = parse(reply.getStateJson());
        String instance = instanceOf(state.id()).orElse("");
        remember(state, instance, reply.getWorker());
        RemoteJob job = new RemoteJob(state.id(), state.tenant());
        Optional<Workspaces.Hold> hold = Optional.empty();
        if (!state.ended()) {
            hold = request.workspace().map(ws -> ws.hold());
            followed.put(state.id(), new Followed(job, state.status(), hold));
        }
        return job;
    }

    /** A worker's refusal of a job as the engine's exceptions say it. */
    private static RuntimeException refusal(StatusRuntimeException e) {
        String d = Optional.ofNullable(e.getStatus().getDescription()).orElse(e.getStatus().getCode().toString());
        return switch (e.getStatus().getCode()) {
            case INVALID_ARGUMENT, NOT_FOUND, FAILED_PRECONDITION -> new ExecutionException.InvalidRequest(d);
            case RESOURCE_EXHAUSTED -> new ExecutionException.Busy(d);
            default -> new ExecutionException.Unavailable("no worker could take the job now (" + e.getStatus().getCode()
                    + "); try again");
        };
    }

    @Override
    public Optional<RemoteJob> find(Optional<String> tenant, String id) {
        if (id == null || !ID.matcher(id).matches()) return Optional.empty();
        Optional<JobState> state;
        try {
            state = fetch(tenant, id, 0);
        } catch (ExecutionException.Unavailable e) {
            // its worker does not answer now: a job this gateway knows is still the tenant's to wait for (a wait
            // goes on until the worker answers or is taken for gone); one it does not know cannot be checked
            Known k = known.get(id);
            if (k == null || tenant.isPresent() && !tenant.get().equals(k.state().tenant())) throw e;
            return Optional.of(new RemoteJob(id, k.state().tenant()));
        }
        if (state.isEmpty()) return Optional.empty();
        RemoteJob job = new RemoteJob(id, state.get().tenant());
        if (!state.get().ended()) followed.putIfAbsent(id, new Followed(job, state.get().status(), Optional.empty()));
        return Optional.of(job);
    }

    @Override
    public List<JobState> list(Optional<String> tenant) {
        record Pending(WorkerDirectory.Node node, ListenableFuture<ListJobsReply> f) {
        }
        List<Pending> pending = new ArrayList<>();
        for (WorkerDirectory.Node n : directory.nodes()) {
            pending.add(new Pending(n, WorkerGrpc.newFutureStub(n.channel)
                    .withDeadlineAfter(WorkerDirectory.POLL_DEADLINE.toMillis(), TimeUnit.MILLISECONDS)
                    .listJobs(ListJobsRequest.newBuilder().setScope(scope(tenant)).build())));
        }
        Map<String, JobState> byId = new LinkedHashMap<>();
        for (Pending p : pending) {
            try {
                ListJobsReply r = p.f().get(WorkerDirectory.POLL_DEADLINE.toMillis() + 1000, TimeUnit.MILLISECONDS);
                for (String json : r.getStateJsonList()) {
                    JobState s = parse(json);
                    byId.put(s.id(), s);
                    remember(s, instanceOf(s.id()).orElse(""), r.getWorker());
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                break;
            } catch (Exception e) {
                LOG.debug("job list from {} failed: {}", p.node().address, e.toString());
            }
        }
        // jobs this gateway knew on workers that went away: lost, with what was known of them
        List<Map.Entry<String, Known>> knownNow;
        synchronized (known) {
            knownNow = List.copyOf(known.entrySet());
        }
        for (Map.Entry<String, Known> e : knownNow) {
            JobState s = e.getValue().state();
            if (byId.containsKey(e.getKey()) || tenant.isPresent() && !tenant.get().equals(s.tenant())) continue;
            gone(e.getValue().instance()).ifPresent(why -> byId.put(s.id(), s.lost(Instant.now(), why)));
        }
        return byId.values().stream().sorted(Comparator.comparing(JobState::createdAt).reversed()).toList();
    }

    @Override
    public void onChange(Consumer<JobHandle> listener) {
        listeners.add(listener);
    }

    @Override
    public int running() {
        return statuses().mapToInt(StatusResponse::getJobsRunning).sum();
    }

    @Override
    public int queued() {
        return statuses().mapToInt(StatusResponse::getJobsQueued).sum();
    }

    @Override
    public Map<String, Long> endedByStatus() {
        Map<String, Long> out = new java.util.TreeMap<>();
        statuses().forEach(s -> s.getJobsEndedMap().forEach((k, v) -> out.merge(k, v, Long::sum)));
        return out;
    }

    /** The last status of each worker that answers now (healthy or draining). */
    private java.util.stream.Stream<StatusResponse> statuses() {
        return directory.nodes().stream().filter(n -> n.status.lastSeen().isPresent() && n.status.error().isEmpty()
                        || n.status.draining())
                .map(n -> n.lastStatus).flatMap(Optional::stream);
    }

    @Override
    public void close() {
        closed = true;
        follower.shutdownNow();
        for (Followed f : followed.values()) f.hold().ifPresent(Workspaces.Hold::close);
        followed.clear();
    }

    // ---- routing ----

    static Optional<String> instanceOf(String id) {
        Matcher m = ID.matcher(id);
        return m.matches() ? Optional.of(m.group(1)) : Optional.empty();
    }

    private static JobScope scope(Optional<String> tenant) {
        return tenant.map(t -> JobScope.newBuilder().setTenant(t).build())
                .orElse(JobScope.newBuilder().setAllTenants(true).build());
    }

    private void remember(JobState state, String instance, String workerName) {
        known.put(state.id(), new Known(state, instance));
        if (!instance.isEmpty() && !workerName.isEmpty()) names.put(instance, workerName);
    }

    /** The node whose worker process is {@code instance}, answering now. */
    private Optional<WorkerDirectory.Node> nodeOf(String instance) {
        return directory.nodes().stream()
                .filter(n -> n.status.instanceId().filter(instance::equals).isPresent()).findFirst();
    }

    /**
     * Why the worker process {@code instance} is gone for good (restarted as another process, left the list, or
     * silent for {@link RemoteExecutor#UNRESPONSIVE}); empty while it may still answer.
     */
    private Optional<String> gone(String instance) {
        String name = names.getOrDefault(instance, directory.nameOfInstance(instance).orElse("?"));
        String who = "the worker " + name + " (instance " + instance + ") that ran it";
        Optional<WorkerStatus> s = directory.statusOfInstance(instance);
        if (s.isEmpty())
            return Optional.of(who + " went away (restarted or removed): a process does not outlive its worker; "
                    + "the output it wrote is on that worker's volume, if it kept it");
        if (s.get().healthy() || s.get().draining() || s.get().lastSeen().isEmpty()) return Optional.empty();
        Duration silent = Duration.between(s.get().lastSeen().get(), Instant.now());
        if (silent.compareTo(RemoteExecutor.UNRESPONSIVE) < 0) return Optional.empty();
        return Optional.of(who + " has not answered for " + silent.toSeconds() + " s: it is taken for gone");
    }

    /** A call to the worker of a job, or the reason it cannot be made. */
    private interface Call<T> {
        T on(WorkerGrpc.WorkerBlockingStub stub);
    }

    /** Thrown when the job's worker is gone for good ({@code why} names it). */
    private static final class Gone extends RuntimeException {
        Gone(String why) {
            super(why, null, false, false);
        }
    }

    /**
     * Makes {@code call} on the worker of job {@code id}: the process its id names; when that process is unknown
     * here, every worker (a restarted one on the same volume has it back).
     *
     * @return empty: no worker has a job of that id for the scope
     * @throws Gone                             the job's worker went away
     * @throws ExecutionException.Unavailable its worker does not answer now (but may again)
     */
    private <T> Optional<T> route(String id, long extraDeadlineMs, Call<T> call) {
        String instance = instanceOf(id).orElseThrow();
        Optional<WorkerDirectory.Node> node = nodeOf(instance);
        List<WorkerDirectory.Node> tried = node.map(List::of).orElseGet(directory::nodes);
        for (WorkerDirectory.Node n : tried) {
            try {
                return Optional.of(call.on(WorkerGrpc.newBlockingStub(n.channel)
                        .withDeadlineAfter(CALL_DEADLINE.toMillis() + extraDeadlineMs, TimeUnit.MILLISECONDS)));
            } catch (StatusRuntimeException e) {
                if (e.getStatus().getCode() == Status.Code.NOT_FOUND) continue;
                if (node.isPresent()) {
                    Optional<String> why = gone(instance);
                    if (why.isPresent()) throw new Gone(why.get());
                    throw new ExecutionException.Unavailable("the worker " + n.status.name().orElse(n.address.toString())
                            + " that runs job " + id + " does not answer now (" + e.getStatus().getCode() + "); try again");
                }
                LOG.debug("job {}: worker {} did not answer: {}", id, n.address, e.getStatus());
            }
        }
        if (node.isEmpty()) {
            Optional<String> why = gone(instance);
            if (why.isPresent() && known.containsKey(id)) throw new Gone(why.get());
        }
        return Optional.empty();
    }

    /** The job's state now (after waiting up to {@code waitMs} for its end); empty: not the scope's, or none. */
    private Optional<JobState> fetch(Optional<String> tenant, String id, long waitMs) {
        JobRequest req = JobRequest.newBuilder().setScope(scope(tenant)).setId(id).setWaitMs(waitMs).build();
        try {
            return route(id, waitMs, stub -> stub.getJob(req)).map(r -> {
                JobState s = parse(r.getStateJson());
                remember(s, instanceOf(id).orElse(""), r.getWorker());
                return s;
            });
        } catch (Gone g) {
            return lostState(tenant, id, g.getMessage());
        }
    }

    /** What is known of a job whose worker is gone, made lost; empty when nothing is (or not the scope's). */
    private Optional<JobState> lostState(Optional<String> tenant, String id, String why) {
        Known k = known.get(id);
        if (k == null || tenant.isPresent() && !tenant.get().equals(k.state().tenant())) return Optional.empty();
        return Optional.of(k.state().lost(k.state().endedAt().orElse(Instant.now()), why));
    }

    private static JobState parse(String json) {
        return JobState.fromWire(JSON.readValue(json, new TypeReference<Map<String, Object>>() { }));
    }

    // ---- following: status changes for subscriptions, workspace holds ----

    private void followQuietly() {
        try {
            follow();
        } catch (RuntimeException e) {
            LOG.warn("following jobs failed: {}", e.toString());
        }
    }

    private void follow() {
        for (Followed f : List.copyOf(followed.values())) {
            if (closed) return;
            Optional<JobState> s;
            try {
                s = fetch(Optional.of(f.job().tenant()), f.job().id(), 0);
            } catch (ExecutionException.Unavailable e) {
                continue; // its worker may answer again
            }
            String status = s.map(JobState::status).orElse(JobState.LOST);
            boolean ended = s.map(JobState::ended).orElse(true);
            if (ended) {
                followed.remove(f.job().id());
                f.hold().ifPresent(Workspaces.Hold::close);
            } else if (!status.equals(f.lastStatus())) {
                followed.put(f.job().id(), new Followed(f.job(), status, f.hold()));
            }
            if (!status.equals(f.lastStatus())) {
                for (Consumer<JobHandle> l : listeners) {
                    try {
                        l.accept(f.job());
                    } catch (RuntimeException e) {
                        LOG.warn("jobs: a listener failed: {}", e.toString());
                    }
                }
            }
        }
    }

    // ---- one job ----

    /** A job on a worker: each call asks the worker (or answers lost when it went away). */
    final class RemoteJob implements JobHandle {

        private final String id;
        private final String tenant;

        RemoteJob(String id, String tenant) {
            this.id = id;
            this.tenant = tenant;
        }

        @Override
        public String id() {
            return id;
        }

        @Override
        public String tenant() {
            return tenant;
        }

        @Override
        public JobState state() {
            return fetch(Optional.of(tenant), id, 0).orElseThrow(() -> new ExecutionException.Unavailable(
                    "job " + id + " is no longer kept by its worker"));
        }

        @Override
        public LogChunk read(OutputListener.Stream stream, long offset, int max) throws IOException {
            ReadJobRequest req = ReadJobRequest.newBuilder().setScope(scope(Optional.of(tenant))).setId(id)
                    .setStderr(stream == OutputListener.Stream.STDERR).setOffset(offset).setMaxBytes(max).build();
            try {
                Optional<ReadJobReply> r = route(id, 0, stub -> stub.readJob(req));
                if (r.isEmpty()) throw new IOException("job " + id + " is no longer kept by its worker");
                ReadJobReply c = r.get();
                return new LogChunk(c.getFrom(), c.getNext(), c.getSkipped(), c.getData().toByteArray(), c.getTotal());
            } catch (Gone g) {
                // what it wrote stays on the worker that went away: nothing more to read here
                return new LogChunk(offset, offset, 0, new byte[0], offset);
            } catch (ExecutionException.Unavailable e) {
                throw new IOException(e.getMessage());
            }
        }

        @Override
        public JobState await(long millis) throws InterruptedException {
            long until = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(millis);
            while (true) {
                long left = TimeUnit.NANOSECONDS.toMillis(until - System.nanoTime());
                try {
                    JobState s = fetch(Optional.of(tenant), id, Math.max(0, Math.min(left, 55_000)))
                            .orElseThrow(() -> new ExecutionException.Unavailable("job " + id + " is no longer kept by its worker"));
                    if (s.ended() || left <= 0) return s;
                } catch (ExecutionException.Unavailable e) {
                    if (left <= 0) throw e;
                    Thread.sleep(Math.min(left, 500)); // its worker does not answer now: until it does or is gone
                }
            }
        }

        @Override
        public AutoCloseable watch(OutputListener listener) {
            JobState from = state();
            Thread t = Thread.ofVirtual().name("job-watch").start(() -> {
                long[] at = {from.stdout(), from.stderr()};
                Utf8Text[] dec = {new Utf8Text(), new Utf8Text()};
                try {
                    boolean ended = false;
                    while (!Thread.currentThread().isInterrupted()) {
                        ended = fetch(Optional.of(tenant), id, 0).map(JobState::ended).orElse(true);
                        for (OutputListener.Stream s : OutputListener.Stream.values()) {
                            int i = s.ordinal();
                            while (true) {
                                LogChunk c = read(s, at[i], 256 * 1024);
                                if (c.next() <= at[i]) break;
                                at[i] = c.next();
                                String text = dec[i].add(c.bytes());
                                if (!text.isEmpty()) listener.onOutput(s, text, System.currentTimeMillis());
                            }
                        }
                        if (ended) return;
                        Thread.sleep(POLL.toMillis());
                    }
                } catch (InterruptedException e) {
                    // closed
                } catch (IOException | RuntimeException e) {
                    LOG.debug("watching job {} stopped: {}", id, e.toString());
                }
            });
            return t::interrupt;
        }

        @Override
        public JobState cancel(long waitMillis) throws InterruptedException {
            JobRequest req = JobRequest.newBuilder().setScope(scope(Optional.of(tenant))).setId(id)
                    .setWaitMs(waitMillis).build();
            try {
                Optional<JobReply> r = route(id, waitMillis, stub -> stub.cancelJob(req));
                if (r.isEmpty()) throw new ExecutionException.Unavailable("job " + id + " is no longer kept by its worker");
                JobState s = parse(r.get().getStateJson());
                remember(s, instanceOf(id).orElse(""), r.get().getWorker());
                return s;
            } catch (Gone g) {
                return lostState(Optional.of(tenant), id, g.getMessage()).orElseThrow();
            }
        }
    }

    /** Bytes to text across reads: a character split between two reads is given whole with the second. */
    static final class Utf8Text {
        private final CharsetDecoder decoder = StandardCharsets.UTF_8.newDecoder()
                .onMalformedInput(CodingErrorAction.REPLACE).onUnmappableCharacter(CodingErrorAction.REPLACE);
        private ByteBuffer pending = ByteBuffer.allocate(0);

        String add(byte[] bytes) {
            ByteBuffer in = ByteBuffer.allocate(pending.remaining() + bytes.length);
            in.put(pending).put(bytes).flip();
            CharBuffer out = CharBuffer.allocate(in.remaining() + 1);
            decoder.decode(in, out, false);
            pending = in; // what is left: the start of a character whose rest comes with the next read
            return out.flip().toString();
        }
    }
}
