package dev.codeexec.http;

import dev.codeexec.ops.Metrics;
import jakarta.servlet.http.HttpServlet;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;

import java.io.IOException;
import java.nio.charset.StandardCharsets;

/** GET /metrics: every meter in the Prometheus text format. {@link EdgeFilter} has checked the admin key or METRICS_TOKEN. */
final class MetricsServlet extends HttpServlet {

    private final Metrics metrics;

    MetricsServlet(Metrics metrics) {
        this.metrics = metrics;
    }

    @Override
    protected void doGet(HttpServletRequest req, HttpServletResponse resp) throws IOException {
        byte[] body = metrics.scrape().getBytes(StandardCharsets.UTF_8);
        resp.setStatus(200);
        resp.setContentType(Metrics.CONTENT_TYPE);
        resp.setHeader("Cache-Control", "no-store");
        resp.setContentLength(body.length);
        resp.getOutputStream().write(body);
    }
}
