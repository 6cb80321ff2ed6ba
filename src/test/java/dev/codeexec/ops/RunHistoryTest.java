package dev.codeexec.ops;

import dev.codeexec.engine.ExecutionException;
import dev.codeexec.engine.ExecutionRequest;
import dev.codeexec.engine.ExecutionRequest.AuditInfo;
import dev.codeexec.engine.ExecutionResult;
import dev.codeexec.sandbox.Limits;
import dev.codeexec.engine.Outcome;
import dev.codeexec.engine.RunObserver.RunEnd;
import dev.codeexec.engine.RunObserver.RunStart;
import dev.codeexec.engine.SessionRef;
import dev.codeexec.ops.RunHistory.Filter;
import dev.codeexec.ops.RunHistory.Run;
import dev.codeexec.workspace.Workspaces;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.Optional;
import java.util.OptionalDouble;
import java.util.OptionalLong;

import static org.assertj.core.api.Assertions.assertThat;

class RunHistoryTest {

    private static final Limits LIMITS = new Limits(Duration.ofSeconds(5), 30, 256L << 20, 64, 256 << 10, 64L << 20);
    private static final Instant T0 = Instant.parse("2026-11-30T12:00:00Z");

    private int ids;

    private RunStart start(RunHistory h, String tenant, String language, String code) {
        ExecutionRequest req = ExecutionRequest.builder(language, code, LIMITS)
                .audit(new AuditInfo(Optional.of(tenant), Optional.empty(), Optional.empty(), Optional.of("req-" + (ids + 1))))
                .build();
        return start(h, req);
    }

    private RunStart start(RunHistory h, ExecutionRequest req) {
        ids++;
        RunStart s = new RunStart("run-" + ids, T0.plusSeconds(ids), req);
        h.submitted(s);
        return s;
    }

    private static void end(RunHistory h, RunStart s, Outcome outcome, int exit, long ms, String stdout, String stderr) {
        ExecutionResult r = ExecutionResult.builder(s.request().language(), outcome).exitCode(exit).stdout(stdout)
                .stderr(stderr).durationMs(ms).peakMemoryBytes(OptionalLong.of(4096))
                .cpuTimeMs(OptionalDouble.of(1.5)).sandbox("fake").build();
        h.finished(new RunEnd(s, s.submittedAt().plusMillis(ms), Optional.of(r), Optional.empty()));
    }

    private static void end(RunHistory h, RunStart s, Outcome outcome, int exit, long ms) {
        end(h, s, outcome, exit, ms, "out", "");
    }

    private static void reject(RunHistory h, RunStart s) {
        h.finished(new RunEnd(s, s.submittedAt(), Optional.empty(),
                Optional.of(new ExecutionException.Busy("the server is busy: 4 runs are executing and 8 are waiting"))));
    }

    private static List<String> ids(RunHistory.Page p) {
        return p.runs().stream().map(Run::id).toList();
    }

    @Test
    void theRingKeepsTheNewestRunsAndCountsEveryRun() {
        RunHistory h = new RunHistory(5, 2);
        for (int i = 0; i < 8; i++) end(h, start(h, "alice", "python", "print(" + i + ")"), Outcome.EXITED, 0, 10);
        assertThat(h.size()).isEqualTo(5);
        RunHistory.Page all = h.query(Filter.ALL, 0, 100);
        assertThat(ids(all)).containsExactly("run-8", "run-7", "run-6", "run-5", "run-4");
        assertThat(all.total()).isEqualTo(5);
        assertThat(h.find("run-3")).isEmpty();
        assertThat(h.find("run-4")).hasValueSatisfying(r -> assertThat(r.code()).isEqualTo("print(3)"));
        RunHistory.Stats s = h.stats(Optional.empty());
        assertThat(s.total()).isEqualTo(8);
        assertThat(s.size()).isEqualTo(5);
        assertThat(s.capacity()).isEqualTo(5);
        assertThat(s.window()).isEqualTo(5);
        assertThat(new RunHistory().capacity()).isEqualTo(10_000);
    }

