package dev.codeexec.job;

import dev.codeexec.config.Config;
import dev.codeexec.config.DataDir;
import dev.codeexec.config.Ids;
import dev.codeexec.engine.ExecutionException;
import dev.codeexec.engine.ExecutionRequest;
import dev.codeexec.engine.ExecutionResult;
import dev.codeexec.engine.Executor;
import dev.codeexec.engine.JobControl;
import dev.codeexec.engine.OutputListener;
import dev.codeexec.engine.RunHandle;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import tools.jackson.core.type.TypeReference;
import tools.jackson.databind.json.JsonMapper;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.Deque;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.function.BiFunction;
import java.util.stream.Stream;

/**
 * Background jobs: runs that outlive the call that started them ({@code execute_code} with {@code background: true},
 * {@code POST /api/jobs}). A job belongs to its tenant, not to an MCP session or a connection: it is found by its id
 * (unguessable) and its tenant, from any session, the REST API or the console.
 *
 * <p>Slots of their own: at most MAX_JOBS running at once server-wide and MAX_JOBS_PER_TENANT per tenant, apart from
 * MAX_CONCURRENT (a long job never takes an interactive call's slot); past them a job waits in one queue
 * (JOB_QUEUE_SIZE, first come first served among the tenants under their cap), past that it is refused. The run
 * itself is the executor's (a request marked {@code background}: its own threads, the job's limits, a lower CPU
 * weight), so a job's result carries everything a foreground run's does.
 *
 * <p>On disk, DATA_DIR/jobs/{id}/: {@code job.json} (the record, rewritten atomically at each change of status) and
 * the two logs ({@link JobLog}, JOB_LOG_MB each). At start every record is read back: a job that was queued or
 * running when its server went away is recorded {@code lost} (a process cannot outlive its server), its logs kept.
 * Ended jobs are removed JOB_RETENTION_HOURS after they ended.
 */
public final class Jobs implements JobControl<Job> {

    private static final Logger LOG = LoggerFactory.getLogger(Jobs.class);
    private static final Logger AUDIT = LoggerFactory.getLogger("audit");
    private static final JsonMapper JSON = JsonMapper.shared();
    private static final String RECORD = "job.json";
    /** How often the retention sweep looks for expired jobs. */
    static final Duration SWEEP_EVERY = Duration.ofMinutes(5);

    private final Executor executor;
    private final Path root;
    private final BiFunction<ExecutionRequest, ExecutionResult, Map<String, Object>> resultMap;
    private final Clock clock;
    private final int maxJobs;
    private final int perTenant;
    private final int queueSize;
    private final long logBytes;
    private final Duration retention;
    private final int keepPerTenant;
    /** The lock on the jobs' directory, held for this server's life; null when another process holds it. */
    private java.nio.channels.FileChannel lockFile;
    /** Why this server keeps no jobs (another server on the same DATA_DIR keeps them), or null. */
    private volatile String unavailable;
    private final Map<String, Job> jobs = new ConcurrentHashMap<>();
    /** Jobs waiting for a slot, in arrival order; guarded by {@code this}, like the counts below. */
    private final Deque<Pending> queue = new ArrayDeque<>();
    private final Map<String, Integer> runningPerTenant = new HashMap<>();
    private int running;
    private final Map<String, Long> endedByStatus = new ConcurrentHashMap<>();
    private final ScheduledExecutorService sweeper;
    private volatile boolean closed;
    /** What new job ids start with after {@code job-} (see {@link #open(Config, Executor, BiFunction, String)}). */
    private volatile String idPrefix = "";
    /** Who keeps these jobs, as a lost job's message names it. */
    private volatile String keeper = "the server";

    private record Pending(Job job, ExecutionRequest request) {
    }

    /** Told of every job's change of status (started, ended, lost): a surface's subscriptions. */
    private final List<java.util.function.Consumer<dev.codeexec.engine.JobHandle>> listeners = new java.util.concurrent.CopyOnWriteArrayList<>();

