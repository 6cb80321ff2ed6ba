package dev.codeexec.mcp;

import dev.codeexec.auth.ApiKeys;
import dev.codeexec.codemode.CodeTools;
import dev.codeexec.config.Config;
import dev.codeexec.egress.EgressSettings;
import dev.codeexec.engine.RequestValidator;
import dev.codeexec.http.HttpServer;
import dev.codeexec.lang.Languages;
import dev.codeexec.sandbox.Sandbox;
import dev.codeexec.surface.ServerSetup;
import dev.codeexec.testing.LogCapture;
import dev.codeexec.testing.Poll;
import io.modelcontextprotocol.client.McpClient;
import io.modelcontextprotocol.client.McpSyncClient;
import io.modelcontextprotocol.client.transport.HttpClientStreamableHttpTransport;
import io.modelcontextprotocol.common.McpTransportContext;
import io.modelcontextprotocol.server.McpServer;
import io.modelcontextprotocol.server.McpServerFeatures.SyncToolSpecification;
import io.modelcontextprotocol.server.McpSyncServer;
import io.modelcontextprotocol.server.transport.HttpServletStreamableServerTransportProvider;
import io.modelcontextprotocol.spec.McpSchema;
import io.modelcontextprotocol.spec.McpSchema.CallToolRequest;
import io.modelcontextprotocol.spec.McpSchema.CallToolResult;
import org.eclipse.jetty.ee10.servlet.ServletContextHandler;
import org.eclipse.jetty.ee10.servlet.ServletHolder;
import org.eclipse.jetty.server.Server;
import org.eclipse.jetty.server.ServerConnector;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import tools.jackson.databind.json.JsonMapper;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CopyOnWriteArrayList;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * {@code /mcp-no-code-execute} through the real HTTP stack (keys file, edge, endpoint filter, SDK transport) with an
 * upstream MCP server of the test's own on 127.0.0.1 that checks the bearer token the server holds for it. Two
 * tenants: {@code fx} is open to both, {@code only-a} (its {@code whoami} only) to alice.
 */
class DirectToolsServerTest {

    private static final String UPSTREAM_TOKEN = "Bearer up-secret-7f3a";
    private static final String ALICE = "alice-key-direct-0001";
    private static final String BOB = "bob-key-direct-0002";

    @TempDir
    static Path dir;
    private static Upstream upstream;
    private static HttpServer server;

    @BeforeAll
    static void start() throws Exception {
        upstream = Upstream.start();
        Path file = dir.resolve("upstreams.json");
        Files.writeString(file, JsonMapper.shared().writeValueAsString(Map.of("mcpServers", Map.of(
                "fx", Map.of("url", upstream.url(), "headers", Map.of("Authorization", UPSTREAM_TOKEN)),
                "only-a", Map.of("url", upstream.url(), "headers", Map.of("Authorization", UPSTREAM_TOKEN),
                        "tenants", List.of("alice"), "tools", List.of("whoami"))))));
        Path keys = dir.resolve("keys");
        Files.writeString(keys, "alice " + ApiKeys.hashHex(ALICE) + "\nbob " + ApiKeys.hashHex(BOB) + "\n");
        Config config = Config.of("PORT", "0", "SANDBOX", "bwrap", "UPSTREAM_MCP_FILE", file.toString(),
                "API_KEYS_FILE", keys.toString(), "DATA_DIR", dir.resolve("data").toString());
        Optional<CodeTools> tools = CodeTools.of(config);
        Poll.until("both upstreams connected", () -> tools.orElseThrow().upstreams().connected("fx")
                && tools.orElseThrow().upstreams().connected("only-a"));
        ServerSetup setup = new ServerSetup(config, new FakeExecutor(), new RequestValidator(config, Languages.load()),
                new Sandbox.Status("fake", Optional.empty()), "test", List.of(), TestServers.workspaces(config),
                EgressSettings.OFF, tools);
        server = HttpServer.start(setup, ApiKeys.load(config));
    }

    @AfterAll
    static void stop() throws Exception {
        if (server != null) server.close();
        if (upstream != null) upstream.close();
    }

