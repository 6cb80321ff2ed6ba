package dev.codeexec.local;

import dev.codeexec.config.Config;
import dev.codeexec.sandbox.Sandbox;
import dev.codeexec.sandbox.Sandboxes;

import java.util.Optional;

/** The sandbox the real-sandbox tests run in: the configured one (bubblewrap by default) when it is usable here. */
final class TestSandboxes {

    private TestSandboxes() {
    }

    /** The configured sandbox, or empty when it cannot run code on this machine (the tests then skip). */
    static Optional<Sandbox> real(Config config) {
        Sandbox s = Sandboxes.create(config);
        return s.unavailableReason().isEmpty() ? Optional.of(s) : Optional.empty();
    }

    /** The real sandbox when usable, else {@link FakeSandbox} (the smoke tests still check the engine's side). */
    static Sandbox realOrFake(Config config) {
        return real(config).orElseGet(FakeSandbox::new);
    }
}
