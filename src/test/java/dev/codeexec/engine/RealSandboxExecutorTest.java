package dev.codeexec.engine;

import dev.codeexec.config.Config;
import dev.codeexec.sandbox.Sandbox;
import org.junit.jupiter.api.Tag;

import java.util.Optional;

import static org.junit.jupiter.api.Assumptions.assumeTrue;

/**
 * Every {@link LocalExecutorTest} again, in the real default sandbox (bubblewrap as uid 65534 here): the
 * engine's promises must hold with real pipes, pid namespaces and kill semantics, not only with the fake.
 * Skipped when the configured sandbox cannot run on this machine.
 */
@Tag("sandbox")
class RealSandboxExecutorTest extends LocalExecutorTest {

    @Override
    Sandbox baseSandbox(Config config) {
        Optional<Sandbox> real = TestSandboxes.real(config);
        assumeTrue(real.isPresent(), "the configured sandbox cannot run code on this machine");
        return real.get();
    }
}
