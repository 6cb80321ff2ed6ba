package dev.codeexec.job;

import dev.codeexec.config.Config;
import dev.codeexec.engine.ExecutionException;
import dev.codeexec.engine.ExecutionRequest;
import dev.codeexec.engine.OutputListener;
import dev.codeexec.engine.RequestValidator;
import dev.codeexec.lang.Languages;
import dev.codeexec.mcp.FakeExecutor;
import dev.codeexec.testing.MutableClock;
import dev.codeexec.testing.Poll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

class JobsTest {

    @TempDir
    Path dir;

    final FakeExecutor executor = new FakeExecutor();
    final List<Jobs> opened = new ArrayList<>();

    @AfterEach
    void close() throws Exception {
        opened.forEach(Jobs::close);
        executor.close();
        for (Jobs j : opened) for (Job job : j.jobs(Optional.empty())) ended(job); // records written before cleanup
    }

    Config config(String... pairs) {
        List<String> all = new ArrayList<>(List.of("DATA_DIR", dir.toString()));
        all.addAll(List.of(pairs));
        return Config.of(all.toArray(String[]::new));
    }

    Jobs jobs(Config config, Clock clock) {
        Jobs j = Jobs.open(config, executor, (req, res) -> {
            Map<String, Object> m = new LinkedHashMap<>();
            m.put("exitCode", res.exitCode());
            m.put("stdout", res.stdout());
            m.put("outcome", res.outcome().wireName());
            return m;
        }, dir.resolve("jobs"), clock);
        opened.add(j);
        return j;
    }

    static ExecutionRequest job(Config config, String tenant, String code) {
        return new RequestValidator(config, Languages.load()).validate("python", code, null, null, null, null,
                new ExecutionRequest.AuditInfo(Optional.of(tenant), Optional.empty(), Optional.empty()), true);
    }

    static Job ended(Job j) throws Exception {
        return j.ended().get(10, TimeUnit.SECONDS);
    }

    @Test
    void aJobRunsItsOutputGoesToItsLogsAndItsResultIsKeptWithoutStdoutAndStderr() throws Exception {
        Config c = config();
        Jobs jobs = jobs(c, Clock.systemUTC());
        Job j = jobs.start(job(c, "alice", "stream:6"));
        assertThat(j.id()).matches("job-[0-9a-f]{32}");
        assertThat(ended(j).status()).isEqualTo("exited");
        assertThat(new String(j.read(OutputListener.Stream.STDOUT, 0, 1000).bytes(), StandardCharsets.UTF_8))
                .isEqualTo("line 0\nline 2\nline 4\n");
        assertThat(new String(j.read(OutputListener.Stream.STDERR, 0, 1000).bytes(), StandardCharsets.UTF_8))
                .isEqualTo("line 1\nline 3\nline 5\n");
        assertThat(j.result()).get().satisfies(r -> {
            assertThat(r).containsEntry("exitCode", 0).containsEntry("outcome", "exited").doesNotContainKey("stdout");
        });
        assertThat(executor.requests.getFirst().background()).isTrue();
        assertThat(executor.requests.getFirst().limits().timeout()).isEqualTo(Duration.ofMillis(c.get(Config.JOB_MAX_TIMEOUT_MS)));
        assertThat(Files.readString(j.dir().resolve("job.json"))).contains("\"status\":\"exited\"");
    }

    @Test
    void anotherTenantFindsNoJobAndSeesNoneInItsList() {
        Config c = config();
        Jobs jobs = jobs(c, Clock.systemUTC());
        Job j = jobs.start(job(c, "alice", "block"));
        assertThat(jobs.find(Optional.of("alice"), j.id())).contains(j);
        assertThat(jobs.find(Optional.of("bob"), j.id())).isEmpty();
        assertThat(jobs.find(Optional.empty(), j.id())).as("an admin's view").contains(j);
        assertThat(jobs.list(Optional.of("bob"))).isEmpty();
        assertThat(jobs.jobs(Optional.of("alice"))).containsExactly(j);
    }

