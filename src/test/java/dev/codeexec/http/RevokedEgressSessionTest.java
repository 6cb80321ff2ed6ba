package dev.codeexec.http;

import com.sun.net.httpserver.HttpServer;
import dev.codeexec.auth.ApiKeys;
import dev.codeexec.testing.Poll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import tools.jackson.databind.json.JsonMapper;

import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.util.Map;
import java.util.concurrent.Executors;
import java.util.concurrent.atomic.AtomicInteger;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * A tenant's egress revoked in API_KEYS_FILE reaches the session it already has open: the whole server (key file,
 * MCP edge, engine, bwrap sandbox, egress proxy), with the test's own HTTP server on 127.0.0.1 as the only upstream.
 */
@Tag("sandbox")
@Timeout(value = 120, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
class RevokedEgressSessionTest {

    private static final JsonMapper JSON = JsonMapper.builder().build();

    @Test
    void aKeyFileEditThatRevokesATenantsEgressLeavesItsOpenSessionWithoutNetworkAtTheNextCall() throws Exception {
        AtomicInteger served = new AtomicInteger();
        HttpServer fixture = HttpServer.create(new InetSocketAddress(InetAddress.ofLiteral("127.0.0.1"), 0), 50);
        fixture.setExecutor(Executors.newVirtualThreadPerTaskExecutor());
        fixture.createContext("/", ex -> {
            served.incrementAndGet();
            byte[] body = "pong".getBytes(StandardCharsets.UTF_8);
            ex.sendResponseHeaders(200, body.length);
            try (OutputStream o = ex.getResponseBody()) {
                o.write(body);
            }
        });
        fixture.start();
        int port = fixture.getAddress().getPort();
        try (RealServer server = new RealServer("WARM_POOL", "off", "EGRESS", "on", "EGRESS_ALLOW", "fixture.test:" + port,
                "EGRESS_ALLOW_CIDRS", "127.0.0.1/32", "EGRESS_RESOLVE", "fixture.test=127.0.0.1")) {
            String mcp = server.session(RealServer.TENANT_KEY);
            String fetch = """
                    import urllib.request, urllib.error
                    def fetch():
                        try:
                            with urllib.request.urlopen('http://fixture.test:%d/ping', timeout=20) as r:
                                return str(r.status)
                        except urllib.error.HTTPError as e:
                            return str(e.code) + ' ' + e.read().decode(errors='replace').strip()
                    print('STATUS', fetch())
                    """.formatted(port);
            String first = execute(server, mcp, 2, fetch);
            assertThat(first).contains("STATUS 200").contains("\"sessionCreated\":true");
            int before = served.get();

            String line = "alice " + ApiKeys.hashHex(RealServer.TENANT_KEY);
            String keys = Files.readString(server.keys);
            assertThat(keys).contains(line + "\n");
            Files.writeString(server.keys, keys.replace(line + "\n", line + " egress=off\n"));
            AtomicInteger id = new AtomicInteger(100);
            Poll.until("the server re-read the key file: alice's allow-list is empty",
                    () -> tool(server, mcp, id.incrementAndGet(), "runtime_info", Map.of()).contains("your allow-list is empty"));

            String revoked = execute(server, mcp, 3, "print('STATUS', fetch())");
            assertThat(revoked).as("the same session, its state kept").contains("\"sessionCreated\":false")
                    .contains("STATUS 403").contains("egress_off");
            assertThat(served.get()).as("nothing reached the fixture after the revocation").isEqualTo(before);
        } finally {
            fixture.stop(0);
        }
    }

    private static String execute(RealServer server, String mcp, int id, String code) throws Exception {
        return tool(server, mcp, id, "execute_code", Map.of("language", "python", "session", "nb", "code", code));
    }

    private static String tool(RealServer server, String mcp, int id, String name, Map<String, Object> arguments)
            throws Exception {
        String body = JSON.writeValueAsString(Map.of("jsonrpc", "2.0", "id", id, "method", "tools/call",
                "params", Map.of("name", name, "arguments", arguments)));
        HttpResponse<String> r = server.raw.send(server.mcpPost(mcp, body, RealServer.TENANT_KEY));
        assertThat(r.statusCode()).as(r.body()).isEqualTo(200);
        return r.body();
    }
}
