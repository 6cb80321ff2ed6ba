package dev.codeexec.conformance;

import dev.codeexec.config.Config;
import dev.codeexec.http.HttpServer;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import tools.jackson.databind.JsonNode;
import tools.jackson.databind.ObjectMapper;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Runs the official MCP conformance suite ({@code @modelcontextprotocol/conformance} 0.2.0-alpha.12, server side,
 * exactly the scenarios revision 2025-11-25 requires: {@code --requirements 2025-11-25}) against our real HTTP stack started in-process on a free port, with the suite's fixture tools,
 * resources and prompts added through the extension hook. Needs Node >= 22: the e2e project installs one
 * ({@code npm ci} in e2e/ gives e2e/node_modules/node/bin/node); this test runs that install when it is missing.
 */
@Tag("slow")
@Timeout(value = 10, unit = TimeUnit.MINUTES)
class ConformanceTest {

    /** The revision whose required server scenarios run. */
    static final String REVISION = "2025-11-25";
    /** The server scenarios 0.2.0-alpha.12 requires of revision 2025-11-25. */
    static final int REQUIRED_SCENARIOS = 33;

    static final Path E2E = Path.of("e2e").toAbsolutePath();
    static final Path NODE22 = E2E.resolve("node_modules/node/bin/node");
    static final Path CLI = E2E.resolve("node_modules/@modelcontextprotocol/conformance/dist/index.js");

    static HttpServer server;
    static Path dataDir;

    @BeforeAll
    static void start() throws Exception {
        ensureNodePackages();
        dataDir = Files.createTempDirectory("conformance-data-");
        // the sandbox uid must be able to pass through to the workspaces below it
        Files.setPosixFilePermissions(dataDir, java.nio.file.attribute.PosixFilePermissions.fromString("rwx--x--x"));
        // Unauthenticated loopback server: the dns-rebinding scenario is defined for exactly that setup.
        server = HttpServer.start(ConformanceServer.setup(Config.of("PORT", "0", "HOST", "127.0.0.1",
                "DATA_DIR", dataDir.toString(), "WORKSPACE_ROOT", dataDir.resolve("workspaces").toString())));
    }

    @AfterAll
    static void stop() throws IOException {
        if (server != null) server.close();
        if (dataDir != null) deleteTree(dataDir);
    }

    @Test
    void everyServerScenarioRevision20251125RequiresPasses() throws Exception {
        Run run = run(REVISION);
        assertThat(run.failures()).as("failed checks; CLI output:\n%s", run.log()).isEmpty();
        assertThat(run.scenarios()).as("scenarios run; CLI output:\n%s", run.log()).hasSize(REQUIRED_SCENARIOS);
        assertThat(run.exit()).as("CLI exit code; output:\n%s", run.log()).isZero();
    }

    /**
     * Revision 2026-07-28: every scenario it requires passes, the tasks extension's ({@code tasks-*}, run because the
     * server announces {@code io.modelcontextprotocol/tasks}) among them.
     */
    @Test
    void everyServerScenarioRevision20260728RequiresPasses() throws Exception {
        Run run = run(REVISION_2026);
        assertThat(run.failures()).as("failed checks; CLI output:\n%s", run.log()).isEmpty();
        assertThat(run.scenarios()).as("scenarios run; CLI output:\n%s", run.log()).hasSize(REQUIRED_SCENARIOS_2026);
        assertThat(run.scenarios().stream().map(Scenario::scenario).filter(n -> n.startsWith("tasks-")))
                .as("the tasks extension's scenarios").hasSize(TASKS_SCENARIOS);
        assertThat(run.exit()).as("CLI exit code; output:\n%s", run.log()).isZero();
    }

    /** The 2026-07-28 revision. */
    static final String REVISION_2026 = "2026-07-28";
    /** The server scenarios 0.2.0-alpha.12 requires of revision 2026-07-28. */
    static final int REQUIRED_SCENARIOS_2026 = 50;
    /** Of those, the tasks extension's. */
    static final int TASKS_SCENARIOS = 10;

    record Run(List<Scenario> scenarios, List<String> failures, String log, int exit) {
    }