    /**
     * Calls {@code listener} after each change of any job's status, on the thread that made it: it must not block
     * (an MCP server hands the notification to a thread of its own). A listener's failure is its own.
     */
    @Override
    public void onChange(java.util.function.Consumer<dev.codeexec.engine.JobHandle> listener) {
        listeners.add(listener);
    }

    private void changed(Job job) {
        for (var l : listeners) {
            try {
                l.accept(job);
            } catch (RuntimeException e) {
                LOG.warn("jobs: a listener failed: {}", e.toString());
            }
        }
    }

    private Jobs(Executor executor, Config config, Path root, BiFunction<ExecutionRequest, ExecutionResult, Map<String, Object>> resultMap,
            Clock clock) {
        this.executor = executor;
        this.root = root;
        this.resultMap = resultMap;
        this.clock = clock;
        this.maxJobs = config.get(Config.MAX_JOBS);
        this.perTenant = config.get(Config.MAX_JOBS_PER_TENANT);
        this.queueSize = config.get(Config.JOB_QUEUE_SIZE);
        this.logBytes = (long) config.get(Config.JOB_LOG_MB) << 20;
        this.retention = Duration.ofHours(config.get(Config.JOB_RETENTION_HOURS));
        this.keepPerTenant = config.get(Config.JOB_KEEP_PER_TENANT);
        this.sweeper = Executors.newSingleThreadScheduledExecutor(Thread.ofPlatform().name("jobs-retention").daemon(true)
                .factory());
    }

    /**
     * The jobs of this server: DATA_DIR/jobs read back (running ones recorded lost), the retention sweep started.
     *
     * @param resultMap a run's result (of its request) as the surfaces show it, kept with the job and in its record
     */
    public static Jobs open(Config config, Executor executor, BiFunction<ExecutionRequest, ExecutionResult, Map<String, Object>> resultMap) {
        return open(config, executor, resultMap, "", "the server");
    }

    /**
     * The same, with job ids that start {@code job-<idPrefix>} (a worker's carry its instance id, which routes a
     * gateway's later calls about the job to it), and messages of lost jobs that name {@code keeper}.
     */
    public static Jobs open(Config config, Executor executor, BiFunction<ExecutionRequest, ExecutionResult, Map<String, Object>> resultMap,
            String idPrefix, String keeper) {
        return open(config, executor, resultMap, DataDir.of(config).root().resolve("jobs"), Clock.systemUTC(), idPrefix,
                keeper);
    }

    static Jobs open(Config config, Executor executor, BiFunction<ExecutionRequest, ExecutionResult, Map<String, Object>> resultMap,
            Path root, Clock clock) {
        return open(config, executor, resultMap, root, clock, "", "the server");
    }

    /**
     * @param idPrefix what new ids start with after {@code job-}
     * @param keeper   who keeps the jobs, as the message of a lost job names it ("the server", "the worker w-1")
     */
    static Jobs open(Config config, Executor executor, BiFunction<ExecutionRequest, ExecutionResult, Map<String, Object>> resultMap,
            Path root, Clock clock, String idPrefix, String keeper) {
        Jobs j = new Jobs(executor, config, root, resultMap, clock);
        j.idPrefix = idPrefix;
        j.keeper = keeper;
        try {
            Files.createDirectories(root);
            Files.setPosixFilePermissions(root, PosixFilePermissions.fromString("rwx------"));
            if (j.lock()) j.readBack();
        } catch (IOException e) {
            LOG.warn("jobs: cannot read {}: {}; earlier jobs are not listed", root, e.toString());
        }
        j.sweeper.scheduleWithFixedDelay(j::sweepQuietly, SWEEP_EVERY.toMillis(), SWEEP_EVERY.toMillis(),
                TimeUnit.MILLISECONDS);
        return j;
    }

