package dev.codeexec.conformance;

import dev.codeexec.Main;
import dev.codeexec.config.Config;
import dev.codeexec.surface.ServerSetup;

import java.util.List;

/**
 * The production wiring ({@link Main#wire(Config, List)}: configured sandbox, local executor, languages table,
 * workspaces), with the conformance fixtures added through the extension hook: the suite talks to the same stack the jar serves, plus
 * the fixtures it calls by name.
 */
final class ConformanceServer {

    private ConformanceServer() {
    }

    static ServerSetup setup(Config config) {
        return Main.wire(config, List.of(ConformanceFixtures.extension()));
    }
}
