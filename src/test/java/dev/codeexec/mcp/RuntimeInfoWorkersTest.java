package dev.codeexec.mcp;

import dev.codeexec.http.HttpServer;
import io.modelcontextprotocol.client.McpClient;
import io.modelcontextprotocol.client.McpSyncClient;
import io.modelcontextprotocol.client.transport.HttpClientStreamableHttpTransport;
import io.modelcontextprotocol.spec.McpSchema.CallToolRequest;
import io.modelcontextprotocol.spec.McpSchema.CallToolResult;
import io.modelcontextprotocol.spec.McpSchema.TextContent;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

import java.time.Duration;
import java.util.List;
import java.util.Map;

import static dev.codeexec.mcp.FakeExecutor.worker;
import static org.assertj.core.api.Assertions.assertThat;

/** runtime_info's {@code mode} and {@code workers}, and execute_code's {@code worker}, through the SDK client over HTTP. */
class RuntimeInfoWorkersTest {

    FakeExecutor executor = new FakeExecutor();
    HttpServer server;
    McpSyncClient client;

    @BeforeEach
    void start() throws Exception {
        server = TestServers.start(executor);
        client = McpClient.sync(HttpClientStreamableHttpTransport.builder("http://127.0.0.1:" + server.port()).build())
                .requestTimeout(Duration.ofSeconds(30)).build();
        client.initialize();
    }

    @AfterEach
    void stop() {
        client.closeGracefully();
        server.close();
    }

    @SuppressWarnings("unchecked")
    private Map<String, Object> runtimeInfo() {
        CallToolResult r = client.callTool(CallToolRequest.builder("runtime_info").arguments(Map.of()).build());
        assertThat(r.isError()).isFalse();
        return (Map<String, Object>) r.structuredContent();
    }

    @Test
    @SuppressWarnings("unchecked")
    void theSessionCountATenantSeesIsItsOwnAndAnAdminSeesEveryTenants() throws Exception {
        java.nio.file.Path keys = java.nio.file.Files.createTempFile("runtime-info-keys", ".txt");
        java.nio.file.Files.writeString(keys, "alice " + dev.codeexec.auth.ApiKeys.hashHex("alice-key") + "\n"
                + "bob " + dev.codeexec.auth.ApiKeys.hashHex("bob-key") + "\n"
                + "ops " + dev.codeexec.auth.ApiKeys.hashHex("ops-key") + " admin\n");
        executor.sessionsByTenant = Map.of("alice", 3, "carol", 2);
        try (HttpServer keyed = TestServers.start(executor, "API_KEYS_FILE", keys.toString())) {
            Map<String, Integer> counts = new java.util.LinkedHashMap<>();
            for (String key : List.of("alice-key", "bob-key", "ops-key")) {
                McpSyncClient c = McpClient.sync(HttpClientStreamableHttpTransport.builder("http://127.0.0.1:" + keyed.port())
                        .httpRequestCustomizer((b, method, uri, body, ctx) -> b.header("Authorization", "Bearer " + key))
                        .build()).requestTimeout(Duration.ofSeconds(30)).build();
                try {
                    c.initialize();
                    CallToolResult r = c.callTool(CallToolRequest.builder("runtime_info").arguments(Map.of()).build());
                    Map<String, Object> sessions = (Map<String, Object>) ((Map<String, Object>) r.structuredContent())
                            .get("sessions");
                    assertThat(sessions).as(key).containsEntry("maxPerTenant", 8);
                    counts.put(key, ((Number) sessions.get("count")).intValue());
                    assertThat(((TextContent) r.content().getFirst()).text()).as(key)
                            .contains("\"count\" : " + counts.get(key));
                } finally {
                    c.closeGracefully();
                }
            }
            assertThat(counts).containsExactly(Map.entry("alice-key", 3), Map.entry("bob-key", 0), Map.entry("ops-key", 5));
        }
    }

    @Test
    void aLocalServerSaysModeLocalAndListsNoWorkers() {
        Map<String, Object> info = runtimeInfo();
        assertThat(info).containsEntry("mode", "local").doesNotContainKey("workers");
        assertThat(info).containsEntry("sandbox", Map.of("kind", "fake"));
    }

    @Test
    @SuppressWarnings("unchecked")
    void aGatewayListsEachWorkerWithItsLoadAndHealth() {
        executor.workers = List.of(worker("10.0.0.1:30031", "w-1", true, 3, 4), worker("10.0.0.2:30031", "w-2", false, 0, 0));
        CallToolResult r = client.callTool(CallToolRequest.builder("runtime_info").arguments(Map.of()).build());
        Map<String, Object> info = (Map<String, Object>) r.structuredContent();
        assertThat(info).containsEntry("mode", "gateway").containsKey("languages");
        List<Map<String, Object>> workers = (List<Map<String, Object>>) info.get("workers");
        assertThat(workers).hasSize(2);
        Map<String, Object> up = workers.get(0);
        assertThat(up).containsEntry("address", "10.0.0.1:30031").containsEntry("name", "w-1")
                .containsEntry("instanceId", "inst-w-1").containsEntry("healthy", true)
                .containsEntry("draining", false).containsEntry("running", 3).containsEntry("queued", 0)
                .containsEntry("slots", 4).containsEntry("sessions", 1)
                .containsEntry("lastSeen", "2026-11-30T12:00:00Z");
        Map<String, Object> down = workers.get(1);
        assertThat(down).containsEntry("address", "10.0.0.2:30031").containsEntry("healthy", false);
        // runtime_info needs a key where keys are configured: the reason a worker is down is shown here
        assertThat(down.get("error")).isEqualTo("UNAVAILABLE: connection refused to 10.9.8.7");
        assertThat(down.get("name")).isNull();
        String text = ((TextContent) r.content().getFirst()).text();
        assertThat(text).contains("\"mode\" : \"gateway\"").contains("\"address\" : \"10.0.0.2:30031\"");
    }

    @Test
    @SuppressWarnings("unchecked")
    void aGatewayBeforeItsFirstWorkerAnsweredStillSaysGateway() {
        executor.remote = true;
        Map<String, Object> info = runtimeInfo();
        assertThat(info).containsEntry("mode", "gateway");
        assertThat((List<Object>) info.get("workers")).isEmpty();
    }

    @Test
    @SuppressWarnings("unchecked")
    void eachRunNamesTheWorkerThatRanIt() {
        executor.worker = "w-2";
        CallToolResult r = client.callTool(CallToolRequest.builder("execute_code")
                .arguments(Map.of("language", "python", "code", "print:hi")).build());
        assertThat(r.isError()).isFalse();
        assertThat((Map<String, Object>) r.structuredContent()).containsEntry("worker", "w-2").containsEntry("stdout", "hi");
    }
}
