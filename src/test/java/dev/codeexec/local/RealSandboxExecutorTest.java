package dev.codeexec.local;

import dev.codeexec.engine.ExecutionResult;
import dev.codeexec.engine.Outcome;
import dev.codeexec.engine.OutputListener;
import dev.codeexec.config.Config;
import dev.codeexec.sandbox.Sandbox;
import org.junit.jupiter.api.Tag;

import dev.codeexec.sandbox.Termination;
import org.junit.jupiter.api.Test;


import static dev.codeexec.local.TestSupport.await;
import static org.assertj.core.api.Assertions.assertThat;

/**
 * Every {@link LocalExecutorTest} again, in the real default sandbox (bubblewrap as uid 65534 here): the
 * engine's promises must hold with real pipes, pid namespaces and kill semantics, not only with the fake.
 * Skipped when the configured sandbox cannot run on this machine.
 */
@Tag("sandbox")
class RealSandboxExecutorTest extends LocalExecutorTest {

    @Override
    Sandbox baseSandbox(Config config) {
        return TestSandboxes.required(config);
    }

    /** The sandbox's init reports the real wait status: an exit status above 128 is not taken for a signal. */
    @Test
    void aProgramThatExitsWith130ExitedAndWasNotKilledBySignal() throws Exception {
        LocalExecutor e = executor();
        ExecutionResult r = await(e.submit(sh(e, "echo bye; exit 130", 10_000), OutputListener.NONE));
        assertThat(r.outcome()).isEqualTo(Outcome.EXITED);
        assertThat(r.exitCode()).isEqualTo(130);
        assertThat(r.stdout()).isEqualTo("bye\n");
        assertThat(r.stderr()).isEmpty();
    }

    @Test
    void aProgramKilledBySignalSaysWhichSignalByName() throws Exception {
        LocalExecutor e = executor();
        // the program is the init's child, not pid 1 of the namespace, so it can signal itself
        ExecutionResult r = await(e.submit(sh(e, "kill -TERM $$", 10_000), OutputListener.NONE));
        assertThat(r.outcome()).isEqualTo(Outcome.KILLED_BY_SIGNAL);
        assertThat(r.exitCode()).isEqualTo(128 + 15);
        assertThat(r.stderr()).isEqualTo("[terminated] killed by signal 15 (SIGTERM)\n");
    }
}