    @Test
    void countersFollowTheFailedRuleAndAreKeptPerTenant() {
        RunHistory h = new RunHistory();
        end(h, start(h, "alice", "python", "a"), Outcome.EXITED, 0, 5);
        end(h, start(h, "alice", "python", "b"), Outcome.EXITED, 1, 5);
        end(h, start(h, "alice", "nodejs", "c"), Outcome.TIMEOUT, 137, 5000);
        end(h, start(h, "alice", "go", "d"), Outcome.MEMORY_LIMIT, 137, 50);
        end(h, start(h, "bob", "python", "e"), Outcome.CANCELLED, 137, 50);
        reject(h, start(h, "bob", "python", "f"));

        RunHistory.Stats all = h.stats(Optional.empty());
        assertThat(all.total()).isEqualTo(6);
        assertThat(all.failed()).as("exit 1, memory_limit, cancelled, rejected").isEqualTo(4);
        assertThat(all.timedOut()).isEqualTo(1);
        assertThat(all.byLanguage()).containsEntry("python", 4L).containsEntry("nodejs", 1L).containsEntry("go", 1L);
        assertThat(all.byOutcome()).containsEntry("exited", 2L).containsEntry("timeout", 1L)
                .containsEntry("memory_limit", 1L).containsEntry("cancelled", 1L).containsEntry("rejected", 1L)
                .containsEntry("output_limit", 0L);
        assertThat(all.window()).as("the rejected run has no duration").isEqualTo(5);

        RunHistory.Stats alice = h.stats(Optional.of("alice"));
        assertThat(alice.total()).isEqualTo(4);
        assertThat(alice.failed()).isEqualTo(2);
        assertThat(alice.byLanguage()).containsOnlyKeys("python", "nodejs", "go").containsEntry("python", 2L);
        assertThat(alice.byOutcome()).containsEntry("rejected", 0L).containsEntry("cancelled", 0L);
        RunHistory.Stats bob = h.stats(Optional.of("bob"));
        assertThat(bob.total()).isEqualTo(2);
        assertThat(bob.failed()).isEqualTo(2);
        assertThat(h.stats(Optional.of("carol")).total()).isZero();

        Run rejected = h.find("run-6").orElseThrow();
        assertThat(rejected.outcome()).isEqualTo("rejected");
        assertThat(rejected.end().orElseThrow().error()).hasValueSatisfying(m -> assertThat(m).contains("busy"));
        assertThat(rejected.end().orElseThrow().exitCode()).isEmpty();
    }

    @Test
    void percentilesAreNearestRankOverTheFinishedRunsInScope() {
        RunHistory h = new RunHistory();
        for (int i = 100; i >= 1; i--) end(h, start(h, "alice", "python", "x"), Outcome.EXITED, 0, i);
        end(h, start(h, "bob", "python", "y"), Outcome.EXITED, 0, 100_000);
        start(h, "alice", "python", "still running");
        reject(h, start(h, "alice", "python", "rejected"));

        RunHistory.Stats alice = h.stats(Optional.of("alice"));
        assertThat(alice.window()).isEqualTo(100);
        assertThat(alice.p50()).hasValue(50);
        assertThat(alice.p95()).hasValue(95);
        RunHistory.Stats all = h.stats(Optional.empty());
        assertThat(all.window()).isEqualTo(101);
        assertThat(all.p95()).hasValue(96);
        assertThat(h.stats(Optional.of("carol")).p50()).isEmpty();
        assertThat(RunHistory.percentile(new long[] {7}, 1, 95)).hasValue(7);
    }

