package dev.codeexec.mcp;

import dev.codeexec.config.Config;
import dev.codeexec.http.HttpServer;
import dev.codeexec.workspace.Workspaces;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;

/** Starts the real HTTP stack on a free port around a {@link FakeExecutor}, with workspaces in a fresh temp dir. */
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
        return setup(config, executor, extensions, workspaces((long) config.get(Config.WORKSPACE_QUOTA_MB) << 20));
    }

    public static ServerSetup setup(Config config, FakeExecutor executor, List<McpExtension> extensions,
            Workspaces workspaces) {
        return new ServerSetup(config, executor, new FakeConverter(), FakeConverter.LANGUAGES,
                new SandboxStatus("fake", Optional.empty()), "test", extensions, workspaces);
    }

    private static final List<Path> ROOTS = new java.util.concurrent.CopyOnWriteArrayList<>();

    static {
        Runtime.getRuntime().addShutdownHook(new Thread(() -> ROOTS.forEach(TestServers::deleteTree)));
    }

    /**
     * Workspaces under a new temporary root, removed when the test JVM exits; files are given to uid 65534 as in
     * production (when run as root).
     */
    public static Workspaces workspaces(long quotaBytes) {
        try {
            Path root = Files.createTempDirectory("codeexec-ws-");
            ROOTS.add(root);
            return new Workspaces(root.resolve("workspaces"), quotaBytes, Duration.ZERO, 65534, 65534);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    private static void deleteTree(Path root) {
        try (var walk = Files.walk(root)) {
            walk.sorted(java.util.Comparator.reverseOrder()).forEach(p -> {
                try {
                    Files.deleteIfExists(p);
                } catch (IOException ignored) {
                    // best effort: a leftover temp dir is harmless
                }
            });
        } catch (IOException | UncheckedIOException ignored) {
            // already gone
        }
    }

    public static HttpServer start(FakeExecutor executor, String... configPairs) throws Exception {
        return HttpServer.start(setup(executor, List.of(), configPairs));
    }
}
