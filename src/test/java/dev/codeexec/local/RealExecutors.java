package dev.codeexec.local;

import dev.codeexec.lang.Languages;
import dev.codeexec.config.Config;

import org.junit.jupiter.api.extension.AfterEachCallback;
import org.junit.jupiter.api.extension.ExtensionContext;

import java.util.ArrayList;
import java.util.List;


/**
 * Executors on the configured real sandbox for one test class ({@code @RegisterExtension}), closed together after
 * each test; a test is skipped when that sandbox cannot run code on this machine.
 */
final class RealExecutors implements AfterEachCallback {

    private final List<LocalExecutor> executors = new ArrayList<>();

    /** A fresh executor with the test configuration plus {@code pairs} (name, value, ...). */
    LocalExecutor start(String... pairs) {
        Config config = TestSupport.config(pairs);
        LocalExecutor e = new LocalExecutor(config, TestSandboxes.required(config), Languages.load());
        executors.add(e);
        return e;
    }

    @Override
    public void afterEach(ExtensionContext context) {
        executors.forEach(LocalExecutor::close);
        executors.clear();
    }
}