    @Test
    void filtersAndPaging(@TempDir Path root) {
        RunHistory h = new RunHistory();
        Workspaces ws = new Workspaces(root, 1 << 20, Duration.ZERO, 65534, 65534);
        end(h, start(h, "alice", "python", "import numpy as np\nprint(np.pi)"), Outcome.EXITED, 0, 5);
        end(h, start(h, "alice", "nodejs", "console.log('NumPy is python')"), Outcome.EXITED, 2, 5);
        end(h, start(h, "bob", "python", "print('numpy')"), Outcome.TIMEOUT, 137, 5);
        RunStart inWs = start(h, ExecutionRequest.builder("python", "open('f','w')", LIMITS)
                .audit(new AuditInfo(Optional.of("bob"), Optional.empty(), Optional.empty())).build()
                .inWorkspace(ws.open("bob", "data", true)).inSession(new SessionRef("bob", "s1")));
        start(h, "alice", "go", "package main");

        assertThat(ids(h.query(filter("alice", null, null, null), 0, 50))).containsExactly("run-5", "run-2", "run-1");
        assertThat(ids(h.query(filter(null, "python", null, null), 0, 50))).containsExactly("run-4", "run-3", "run-1");
        assertThat(ids(h.query(filter(null, null, "timeout", null), 0, 50))).containsExactly("run-3");
        assertThat(ids(h.query(filter(null, null, "running", null), 0, 50))).containsExactly("run-5", "run-4");
        assertThat(ids(h.query(filter(null, null, "failed", null), 0, 50))).containsExactly("run-2");
        assertThat(ids(h.query(filter(null, null, null, "numpy"), 0, 50))).as("case-insensitive")
                .containsExactly("run-3", "run-2", "run-1");
        assertThat(ids(h.query(filter("alice", "python", "exited", "NUMPY"), 0, 50))).containsExactly("run-1");
        assertThat(h.query(filter(null, null, null, "no such code"), 0, 50).total()).isZero();

        RunHistory.Page page = h.query(Filter.ALL, 1, 2);
        assertThat(ids(page)).containsExactly("run-4", "run-3");
        assertThat(page.total()).isEqualTo(5);
        assertThat(h.query(Filter.ALL, 5, 2).runs()).isEmpty();

        end(h, inWs, Outcome.EXITED, 0, 9);
        Run r = h.find("run-4").orElseThrow();
        assertThat(r.workspace()).hasValue("data");
        assertThat(r.session()).hasValue("s1");
        assertThat(r.tenant()).isEqualTo("bob");
    }

    @Test
    void eachRunKeepsTheWorkerThatRanItAndTheListFiltersByIt() {
        RunHistory h = new RunHistory(10, 2);
        RunStart a = start(h, "alice", "python", "print(1)");
        RunStart b = start(h, "alice", "python", "print(2)");
        RunStart c = start(h, "alice", "python", "print(3)");
        RunStart local = start(h, "alice", "python", "print(4)");
        RunStart refused = start(h, "alice", "python", "print(5)");
        assertThat(h.find(a.id()).orElseThrow().worker()).as("in flight: not known yet").isEmpty();
        finish(h, a, Outcome.EXITED, "w-1");
        finish(h, b, Outcome.EXITED, "w-2");
        finish(h, c, Outcome.WORKER_LOST, "w-1");
        end(h, local, Outcome.EXITED, 0, 5);
        reject(h, refused);

        assertThat(h.find(a.id()).orElseThrow().worker()).hasValue("w-1");
        assertThat(h.find(local.id()).orElseThrow().worker()).isEmpty();
        assertThat(h.find(refused.id()).orElseThrow().worker()).isEmpty();
        // runs 1 and 2 are older than the 2 detailed ones: shrinking keeps the worker
        assertThat(h.find(b.id()).orElseThrow().worker()).hasValue("w-2");
        Run lost = h.find(c.id()).orElseThrow();
        assertThat(lost.outcome()).isEqualTo("worker_lost");
        assertThat(lost.failed()).as("a lost worker is a failed run").isTrue();

        Filter w1 = new Filter(Optional.empty(), Optional.empty(), Optional.empty(), Optional.empty(), Optional.of("w-1"));
        assertThat(ids(h.query(w1, 0, 50))).containsExactly(c.id(), a.id());
        Filter w1Lost = new Filter(Optional.empty(), Optional.empty(), Optional.of("worker_lost"), Optional.empty(),
                Optional.of("w-1"));
        assertThat(ids(h.query(w1Lost, 0, 50))).containsExactly(c.id());
        assertThat(h.query(new Filter(Optional.empty(), Optional.empty(), Optional.empty(), Optional.empty(),
                Optional.of("w-9")), 0, 50).total()).isZero();
        assertThat(h.stats(Optional.empty()).byOutcome()).containsEntry("worker_lost", 1L);
    }

