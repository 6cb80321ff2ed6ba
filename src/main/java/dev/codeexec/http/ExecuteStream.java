package dev.codeexec.http;

import dev.codeexec.auth.Principal;
import dev.codeexec.egress.EgressPolicy;
import dev.codeexec.engine.ExecutionException;
import dev.codeexec.engine.ExecutionRequest;
import dev.codeexec.engine.ExecutionRequest.AuditInfo;
import dev.codeexec.engine.ExecutionResult;
import dev.codeexec.engine.Executor;
import dev.codeexec.engine.OutputListener;
import dev.codeexec.engine.RunHandle;
import dev.codeexec.surface.ResultMaps;
import dev.codeexec.surface.ServerSetup;
import dev.codeexec.workspace.Workspace;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import tools.jackson.core.JacksonException;

import java.io.IOException;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Base64;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CompletionException;

/**
 * One {@code POST /api/execute} response: the run's output as NDJSON lines while it runs, then its result.
 *
 * <p>The engine hands output to {@link #onOutput} without waiting; the request's own thread writes it, merging
 * what arrived since its last write into one line per stream, so a program printing many tiny lines costs a few
 * writes. A client that goes away must cancel its run, but a servlet container only learns that a connection is
 * gone when a write to it fails (Jetty 12 reports nothing to a request that is not reading or writing). So while
 * a run is silent a {@code {"type":"keepalive"}} line goes out every {@link #KEEPALIVE_MILLIS}: the first write
 * after the client closed draws a reset, the next fails, and the run is cancelled within about two intervals.
 */
final class ExecuteStream implements OutputListener {

    static final long KEEPALIVE_MILLIS = 1000;
    private static final Logger LOG = LoggerFactory.getLogger(ExecuteStream.class);
    private static final byte[] KEEPALIVE = "{\"type\":\"keepalive\"}\n".getBytes(StandardCharsets.UTF_8);

    private record Chunk(Stream stream, StringBuilder text) {
    }

    private final Object lock = new Object();
    private final List<Chunk> pending = new ArrayList<>();
    private boolean ended;

    @Override
    public void onOutput(Stream stream, String text) {
        if (text.isEmpty()) return;
        synchronized (lock) {
            Chunk last = pending.isEmpty() ? null : pending.getLast();
            if (last != null && last.stream() == stream) last.text().append(text);
            else pending.add(new Chunk(stream, new StringBuilder(text)));
            lock.notifyAll();
        }
    }

    /**
     * Writes output as it comes, then the result line, until the run has ended or the client has gone (then the
     * run is cancelled). Output the engine delivers after the result is dropped: the result carries all of it.
     */
    void pump(RunHandle handle, HttpServletResponse resp, Optional<String> workspace, long maxImageBytes) {
        handle.result().whenComplete((r, e) -> {
            synchronized (lock) {
                ended = true;
                lock.notifyAll();
            }
        });
        try {
            OutputStream out = resp.getOutputStream();
            resp.flushBuffer();
            long lastWrite = System.nanoTime();
            boolean done = false;
            while (!done) {
                List<Chunk> batch;
                synchronized (lock) {
                    long waitMs;
                    while (pending.isEmpty() && !ended
                            && (waitMs = KEEPALIVE_MILLIS - (System.nanoTime() - lastWrite) / 1_000_000) > 0) {
                        lock.wait(waitMs);
                    }
                    batch = new ArrayList<>(pending);
                    pending.clear();
                    done = ended;
                }
                if (!batch.isEmpty()) {
                    for (Chunk c : batch) out.write(line(output(c)));
                } else if (!done) {
                    out.write(KEEPALIVE);
                }
                out.flush();
                lastWrite = System.nanoTime();
            }
            for (Map<String, Object> m : last(handle, workspace, maxImageBytes)) out.write(line(m));
            out.flush();
        } catch (IOException e) {
            LOG.debug("playground client went away; cancelling run {}: {}", handle.id(), e.toString());
            handle.cancel();
        } catch (InterruptedException e) {
            handle.cancel();
            Thread.currentThread().interrupt();
        } catch (RuntimeException e) {
            // nobody will read this run's output any more: it must not go on
            handle.cancel();
            throw e;
        }
    }