    @Test
    void pastMaxJobsAndTheTenantsCapJobsQueueAndPastTheQueueTheyAreRefused() throws Exception {
        Config c = config("MAX_JOBS", "2", "MAX_JOBS_PER_TENANT", "1", "JOB_QUEUE_SIZE", "2");
        Jobs jobs = jobs(c, Clock.systemUTC());
        Job a1 = jobs.start(job(c, "alice", "block"));
        Job a2 = jobs.start(job(c, "alice", "sleep:50"));   // alice's cap: waits
        Job b1 = jobs.start(job(c, "bob", "block"));        // bob is under his cap and a slot is free: runs
        assertThat(a1.status()).isEqualTo(Job.RUNNING);
        assertThat(b1.status()).isEqualTo(Job.RUNNING);
        assertThat(a2.status()).isEqualTo(Job.QUEUED);
        assertThat(jobs.position(a2)).contains(1);
        Job c1 = jobs.start(job(c, "carol", "print:c"));    // MAX_JOBS reached: waits behind a2
        assertThat(jobs.position(c1)).contains(2);
        assertThatThrownBy(() -> jobs.start(job(c, "dave", "print:x")))
                .isInstanceOf(ExecutionException.Busy.class).hasMessageContaining("JOB_QUEUE_SIZE");
        jobs.cancel(a1); // frees a slot and alice's cap: a2 runs; carol waits for the next slot
        assertThat(ended(a1).status()).isEqualTo("cancelled");
        assertThat(ended(a2).status()).isEqualTo("exited");
        assertThat(ended(c1).status()).isEqualTo("exited");
        assertThat(jobs.running()).isEqualTo(1);
        jobs.cancel(b1);
        assertThat(ended(b1).status()).isEqualTo("cancelled");
        assertThat(jobs.running()).isZero();
        assertThat(jobs.queued()).isZero();
    }

    @Test
    void aQueuedJobThatIsCancelledLeavesTheQueueAndNeverRuns() throws Exception {
        Config c = config("MAX_JOBS", "1");
        Jobs jobs = jobs(c, Clock.systemUTC());
        Job first = jobs.start(job(c, "alice", "block"));
        Job second = jobs.start(job(c, "bob", "print:never"));
        jobs.cancel(second);
        assertThat(ended(second).status()).isEqualTo("cancelled");
        assertThat(second.message()).contains("cancelled while queued");
        jobs.cancel(first);
        ended(first);
        assertThat(executor.requests).extracting(ExecutionRequest::code).containsExactly("block");
    }

    @Test
    void jobsOffAndBackgroundWithASessionAreClearErrors() {
        Config c = config("MAX_JOBS", "0");
        Jobs jobs = jobs(c, Clock.systemUTC());
        assertThatThrownBy(() -> jobs.start(job(c, "alice", "print:x")))
                .isInstanceOf(ExecutionException.InvalidRequest.class).hasMessageContaining("MAX_JOBS=0");
        RequestValidator v = new RequestValidator(c, Languages.load());
        assertThatThrownBy(() -> v.parse(Map.of("language", "python", "code", "1", "background", true, "session", "s"),
                ExecutionRequest.AuditInfo.NONE)).isInstanceOf(ExecutionException.InvalidRequest.class)
                .hasMessageContaining("'background' cannot be used with 'session'");
        assertThatThrownBy(() -> v.parse(Map.of("language", "python", "code", "1", "timeout_ms", 200_000),
                ExecutionRequest.AuditInfo.NONE)).hasMessageContaining("background: true");
        ExecutionRequest r = v.parse(Map.of("language", "python", "code", "1", "background", true,
                "timeout_ms", 200_000), ExecutionRequest.AuditInfo.NONE).request();
        assertThat(r.limits().timeout()).isEqualTo(Duration.ofMillis(200_000));
        assertThat(r.limits().cpuSeconds()).as("the job's timeout, not CPU_LIMIT_SECONDS").isEqualTo(200);
    }