    /**
     * Takes the jobs' directory for this server, for its whole life: two servers on one DATA_DIR (two desktop clients'
     * stdio servers, say) would each take the other's running jobs for lost. The second keeps no jobs and says why.
     * A lock already held in this process (tests that start a server again in one JVM) counts as taken.
     */
    private boolean lock() throws IOException {
        lockFile = java.nio.channels.FileChannel.open(root.resolve(".lock"), java.nio.file.StandardOpenOption.CREATE,
                java.nio.file.StandardOpenOption.WRITE);
        try {
            if (lockFile.tryLock() != null) return true;
        } catch (java.nio.channels.OverlappingFileLockException e) {
            return true;
        }
        lockFile.close();
        lockFile = null;
        unavailable = "background jobs are kept by another server on this DATA_DIR (" + root.getParent()
                + "); give this server a DATA_DIR of its own to run jobs here";
        LOG.warn("jobs: {}", unavailable);
        return false;
    }

    /** Every record left in the directory: ended ones as they were, queued or running ones now lost. */
    private void readBack() throws IOException {
        int lost = 0;
        try (Stream<Path> dirs = Files.list(root)) {
            for (Path d : dirs.toList()) {
                Path rec = d.resolve(RECORD);
                if (!Files.isRegularFile(rec, java.nio.file.LinkOption.NOFOLLOW_LINKS)) continue;
                try {
                    Map<String, Object> r = JSON.readValue(Files.readAllBytes(rec), new TypeReference<Map<String, Object>>() { });
                    Job job = Job.fromRecord(r, d, JobLog.open(d, "stdout", logBytes), JobLog.open(d, "stderr", logBytes));
                    if (!job.isEnded()) {
                        job.end(Job.LOST, clock.instant(), keeper + " stopped while the job was " + job.status()
                                + ": a process cannot outlive it; the output it wrote is kept", null);
                        write(job);
                        lost++;
                        AUDIT.info("job lost id={} tenant={} reason=server_restart", job.id(), job.tenant());
                    }
                    job.completeEnded();
                    job.owner = this;
                    jobs.put(job.id(), job);
                } catch (IOException | RuntimeException e) {
                    LOG.warn("jobs: cannot read the record {}: {}", rec, e.toString());
                }
            }
        }
        if (!jobs.isEmpty()) LOG.info("jobs: {} kept from before ({} lost with the last server)", jobs.size(), lost);
    }

    /**
     * Starts a job for the request's tenant: it runs at once when a slot is free, else it waits in the queue.
     *
     * @param request a request marked {@code background} (RequestValidator made its limits)
     * @throws ExecutionException.InvalidRequest jobs are off here (MAX_JOBS=0), or the request is not a background one
     * @throws ExecutionException.Busy           the queue is full
     */
    @Override
    public Job start(ExecutionRequest request) {
        if (!request.background()) throw new IllegalArgumentException("not a background request");
        if (closed) throw new ExecutionException.Unavailable("the server is shutting down; no new jobs are accepted");
        if (maxJobs == 0) throw new ExecutionException.InvalidRequest("background jobs are off on this server (MAX_JOBS=0)");
        if (unavailable != null) throw new ExecutionException.Unavailable(unavailable);
        String tenant = request.audit().tenant().orElse("default");
        forgetOldest(tenant);
        String id = "job-" + idPrefix + Ids.hex(16);
        Path dir = root.resolve(id);
        Job job;
        try {
            Files.createDirectory(dir, PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rwx------")));
            job = new Job(id, tenant, dir, declared(request), clock.instant(), Job.QUEUED,
                    JobLog.open(dir, "stdout", logBytes), JobLog.open(dir, "stderr", logBytes));
        } catch (IOException e) {
            DataDir.deleteTree(dir);
            throw new ExecutionException.Unavailable("the job's directory cannot be made: " + e.getMessage());
        }
        boolean now;
        synchronized (this) {
            // a queued job that fits would have been started when its slot freed: what waits does not fit now
            now = fits(tenant);
            if (!now && queue.size() >= queueSize) {
                DataDir.deleteTree(dir);
                throw new ExecutionException.Busy("the server runs " + maxJobs + " background jobs at once (MAX_JOBS), "
                        + perTenant + " per tenant (MAX_JOBS_PER_TENANT), and " + queue.size()
                        + " more are waiting (JOB_QUEUE_SIZE); try again later");
            }
            // one tenant may fill at most half the queue: the others keep places while its own jobs wait for it
            long own = queue.stream().filter(p -> p.job().tenant().equals(tenant)).count();
            if (!now && own >= Math.max(1, queueSize / 2)) {
                DataDir.deleteTree(dir);
                throw new ExecutionException.Busy("you have " + own + " background jobs waiting, half the queue "
                        + "(JOB_QUEUE_SIZE " + queueSize + "), and " + runningPerTenant.getOrDefault(tenant, 0)
                        + " running; try again when one has ended");
            }
            job.owner = this;
            jobs.put(id, job);
            if (now) take(tenant);
            else queue.add(new Pending(job, request));
        }
        writeQuietly(job);
        AUDIT.info("job start id={} tenant={} language={} timeoutMs={} queued={}", id, tenant, request.language(),
                request.limits().timeout().toMillis(), !now);
        if (now) run(job, request);
        return job;
    }

    private static Map<String, Object> declared(ExecutionRequest r) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("language", r.language());
        m.put("timeoutMs", r.limits().timeout().toMillis());
        r.workspace().ifPresent(w -> m.put("workspace", w.name()));
        if (!r.egress().isOff()) m.put("network", r.egress().patterns());
        r.packages().ifPresent(p -> m.put("packages", p.specs()));
        if (!r.args().isEmpty()) m.put("args", r.args());
        return m;
    }

