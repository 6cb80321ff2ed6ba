package dev.codeexec.local;

import dev.codeexec.config.Config;
import dev.codeexec.sandbox.Sandbox;
import dev.codeexec.sandbox.Sandboxes;
import dev.codeexec.testing.Requires;

import java.util.Optional;
import java.util.function.Predicate;

/** The sandbox the real-sandbox tests run in: the configured one (bubblewrap by default) when it is usable here. */
final class TestSandboxes {

    private TestSandboxes() {
    }

    /** The configured sandbox, or empty when it cannot run code on this machine (the tests then skip). */
    static Optional<Sandbox> real(Config config) {
        Sandbox s = Sandboxes.create(config);
        return s.unavailableReason().isEmpty() ? Optional.of(s) : Optional.empty();
    }

    /**
     * The configured sandbox; a test that calls this is skipped (failed in a strict run, see {@link Requires}) when
     * the sandbox cannot run code here, with the sandbox's own reason.
     */
    static Sandbox required(Config config) {
        return required(config, s -> true, "");
    }

    /** {@link #required(Config)}, when the sandbox also has what {@code usable} asks ({@code what} names it). */
    static Sandbox required(Config config, Predicate<Sandbox> usable, String what) {
        Sandbox s = Sandboxes.create(config);
        Requires.that(s.unavailableReason().isEmpty(), "the configured sandbox (" + s.name() + "), able to run code here ("
                + s.unavailableReason().orElse("") + ")");
        Requires.that(usable.test(s), what);
        return s;
    }

    /**
     * The real sandbox when usable, else {@link FakeSandbox} (the smoke tests still check the engine's side); a
     * strict run ({@link Requires}) fails instead of falling back.
     */
    static Sandbox realOrFake(Config config) {
        Optional<Sandbox> real = real(config);
        return Requires.orFallBack(real.isPresent(), "the configured sandbox, able to run code here") ? real.get()
                : new FakeSandbox();
    }
}
