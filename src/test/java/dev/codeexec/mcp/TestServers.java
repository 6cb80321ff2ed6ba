package dev.codeexec.mcp;

import dev.codeexec.config.Config;
import dev.codeexec.http.HttpServer;

import java.util.ArrayList;
import java.util.List;
import java.util.Optional;

/** Starts the real HTTP stack on a free port around a {@link FakeExecutor}. */
public final class TestServers {

    private TestServers() {
    }

    public static ServerSetup setup(FakeExecutor executor, List<McpExtension> extensions, String... configPairs) {
        List<String> pairs = new ArrayList<>(List.of(configPairs));
        pairs.add("PORT");
        pairs.add("0");
        return setup(Config.of(pairs.toArray(String[]::new)), executor, extensions);
    }

    public static ServerSetup setup(Config config, FakeExecutor executor, List<McpExtension> extensions) {
        return new ServerSetup(config, executor, new FakeConverter(), FakeConverter.LANGUAGES,
                new SandboxStatus("fake", Optional.empty()), "test", extensions);
    }

    public static HttpServer start(FakeExecutor executor, String... configPairs) throws Exception {
        return HttpServer.start(setup(executor, List.of(), configPairs));
    }
}