    private boolean fits(String tenant) {
        return running < maxJobs && runningPerTenant.getOrDefault(tenant, 0) < perTenant;
    }

    private void take(String tenant) {
        running++;
        runningPerTenant.merge(tenant, 1, Integer::sum);
    }

    private void release(String tenant) {
        running--;
        runningPerTenant.computeIfPresent(tenant, (k, v) -> v <= 1 ? null : v - 1);
    }

    /** Submits the job's run; its output goes to its logs and watchers, its end to {@link #finish}. */
    private void run(Job job, ExecutionRequest request) {
        OutputListener sink = new OutputListener() {
            @Override
            public void onOutput(Stream stream, String text) {
                onOutput(stream, text, System.currentTimeMillis());
            }

            @Override
            public void onOutput(Stream stream, String text, long atMillis) {
                try {
                    job.log(stream).append(text.getBytes(StandardCharsets.UTF_8));
                } catch (IOException e) {
                    LOG.warn("job {}: cannot write its {}: {}", job.id(), stream, e.toString());
                }
                job.output(stream, text, atMillis);
            }
        };
        // running from here: it holds a job slot, and the executor starts a background run at once (no queue)
        job.started(clock.instant());
        writeQuietly(job);
        changed(job);
        RunHandle handle;
        try {
            handle = executor.submit(request, sink);
        } catch (ExecutionException e) {
            finish(job, request, null, e.getMessage());
            return;
        } catch (RuntimeException e) {
            LOG.warn("job {}: its run could not be submitted: {}", job.id(), e.toString());
            finish(job, request, null, "the run could not be started inside the server");
            return;
        }
        job.runId = handle.id();
        job.cancel = handle::cancel;
        if (job.cancelRequested) handle.cancel(); // a cancel that came while the run was being submitted
        handle.result().whenComplete((r, e) -> finish(job, request, r, e == null ? null
                : e.getCause() instanceof ExecutionException ee ? ee.getMessage()
                : e instanceof ExecutionException ee2 ? ee2.getMessage() : "the run failed inside the server"));
    }

