package dev.codeexec.conformance;

import dev.codeexec.config.Config;
import dev.codeexec.engine.ExecutionRequest;
import dev.codeexec.engine.Languages;
import dev.codeexec.engine.LocalExecutor;
import dev.codeexec.engine.RequestValidator;
import dev.codeexec.mcp.SandboxStatus;
import dev.codeexec.mcp.ServerSetup;
import dev.codeexec.sandbox.Sandbox;
import dev.codeexec.sandbox.Sandboxes;

import java.util.List;

/**
 * The production engine (configured sandbox, local executor, the languages table and its validator) with the
 * conformance fixtures added through the extension hook: the suite talks to the same stack the jar serves, plus
 * the fixtures it calls by name.
 */
final class ConformanceServer {

    private ConformanceServer() {
    }

    static ServerSetup setup(Config config) {
        Sandbox sandbox = Sandboxes.create(config);
        LocalExecutor executor = LocalExecutor.create(config, sandbox);
        Languages languages = Languages.load();
        RequestValidator validator = new RequestValidator(config, languages);
        return new ServerSetup(config, executor, args -> validator.fromArguments(args, ExecutionRequest.AuditInfo.NONE),
                languages.ids(), new SandboxStatus(sandbox.name(), sandbox.unavailableReason()), "conformance",
                List.of(ConformanceFixtures::register));
    }
}
