package dev.codeexec.job;

import dev.codeexec.engine.JobHandle;
import dev.codeexec.engine.JobState;
import dev.codeexec.engine.LogChunk;
import dev.codeexec.engine.OutputListener;

import java.io.IOException;
import java.nio.file.Path;
import java.time.Instant;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;

/**
 * One background job: what it declared, where it is in its life ({@link #status()}), its two logs, and who watches
 * it. Made and changed only by {@link Jobs}; read by every surface. A job that ended (or was found ended at start)
 * keeps its record and logs until the retention removes them.
 */
public final class Job implements JobHandle {

    /** Waiting for a job slot. */
    public static final String QUEUED = JobState.QUEUED;
    /** Its program runs. */
    public static final String RUNNING = JobState.RUNNING;
    /** Its server (or worker) went away while it was queued or running: no process survives that. */
    public static final String LOST = JobState.LOST;
    /** It could not start (the sandbox is unavailable, its packages failed to install, ...): {@code message} says why. */
    public static final String FAILED = JobState.FAILED;

    private final String id;
    private final String tenant;
    private final Path dir;
    private final Map<String, Object> declared;
    private final Instant createdAt;
    final JobLog stdout;
    final JobLog stderr;
    private final List<OutputListener> watchers = new CopyOnWriteArrayList<>();
    private final CompletableFuture<Job> ended = new CompletableFuture<>();

    private volatile String status;
    private volatile Instant startedAt;
    private volatile Instant endedAt;
    private volatile String message;
    /** The run's result as every surface shows it (without its stdout and stderr, which the logs hold), once ended. */
    private volatile Map<String, Object> result;
    volatile Runnable cancel = () -> { };
    volatile boolean cancelRequested;
    /** The jobs that keep it (its place in their queue, its cancel); set when they take it. */
    volatile Jobs owner;
    /** Its run's id once started (its sandbox's preview directory is named by it). */
    volatile String runId;

    Job(String id, String tenant, Path dir, Map<String, Object> declared, Instant createdAt, String status,
            JobLog stdout, JobLog stderr) {
        this.id = id;
        this.tenant = tenant;
        this.dir = dir;
        this.declared = Map.copyOf(declared);
        this.createdAt = createdAt;
        this.status = status;
        this.stdout = stdout;
        this.stderr = stderr;
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
        String st = status; // first: a status read ended comes with the end time, message and result set before it
        Jobs o = owner;
        return new JobState(id, tenant, st, o == null ? Optional.empty() : o.position(this), declared, createdAt,
                startedAt(), endedAt(), message(), result(), stdout.total(), stderr.total());
    }

    @Override
    public JobState await(long millis) throws InterruptedException {
        try {
            ended.get(millis, java.util.concurrent.TimeUnit.MILLISECONDS);
        } catch (java.util.concurrent.TimeoutException e) {
            // the wait is over; the job goes on
        } catch (java.util.concurrent.ExecutionException e) {
            // never completed exceptionally
        }
        return state();
    }

    @Override
    public JobState cancel(long waitMillis) throws InterruptedException {
        Jobs o = owner;
        if (o != null) o.cancel(this);
        return await(waitMillis);
    }

    Path dir() {
        return dir;
    }

    /** {@code queued}, {@code running}, then how it ended: a run outcome ({@code exited}, {@code timeout}, ...), {@code lost} or {@code failed}. */
    public String status() {
        return status;
    }

    /** Whether it has ended (every status but queued and running). */
    public boolean isEnded() {
        return !status.equals(QUEUED) && !status.equals(RUNNING);
    }

    public Instant createdAt() {
        return createdAt;
    }

    public Optional<Instant> startedAt() {
        return Optional.ofNullable(startedAt);
    }

    public Optional<Instant> endedAt() {
        return Optional.ofNullable(endedAt);
    }

    /** Its run's id while it runs or after (a sandbox of this server's: its preview directory's name). */
    public Optional<String> runId() {
        return Optional.ofNullable(runId);
    }

    /** Why it was lost or failed, or how it was cancelled. */
    public Optional<String> message() {
        return Optional.ofNullable(message);
    }

    /** What the call declared: language, workspace, network, packages, timeout. */
    public Map<String, Object> declared() {
        return declared;
    }

    /** The result of its run once it ended with one (not for lost or failed jobs). */
    public Optional<Map<String, Object>> result() {
        return Optional.ofNullable(result);
    }

    /** Completes when the job has ended and its record is written. */
    public CompletableFuture<Job> ended() {
        return ended;
    }

    /** The log of {@code stream}. */
    public JobLog log(OutputListener.Stream stream) {
        return stream == OutputListener.Stream.STDOUT ? stdout : stderr;
    }

    /**
     * Reads one stream from {@code offset}, at most {@code max} bytes.
     *
     * @throws IOException the log cannot be read
     */
    @Override
    public LogChunk read(OutputListener.Stream stream, long offset, int max) throws IOException {
        return log(stream).read(offset, max);
    }

    @Override
    public AutoCloseable watch(OutputListener listener) {
        watchers.add(listener);
        return () -> watchers.remove(listener);
    }

    // ---- changes, by Jobs only ----

    void output(OutputListener.Stream stream, String text, long atMillis) {
        for (OutputListener w : watchers) {
            try {
                w.onOutput(stream, text, atMillis);
            } catch (RuntimeException e) {
                // a watcher's failure is its own
            }
        }
    }

    void started(Instant at) {
        startedAt = at;
        status = RUNNING;
    }

    void end(String how, Instant at, String why, Map<String, Object> resultMap) {
        endedAt = at;
        message = why;
        result = resultMap;
        stdout.close();
        stderr.close();
        status = how; // last: whoever sees it ended sees its end time, message and result too
    }

    /** After the record is on disk (see Jobs): whoever waits for the end sees it whole. */
    void completeEnded() {
        ended.complete(this);
    }

    /** The record written to job.json, and the summary the surfaces show (without the position in the queue). */
    Map<String, Object> record() {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("job", id);
        m.put("tenant", tenant);
        m.put("status", status);
        m.putAll(declared);
        m.put("createdAt", createdAt.toString());
        m.put("startedAt", startedAt == null ? null : startedAt.toString());
        m.put("endedAt", endedAt == null ? null : endedAt.toString());
        m.put("message", message);
        m.put("result", result);
        return m;
    }

    /** A job read back from its record (a server restart): its status as the record says. */
    static Job fromRecord(Map<String, Object> r, Path dir, JobLog out, JobLog err) {
        Map<String, Object> declared = new LinkedHashMap<>(r);
        for (String k : List.of("job", "tenant", "status", "createdAt", "startedAt", "endedAt", "message", "result"))
            declared.remove(k);
        Job j = new Job((String) r.get("job"), (String) r.get("tenant"), dir, declared,
                Instant.parse((String) r.get("createdAt")), (String) r.get("status"), out, err);
        j.startedAt = r.get("startedAt") == null ? null : Instant.parse((String) r.get("startedAt"));
        j.endedAt = r.get("endedAt") == null ? null : Instant.parse((String) r.get("endedAt"));
        j.message = (String) r.get("message");
        @SuppressWarnings("unchecked")
        Map<String, Object> res = (Map<String, Object>) r.get("result");
        j.result = res;
        return j;
    }
}