    /**
     * The job ended: its slot given to the next jobs that fit (whatever else fails here), its record written. How it
     * ended: the run's outcome, except a run that could not start ({@code failed}, with the reason the run's stderr
     * gave), a worker that went away and a cancel nobody asked for (the server or the worker stopping): {@code lost}.
     */
    private void finish(Job job, ExecutionRequest request, ExecutionResult r, String error) {
        List<Pending> next = new ArrayList<>();
        synchronized (this) {
            release(job.tenant()); // every job that gets here took its slot before its run was submitted
            for (var it = queue.iterator(); it.hasNext() && running < maxJobs; ) {
                Pending p = it.next();
                if (!fits(p.job().tenant())) continue;
                it.remove();
                take(p.job().tenant());
                next.add(p);
            }
        }
        try {
            String how;
            String message = null;
            Map<String, Object> res = null;
            dev.codeexec.engine.Outcome o = r == null ? null : r.outcome();
            if (r == null) {
                how = Job.FAILED;
                message = error;
            } else if (o == dev.codeexec.engine.Outcome.FAILED_TO_START) {
                how = Job.FAILED;
                message = r.stderr().strip().isEmpty() ? "the job could not start" : r.stderr().strip();
            } else if (o == dev.codeexec.engine.Outcome.WORKER_LOST
                    || o == dev.codeexec.engine.Outcome.CANCELLED && !job.cancelRequested) {
                how = Job.LOST;
                message = closed ? keeper + " stopped while the job was running"
                        : r.worker().map(w -> "the worker " + w + " that ran the job went away (or stopped)")
                                .orElse("the run was ended by its server, not by a cancel")
                        + "; the output it sent until then is kept";
            } else {
                how = o.wireName();
                res = new LinkedHashMap<>(resultMap.apply(request, r));
                res.remove("stdout");
                res.remove("stderr");
            }
            job.end(how, clock.instant(), message, res);
        } catch (RuntimeException e) {
            LOG.warn("job {}: its result could not be kept: {}", job.id(), e.toString());
            job.end(Job.FAILED, clock.instant(), "the job ended, but its result could not be kept", null);
        }
        writeQuietly(job);
        endedByStatus.merge(job.status(), 1L, Long::sum);
        AUDIT.info("job end id={} tenant={} status={} stdoutBytes={} stderrBytes={}", job.id(), job.tenant(),
                job.status(), job.stdout.total(), job.stderr.total());
        job.completeEnded(); // after the slot is given back: whoever sees the end sees the counts of after it
        changed(job);
        for (Pending p : next) run(p.job(), p.request());
    }

    /** A job of {@code tenant} (empty: any tenant's, for an admin); another tenant's id is not found. */
    @Override
    public Optional<Job> find(Optional<String> tenant, String id) {
        Job j = id == null ? null : jobs.get(id);
        if (j == null || tenant.isPresent() && !tenant.get().equals(j.tenant())) return Optional.empty();
        return Optional.of(j);
    }

    @Override
    public List<dev.codeexec.engine.JobState> list(Optional<String> tenant) {
        return jobs(tenant).stream().map(Job::state).toList();
    }

    /** The jobs of {@code tenant} (empty: every tenant's), newest first. */
    public List<Job> jobs(Optional<String> tenant) {
        return jobs.values().stream().filter(j -> tenant.isEmpty() || tenant.get().equals(j.tenant()))
                .sorted(Comparator.comparing(Job::createdAt).reversed()).toList();
    }

    /** A queued job's place in the queue (1 = next), or empty when it is not waiting. */
    public synchronized Optional<Integer> position(Job job) {
        int i = 1;
        for (Pending p : queue) {
            if (p.job() == job) return Optional.of(i);
            i++;
        }
        return Optional.empty();
    }

    /**
     * Cancels a job: a queued one leaves the queue, a running one's whole process tree is killed. Its record and
     * output stay. Nothing happens to a job that has ended.
     */
    public void cancel(Job job) {
        Pending dropped = null;
        synchronized (this) {
            for (var it = queue.iterator(); it.hasNext(); ) {
                Pending p = it.next();
                if (p.job() == job) {
                    it.remove();
                    dropped = p;
                }
            }
        }
        AUDIT.info("job cancel id={} tenant={} status={}", job.id(), job.tenant(), job.status());
        if (dropped != null) {
            job.end(dev.codeexec.engine.Outcome.CANCELLED.wireName(), clock.instant(), "cancelled while queued", null);
            writeQuietly(job);
            endedByStatus.merge(job.status(), 1L, Long::sum);
            job.completeEnded();
            changed(job);
        } else if (!job.isEnded()) {
            job.cancelRequested = true;
            job.cancel.run();
        }
    }