    @Test
    void aServerStartedAgainFindsTheJobsThatWereRunningLostWithTheirOutputAndTheEndedOnesAsTheyWere() throws Exception {
        Config c = config();
        Jobs first = jobs(c, Clock.systemUTC());
        Job done = first.start(job(c, "alice", "print:finished"));
        ended(done);
        Job running = first.start(job(c, "alice", "stream:1000"));
        Poll.until("the condition", Duration.ofSeconds(10), () -> running.log(OutputListener.Stream.STDOUT).total() > 0);
        // the server dies: nothing is closed, the record on disk still says running
        Jobs second = jobs(c, Clock.systemUTC());
        Job lost = second.find(Optional.of("alice"), running.id()).orElseThrow();
        assertThat(lost.status()).isEqualTo(Job.LOST);
        assertThat(lost.message()).get().asString().contains("server stopped");
        assertThat(new String(lost.read(OutputListener.Stream.STDOUT, 0, 100).bytes(), StandardCharsets.UTF_8))
                .startsWith("line 0\n");
        Job kept = second.find(Optional.of("alice"), done.id()).orElseThrow();
        assertThat(kept.status()).isEqualTo("exited");
        assertThat(kept.result()).get().satisfies(r -> assertThat(r).containsEntry("exitCode", 0));
        assertThat(Files.readString(running.dir().resolve("job.json"))).contains("\"status\":\"lost\"");
    }

    @Test
    void retentionRemovesEndedJobsAndTheirLogsOnlyOnceTheirTimeIsOver() throws Exception {
        Config c = config("JOB_RETENTION_HOURS", "2");
        MutableClock clock = new MutableClock(Instant.parse("2026-12-05T10:00:00Z"));
        Jobs jobs = jobs(c, clock);
        Job old = jobs.start(job(c, "alice", "print:a"));
        ended(old);
        Job running = jobs.start(job(c, "alice", "block"));
        clock.now = clock.now.plus(Duration.ofMinutes(119));
        jobs.sweep();
        assertThat(jobs.find(Optional.of("alice"), old.id())).isPresent();
        clock.now = clock.now.plus(Duration.ofMinutes(2));
        jobs.sweep();
        assertThat(jobs.find(Optional.of("alice"), old.id())).isEmpty();
        assertThat(old.dir()).doesNotExist();
        assertThat(jobs.find(Optional.of("alice"), running.id())).as("a running job is never removed").isPresent();
        jobs.cancel(running);
        ended(running);
    }

    @Test
    void aJobKilledByTheServersShutdownIsLostNotCancelled() throws Exception {
        Config c = config();
        Jobs jobs = jobs(c, Clock.systemUTC());
        Job j = jobs.start(job(c, "alice", "block"));
        executor.blockStarted.await(10, TimeUnit.SECONDS);
        jobs.close();
        executor.close();
        assertThat(ended(j).status()).isEqualTo(Job.LOST);
    }

    @Test
    void watchersGetTheOutputAsItComesUntilTheyLetGo() throws Exception {
        Config c = config();
        Jobs jobs = jobs(c, Clock.systemUTC());
        StringBuilder seen = new StringBuilder();
        Job j = jobs.start(job(c, "alice", "stream:20"));
        try (AutoCloseable w = j.watch((stream, text) -> {
            synchronized (seen) {
                seen.append(text);
            }
        })) {
            ended(j);
        }
        synchronized (seen) {
            assertThat(seen.toString()).contains("line 19\n");
        }
    }

    @Test
    void theMetersCountJobsRunningAndEndedAndTheAuditLogHasEachStartEndAndCancel() throws Exception {
        Config c = config();
        Jobs jobs = jobs(c, Clock.systemUTC());
        dev.codeexec.ops.Metrics metrics = dev.codeexec.ops.Metrics.create(executor);
        metrics.bindJobs(jobs);
        try (dev.codeexec.testing.LogCapture audit = dev.codeexec.testing.LogCapture.named("audit")) {
            Job j = jobs.start(job(c, "alice", "block"));
            assertThat(metrics.scrape()).contains("codeexec_jobs_running 1.0").contains("codeexec_jobs_queued 0.0");
            jobs.cancel(j);
            ended(j);
            assertThat(metrics.scrape()).contains("codeexec_jobs_running 0.0")
                    .contains("codeexec_jobs_ended_total{status=\"cancelled\"} 1.0")
                    .contains("codeexec_jobs_ended_total{status=\"exited\"} 0.0");
            assertThat(audit.contains("job start id=" + j.id() + " tenant=alice")).isTrue();
            assertThat(audit.contains("job cancel id=" + j.id() + " tenant=alice")).isTrue();
            assertThat(audit.contains("job end id=" + j.id() + " tenant=alice status=cancelled")).isTrue();
        }
    }

