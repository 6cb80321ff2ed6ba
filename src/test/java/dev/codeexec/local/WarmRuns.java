package dev.codeexec.local;

import dev.codeexec.engine.ExecutionRequest;
import dev.codeexec.engine.ExecutionResult;
import dev.codeexec.engine.OutputListener;
import dev.codeexec.lang.Languages;
import dev.codeexec.config.Config;
import dev.codeexec.sandbox.Sandbox;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.function.Predicate;

import static dev.codeexec.local.TestSupport.await;
import static org.assertj.core.api.Assertions.assertThat;

/** What the warm-pool tests (bubblewrap, gVisor) share: starting executors, warm runs asserted warm, warm against cold. */
final class WarmRuns {

    private WarmRuns() {
    }

    /**
     * An executor on the configured real sandbox with its pool filled, added to {@code into} (the test closes them);
     * the test is skipped (failed when strict) when the sandbox is not usable here or lacks what {@code usable} asks ({@code what}).
     */
    static LocalExecutor executor(List<LocalExecutor> into, Predicate<Sandbox> usable, String what, Config config)
            throws Exception {
        LocalExecutor e = new LocalExecutor(config, TestSandboxes.required(config, usable, what), Languages.load());
        into.add(e);
        assertThat(e.awaitWarmPool(Duration.ofSeconds(90))).as("pool filled").isTrue();
        return e;
    }

    static ExecutionResult run(LocalExecutor e, ExecutionRequest r) throws Exception {
        return await(e.submit(r, OutputListener.NONE));
    }

    /** The pool's per-language map (runtime_info's warmPool.languages). */
    @SuppressWarnings("unchecked")
    static Map<String, Object> languages(LocalExecutor e) {
        return (Map<String, Object>) e.warmPoolInfo().get("languages");
    }

    /** One of a language's pool counters: served, missed, started, failed. */
    @SuppressWarnings("unchecked")
    static long counter(LocalExecutor e, String lang, String name) {
        return ((Number) ((Map<String, Object>) languages(e).get(lang)).get(name)).longValue();
    }

    static long served(LocalExecutor e, String lang) {
        return counter(e, lang, "served");
    }

    /** Runs warm: asserts the pool served it and the run started warm. */
    static ExecutionResult warm(LocalExecutor e, ExecutionRequest r) throws Exception {
        e.awaitWarmPool(Duration.ofSeconds(90));
        long before = served(e, r.language());
        TestSupport.Starts starts = TestSupport.startsOf(e);
        starts.take();
        ExecutionResult res = run(e, r);
        assertThat(served(e, r.language())).as("served warm").isEqualTo(before + 1);
        // a hand-out that failed would have started the run cold, the counter moved all the same
        assertThat(starts.take()).as("started warm").containsExactly(true);
        return res;
    }

    /**
     * Each case warm on {@code hot} and cold on {@code cold}: the same output, exit code and outcome. Returns the
     * warm results.
     */
    static List<ExecutionResult> assertWarmGivesWhatColdGives(LocalExecutor hot, LocalExecutor cold,
            List<ExecutionRequest> cases) throws Exception {
        List<ExecutionResult> warmResults = new ArrayList<>();
        for (ExecutionRequest c : cases) {
            ExecutionResult w = warm(hot, c);
            ExecutionResult k = run(cold, c);
            // the code file's random name differs per run
            assertThat(w.stdout().replaceAll("code_[0-9a-f]{8}", "CODE")).as(c.code())
                    .isEqualTo(k.stdout().replaceAll("code_[0-9a-f]{8}", "CODE"));
            assertThat(w.stderr().replaceAll("code_[0-9a-f]{8}", "CODE")).as(c.code())
                    .isEqualTo(k.stderr().replaceAll("code_[0-9a-f]{8}", "CODE"));
            assertThat(w.exitCode()).as(c.code()).isEqualTo(k.exitCode());
            assertThat(w.outcome()).as(c.code()).isEqualTo(k.outcome());
            warmResults.add(w);
        }
        return warmResults;
    }
}
