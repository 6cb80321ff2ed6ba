package dev.codeexec.http;

import dev.codeexec.sandbox.Sandbox;
import dev.codeexec.engine.Executor;
import dev.codeexec.engine.WorkerStatus;
import dev.codeexec.surface.ResultMaps;
import jakarta.servlet.http.HttpServlet;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * GET /healthz, open without a key so load balancers and operators can probe it.
 *
 * <p>A local server: "ok", or "degraded" when it is up but cannot run code (the sandbox does not work here), both
 * with 200. A gateway: "ok" while every worker is healthy, "degraded" (200) while some are not but at least one is,
 * and "unavailable" with 503 when none is (or none is known), so a readiness probe takes a gateway that can run
 * nothing out of rotation.
 *
 * <p>Reasons (why the sandbox or a worker is not usable) are in runtime_info, the admin stats and the log, not here,
 * because this endpoint is unauthenticated: a worker's entry here is {@link ResultMaps#worker} without its error.
 */
final class HealthServlet extends HttpServlet {

    static final String OK = "ok";
    static final String DEGRADED = "degraded";
    static final String UNAVAILABLE = "unavailable";

    private final Executor executor;
    private final Sandbox.Status sandbox;
    private final String version;
    private final long startNanos = System.nanoTime();

    HealthServlet(Executor executor, Sandbox.Status sandbox, String version) {
        this.executor = executor;
        this.sandbox = sandbox;
        this.version = version;
    }

    @Override
    protected void doGet(HttpServletRequest req, HttpServletResponse resp) throws IOException {
        List<WorkerStatus> workers = executor.status().workers();
        String mode = ResultMaps.mode(executor, workers);
        int healthy = (int) workers.stream().filter(WorkerStatus::healthy).count();
        String status;
        if (mode.equals(ResultMaps.LOCAL)) status = sandbox.available() ? OK : DEGRADED;
        else status = healthy == 0 ? UNAVAILABLE : healthy < workers.size() ? DEGRADED : OK;

        Map<String, Object> body = new LinkedHashMap<>();
        body.put("status", status);
        body.put("mode", mode);
        body.put("version", version);
        body.put("uptime", (System.nanoTime() - startNanos) / 1_000_000_000L);
        body.put("running", executor.status().running());
        body.put("maxConc", executor.status().maxConcurrent());
        body.put("queued", executor.status().queued());
        body.put("sandbox", sandbox.name());
        body.put("warmPool", executor.status().warmPoolLevels());
        if (mode.equals(ResultMaps.GATEWAY)) {
            List<Map<String, Object>> list = new ArrayList<>();
            for (WorkerStatus w : workers) {
                Map<String, Object> m = ResultMaps.worker(w);
                m.remove("error");
                list.add(m);
            }
            Map<String, Object> ws = new LinkedHashMap<>();
            ws.put("total", workers.size());
            ws.put("healthy", healthy);
            ws.put("list", list);
            body.put("workers", ws);
        }
        byte[] bytes = JsonErrors.JSON.writeValueAsBytes(body);
        resp.setStatus(status.equals(UNAVAILABLE) ? 503 : 200);
        resp.setContentType("application/json");
        resp.setCharacterEncoding(StandardCharsets.UTF_8.name());
        resp.setHeader("Cache-Control", "no-store");
        resp.setContentLength(bytes.length);
        resp.getOutputStream().write(bytes);
    }
}