    @Test
    void pastJobKeepPerTenantANewJobRemovesTheTenantsOldestEndedJobOnly() throws Exception {
        Config c = config("JOB_KEEP_PER_TENANT", "2");
        Jobs jobs = jobs(c, Clock.systemUTC());
        Job a = ended(jobs.start(job(c, "alice", "print:a")));
        Job b = ended(jobs.start(job(c, "alice", "print:b")));
        Job bobs = ended(jobs.start(job(c, "bob", "print:x")));
        Job third = jobs.start(job(c, "alice", "print:c"));
        ended(third);
        assertThat(jobs.jobs(Optional.of("alice"))).containsExactly(third, b);
        assertThat(a.dir()).doesNotExist();
        assertThat(jobs.find(Optional.of("bob"), bobs.id())).as("another tenant's jobs are not its to lose").isPresent();
    }

    @Test
    void aSecondServerOnTheSameDataDirKeepsNoJobsAndSaysWhyInsteadOfTakingTheFirstsForLost() throws Exception {
        Path root = dir.resolve("jobs");
        Files.createDirectories(root);
        // another process holds the jobs' directory (a first server), with the same kind of lock
        Process other = new ProcessBuilder("python3", "-c", "import fcntl, sys, time\n"
                + "f = open(sys.argv[1], 'w')\nfcntl.lockf(f, fcntl.LOCK_EX)\nprint('locked', flush=True)\ntime.sleep(60)\n",
                root.resolve(".lock").toString()).redirectErrorStream(true).start();
        try {
            assertThat(new String(other.getInputStream().readNBytes(7), StandardCharsets.UTF_8)).isEqualTo("locked\n");
            Config c = config();
            Jobs second = jobs(c, Clock.systemUTC());
            assertThatThrownBy(() -> second.start(job(c, "alice", "print:x")))
                    .isInstanceOf(ExecutionException.Unavailable.class).hasMessageContaining("another server on this DATA_DIR");
            assertThat(executor.requests).isEmpty();
        } finally {
            other.destroyForcibly().waitFor();
        }
    }

    @Test
    void aRunEndedByItsServerWithoutACancelIsLostAndAJobThatCannotStartIsFailedWithItsReason() throws Exception {
        Config c = config();
        Jobs jobs = jobs(c, Clock.systemUTC());
        Job refused = jobs.start(job(c, "alice", "unavailable"));
        assertThat(ended(refused).status()).isEqualTo(Job.FAILED);
        assertThat(refused.message()).get().asString().contains("no user namespaces");
        Job j = jobs.start(job(c, "alice", "block"));
        executor.blockStarted.await(10, TimeUnit.SECONDS);
        executor.close(); // a worker drained under it: its run ends cancelled, though nobody cancelled the job
        assertThat(ended(j).status()).isEqualTo(Job.LOST);
        assertThat(j.message()).get().asString().contains("not by a cancel");
        assertThat(jobs.running()).isZero();
    }

    @Test
    void oneTenantHoldsAtMostHalfTheQueue() throws Exception {
        Config c = config("MAX_JOBS", "1", "MAX_JOBS_PER_TENANT", "1", "JOB_QUEUE_SIZE", "4");
        Jobs jobs = jobs(c, Clock.systemUTC());
        Job running = jobs.start(job(c, "alice", "block"));
        jobs.start(job(c, "alice", "print:1"));
        jobs.start(job(c, "alice", "print:2"));
        assertThatThrownBy(() -> jobs.start(job(c, "alice", "print:3")))
                .isInstanceOf(ExecutionException.Busy.class).hasMessageContaining("half the queue");
        Job bobs = jobs.start(job(c, "bob", "print:b"));
        assertThat(jobs.position(bobs)).contains(3);
        jobs.cancel(running);
        assertThat(ended(bobs).status()).isEqualTo("exited");
    }
}
