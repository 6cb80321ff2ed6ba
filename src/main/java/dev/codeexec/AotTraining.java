package dev.codeexec;

import dev.codeexec.engine.Outcome;
import dev.codeexec.auth.ApiKeys;
import dev.codeexec.config.Config;
import dev.codeexec.config.DataDir;
import dev.codeexec.config.Ids;
import dev.codeexec.http.HttpServer;
import dev.codeexec.mcp.StdioServer;
import dev.codeexec.surface.ServerSetup;
import tools.jackson.databind.json.JsonMapper;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.io.PipedInputStream;
import java.io.PipedOutputStream;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * {@code java -XX:AOTCacheOutput=code-exec-mcp.aot -jar code-exec-mcp.jar train-aot}: the training run of the
 * JDK's ahead-of-time cache (JEP 483/514/515: classes loaded and linked, lambdas resolved, method profiles). It
 * starts the real server (HTTP on a free loopback port, with an API key, and stdio over pipes) on a temporary
 * DATA_DIR, drives the calls a user's first minutes bring through the real surfaces (initialize, tools/list,
 * execute_code in every language that is installed, a python and a node session, the file tools, the REST file
 * API, /healthz, /metrics), stops it and exits; the JVM writes the cache at exit. A server started with
 * {@code -XX:AOTCache=code-exec-mcp.aot} then starts and answers its first calls without most of that class
 * loading and interpretation (docs/benchmarks.md has the figures).
 *
 * <p>Only our own fixed programs run. Where the sandbox cannot run (an image build without namespaces), every
 * run is refused with the sandbox's reason: the training still covers the HTTP, MCP and JSON paths, and says so.
 * The cache is valid only for the same JDK and the same jar (the JVM checks both and ignores a stale cache);
 * {@code scripts/run.sh} trains again whenever the jar is newer than the cache.
 */
final class AotTraining {

    private static final String ACCEPT = "application/json, text/event-stream";
    private static final JsonMapper JSON = JsonMapper.shared();

