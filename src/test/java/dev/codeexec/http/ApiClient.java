package dev.codeexec.http;

import dev.codeexec.mcp.FakeExecutor;
import dev.codeexec.mcp.TestServers;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;

/** A real server on a free port with temporary WORKSPACE_ROOT and DATA_DIR, and plain HTTP calls against /api. */
final class ApiClient implements AutoCloseable {

    final Path root;
    final Path dataDir;
    final HttpServer server;
    final FakeExecutor fake = new FakeExecutor();
    final HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();
    final String base;
    String key;

    ApiClient(String... config) throws Exception {
        root = Files.createTempDirectory("api-ws");
        dataDir = Files.createTempDirectory("api-data");
        List<String> pairs = new ArrayList<>(List.of("WORKSPACE_ROOT", root.toString(), "DATA_DIR", dataDir.toString()));
        pairs.addAll(List.of(config));
        server = TestServers.start(fake, pairs.toArray(String[]::new));
        base = "http://127.0.0.1:" + server.port();
    }

    ApiClient as(String key) {
        this.key = key;
        return this;
    }

    /** The workspace directory on disk, for planting links as user code would. */
    Path dir(String tenant, String ws) {
        return root.resolve(tenant).resolve(ws);
    }

    HttpRequest.Builder req(String path) {
        HttpRequest.Builder b = HttpRequest.newBuilder(URI.create(base + path)).timeout(Duration.ofSeconds(120));
        if (key != null) b.header("Authorization", "Bearer " + key);
        return b;
    }

    HttpResponse<String> send(HttpRequest.Builder b) throws IOException, InterruptedException {
        return http.send(b.build(), HttpResponse.BodyHandlers.ofString());
    }

    HttpResponse<byte[]> bytes(HttpRequest.Builder b) throws IOException, InterruptedException {
        return http.send(b.build(), HttpResponse.BodyHandlers.ofByteArray());
    }

    HttpResponse<String> get(String path) throws IOException, InterruptedException {
        return send(req(path).GET());
    }

    HttpResponse<String> delete(String path) throws IOException, InterruptedException {
        return send(req(path).DELETE());
    }

    HttpResponse<String> upload(String ws, String path, byte[] data) throws IOException, InterruptedException {
        return send(req("/api/workspaces/" + ws + "/files/" + path).POST(HttpRequest.BodyPublishers.ofByteArray(data)));
    }

    HttpResponse<String> upload(String ws, String path, String text) throws IOException, InterruptedException {
        return upload(ws, path, text.getBytes(StandardCharsets.UTF_8));
    }

    HttpResponse<String> rename(String ws, String json) throws IOException, InterruptedException {
        return send(req("/api/workspaces/" + ws + "/rename").header("Content-Type", "application/json")
                .POST(HttpRequest.BodyPublishers.ofString(json)));
    }

    HttpResponse<String> multipart(String ws, String dir, Map<String, byte[]> files)
            throws IOException, InterruptedException {
        String boundary = "----cem-test-boundary-7MA4YWxk";
        ByteArrayOutputStream body = new ByteArrayOutputStream();
        for (var f : files.entrySet()) {
            body.writeBytes(("--" + boundary + "\r\nContent-Disposition: form-data; name=\"file\"; filename=\""
                    + f.getKey() + "\"\r\nContent-Type: application/octet-stream\r\n\r\n").getBytes(StandardCharsets.UTF_8));
            body.writeBytes(f.getValue());
            body.writeBytes("\r\n".getBytes(StandardCharsets.UTF_8));
        }
        body.writeBytes(("--" + boundary + "--\r\n").getBytes(StandardCharsets.UTF_8));
        // The body follows the server's 100 Continue: a request refused for its path alone gets the refusal, where
        // the body would race the server closing the connection after it (a broken pipe instead of the 400).
        return send(req("/api/workspaces/" + ws + "/files/" + dir).expectContinue(true)
                .header("Content-Type", "multipart/form-data; boundary=" + boundary)
                .POST(HttpRequest.BodyPublishers.ofByteArray(body.toByteArray())));
    }

    @Override
    public void close() throws IOException {
        server.close();
        for (Path p : List.of(root, dataDir)) {
            try (Stream<Path> s = Files.walk(p)) {
                s.sorted(Comparator.reverseOrder()).forEach(x -> x.toFile().delete());
            }
        }
    }
}