    private static void finish(RunHistory h, RunStart s, Outcome outcome, String worker) {
        ExecutionResult r = ExecutionResult.builder(s.request().language(), outcome)
                .exitCode(outcome == Outcome.EXITED ? 0 : -1).stdout("out").durationMs(7).sandbox("bwrap").build().withWorker(worker);
        h.finished(new RunEnd(s, s.submittedAt().plusMillis(7), Optional.of(r), Optional.empty()));
    }

    private static Filter filter(String tenant, String language, String outcome, String q) {
        return new Filter(Optional.ofNullable(tenant), Optional.ofNullable(language), Optional.ofNullable(outcome),
                Optional.ofNullable(q));
    }

    @Test
    void codeAndOutputAreCutAndOlderRunsKeepLess() {
        RunHistory h = new RunHistory(10, 2);
        String code = "é".repeat(40_000); // 80,000 UTF-8 bytes
        String out = "o".repeat(20_000);
        String err = "€".repeat(10_000); // 30,000 UTF-8 bytes
        RunStart big = start(h, "alice", "python", code);
        end(h, big, Outcome.EXITED, 0, 5, out, err);

        Run kept = h.find(big.id()).orElseThrow();
        assertThat(kept.code().getBytes(StandardCharsets.UTF_8).length).isLessThanOrEqualTo(RunHistory.CODE_BYTES)
                .isGreaterThan(RunHistory.CODE_BYTES - 2);
        assertThat(kept.code()).isEqualTo(code.substring(0, kept.code().length()));
        assertThat(kept.codeTruncated()).isTrue();
        var e = kept.end().orElseThrow();
        assertThat(e.stdout()).hasSize(RunHistory.OUTPUT_BYTES);
        assertThat(e.stderr().getBytes(StandardCharsets.UTF_8).length).isLessThanOrEqualTo(RunHistory.OUTPUT_BYTES)
                .isGreaterThan(RunHistory.OUTPUT_BYTES - 3);
        assertThat(e.stderr()).matches("€+");
        assertThat(e.outputTruncated()).isTrue();

        RunStart small = start(h, "alice", "python", "print(1)");
        end(h, small, Outcome.EXITED, 0, 5);
        assertThat(h.find(small.id()).orElseThrow().codeTruncated()).isFalse();
        assertThat(h.find(small.id()).orElseThrow().end().orElseThrow().outputTruncated()).isFalse();
        assertThat(h.find(big.id()).orElseThrow().code().getBytes(StandardCharsets.UTF_8)).hasSize(RunHistory.CODE_BYTES);

        // Two newer runs push the big one out of the detailed tier: code and output shrink to the older caps.
        end(h, start(h, "alice", "python", "x"), Outcome.EXITED, 0, 5);
        Run old = h.find(big.id()).orElseThrow();
        assertThat(old.code().getBytes(StandardCharsets.UTF_8)).hasSize(RunHistory.OLD_CODE_BYTES);
        assertThat(old.end().orElseThrow().stdout()).hasSize(RunHistory.OLD_OUTPUT_BYTES);
        assertThat(old.end().orElseThrow().stderr()).matches("€+").hasSize(RunHistory.OLD_OUTPUT_BYTES / 3);
        assertThat(old.end().orElseThrow().exitCode()).hasValue(0);

        // A run that is still in flight when it leaves the detailed tier is cut when it ends.
        RunStart slow = start(h, "alice", "python", code);
        end(h, start(h, "alice", "python", "y"), Outcome.EXITED, 0, 5);
        end(h, start(h, "alice", "python", "z"), Outcome.EXITED, 0, 5);
        end(h, slow, Outcome.EXITED, 0, 5, out, "");
        Run slowRun = h.find(slow.id()).orElseThrow();
        assertThat(slowRun.code().getBytes(StandardCharsets.UTF_8)).hasSize(RunHistory.OLD_CODE_BYTES);
        assertThat(slowRun.end().orElseThrow().stdout()).hasSize(RunHistory.OLD_OUTPUT_BYTES);
    }

