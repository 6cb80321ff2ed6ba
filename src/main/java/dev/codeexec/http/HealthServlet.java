package dev.codeexec.http;

import dev.codeexec.engine.Executor;
import dev.codeexec.mcp.SandboxStatus;
import jakarta.servlet.http.HttpServlet;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * GET /healthz, open without a key so load balancers and operators can probe it. "degraded" means the server is
 * up but cannot run code (the sandbox does not work here); the reason is in runtime_info and the start-up log,
 * not here, because this endpoint is unauthenticated.
 */
final class HealthServlet extends HttpServlet {

    private final Executor executor;
    private final SandboxStatus sandbox;
    private final String version;
    private final long startNanos = System.nanoTime();

    HealthServlet(Executor executor, SandboxStatus sandbox, String version) {
        this.executor = executor;
        this.sandbox = sandbox;
        this.version = version;
    }

    @Override
    protected void doGet(HttpServletRequest req, HttpServletResponse resp) throws IOException {
        Map<String, Object> body = new LinkedHashMap<>();
        body.put("status", sandbox.available() ? "ok" : "degraded");
        body.put("version", version);
        body.put("uptime", (System.nanoTime() - startNanos) / 1_000_000_000L);
        body.put("running", executor.running());
        body.put("maxConc", executor.maxConcurrent());
        body.put("queued", executor.queued());
        body.put("sandbox", sandbox.name());
        body.put("warmPool", executor.warmPoolLevels());
        byte[] bytes = JsonErrors.JSON.writeValueAsBytes(body);
        resp.setStatus(200);
        resp.setContentType("application/json");
        resp.setCharacterEncoding(StandardCharsets.UTF_8.name());
        resp.setHeader("Cache-Control", "no-store");
        resp.setContentLength(bytes.length);
        resp.getOutputStream().write(bytes);
    }
}
