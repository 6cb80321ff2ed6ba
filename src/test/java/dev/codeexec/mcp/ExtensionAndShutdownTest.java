package dev.codeexec.mcp;

import dev.codeexec.http.HttpServer;
import io.modelcontextprotocol.client.McpClient;
import io.modelcontextprotocol.client.McpSyncClient;
import io.modelcontextprotocol.client.transport.HttpClientStreamableHttpTransport;
import io.modelcontextprotocol.server.McpServerFeatures.SyncPromptSpecification;
import io.modelcontextprotocol.server.McpServerFeatures.SyncResourceSpecification;
import io.modelcontextprotocol.server.McpServerFeatures.SyncToolSpecification;
import io.modelcontextprotocol.spec.McpSchema.CallToolRequest;
import io.modelcontextprotocol.spec.McpSchema.CallToolResult;
import io.modelcontextprotocol.spec.McpSchema.GetPromptResult;
import io.modelcontextprotocol.spec.McpSchema.Prompt;
import io.modelcontextprotocol.spec.McpSchema.PromptMessage;
import io.modelcontextprotocol.spec.McpSchema.ReadResourceResult;
import io.modelcontextprotocol.spec.McpSchema.Resource;
import io.modelcontextprotocol.spec.McpSchema.Role;
import io.modelcontextprotocol.spec.McpSchema.TextContent;
import io.modelcontextprotocol.spec.McpSchema.TextResourceContents;
import io.modelcontextprotocol.spec.McpSchema.Tool;
import org.junit.jupiter.api.Test;

import java.net.ConnectException;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/** The test-only extension hook, and shutdown delivering the results of runs it ends. */
class ExtensionAndShutdownTest {

    @Test
    void extensionsAddToolsResourcesAndPromptsNextToOurs() throws Exception {
        McpCatalog added = new McpCatalog(List.of(
                new SyncToolSpecification(Tool.builder().name("echo").description("echo")
                        .inputSchema(Map.of("type", "object")).build(),
                        (ex, call) -> CallToolResult.builder().addTextContent("echo:" + call.arguments().get("m")).build()),
                // an extension's structured result is still checked against its output schema (ours are not: OwnSchemas)
                new SyncToolSpecification(Tool.builder().name("count").description("count")
                        .inputSchema(Map.of("type", "object"))
                        .outputSchema(Map.of("type", "object", "properties", Map.of("n", Map.of("type", "integer")),
                                "required", List.of("n"))).build(),
                        (ex, call) -> CallToolResult.builder().structuredContent(Map.of("n", call.arguments().get("n")))
                                .addTextContent("counted").build())),
                List.of(new SyncResourceSpecification(Resource.builder().uri("test://a").name("a").mimeType("text/plain").build(),
                        (ex, req) -> new ReadResourceResult(List.of(new TextResourceContents("test://a", "text/plain", "A"))))),
                List.of(),
                List.of(new SyncPromptSpecification(new Prompt("p", "a prompt", List.of()),
                        (ex, req) -> new GetPromptResult("d", List.of(new PromptMessage(Role.USER, new TextContent("hi")))))),
                List.of());
        McpExtension fixtures = () -> added;
        try (HttpServer server = HttpServer.start(TestServers.setup(new FakeExecutor(), List.of(fixtures)))) {
            McpSyncClient client = McpClient.sync(HttpClientStreamableHttpTransport.builder("http://127.0.0.1:" + server.port()).build())
                    .requestTimeout(Duration.ofSeconds(20)).build();
            try {
                client.initialize();
                assertThat(client.listTools().tools()).extracting(Tool::name).contains("execute_code", "runtime_info", "echo");
                CallToolResult echo = client.callTool(CallToolRequest.builder("echo").arguments(Map.of("m", "x")).build());
                assertThat(((TextContent) echo.content().getFirst()).text()).isEqualTo("echo:x");
                CallToolResult counted = client.callTool(CallToolRequest.builder("count").arguments(Map.of("n", 3)).build());
                assertThat(counted.isError()).isNotEqualTo(Boolean.TRUE);
                assertThat(counted.structuredContent()).isEqualTo(Map.of("n", 3));
                CallToolResult wrong = client.callTool(CallToolRequest.builder("count").arguments(Map.of("n", "three")).build());
                assertThat(wrong.isError()).isTrue();
                assertThat(((TextContent) wrong.content().getFirst()).text()).contains("n");
                assertThat(client.listResources().resources()).extracting(Resource::uri)
                        .containsExactlyInAnyOrder("test://a", "code-exec://info");
                assertThat(client.listPrompts().prompts()).extracting(Prompt::name)
                        .containsExactlyInAnyOrder("p", "review-code", "write-and-run-tests");
            } finally {
                client.closeGracefully();
            }
        }
    }

    @Test
    void shutdownEndsRunsAndStillDeliversTheirResults() throws Exception {
        FakeExecutor executor = new FakeExecutor();
        HttpServer server = HttpServer.start(TestServers.setup(executor, List.of()));
        RawClient raw = new RawClient(server.port());
        String session = raw.initialize();
        CompletableFuture<HttpResponse<String>> call = CompletableFuture.supplyAsync(() -> {
            try {
                return raw.send(raw.mcpPost(session, RawClient.call(1, "block")));
            } catch (Exception e) {
                throw new IllegalStateException(e);
            }
        });
        assertThat(executor.blockStarted.await(10, TimeUnit.SECONDS)).isTrue();

        server.close();

        assertThat(executor.closed).isTrue();
        HttpResponse<String> r = call.get(10, TimeUnit.SECONDS);
        assertThat(r.statusCode()).isEqualTo(200);
        assertThat(r.body()).contains("\"outcome\":\"cancelled\"");
        assertThatThrownBy(() -> raw.send(raw.request("/healthz").GET())).isInstanceOf(ConnectException.class);
    }
}