    @Test
    void eachTenantListsTheUpstreamToolsItMayCallAndNoOthers() throws Exception {
        try (McpSyncClient alice = client(ALICE); McpSyncClient bob = client(BOB)) {
            assertThat(names(alice)).containsExactlyInAnyOrder("fx__add", "fx__whoami", "only-a__whoami");
            assertThat(names(bob)).containsExactlyInAnyOrder("fx__add", "fx__whoami");
            McpSchema.Tool add = alice.listTools().tools().stream().filter(t -> t.name().equals("fx__add")).findFirst().orElseThrow();
            assertThat(add.description()).isEqualTo("[fx] Adds two numbers.");
            assertThat(add.inputSchema().get("required")).isEqualTo(List.of("a", "b"));
        }
    }

    @Test
    void aCallReachesTheUpstreamWithTheServersTokenAndIsAuditedAsARunOfItsOwn() throws Exception {
        try (LogCapture audit = LogCapture.named("audit"); McpSyncClient alice = client(ALICE)) {
            CallToolResult sum = alice.callTool(new CallToolRequest("fx__add", Map.of("a", 2, "b", 40)));
            assertThat(sum.isError()).isNotEqualTo(Boolean.TRUE);
            assertThat(sum.structuredContent()).isEqualTo(Map.of("sum", 42));
            CallToolResult who = alice.callTool(new CallToolRequest("only-a__whoami", Map.of()));
            assertThat(text(who)).isEqualTo("token ok");
            assertThat(upstream.tokens).contains(UPSTREAM_TOKEN).allMatch(UPSTREAM_TOKEN::equals);
            Poll.until("the audit line of the call", () -> audit.contains("tenant=alice server=fx tool=add ok=true"));
            assertThat(audit.contains("tool_call run=direct-")).isTrue();
        }
    }

    @Test
    void aToolOfAnotherTenantIsRefusedAsInCodeModeAndNeverReachesTheUpstream() throws Exception {
        try (LogCapture audit = LogCapture.named("audit"); McpSyncClient bob = client(BOB)) {
            int before = upstream.calls.size();
            CallToolResult r = bob.callTool(new CallToolRequest("only-a__whoami", Map.of()));
            assertThat(r.isError()).isTrue();
            assertThat(text(r)).startsWith("Error [not_allowed]: no server 'only-a' for this caller (it may call: fx)");
            Poll.until("the refusal's audit line", () -> audit.contains("tenant=bob server=only-a tool=whoami ok=false reason=not_allowed"));
            assertThat(upstream.calls).hasSize(before);
        }
    }

    @Test
    void argumentsReachTheUpstreamUncheckedAndItsErrorResultIsAToolErrorWithItsText() throws Exception {
        try (McpSyncClient bob = client(BOB)) {
            CallToolResult r = bob.callTool(new CallToolRequest("fx__add", Map.of("a", "two", "b", 1)));
            assertThat(r.isError()).isTrue();
            // the upstream's own SDK checked the arguments against its schema: this server let them through
            assertThat(text(r)).startsWith("Error [tool_error]: ").contains("/a: string found, number expected");
        }
    }

    @Test
    void aToolTheUpstreamAddsLaterIsListedAndAnnouncedToListeningClients() throws Exception {
        List<List<McpSchema.Tool>> announced = new CopyOnWriteArrayList<>();
        try (McpSyncClient bob = client(BOB, spec -> spec.toolsChangeConsumer(announced::add))) {
            assertThat(names(bob)).doesNotContain("fx__late");
            upstream.addLate();
            Poll.until("tools/list_changed with fx__late", () -> announced.stream()
                    .anyMatch(l -> l.stream().anyMatch(t -> t.name().equals("fx__late"))));
            assertThat(names(bob)).contains("fx__late").doesNotContain("only-a__late");
        }
    }

    @Test
    void withoutUpstreamsTheEndpointAnswersAndListsNoTools() throws Exception {
        Config config = Config.of("PORT", "0");
        try (HttpServer plain = HttpServer.start(TestServers.setup(config, new FakeExecutor(), List.of()), ApiKeys.load(config));
             McpSyncClient c = McpClient.sync(HttpClientStreamableHttpTransport.builder("http://127.0.0.1:" + plain.port())
                     .endpoint("/mcp-no-code-execute").build()).requestTimeout(Duration.ofSeconds(30)).build()) {
            McpSchema.InitializeResult init = c.initialize();
            assertThat(init.instructions()).contains("UPSTREAM_MCP_FILE");
            assertThat(c.listTools().tools()).isEmpty();
        }
    }

    private static McpSyncClient client(String key) {
        return client(key, spec -> spec);
    }

