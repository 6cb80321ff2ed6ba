package dev.codeexec.http;

import dev.codeexec.auth.ApiKeys;
import dev.codeexec.config.Config;
import dev.codeexec.local.LocalExecutor;
import dev.codeexec.mcp.RawClient;
import dev.codeexec.mcp.TestServers;
import dev.codeexec.sandbox.Sandbox;
import dev.codeexec.sandbox.Sandboxes;
import dev.codeexec.testing.Requires;

import java.io.IOException;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.List;


/**
 * The whole server as production wires it (real sandbox, {@link LocalExecutor}, validator, HTTP stack) on a free
 * port, with an admin key, a tenant key (API_KEYS_FILE) and a METRICS_TOKEN; MCP calls over plain HTTP.
 * Skips the test where the configured sandbox cannot run code.
 */
final class RealServer implements AutoCloseable {

    static final String ADMIN_KEY = "admin-key-for-observability-tests";
    static final String TENANT_KEY = "alice-key-for-observability-tests";
    static final String METRICS_TOKEN = "scraper-token-for-observability-tests";

    final LocalExecutor executor;
    final HttpServer server;
    final RawClient raw;
    /** The API_KEYS_FILE, which a test may rewrite (the server re-reads it within a second). */
    final Path keys;

    RealServer(String... config) throws Exception {
        Path data = Files.createTempDirectory("observability-data");
        Files.setPosixFilePermissions(data, PosixFilePermissions.fromString("rwx--x--x"));
        keys = Files.createTempFile(data, "keys", ".txt");
        Files.writeString(keys, "ops " + ApiKeys.hashHex(ADMIN_KEY) + " admin\nalice " + ApiKeys.hashHex(TENANT_KEY) + "\n");
        List<String> pairs = new ArrayList<>(List.of("PORT", "0", "DATA_DIR", data.toString(),
                "API_KEYS_FILE", keys.toString(), "METRICS_TOKEN", METRICS_TOKEN));
        pairs.addAll(List.of(config));
        Config c = Config.of(pairs.toArray(String[]::new));
        Sandbox sandbox = Sandboxes.create(c);
        Requires.that(sandbox.unavailableReason().isEmpty(), "a sandbox that can run code here ("
                + sandbox.unavailableReason().orElse("") + ")");
        executor = LocalExecutor.create(c, sandbox);
        server = HttpServer.start(TestServers.real(c, sandbox, executor));
        raw = new RawClient(server.port());
    }

    HttpRequest.Builder mcpPost(String session, String json, String key) {
        return raw.mcpPost(session, json).header("Authorization", "Bearer " + key);
    }

    /** An initialized MCP session of the key's tenant. */
    String session(String key) throws IOException, InterruptedException {
        HttpResponse<String> r = raw.send(mcpPost(null, RawClient.INIT, key));
        if (r.statusCode() != 200) throw new IllegalStateException("initialize: " + r.statusCode() + " " + r.body());
        String session = r.headers().firstValue("Mcp-Session-Id").orElseThrow();
        raw.send(mcpPost(session, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}", key));
        return session;
    }

    /** An execute_code call of the given python code (no quotes or backslashes in it) as one POST. */
    HttpRequest.Builder python(String session, int id, String code, String key) {
        return mcpPost(session, "{\"jsonrpc\":\"2.0\",\"id\":" + id + ",\"method\":\"tools/call\",\"params\":"
                + "{\"name\":\"execute_code\",\"arguments\":{\"language\":\"python\",\"code\":\"" + code + "\"}}}", key);
    }

    HttpResponse<String> get(String path, String authorization) throws IOException, InterruptedException {
        HttpRequest.Builder b = raw.request(path).GET();
        if (authorization != null) b.header("Authorization", authorization);
        return raw.send(b);
    }

    @Override
    public void close() {
        server.close();
    }
}
