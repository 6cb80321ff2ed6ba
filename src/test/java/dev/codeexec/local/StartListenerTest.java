package dev.codeexec.local;

import dev.codeexec.engine.ExecutionResult;
import dev.codeexec.engine.Outcome;
import dev.codeexec.engine.OutputListener;
import dev.codeexec.lang.Languages;
import dev.codeexec.sandbox.Sandbox;
import dev.codeexec.sandbox.SandboxException;
import dev.codeexec.sandbox.SandboxProcess;
import dev.codeexec.sandbox.SandboxSpec;
import org.junit.jupiter.api.Test;

import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CopyOnWriteArrayList;

import static dev.codeexec.local.TestSupport.await;
import static dev.codeexec.local.TestSupport.config;
import static dev.codeexec.local.TestSupport.request;
import static org.assertj.core.api.Assertions.assertThat;

/** The engine tells its start listeners (metrics) about each sandbox that started, and only those. */
class StartListenerTest {

    record Started(String language, boolean warm, Duration elapsed) {
    }

    @Test
    void eachStartedSandboxIsReportedOnceAndAFailingListenerDoesNotFailTheRun() throws Exception {
        List<Started> seen = new CopyOnWriteArrayList<>();
        try (LocalExecutor e = new LocalExecutor(config("WARM_POOL", "off"), new FakeSandbox(), Languages.load())) {
            e.status().addStartListener((language, warm, elapsed) -> {
                throw new IllegalStateException("listener bug");
            });
            e.status().addStartListener((language, warm, elapsed) -> seen.add(new Started(language, warm, elapsed)));
            ExecutionResult r = await(e.submit(request(e.config, "python", "print('hi')"), OutputListener.NONE));
            assertThat(r.outcome()).isEqualTo(Outcome.EXITED);
            assertThat(r.stdout()).isEqualTo("hi\n");
            await(e.submit(request(e.config, "shell", "echo x"), OutputListener.NONE));
        }
        assertThat(seen).extracting(Started::language).containsExactly("python", "shell");
        assertThat(seen).allSatisfy(s -> {
            assertThat(s.warm()).isFalse();
            assertThat(s.elapsed()).isPositive();
        });
    }

    @Test
    void aSandboxThatFailsToStartIsNotReported() throws Exception {
        List<Started> seen = new CopyOnWriteArrayList<>();
        Sandbox broken = new Sandbox() {
            @Override
            public String name() {
                return "broken";
            }

            @Override
            public Optional<String> unavailableReason() {
                return Optional.empty();
            }

            @Override
            public SandboxProcess start(SandboxSpec spec) throws SandboxException {
                throw new SandboxException("cannot start here");
            }

            @Override
            public Map<String, Object> info() {
                return Map.of();
            }
        };
        try (LocalExecutor e = new LocalExecutor(config("WARM_POOL", "off"), broken, Languages.load())) {
            e.status().addStartListener((language, warm, elapsed) -> seen.add(new Started(language, warm, elapsed)));
            ExecutionResult r = await(e.submit(request(e.config, "python", "print('hi')"), OutputListener.NONE));
            assertThat(r.outcome()).isEqualTo(Outcome.FAILED_TO_START);
        }
        assertThat(seen).isEmpty();
    }
}
