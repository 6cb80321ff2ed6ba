package dev.codeexec.surface;

import dev.codeexec.engine.ExecutionException;
import dev.codeexec.engine.OutputListener;
import dev.codeexec.engine.JobHandle;
import dev.codeexec.engine.JobState;
import dev.codeexec.engine.LogChunk;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.time.Instant;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * A background job as every surface shows it (job_status, job_wait, job_list, {@code GET /api/jobs/{job}}, the
 * console): one map, so a field added here reaches all of them. Its output is read by offsets ({@link #output}), so a
 * caller that passes back the offsets it was given reads each byte once.
 */
public final class JobMaps {

    /** Bytes of one stream one answer carries at most; {@code more} says when there is more to read. */
    public static final int READ_MAX = 256 * 1024;

    private JobMaps() {
    }

    /**
     * The job's status: what it declared, where it is (its place when queued), its times, how it ended, the sizes of
     * its logs, and once it ended with a run its result (as a foreground run's, without stdout and stderr: the logs
     * hold those).
     */
    public static Map<String, Object> status(JobState job) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("job", job.id());
        m.put("status", job.status());
        job.position().ifPresent(p -> m.put("position", p));
        m.putAll(job.declared());
        m.put("createdAt", job.createdAt().toString());
        job.startedAt().ifPresent(t -> m.put("startedAt", t.toString()));
        job.endedAt().ifPresent(t -> m.put("endedAt", t.toString()));
        job.startedAt().ifPresent(s -> m.put("durationMs",
                Duration.between(s, job.endedAt().orElse(Instant.now())).toMillis()));
        job.message().ifPresent(s -> m.put("message", s));
        job.result().ifPresent(r -> {
            for (String k : new String[] {"exitCode", "cpuTimeMs", "peakMemoryBytes"})
                if (r.containsKey(k)) m.put(k, r.get(k));
            m.put("result", r);
        });
        m.put("sizes", Map.of("stdout", job.stdout(), "stderr", job.stderr()));
        return m;
    }

    /**
     * The output written since {@code stdoutFrom} / {@code stderrFrom} (each at most {@link #READ_MAX} bytes):
     * {@code stdout}, {@code stderr}, {@code offsets} (what to pass next time), {@code skipped} (bytes dropped past
     * JOB_LOG_MB between the offset asked and the text given; a marker in the text says so) and {@code more} (true
     * when a stream has more than this answer carried).
     */
    public static Map<String, Object> output(JobHandle job, long stdoutFrom, long stderrFrom) {
        try {
            LogChunk out = job.read(OutputListener.Stream.STDOUT, stdoutFrom, READ_MAX);
            LogChunk err = job.read(OutputListener.Stream.STDERR, stderrFrom, READ_MAX);
            Map<String, Object> m = new LinkedHashMap<>();
            m.put("stdout", text(out));
            m.put("stderr", text(err));
            m.put("offsets", Map.of("stdout", out.next(), "stderr", err.next()));
            if (out.skipped() > 0 || err.skipped() > 0)
                m.put("skipped", Map.of("stdout", out.skipped(), "stderr", err.skipped()));
            m.put("more", !out.atEnd() || !err.atEnd());
            return m;
        } catch (IOException e) {
            throw new ExecutionException.Unavailable("the job's output cannot be read: " + e.getMessage());
        }
    }

    /** A chunk's text, with the marker of the bytes dropped before it. */
    public static String text(LogChunk c) {
        String s = new String(c.bytes(), StandardCharsets.UTF_8);
        return c.skipped() > 0 ? "[... " + c.skipped() + " bytes left out (JOB_LOG_MB) ...]\n" + s : s;
    }
}
