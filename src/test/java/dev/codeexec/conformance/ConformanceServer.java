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
import java.util.stream.Stream;

/**
 * The production engine, wired as {@code Main} wires it (configured sandbox, local executor, the languages table
 * and its validator; Main's wiring is package-private), with the
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
        List<String> names = languages.all().stream()
                .flatMap(l -> Stream.concat(Stream.of(l.id()), l.aliases().stream())).toList();
        return new ServerSetup(config, executor, args -> validator.fromArguments(args, ExecutionRequest.AuditInfo.NONE),
                names, new SandboxStatus(sandbox.name(), sandbox.unavailableReason()), "conformance",
                List.of(ConformanceFixtures::register));
    }
}