    private final HttpClient http = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1)
            .connectTimeout(Duration.ofSeconds(5)).build();
    private final AtomicInteger ids = new AtomicInteger();
    /** The workload's calls stop after this much time: a slow or broken machine must not hold up a build. */
    private final long deadline = System.nanoTime() + Duration.ofMinutes(3).toNanos();
    private final String base;
    private final String key;
    private String session;
    private int ok;
    private int refused;

    private AotTraining(int port, String key) {
        this.base = "http://127.0.0.1:" + port;
        this.key = key;
    }

    /** What a training run did: runs answered, runs refused, and why runs were refused when the sandbox cannot run. */
    record Outcome(int answered, int refused, Optional<String> sandboxProblem) {
    }

    static int run(Map<String, String> hostEnv) {
        long t0 = System.nanoTime();
        try {
            Outcome o = train(hostEnv);
            System.err.printf("aot training: %d runs answered, %d refused%s, in %d ms%n", o.answered(), o.refused(),
                    o.sandboxProblem().map(p -> " (the sandbox cannot run here: " + p + ")").orElse(""),
                    (System.nanoTime() - t0) / 1_000_000);
            return 0;
        } catch (Exception e) {
            System.err.println("aot training failed: " + e);
            return 1;
        }
    }

    /** Starts the server on a temporary DATA_DIR, drives the workload, stops it. */
    static Outcome train(Map<String, String> hostEnv) throws Exception {
        Path data = Files.createTempDirectory("code-exec-aot-training-");
        try {
            String key = Ids.hex(16);
            Map<String, String> env = new HashMap<>(hostEnv);
            // Only what the training needs from the host: its runtimes and sandbox settings; state and
            // credentials of its own.
            env.keySet().removeIf(k -> k.equals("API_KEYS_FILE") || k.equals("WORKERS") || k.equals("METRICS_TOKEN")
                    || k.equals("UPSTREAM_MCP_FILE") || k.equals("PACKAGES"));
            env.putAll(Map.of("DATA_DIR", data.toString(), "WORKSPACE_ROOT", data.resolve("workspaces").toString(),
                    "HOST", "127.0.0.1", "PORT", "0", "TRANSPORT", "http", "API_KEY", key, "LOG_LEVEL",
                    hostEnv.getOrDefault("LOG_LEVEL", "warn")));
            Config config = Config.load(env);
            dev.codeexec.boot.Logging.configure(config);
            ServerSetup setup = Main.wire(config);
            // Closing either surface closes the executor too (the stdio one last, so both serve their calls).
            try (HttpServer server = HttpServer.start(setup, ApiKeys.load(config))) {
                AotTraining t = new AotTraining(server.port(), key);
                t.workload();
                t.stdio(setup);
                return new Outcome(t.ok, t.refused, setup.sandbox().unavailableReason());
            }
        } finally {
            DataDir.deleteTree(data);
        }
    }

    private void workload() throws Exception {
        healthz();
        initialize();
        rpc("tools/list", "{}");
        rpc("resources/list", "{}");
        tool("runtime_info", "{}");
        List<String[]> hellos = List.of(
                new String[] {"python", "print(6*7)"},
                new String[] {"nodejs", "console.log(6*7)"},
                new String[] {"shell", "echo 42"},
                new String[] {"bash", "echo $((6*7))"},
                new String[] {"typescript", "const n: number = 6 * 7; console.log(n)"},
                // compiled languages share one path in the server; go and java would wait for their warm-ups
                new String[] {"c", "#include <stdio.h>\nint main(void) { printf(\"%d\\n\", 6 * 7); return 0; }\n"});
        for (String[] h : hellos) execute(h[0], h[1], "");
        // The request path many times over, so that its methods are profiled (and compiled) in the training.
        for (int i = 0; i < 80; i++) execute("python", "print(" + i + ")", "");
        for (int i = 0; i < 30; i++) execute("nodejs", "console.log(" + i + ")", "");
        for (int i = 0; i < 30; i++) execute("shell", "echo " + i, "");
        execute("python", "import sys; print('x' * 100000); sys.stderr.write('e'); sys.exit(3)", "");
        execute("python", "import time; time.sleep(5)", ", \"timeout_ms\": 200");
        execute("python", "print(open('in.txt').read())", ", \"workspace\": \"train\"");
        for (int i = 0; i < 60; i++) execute("python", i == 0 ? "x = 0" : "x += 1; print(x)", ", \"session\": \"nb\"");
        for (int i = 0; i < 15; i++) execute("nodejs", i == 0 ? "let y = 0" : "y += 1; console.log(y)",
                ", \"session\": \"js\"");
        tool("session_list", "{}");
        tool("session_close", "{\"session\": \"nb\"}");
        tool("write_file", "{\"workspace\": \"train\", \"path\": \"a/b.txt\", \"content\": \"hello\"}");
        tool("read_file", "{\"workspace\": \"train\", \"path\": \"a/b.txt\"}");
        tool("list_files", "{\"workspace\": \"train\", \"recursive\": true}");
        tool("workspace_info", "{}");
        tool("delete_file", "{\"workspace\": \"train\", \"path\": \"a\", \"recursive\": true}");
        rest("POST", "/api/workspaces/train/files/data/in.csv", "a,b\n1,2\n");
        rest("GET", "/api/workspaces/train/files/data/in.csv", null);
        rest("GET", "/api/workspaces/train/tree?path=data", null);
        rest("GET", "/api/workspaces", null);
        rest("GET", "/metrics", null);
        healthz();
        send(HttpRequest.newBuilder(URI.create(base + "/mcp")).DELETE());
    }

    private void execute(String language, String code, String extra) throws Exception {
        String r = tool("execute_code", "{\"language\": " + quote(language) + ", \"code\": " + quote(code) + extra + "}");
        if (r.isEmpty()) return;
        if (r.contains("\"isError\":true")) refused++;
        else ok++;
    }

    private void initialize() throws Exception {
        HttpResponse<String> r = send(post("/mcp", "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":"
                + "{\"protocolVersion\":\"2025-06-18\",\"capabilities\":{},\"clientInfo\":{\"name\":\"aot-training\","
                + "\"version\":\"1\"}}}"));
        session = r.headers().firstValue("mcp-session-id").orElseThrow(
                () -> new IllegalStateException("initialize answered " + r.statusCode() + " without a session"));
        send(post("/mcp", "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}"));
    }

    private String tool(String name, String arguments) throws Exception {
        if (System.nanoTime() > deadline) return "";
        return rpc("tools/call", "{\"name\": " + quote(name) + ", \"arguments\": " + arguments + "}");
    }

    private String rpc(String method, String params) throws Exception {
        return send(post("/mcp", "{\"jsonrpc\":\"2.0\",\"id\":" + ids.incrementAndGet() + ",\"method\":"
                + quote(method) + ",\"params\":" + params + "}")).body();
    }

    private void healthz() throws Exception {
        send(HttpRequest.newBuilder(URI.create(base + "/healthz")).GET());
    }

    private void rest(String method, String path, String body) throws Exception {
        send(HttpRequest.newBuilder(URI.create(base + path)).method(method,
                body == null ? HttpRequest.BodyPublishers.noBody() : HttpRequest.BodyPublishers.ofString(body)));
    }

    private HttpRequest.Builder post(String path, String json) {
        return HttpRequest.newBuilder(URI.create(base + path)).header("Content-Type", "application/json")
                .header("Accept", ACCEPT).POST(HttpRequest.BodyPublishers.ofString(json));
    }

    private HttpResponse<String> send(HttpRequest.Builder b) throws Exception {
        b.header("Authorization", "Bearer " + key).timeout(Duration.ofSeconds(120));
        if (session != null) b.header("Mcp-Session-Id", session);
        return http.send(b.build(), HttpResponse.BodyHandlers.ofString());
    }

    /** The stdio surface: initialize, tools/list and one run over pipes, as a desktop client would. */
    private void stdio(ServerSetup setup) throws Exception {
        PipedOutputStream toServer = new PipedOutputStream();
        PipedInputStream serverIn = new PipedInputStream(toServer, 1 << 16);
        PipedInputStream fromServer = new PipedInputStream(1 << 16);
        PipedOutputStream serverOut = new PipedOutputStream(fromServer);
        StdioServer server = StdioServer.start(setup, serverIn, serverOut);
        try (BufferedReader in = new BufferedReader(new InputStreamReader(fromServer, StandardCharsets.UTF_8))) {
            line(toServer, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{\"protocolVersion\":"
                    + "\"2025-06-18\",\"capabilities\":{},\"clientInfo\":{\"name\":\"aot-training\",\"version\":\"1\"}}}");
            in.readLine();
            line(toServer, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}");
            line(toServer, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/list\",\"params\":{}}");
            in.readLine();
            for (int i = 0; i < 10; i++) {
                line(toServer, "{\"jsonrpc\":\"2.0\",\"id\":" + (3 + i) + ",\"method\":\"tools/call\",\"params\":"
                        + "{\"name\":\"execute_code\",\"arguments\":{\"language\":\"python\",\"code\":\"print(1)\"}}}");
                String l;
                while ((l = in.readLine()) != null && !l.contains("\"id\":" + (3 + i) + ",")) {
                    // progress notifications come before the result
                }
            }
            toServer.close();
            server.awaitEnd();
        } finally {
            server.close();
        }
    }

    private static void line(OutputStream out, String json) throws Exception {
        out.write((json + "\n").getBytes(StandardCharsets.UTF_8));
        out.flush();
    }

    private static String quote(String s) {
        return JSON.writeValueAsString(s);
    }
}
