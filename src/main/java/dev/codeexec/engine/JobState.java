package dev.codeexec.engine;

import java.time.Instant;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Optional;

/**
 * A background job as it is at one moment: what every surface shows of it, read at once so that its parts agree
 * (a job seen ended has its end time and result). The same for a job kept by this server and one kept by a worker
 * ({@link #toWire} / {@link #fromWire} carry it between them).
 *
 * @param declared what the call declared: language, timeout, workspace, network, packages, args
 * @param position while queued, its place (1 = next)
 * @param message  why it was lost or failed, or how it was cancelled
 * @param result   once it ended with a run: the run's result as surfaces show it, without stdout and stderr
 * @param stdout   bytes written to stdout so far
 * @param stderr   bytes written to stderr so far
 */
public record JobState(String id, String tenant, String status, Optional<Integer> position, Map<String, Object> declared,
        Instant createdAt, Optional<Instant> startedAt, Optional<Instant> endedAt, Optional<String> message,
        Optional<Map<String, Object>> result, long stdout, long stderr) {

    /** Waiting for a job slot. */
    public static final String QUEUED = "queued";
    /** Its program runs. */
    public static final String RUNNING = "running";
    /** Its server (or worker) went away while it was queued or running: no process survives that. */
    public static final String LOST = "lost";
    /** It could not start (the sandbox is unavailable, its packages failed to install, ...): {@code message} says why. */
    public static final String FAILED = "failed";

    /** Whether it has ended (every status but queued and running). */
    public boolean ended() {
        return !status.equals(QUEUED) && !status.equals(RUNNING);
    }

    /** Bytes written so far to {@code stream}. */
    public long size(OutputListener.Stream stream) {
        return stream == OutputListener.Stream.STDOUT ? stdout : stderr;
    }

    /** The same state, ended {@code lost} now (its server went away) with {@code why}, unless it had ended. */
    public JobState lost(Instant at, String why) {
        if (ended()) return this;
        return new JobState(id, tenant, LOST, Optional.empty(), declared, createdAt, startedAt, Optional.of(at),
                Optional.of(why), Optional.empty(), stdout, stderr);
    }

    /** As plain data (JSON between a worker and its gateway). */
    public Map<String, Object> toWire() {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("id", id);
        m.put("tenant", tenant);
        m.put("status", status);
        position.ifPresent(p -> m.put("position", p));
        m.put("declared", declared);
        m.put("createdAt", createdAt.toString());
        startedAt.ifPresent(t -> m.put("startedAt", t.toString()));
        endedAt.ifPresent(t -> m.put("endedAt", t.toString()));
        message.ifPresent(s -> m.put("message", s));
        result.ifPresent(r -> m.put("result", r));
        m.put("stdout", stdout);
        m.put("stderr", stderr);
        return m;
    }

    /**
     * Read back from {@link #toWire}'s form.
     *
     * @throws IllegalArgumentException a field is missing or of the wrong kind
     */
    @SuppressWarnings("unchecked")
    public static JobState fromWire(Map<String, Object> m) {
        try {
            return new JobState((String) req(m, "id"), (String) req(m, "tenant"), (String) req(m, "status"),
                    Optional.ofNullable((Number) m.get("position")).map(Number::intValue),
                    Map.copyOf((Map<String, Object>) req(m, "declared")), Instant.parse((String) req(m, "createdAt")),
                    time(m.get("startedAt")), time(m.get("endedAt")), Optional.ofNullable((String) m.get("message")),
                    Optional.ofNullable((Map<String, Object>) m.get("result")),
                    ((Number) req(m, "stdout")).longValue(), ((Number) req(m, "stderr")).longValue());
        } catch (ClassCastException | java.time.format.DateTimeParseException e) {
            throw new IllegalArgumentException("a job's state has a field of the wrong kind: " + e.getMessage());
        }
    }

    private static Object req(Map<String, Object> m, String k) {
        Object v = m.get(k);
        if (v == null) throw new IllegalArgumentException("a job's state lacks '" + k + "'");
        return v;
    }

    private static Optional<Instant> time(Object v) {
        return v == null ? Optional.empty() : Optional.of(Instant.parse((String) v));
    }
}