    private static McpSyncClient client(String key, java.util.function.UnaryOperator<McpClient.SyncSpec> more) {
        McpSyncClient c = more.apply(McpClient.sync(HttpClientStreamableHttpTransport.builder("http://127.0.0.1:" + server.port())
                .endpoint("/mcp-no-code-execute")
                .httpRequestCustomizer((b, method, uri, body, ctx) -> b.header("Authorization", "Bearer " + key))
                .build()).requestTimeout(Duration.ofSeconds(30))).build();
        c.initialize();
        return c;
    }

    private static List<String> names(McpSyncClient c) {
        return c.listTools().tools().stream().map(McpSchema.Tool::name).toList();
    }

    private static String text(CallToolResult r) {
        return ((McpSchema.TextContent) r.content().getFirst()).text();
    }

    /**
     * The upstream: an MCP server of the SDK on 127.0.0.1 (which checks arguments against the tools' schemas) with
     * {@code add} (structured {@code {sum}}) and {@code whoami} (whether the bearer token is the one the
     * server was given); {@code late} is added on demand. It keeps every token and call it got.
     */
    private static final class Upstream implements AutoCloseable {
        final List<String> tokens;
        final List<String> calls;
        private final Server jetty;
        private final ServerConnector connector;
        private final McpSyncServer mcp;

        private Upstream(List<String> tokens, List<String> calls, Server jetty, ServerConnector connector, McpSyncServer mcp) {
            this.tokens = tokens;
            this.calls = calls;
            this.jetty = jetty;
            this.connector = connector;
            this.mcp = mcp;
        }

        static Upstream start() throws Exception {
            HttpServletStreamableServerTransportProvider transport = HttpServletStreamableServerTransportProvider.builder()
                    .mcpEndpoint("/mcp")
                    .contextExtractor(r -> McpTransportContext.create(Map.of("token", String.valueOf(r.getHeader("Authorization")))))
                    .build();
            List<String> tokens = new CopyOnWriteArrayList<>();
            List<String> calls = new CopyOnWriteArrayList<>();
            McpSyncServer mcp = McpServer.sync(transport).serverInfo("upstream", "1")
                    .capabilities(McpSchema.ServerCapabilities.builder().tools(true).build())
                    .tools(tool("add", "Adds two numbers.", tokens, calls, args -> {
                                int sum = ((Number) args.get("a")).intValue() + ((Number) args.get("b")).intValue();
                                return CallToolResult.builder().addTextContent(String.valueOf(sum))
                                        .structuredContent(Map.of("sum", sum)).build();
                            }),
                            tool("whoami", "Says whether the caller's token is right.", tokens, calls,
                                    args -> CallToolResult.builder().addTextContent("token ok").build()))
                    .build();
            Server jetty = new Server();
            ServerConnector connector = new ServerConnector(jetty);
            connector.setHost("127.0.0.1");
            connector.setPort(0);
            jetty.addConnector(connector);
            ServletContextHandler context = new ServletContextHandler("/");
            ServletHolder servlet = new ServletHolder(transport);
            servlet.setAsyncSupported(true);
            context.addServlet(servlet, "/mcp");
            jetty.setHandler(context);
            jetty.start();
            return new Upstream(tokens, calls, jetty, connector, mcp);
        }

        String url() {
            return "http://127.0.0.1:" + connector.getLocalPort() + "/mcp";
        }

        void addLate() {
            mcp.addTool(tool("late", "Came later.", tokens, calls, args -> CallToolResult.builder().addTextContent("late").build()));
        }

        private static SyncToolSpecification tool(String name, String description, List<String> tokens, List<String> calls,
                java.util.function.Function<Map<String, Object>, CallToolResult> body) {
            McpSchema.Tool t = McpSchema.Tool.builder().name(name).description(description)
                    .inputSchema(name.equals("add")
                            ? Map.of("type", "object", "properties", Map.of("a", Map.of("type", "number"), "b", Map.of("type", "number")),
                            "required", List.of("a", "b"))
                            : Map.of("type", "object", "properties", Map.of()))
                    .build();
            return SyncToolSpecification.builder().tool(t).callHandler((exchange, request) -> {
                String token = String.valueOf(exchange.transportContext().get("token"));
                tokens.add(token);
                if (!UPSTREAM_TOKEN.equals(token))
                    return CallToolResult.builder().addTextContent("wrong token").isError(true).build();
                calls.add(name);
                return body.apply(request.arguments() == null ? Map.of() : request.arguments());
            }).build();
        }

        @Override
        public void close() throws Exception {
            mcp.closeGracefully();
            jetty.stop();
        }
    }
}
