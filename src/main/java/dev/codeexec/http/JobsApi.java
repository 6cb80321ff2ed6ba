package dev.codeexec.http;

import dev.codeexec.auth.Principal;
import dev.codeexec.egress.EgressPolicy;
import dev.codeexec.engine.ExecutionException;
import dev.codeexec.engine.ExecutionRequest;
import dev.codeexec.engine.ExecutionRequest.AuditInfo;
import dev.codeexec.engine.OutputListener;
import dev.codeexec.engine.JobControl;
import dev.codeexec.engine.JobHandle;
import dev.codeexec.engine.JobState;
import dev.codeexec.engine.LogChunk;
import dev.codeexec.surface.JobMaps;
import dev.codeexec.surface.ServerSetup;
import jakarta.servlet.ServletOutputStream;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Background jobs over REST: {@code POST /api/jobs} (execute_code's arguments; the job starts or queues, 202),
 * {@code GET /api/jobs} (newest first), {@code GET /api/jobs/{job}} (its status), {@code DELETE /api/jobs/{job}}
 * (cancel), {@code GET /api/jobs/{job}/stdout} and {@code /stderr} (the kept log as text; {@code Range: bytes=N-}
 * reads from byte N of everything the job wrote, 206, so a client can tail it), and {@code GET
 * /api/jobs/{job}/events} (server-sent events for the console: {@code output} pieces with their offsets and
 * {@code status} changes, until the job has ended and its output is sent). A tenant key sees its own jobs only;
 * another tenant's id is 404 like one that never existed; an admin key sees every tenant's (or one's, with
 * {@code ?tenant=}).
 */
final class JobsApi {

    static final String PATH = JsonErrors.API_PATH + "/jobs";
    private static final Pattern ROUTE = Pattern.compile("^" + Pattern.quote(PATH)
            + "(?:/([A-Za-z0-9-]{1,80})(?:/(stdout|stderr|events))?)?/?$");
    private static final Pattern RANGE = Pattern.compile("^bytes=(\\d{1,18})-(\\d{1,18})?$");
    /** How often the event stream looks for new output and a change of status. */
    static final long EVENTS_POLL_MS = 250;
    /** How often a quiet event stream gets a comment line. */
    static final long PING_EVERY_MS = 15_000;

    private final ServerSetup setup;
    private final long maxBodyBytes;
    private final Bodies bodies;

    JobsApi(ServerSetup setup, long maxBodyBytes, Bodies bodies) {
        this.setup = setup;
        this.maxBodyBytes = maxBodyBytes;
        this.bodies = bodies;
    }

    static boolean handles(String uri) {
        return uri.equals(PATH) || uri.startsWith(PATH + "/");
    }

    void handle(String method, Principal who, HttpServletRequest req, HttpServletResponse resp) throws IOException {
        Matcher m = ROUTE.matcher(req.getRequestURI());
        if (!m.matches()) throw new ApiException(404, "not_found", "no such API route");
        Map<String, String> query = ApiRoute.query(req.getQueryString());
        JobControl<?> jobs = setup.jobs().orElseThrow(() -> new ApiException(503, "unavailable", "background jobs are not available here"));
        if (m.group(1) == null) {
            switch (method) {
                case "POST" -> start(AdminApi.actingTenant(who, query.get("tenant")), who, req, resp);
                case "GET" -> {
                    List<Map<String, Object>> out = new ArrayList<>();
                    for (JobState j : jobs.list(AdminApi.viewScope(who, query.get("tenant")))) {
                        Map<String, Object> s = JobMaps.status(j);
                        s.remove("result");
                        s.put("tenant", j.tenant());
                        out.add(s);
                    }
                    ApiServlet.json(resp, 200, Map.of("jobs", out));
                }
                default -> throw new ApiException(405, "method_not_allowed", method + " is not allowed on this route");
            }
            return;
        }
        JobHandle job = jobs.find(AdminApi.viewScope(who, query.get("tenant")), m.group(1)).map(JobHandle.class::cast)
                .orElseThrow(() -> new ApiException(404, "not_found", "no such job"));
        String part = m.group(2);
        if (part == null && method.equals("GET")) {
            Map<String, Object> s = JobMaps.status(job.state());
            s.put("tenant", job.tenant());
            ApiServlet.json(resp, 200, s);
        } else if (part == null && method.equals("DELETE")) {
            JobState st;
            try {
                st = job.cancel(10_000);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                st = job.state();
            }
            ApiServlet.json(resp, 200, JobMaps.status(st));
        } else if (part != null && method.equals("GET")) {
            if (part.equals("events")) events(job, query, resp);
            else log(job, part.equals("stdout") ? OutputListener.Stream.STDOUT : OutputListener.Stream.STDERR, req, resp);
        } else {
            throw new ApiException(405, "method_not_allowed", method + " is not allowed on this route");
        }
    }

    private void start(String tenant, Principal who, HttpServletRequest req, HttpServletResponse resp)
            throws IOException {
        Map<String, Object> args;
        try (Bodies.Body body = bodies.read(req, maxBodyBytes, "MAX_BODY_MB")) {
            args = ExecuteStream.Endpoint.parse(body.bytes());
        } catch (Bodies.Refused e) {
            throw e.api(resp);
        }
        Map<String, Object> withBackground = new LinkedHashMap<>(args);
        withBackground.put("background", true);
        ExecutionRequest request;
        try {
            Optional<EgressPolicy> own = who.egress();
            request = setup.request(withBackground, tenant, own, new AuditInfo(Optional.of(tenant),
                    Optional.empty(), Optional.empty(), RequestTracker.requestId(req)));
        } catch (ExecutionException.InvalidRequest e) {
            throw new ApiException(400, e.code(), e.getMessage());
        }
        started(setup, request, resp);
    }

    /** Starts the job of a checked request and answers 202 with its status (429 when the queue is full). */
    static void started(ServerSetup setup, ExecutionRequest request, HttpServletResponse resp) throws IOException {
        JobState job;
        try {
            job = setup.jobsOrFail().start(request).state();
        } catch (ExecutionException.InvalidRequest e) {
            throw new ApiException(400, e.code(), e.getMessage());
        } catch (ExecutionException.Busy e) {
            resp.setHeader("Retry-After", "10");
            throw new ApiException(429, e.code(), e.getMessage());
        } catch (ExecutionException e) {
            throw new ApiException(503, e.code(), e.getMessage());
        }
        resp.setHeader("Location", PATH + "/" + job.id());
        ApiServlet.json(resp, 202, JobMaps.status(job));
    }

    /** The log as text: all that is kept (a marker where bytes were dropped), or from {@code Range: bytes=N-}. */
    private static void log(JobHandle job, OutputListener.Stream stream, HttpServletRequest req, HttpServletResponse resp)
            throws IOException {
        long total = job.state().size(stream);
        String range = req.getHeader("Range");
        long from = 0, to = Long.MAX_VALUE;
        // a Range this route does not serve (several ranges, a suffix, another unit) is ignored: the whole log, 200
        Matcher r = range == null ? null : RANGE.matcher(range.strip());
        if (r != null && !r.matches()) range = null;
        if (range != null) {
            from = Long.parseLong(r.group(1));
            if (r.group(2) != null) to = Long.parseLong(r.group(2));
            if (from >= total || to < from) {
                // written here, not thrown: an ApiException's answer drops Content-Range, which a tailing client
                // reads the log's size from
                resp.setHeader("Content-Range", "bytes */" + total);
                JsonErrors.writeApi(resp, 416, "bad_range", "the log has " + total + " bytes");
                return;
            }
        }
        resp.setContentType("text/plain; charset=utf-8");
        resp.setHeader("Cache-Control", "no-store");
        resp.setHeader("X-Content-Type-Options", "nosniff");
        resp.setHeader("Accept-Ranges", "bytes");
        resp.setHeader("X-Codeexec-Total", Long.toString(total));
        long end = Math.min(total, to == Long.MAX_VALUE ? total : to + 1);
        if (range != null) {
            // one contiguous piece from FROM: what is kept there (a dropped start is skipped and said so), never
            // past TO; a range that lies wholly in what was dropped has nothing to serve
            LogChunk c = job.read(stream, from, (int) Math.min(end - from, 4L << 20));
            if (c.from() >= end || c.bytes().length == 0) {
                resp.setHeader("Content-Range", "bytes */" + total);
                JsonErrors.writeApi(resp, 416, "bad_range", "bytes " + from + "-" + (end - 1) + " of the log were "
                        + "dropped (JOB_LOG_MB); the kept tail starts later");
                return;
            }
            if (c.next() > end) {
                byte[] cut = java.util.Arrays.copyOf(c.bytes(), (int) (end - c.from()));
                c = new LogChunk(c.from(), end, c.skipped(), cut, c.total());
            }
            resp.setStatus(206);
            resp.setHeader("Content-Range", "bytes " + c.from() + "-" + (c.next() - 1) + "/" + total);
            if (c.skipped() > 0) resp.setHeader("X-Codeexec-Skipped", Long.toString(c.skipped()));
            resp.getOutputStream().write(c.bytes());
            return;
        }
        resp.setStatus(200);
        ServletOutputStream out = resp.getOutputStream();
        long at = 0;
        while (at < end) {
            LogChunk c = job.read(stream, at, JobMaps.READ_MAX);
            if (c.next() <= at) break;
            out.write(JobMaps.text(c).getBytes(StandardCharsets.UTF_8));
            at = c.next();
        }
    }

    /** Server-sent events: output from the offsets asked ({@code ?stdout=&stderr=}), status changes, until the end. */
    private static void events(JobHandle job, Map<String, String> query, HttpServletResponse resp) throws IOException {
        resp.setStatus(200);
        resp.setContentType("text/event-stream");
        resp.setCharacterEncoding(StandardCharsets.UTF_8.name());
        resp.setHeader("Cache-Control", "no-store");
        resp.setHeader("X-Accel-Buffering", "no");
        ServletOutputStream out = resp.getOutputStream();
        long outAt = offset(query.get("stdout")), errAt = offset(query.get("stderr"));
        String lastStatus = null;
        long quiet = 0;
        while (true) {
            JobState now = job.state(); // read first: once it says ended, the output read after it is complete
            boolean ended = now.ended();
            for (OutputListener.Stream s : OutputListener.Stream.values()) {
                long at = s == OutputListener.Stream.STDOUT ? outAt : errAt;
                while (true) {
                    LogChunk c = job.read(s, at, JobMaps.READ_MAX);
                    if (c.next() <= at) break;
                    send(out, "output", Map.of("stream", s.name().toLowerCase(java.util.Locale.ROOT),
                            "text", JobMaps.text(c), "offset", c.next()));
                    at = c.next();
                }
                if (s == OutputListener.Stream.STDOUT) outAt = at;
                else errAt = at;
            }
            if (!now.status().equals(lastStatus) || ended) {
                lastStatus = now.status();
                send(out, "status", JobMaps.status(now));
            }
            if (ended) return;
            if (++quiet % (PING_EVERY_MS / EVENTS_POLL_MS) == 0) {
                // a comment line: keeps proxies and the connector from timing out a quiet stream, and finds a client
                // that went away (the write fails) instead of polling for it until the job ends
                out.write(": ping\n\n".getBytes(StandardCharsets.UTF_8));
                out.flush();
            }
            try {
                Thread.sleep(EVENTS_POLL_MS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return;
            }
        }
    }

    private static long offset(String v) {
        if (v == null || v.isEmpty()) return 0;
        try {
            return Math.max(0, Long.parseLong(v));
        } catch (NumberFormatException e) {
            throw ApiException.badRequest("an offset must be a whole number of bytes");
        }
    }

    private static void send(ServletOutputStream out, String event, Map<String, Object> data) throws IOException {
        String json = JsonErrors.JSON.writeValueAsString(data);
        out.write(("event: " + event + "\ndata: " + json + "\n\n").getBytes(StandardCharsets.UTF_8));
        out.flush();
    }
}