    /** Running jobs, all tenants. */
    @Override
    public synchronized int running() {
        return running;
    }

    /** Queued jobs, all tenants. */
    @Override
    public synchronized int queued() {
        return queue.size();
    }

    /** Ended jobs since the server started, by status. */
    @Override
    public Map<String, Long> endedByStatus() {
        return Map.copyOf(endedByStatus);
    }

    /** Makes room for one more of the tenant's jobs: its oldest ended ones past JOB_KEEP_PER_TENANT - 1 go. */
    private void forgetOldest(String tenant) {
        List<Job> ended = jobs.values().stream().filter(j -> j.tenant().equals(tenant) && j.isEnded())
                .sorted(Comparator.comparing(Job::createdAt)).toList();
        for (int i = 0; i <= ended.size() - keepPerTenant; i++) remove(ended.get(i), "keep_per_tenant");
    }

    private void remove(Job j, String reason) {
        if (jobs.remove(j.id()) == null) return;
        DataDir.deleteTree(j.dir());
        AUDIT.info("job removed id={} tenant={} reason={}", j.id(), j.tenant(), reason);
    }

    /** Removes ended jobs whose end lies more than JOB_RETENTION_HOURS back, with their logs. */
    void sweep() {
        Instant cutoff = clock.instant().minus(retention);
        for (Job j : List.copyOf(jobs.values())) {
            if (!j.isEnded() || j.endedAt().map(t -> t.isAfter(cutoff)).orElse(true)) continue;
            remove(j, "retention");
        }
        if (unavailable != null) return;
        // what no record describes (unreadable, or a start cut short by a crash) goes too once as old
        try (Stream<Path> dirs = Files.list(root)) {
            for (Path d : dirs.toList()) {
                String name = d.getFileName().toString();
                if (!name.startsWith("job-") || jobs.containsKey(name)) continue;
                if (Files.getLastModifiedTime(d, java.nio.file.LinkOption.NOFOLLOW_LINKS).toInstant().isBefore(cutoff)) {
                    DataDir.deleteTree(d);
                    AUDIT.info("job removed id={} tenant= reason=retention_without_record", name);
                }
            }
        } catch (IOException e) {
            LOG.warn("jobs: cannot look through {}: {}", root, e.toString());
        }
    }

    private void sweepQuietly() {
        try {
            sweep();
        } catch (RuntimeException e) {
            LOG.warn("jobs: retention sweep failed: {}", e.toString());
        }
    }

    private void writeQuietly(Job job) {
        try {
            write(job);
        } catch (IOException e) {
            LOG.warn("job {}: cannot write its record: {}", job.id(), e.toString());
        }
    }

    private static void write(Job job) throws IOException {
        DataDir.write(job.dir().resolve(RECORD), JSON.writeValueAsBytes(job.record()), "rw-------");
    }

    /**
     * Stops taking jobs. Queued jobs end {@code lost} now; running ones are killed by the executor's close, and end
     * {@code lost} as they finish ({@link #finish}); a record still running on disk is made lost at the next start.
     */
    @Override
    public void close() {
        closed = true;
        sweeper.shutdownNow();
        if (lockFile != null) {
            try {
                lockFile.close(); // the lock goes with it; jobs still ending write their records all the same
            } catch (IOException e) {
                // closing
            }
        }
        List<Pending> left;
        synchronized (this) {
            left = new ArrayList<>(queue);
            queue.clear();
        }
        for (Pending p : left) {
            p.job().end(Job.LOST, clock.instant(), keeper + " stopped while the job was queued", null);
            writeQuietly(p.job());
            endedByStatus.merge(Job.LOST, 1L, Long::sum);
            AUDIT.info("job lost id={} tenant={} reason=server_stopped_while_queued", p.job().id(), p.job().tenant());
            p.job().completeEnded();
            changed(p.job());
        }
    }
}