    @Test
    void anInFlightRunShowsAsRunningUntilItEnds() {
        RunHistory h = new RunHistory(3, 3);
        RunStart s = start(h, "alice", "python", "import time; time.sleep(60)");
        Run r = h.find(s.id()).orElseThrow();
        assertThat(r.running()).isTrue();
        assertThat(r.outcome()).isEqualTo("running");
        assertThat(r.failed()).isFalse();
        assertThat(r.requestId()).hasValue("req-1");
        assertThat(h.stats(Optional.of("alice")).running()).isEqualTo(1);
        assertThat(h.stats(Optional.of("alice")).total()).isZero();
        assertThat(h.stats(Optional.of("bob")).running()).isZero();

        // Pushed out of the ring while it runs: still counted as running, then counted when it ends.
        for (int i = 0; i < 3; i++) end(h, start(h, "bob", "python", "x"), Outcome.EXITED, 0, 1);
        assertThat(h.find(s.id())).isEmpty();
        assertThat(h.stats(Optional.empty()).running()).isEqualTo(1);
        end(h, s, Outcome.CANCELLED, 137, 60_000);
        assertThat(h.stats(Optional.empty()).running()).isZero();
        assertThat(h.stats(Optional.of("alice")).total()).isEqualTo(1);
        assertThat(h.stats(Optional.of("alice")).byOutcome()).containsEntry("cancelled", 1L);
    }

    @Test
    void theExcerptIsOneLineOfAtMost120Characters() {
        assertThat(RunHistory.excerpt("\n\n  import os\n\tprint(os.getcwd())\r\n")).isEqualTo("import os print(os.getcwd())");
        String longCode = "x = 1\n".repeat(100);
        assertThat(RunHistory.excerpt(longCode)).hasSize(120).doesNotContain("\n").startsWith("x = 1 x = 1");
        assertThat(RunHistory.excerpt("a".repeat(119) + "😀")).hasSize(119);
        assertThat(RunHistory.excerpt("")).isEmpty();
    }

    @Test
    void theCodeSearchIsCaseInsensitiveAndFindsOverlappingStarts() {
        RunHistory.FoldedSearch aab = new RunHistory.FoldedSearch("aAb");
        assertThat(aab.test("xaaab")).isTrue();      // a partial match "aa" must fall back, not restart after it
        assertThat(aab.test("AAAAB")).isTrue();
        assertThat(aab.test("aaaa")).isFalse();
        assertThat(new RunHistory.FoldedSearch("abab").test("abaabab")).isTrue();
        assertThat(new RunHistory.FoldedSearch("abab").test("abaabaab")).isFalse();
        assertThat(new RunHistory.FoldedSearch("PRINT(").test("x = 1\nprint(x)")).isTrue();
        assertThat(new RunHistory.FoldedSearch("Ärger").test("kein äRGER hier")).isTrue();
        assertThat(new RunHistory.FoldedSearch("").test("anything")).isTrue();
        // The adversarial shape a naive search is quadratic on: still a plain yes/no.
        String code = "a".repeat(64 * 1024);
        assertThat(new RunHistory.FoldedSearch("a".repeat(199) + "b").test(code)).isFalse();
        assertThat(new RunHistory.FoldedSearch("a".repeat(199) + "b").test(code + "b")).isTrue();
    }

    @Test
    void aQueryLongerThanTheLimitIsRefused() {
        org.assertj.core.api.Assertions.assertThatThrownBy(() -> new Filter(Optional.empty(), Optional.empty(),
                Optional.empty(), Optional.of("x".repeat(Filter.MAX_QUERY + 1))))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("200");
        assertThat(new Filter(Optional.empty(), Optional.empty(), Optional.empty(),
                Optional.of("x".repeat(Filter.MAX_QUERY))).q()).isPresent();
    }
}