    /** Runs the suite's requirement set of {@code revision} against the server; prints the counts. */
    private static Run run(String revision) throws Exception {
        Path out = Files.createTempDirectory("conformance-results-");
        try {
            String url = "http://127.0.0.1:" + server.port() + "/mcp";
            ProcessBuilder pb = new ProcessBuilder(NODE22.toString(), CLI.toString(), "server", "--url", url,
                    "--requirements", revision, "-o", out.toString())
                    .directory(out.toFile())
                    .redirectErrorStream(true);
            Process p = pb.start();
            String log = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
            assertThat(p.waitFor(5, TimeUnit.MINUTES)).as("conformance CLI finished").isTrue();
            List<Scenario> scenarios = readResults(out);
            List<String> failures = scenarios.stream().flatMap(s -> s.failures().stream()).toList();
            // the counts, for the test command's log (docs/testing.md)
            System.out.printf("conformance %s: %d scenarios (%d passing whole), %d checks passed, %d failed, "
                            + "%d skipped or informational%n", revision, scenarios.size(),
                    scenarios.stream().filter(s -> s.failures().isEmpty()).count(),
                    scenarios.stream().mapToInt(Scenario::passed).sum(), failures.size(),
                    scenarios.stream().mapToInt(x -> x.other().size()).sum());
            scenarios.forEach(x -> x.other().forEach(o -> System.out.println("  " + o)));
            return new Run(scenarios, failures, log, p.exitValue());
        } finally {
            deleteTree(out);
        }
    }

    record Scenario(String name, List<String> failures, int passed, List<String> other) {
        /** The scenario's name without the CLI's "server-" prefix and timestamp suffix. */
        String scenario() {
            return name.replaceFirst("^server-", "").replaceFirst("-\\d{4}-\\d{2}-\\d{2}T.*$", "");
        }
    }

    /** The CLI writes one directory per scenario, each with a checks.json array of {id, status, errorMessage}. */
    static List<Scenario> readResults(Path out) throws IOException {
        ObjectMapper json = new ObjectMapper();
        List<Scenario> scenarios = new ArrayList<>();
        try (Stream<Path> files = Files.walk(out)) {
            for (Path checks : files.filter(f -> f.getFileName().toString().equals("checks.json")).toList()) {
                String name = checks.getParent().getFileName().toString();
                List<String> failures = new ArrayList<>();
                int passed = 0;
                List<String> other = new ArrayList<>();
                for (JsonNode c : json.readTree(checks.toFile())) {
                    String status = c.path("status").asString("");
                    if (status.equals("FAILURE")) {
                        failures.add(name + ": " + c.path("id").asString("") + " " + c.path("errorMessage").asString(""));
                    } else if (status.equals("SUCCESS")) {
                        passed++;
                    } else {
                        other.add(name.replaceFirst("-\\d{4}-\\d{2}-\\d{2}T.*$", "") + ": " + c.path("id").asString("") + " " + status);
                    }
                }
                scenarios.add(new Scenario(name, failures, passed, other));
            }
        }
        return scenarios;
    }

    private static void ensureNodePackages() throws IOException, InterruptedException {
        if (Files.isExecutable(NODE22) && Files.isRegularFile(CLI)) return;
        // Exactly the lock: npm install could resolve anew and rewrite e2e/package-lock.json in the checkout.
        Process p = new ProcessBuilder("npm", "ci", "--no-fund", "--no-audit", "--loglevel=error")
                .directory(E2E.toFile()).redirectErrorStream(true).start();
        String log = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertThat(p.waitFor()).as("npm ci in e2e/:\n%s", log).isZero();
        assertThat(NODE22).as("Node 22 from npm package node@22").isExecutable();
        assertThat(CLI).as("conformance CLI").isRegularFile();
    }

    private static void deleteTree(Path root) throws IOException {
        if (!Files.exists(root)) return;
        try (Stream<Path> paths = Files.walk(root)) {
            for (Path p : paths.sorted((a, b) -> b.getNameCount() - a.getNameCount()).toList()) Files.deleteIfExists(p);
        }
    }
}