    private static Map<String, Object> output(Chunk c) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("type", "output");
        m.put("stream", c.stream() == Stream.STDOUT ? "stdout" : "stderr");
        m.put("text", c.text().toString());
        return m;
    }

    /**
     * The session figures a call produced, one {@code {"type":"figure","mimeType","data"(base64)}} line each (those
     * the result marks {@code shown}: the same choice as execute_code's image content), then the result line; or
     * the error line of a run that was not attempted.
     */
    private static List<Map<String, Object>> last(RunHandle handle, Optional<String> workspace, long maxImageBytes) {
        try {
            ExecutionResult r = handle.result().join();
            Map<String, Object> structured = ResultMaps.structured(r, workspace, maxImageBytes);
            List<Map<String, Object>> lines = new ArrayList<>();
            if (r.session().isPresent()) {
                // the images the result marks shown: the outputs' (with the output's index), then the figures'
                List<ExecutionResult.RichOutput> outputs = r.session().get().outputs();
                List<ExecutionResult.Figure> figures = r.session().get().figures();
                List<?> described = structured.get("figures") instanceof List<?> l ? l : List.of();
                List<?> outs = structured.get("outputs") instanceof List<?> l ? l : List.of();
                for (int i = 0; i < outputs.size() && i < outs.size(); i++) {
                    if (outs.get(i) instanceof Map<?, ?> o && o.get("image") instanceof Map<?, ?> d
                            && Boolean.TRUE.equals(d.get("shown"))) {
                        int index = i;
                        outputs.get(i).image().ifPresent(f -> lines.add(figureLine(f, index)));
                    }
                }
                for (int i = 0; i < figures.size() && i < described.size(); i++) {
                    if (described.get(i) instanceof Map<?, ?> d && Boolean.TRUE.equals(d.get("shown")))
                        lines.add(figureLine(figures.get(i), -1));
                }
            }
            Map<String, Object> m = new LinkedHashMap<>();
            m.put("type", "result");
            m.put("result", structured);
            lines.add(m);
            return lines;
        } catch (CompletionException | java.util.concurrent.CancellationException e) {
            Throwable cause = e.getCause() == null ? e : e.getCause();
            if (cause instanceof ExecutionException ee) return List.of(error(ee));
            LOG.warn("playground run {} failed: {}", handle.id(), cause.toString());
            return List.of(error("unavailable", "the run failed inside the server"));
        }
    }

    /** One image line; {@code output} is the index of the rich output it belongs to, or -1 for a figure. */
    private static Map<String, Object> figureLine(ExecutionResult.Figure figure, int output) {
        Map<String, Object> f = new LinkedHashMap<>();
        f.put("type", "figure");
        f.put("mimeType", figure.mimeType());
        f.put("data", Base64.getEncoder().encodeToString(figure.data()));
        if (output >= 0) f.put("output", output);
        return f;
    }

    /** A run that was not attempted, named by its kind ({@link ExecutionException#code}). */
    static Map<String, Object> error(ExecutionException e) {
        return error(e.code(), e.getMessage());
    }

    private static Map<String, Object> error(String code, String message) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("type", "error");
        m.put("error", code);
        m.put("message", message);
        return m;
    }

    private static byte[] line(Map<String, Object> m) {
        byte[] json = JsonErrors.JSON.writeValueAsBytes(m);
        byte[] out = new byte[json.length + 1];
        System.arraycopy(json, 0, out, 0, json.length);
        out[json.length] = '\n';
        return out;
    }

    /**
     * The route: the body is execute_code's arguments ({@link ServerSetup#request}), resolved in the acting tenant;
     * then the run streams. Everything that can be refused is refused with a JSON error
     * before the first line goes out.
     */
    static final class Endpoint {

        private final ServerSetup setup;
        private final Executor executor;
        private final long maxBodyBytes;
        private final long maxImageBytes;
        private final Bodies bodies;

        Endpoint(ServerSetup setup, long maxBodyBytes, Bodies bodies) {
            this.setup = setup;
            this.executor = setup.executor();
            this.maxBodyBytes = maxBodyBytes;
            this.bodies = bodies;
            this.maxImageBytes = (long) setup.config().get(dev.codeexec.config.Config.MAX_IMAGE_KB) << 10;
        }

        /** The body's bytes count against the server-wide budget until the stream ends, like an MCP call's. */
        void handle(String tenant, HttpServletRequest req, HttpServletResponse resp) throws IOException {
            try (Bodies.Body body = bodies.read(req, maxBodyBytes, "MAX_BODY_MB")) {
                handle(tenant, parse(body.bytes()), req, resp);
            } catch (Bodies.Refused e) {
                throw e.api(resp);
            }
        }

        private void handle(String tenant, Map<String, Object> args, HttpServletRequest req, HttpServletResponse resp)
                throws IOException {
            ExecutionRequest request;
            try {
                // No JSON-RPC id here: the run is known by its HTTP request's X-Request-Id (audit line, log MDC, history).
                Optional<EgressPolicy> own = req.getAttribute(Principal.ATTRIBUTE) instanceof Principal p ? p.egress() : Optional.empty();
                request = setup.request(args, tenant, own, new AuditInfo(Optional.of(tenant), Optional.empty(),
                        Optional.empty(), RequestTracker.requestId(req)));
            } catch (ExecutionException.InvalidRequest e) {
                throw new ApiException(400, e.code(), e.getMessage());
            }
            if (request.background()) {
                // a job answers at once: its id, then GET /api/jobs/{job}/events follows it
                JobsApi.started(setup, request, resp);
                return;
            }
            Optional<String> wsName = request.workspace().map(Workspace::name);
            ExecuteStream stream = new ExecuteStream();
            RunHandle handle;
            try {
                handle = executor.submit(request, stream);
            } catch (ExecutionException.InvalidRequest e) {
                throw new ApiException(400, e.code(), e.getMessage());
            } catch (ExecutionException e) {
                start(resp);
                resp.getOutputStream().write(line(error(e)));
                return;
            }
            start(resp);
            stream.pump(handle, resp, wsName, maxImageBytes);
        }

        private static void start(HttpServletResponse resp) {
            resp.setStatus(200);
            resp.setContentType("application/x-ndjson");
            resp.setCharacterEncoding(StandardCharsets.UTF_8.name());
            resp.setHeader("Cache-Control", "no-store");
            resp.setHeader("X-Content-Type-Options", "nosniff");
            // Proxies that buffer (nginx) would hold the stream back until the run ends.
            resp.setHeader("X-Accel-Buffering", "no");
        }

        static Map<String, Object> parse(byte[] bytes) {
            Object parsed;
            try {
                parsed = JsonErrors.JSON.readValue(bytes, Object.class);
            } catch (JacksonException e) {
                throw ApiException.badRequest("the body is not valid JSON");
            }
            if (!(parsed instanceof Map<?, ?> map)) throw ApiException.badRequest("the body must be a JSON object");
            Map<String, Object> args = new LinkedHashMap<>();
            map.forEach((k, v) -> args.put(String.valueOf(k), v));
            return args;
        }
    }
}
