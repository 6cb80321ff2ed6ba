package dev.codeexec.local;

import dev.codeexec.engine.ExecutionRequest;
import dev.codeexec.engine.ExecutionResult;
import dev.codeexec.engine.Executor;
import dev.codeexec.engine.ExecutorStatus;
import dev.codeexec.engine.RequestValidator;
import dev.codeexec.engine.RunHandle;
import dev.codeexec.lang.Languages;
import dev.codeexec.config.Config;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/** Shared helpers of the engine tests. */
public final class TestSupport {

    /**
     * A stable DATA_DIR for tests, so the Go build cache is warmed once per machine and not once per test class.
     * World-traversable because the real sandbox opens staged files as its own uid.
     */
    static final String DATA_DIR = "/tmp/code-exec-engine-test";

    private TestSupport() {
    }

    public static Config config(String... pairs) {
        List<String> all = new ArrayList<>(List.of("DATA_DIR", DATA_DIR));
        all.addAll(List.of(pairs));
        return Config.of(all.toArray(String[]::new));
    }

    static ExecutionRequest request(Config config, String language, String code) {
        return request(config, language, code, "", List.of(), Map.of(), null);
    }

    static ExecutionRequest request(Config config, String language, String code, String stdin, List<String> args,
            Map<String, String> env, Long timeoutMs) {
        return new RequestValidator(config, Languages.load()).validate(language, code, stdin, timeoutMs, args, env,
                null);
    }

    static ExecutionResult await(RunHandle h) throws Exception {
        return h.result().get(120, TimeUnit.SECONDS);
    }

    private static final Map<LocalExecutor, Starts> STARTS =
            java.util.Collections.synchronizedMap(new java.util.WeakHashMap<>());

    /** The start record of an executor, attached as its start listener at the first ask (before the runs to watch). */
    static Starts startsOf(LocalExecutor e) {
        return STARTS.computeIfAbsent(e, x -> {
            Starts s = new Starts();
            x.addStartListener(s);
            return s;
        });
    }

    /**
     * Whether each run an executor started got a warm sandbox, in order: what tells a warm run from one whose
     * hand-out failed and that started cold instead (the pool's {@code served} counter moves for both).
     */
    static final class Starts implements ExecutorStatus.StartListener {
        private final java.util.concurrent.ConcurrentLinkedDeque<Boolean> warm = new java.util.concurrent.ConcurrentLinkedDeque<>();

        @Override
        public void started(String language, boolean wasWarm, java.time.Duration elapsed) {
            warm.add(wasWarm);
        }

        /** The flags since the last call, oldest first; forgets them. */
        List<Boolean> take() {
            List<Boolean> out = new ArrayList<>();
            for (Boolean b; (b = warm.pollFirst()) != null; ) out.add(b);
            return out;
        }
    }
}
