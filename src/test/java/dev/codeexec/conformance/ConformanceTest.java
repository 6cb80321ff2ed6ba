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
    void everyServerScenarioTheRevisionRequiresPasses() throws Exception {
        Path out = Files.createTempDirectory("conformance-results-");
        try {
            String url = "http://127.0.0.1:" + server.port() + "/mcp";
            ProcessBuilder pb = new ProcessBuilder(NODE22.toString(), CLI.toString(), "server", "--url", url,
                    "--requirements", REVISION, "-o", out.toString())
                    .directory(out.toFile())
                    .redirectErrorStream(true);
            Process p = pb.start();
            String log = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
            assertThat(p.waitFor(5, TimeUnit.MINUTES)).as("conformance CLI finished").isTrue();

            List<Scenario> scenarios = readResults(out);
            List<String> failures = scenarios.stream().flatMap(s -> s.failures().stream()).toList();
            // the counts, for the test command's log (docs/testing.md)
            System.out.printf("conformance %s: %d scenarios, %d checks passed, %d failed, %d skipped or informational%n",
                    REVISION, scenarios.size(), scenarios.stream().mapToInt(Scenario::passed).sum(), failures.size(),
                    scenarios.stream().mapToInt(x -> x.other().size()).sum());
            scenarios.forEach(x -> x.other().forEach(o -> System.out.println("  " + o)));
            assertThat(failures).as("failed checks; CLI output:\n%s", log).isEmpty();
            assertThat(scenarios).as("scenarios run; CLI output:\n%s", log).hasSize(REQUIRED_SCENARIOS);
            assertThat(p.exitValue()).as("CLI exit code; output:\n%s", log).isZero();
        } finally {
            deleteTree(out);
        }
    }

    record Scenario(String name, List<String> failures, int passed, List<String> other) {
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
