package dev.codeexec.mcp;

import dev.codeexec.surface.ServerSetup;
import dev.codeexec.sandbox.Sandbox;
import dev.codeexec.config.Config;
import dev.codeexec.engine.RequestValidator;
import dev.codeexec.lang.Languages;
import dev.codeexec.http.HttpServer;
import dev.codeexec.workspace.Workspaces;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CopyOnWriteArrayList;

/** Starts the real HTTP stack on a free port around a {@link FakeExecutor}. */
public final class TestServers {

    /** Temporary workspace roots made here, removed when the test JVM exits. */
    private static final List<Path> TEMP_ROOTS = new CopyOnWriteArrayList<>();

    static {
        Runtime.getRuntime().addShutdownHook(new Thread(() -> TEMP_ROOTS.forEach(TestServers::deleteTree)));
    }

    private TestServers() {
    }

    public static ServerSetup setup(FakeExecutor executor, List<McpExtension> extensions, String... configPairs) {
        List<String> pairs = new ArrayList<>(List.of(configPairs));
        pairs.add("PORT");
        pairs.add("0");
        return setup(Config.of(pairs.toArray(String[]::new)), executor, extensions);
    }

    public static ServerSetup setup(Config config, FakeExecutor executor, List<McpExtension> extensions) {
        return setup(config, executor, extensions, workspaces(config));
    }

    public static ServerSetup setup(Config config, FakeExecutor executor, List<McpExtension> extensions,
            Workspaces workspaces) {
        return new ServerSetup(config, executor, new RequestValidator(config, Languages.load()),
                new Sandbox.Status("fake", Optional.empty()), "test", extensions, workspaces);
    }

    /**
     * The production engine (real sandbox, LocalExecutor, validator) behind a setup, for tests of real runs; its
     * egress settings from the config, as the server's own.
     */
    public static ServerSetup real(Config config, dev.codeexec.sandbox.Sandbox sandbox,
            dev.codeexec.engine.Executor executor) {
        return new ServerSetup(config, executor, new RequestValidator(config, Languages.load()),
                new Sandbox.Status(sandbox.name(), sandbox.unavailableReason()), "test", List.of(), workspaces(config),
                dev.codeexec.egress.EgressSettings.of(config));
    }

    /**
     * Workspaces at the configured WORKSPACE_ROOT, or in a fresh temporary directory when the test left the
     * production default (tests never write to /var/lib).
     */
    public static Workspaces workspaces(Config config) {
        Path root = Path.of(config.get(Config.WORKSPACE_ROOT));
        if (config.get(Config.WORKSPACE_ROOT).equals(Config.WORKSPACE_ROOT.defaultValue())) root = tempRoot();
        return new Workspaces(root, config.get(Config.WORKSPACE_QUOTA_MB) * 1024L * 1024L,
                config.get(Config.WORKSPACE_MAX_ENTRIES), Duration.ofHours(config.get(Config.WORKSPACE_MAX_AGE_HOURS)),
                config.get(Config.SANDBOX_UID), config.get(Config.SANDBOX_GID));
    }

    /** Workspaces with a quota in bytes (smaller than WORKSPACE_QUOTA_MB allows) in a fresh temporary directory. */
    public static Workspaces workspaces(long quotaBytes) {
        return new Workspaces(tempRoot(), quotaBytes, Duration.ZERO, 65534, 65534);
    }

    private static Path tempRoot() {
        try {
            Path root = Files.createTempDirectory("ws-test");
            TEMP_ROOTS.add(root);
            return root;
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    private static void deleteTree(Path root) {
        try (var walk = Files.walk(root)) {
            walk.sorted(Comparator.reverseOrder()).forEach(p -> {
                try {
                    Files.deleteIfExists(p);
                } catch (IOException ignored) {
                    // best effort: a leftover temporary directory is harmless
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
