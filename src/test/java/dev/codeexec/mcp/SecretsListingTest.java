package dev.codeexec.mcp;

import dev.codeexec.auth.ApiKeys;
import dev.codeexec.config.Config;
import dev.codeexec.egress.EgressSettings;
import dev.codeexec.engine.RequestValidator;
import dev.codeexec.http.HttpServer;
import dev.codeexec.lang.Languages;
import dev.codeexec.sandbox.Sandbox;
import dev.codeexec.surface.ServerSetup;
import io.modelcontextprotocol.client.McpClient;
import io.modelcontextprotocol.client.McpSyncClient;
import io.modelcontextprotocol.client.transport.HttpClientStreamableHttpTransport;
import io.modelcontextprotocol.spec.McpSchema.CallToolRequest;
import io.modelcontextprotocol.spec.McpSchema.CallToolResult;
import io.modelcontextprotocol.spec.McpSchema.ReadResourceRequest;
import io.modelcontextprotocol.spec.McpSchema.TextResourceContents;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import tools.jackson.databind.JsonNode;
import tools.jackson.databind.json.JsonMapper;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * runtime_info and code-exec://info list, for the calling tenant, the placeholder secrets its runs get
 * ({@code network.secrets}: name, description, hosts), never a value; a tenant a secret is not for does not see it,
 * and a tenant without network sees none. The file is read for its names only, as a gateway reads it: the value's
 * variable is set nowhere.
 */
class SecretsListingTest {

    static HttpServer server;
    static Path dir;

    @BeforeAll
    static void start() throws Exception {
        dir = Files.createTempDirectory("secrets-listing-test");
        Path secrets = Files.writeString(dir.resolve("secrets.json"), """
                {"GITHUB_TOKEN": {"value": "${LISTING_TEST_UNSET}", "hosts": ["api.github.com"], "description": "GitHub's API"},
                 "TEAM_TOKEN": {"value": "listing-test-literal-value", "hosts": ["api.team.test"], "tenants": ["alice"]}}
                """);
        Path keys = Files.writeString(dir.resolve("keys.txt"), "alice " + ApiKeys.hashHex("alice-key") + "\n"
                + "bob " + ApiKeys.hashHex("bob-key") + "\n"
                + "carol " + ApiKeys.hashHex("carol-key") + " egress=off\n");
        Config config = Config.of("PORT", "0", "EGRESS", "on", "EGRESS_ALLOW", "api.github.com,api.team.test",
                "EGRESS_SECRETS_FILE", secrets.toString(), "API_KEYS_FILE", keys.toString());
        server = HttpServer.start(new ServerSetup(config, new FakeExecutor(), new RequestValidator(config, Languages.load()),
                new Sandbox.Status("fake", Optional.empty()), "test", List.of(), TestServers.workspaces(config),
                EgressSettings.of(config)));
    }

    @AfterAll
    static void stop() throws Exception {
        if (server != null) server.close();
        if (dir != null) dev.codeexec.config.DataDir.deleteTree(dir);
    }

    /** runtime_info's and code-exec://info's {@code network} as {@code key}'s tenant sees them. */
    static List<JsonNode> networks(String key) {
        McpSyncClient c = McpClient.sync(HttpClientStreamableHttpTransport.builder("http://127.0.0.1:" + server.port())
                .httpRequestCustomizer((b, method, uri, body, ctx) -> b.header("Authorization", "Bearer " + key))
                .build()).requestTimeout(Duration.ofSeconds(30)).build();
        try {
            c.initialize();
            CallToolResult r = c.callTool(CallToolRequest.builder("runtime_info").arguments(Map.of()).build());
            assertThat(r.isError()).isFalse();
            JsonMapper json = JsonMapper.shared();
            List<JsonNode> out = new ArrayList<>();
            out.add(json.valueToTree(r.structuredContent()).path("network"));
            String info = ((TextResourceContents) c.readResource(new ReadResourceRequest("code-exec://info")).contents()
                    .getFirst()).text();
            out.add(json.readTree(info).path("network"));
            return out;
        } finally {
            c.closeGracefully();
        }
    }

    static List<String> names(JsonNode network) {
        List<String> out = new ArrayList<>();
        network.path("secrets").forEach(s -> out.add(s.path("name").asString()));
        return out;
    }

    @Test
    void aTenantSeesTheSecretsItsRunsGetWithTheirHostsAndNeverAValue() {
        for (JsonNode network : networks("alice-key")) {
            assertThat(names(network)).containsExactly("GITHUB_TOKEN", "TEAM_TOKEN");
            JsonNode github = network.path("secrets").get(0);
            assertThat(github.path("description").asString()).isEqualTo("GitHub's API");
            assertThat(github.path("hosts").get(0).asString()).isEqualTo("api.github.com");
            assertThat(network.path("secretsNote").asString()).contains("placeholder");
            assertThat(network.toString()).doesNotContain("listing-test-literal-value").doesNotContain("LISTING_TEST_UNSET");
        }
    }

    @Test
    void aTenantASecretIsNotForDoesNotSeeItAndOneWithoutNetworkSeesNone() {
        for (JsonNode network : networks("bob-key")) assertThat(names(network)).containsExactly("GITHUB_TOKEN");
        for (JsonNode network : networks("carol-key")) {
            assertThat(network.path("enabled").asBoolean()).isTrue();
            assertThat(network.has("secrets")).isFalse();
        }
    }
}
