package dev.codeexec.local;

import dev.codeexec.lang.Languages;
import dev.codeexec.config.Config;
import dev.codeexec.sandbox.Sandbox;

import org.junit.jupiter.api.extension.AfterEachCallback;
import org.junit.jupiter.api.extension.ExtensionContext;

import java.util.ArrayList;
import java.util.List;
import java.util.Optional;

import static org.junit.jupiter.api.Assumptions.assumeTrue;

/**
 * Executors on the configured real sandbox for one test class ({@code @RegisterExtension}), closed together after
 * each test; a test is skipped when that sandbox cannot run code on this machine.
 */
final class RealExecutors implements AfterEachCallback {

    private final List<LocalExecutor> executors = new ArrayList<>();

    /** A fresh executor with the test configuration plus {@code pairs} (name, value, ...). */
    LocalExecutor start(String... pairs) {
        Config config = TestSupport.config(pairs);
        Optional<Sandbox> real = TestSandboxes.real(config);
        assumeTrue(real.isPresent(), "the configured sandbox cannot run code on this machine");
        LocalExecutor e = new LocalExecutor(config, real.get(), Languages.load());
        executors.add(e);
        return e;
    }

    @Override
    public void afterEach(ExtensionContext context) {
        executors.forEach(LocalExecutor::close);
        executors.clear();
    }
}
