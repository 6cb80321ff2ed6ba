package dev.codeexec.codemode;

import dev.codeexec.egress.EgressChannel;
import dev.codeexec.egress.LocalEndpoint;
import io.modelcontextprotocol.spec.McpSchema;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import tools.jackson.core.JacksonException;
import tools.jackson.databind.JsonNode;
import tools.jackson.databind.json.JsonMapper;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.FutureTask;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/**
 * One run's code tools: the endpoint its code reaches at {@code http://127.0.0.1:3128/code-tools/v1} through the
 * run's channel. {@code GET .../servers} lists what the run may call; {@code POST .../call} with
 * {@code {"server", "tool", "arguments"}} calls it upstream with the operator's credentials and answers
 * {@code {"result": ..., "structured": bool}} (the tool's structuredContent when it has one, else its text) or an
 * error {@code {"error", "reason"}} with a status that fits. {@code .../apis/{api}/...} (CODE_APIS_URL) is a
 * credentialed HTTP API route ({@link ApiRoutes}); {@code GET /apis} lists the APIs the run may call. Applies the
 * caller's allow-lists, the per-run caps on calls and bytes (tool and API calls count against the same) and the
 * per-call timeout, keeps a record of every call, and cancels what is in flight when the run ends.
 */
public final class CodeToolsRun implements LocalEndpoint {

    private static final Logger AUDIT = LoggerFactory.getLogger("audit");
    static final String PREFIX = "/code-tools/v1";
    /** The endpoint as a run's code reaches it: through its channel's relay (CODE_TOOLS_URL). */
    static final String URL = EgressChannel.PROXY_URL + PREFIX;
    private static final JsonMapper JSON = JsonMapper.shared();

    private final CodeTools tools;
    private final String tenant;
    private final String runId;
    private final Set<Future<?>> inFlight = ConcurrentHashMap.newKeySet();
    private final List<ToolCall> records = new ArrayList<>();
    private int leftOut;
    private final List<ApiCall> apiRecords = new ArrayList<>();
    private int apiLeftOut;
    private int calls;
    private long bytes;
    private volatile boolean closed;

    CodeToolsRun(CodeTools tools, String tenant, String runId) {
        this.tools = tools;
        this.tenant = tenant;
        this.runId = runId;
    }

    @Override
    public int maxRequestBytes() {
        return (int) Math.min(Integer.MAX_VALUE - 8, tools.maxBytes());
    }

    @Override
    public Response tooLarge(String method, String path, long length) {
        if (isRoute(path)) {
            String name = path.length() > ApiRoutes.PREFIX.length() + 1 ? path.substring(ApiRoutes.PREFIX.length() + 1).split("[/?]", 2)[0] : "?";
            return apiRefused(name, method, "?", System.nanoTime(), length, 429, "byte_limit", "the request body (" + length
                    + " bytes) is more than this run's " + (tools.maxBytes() >> 20) + " MiB of tool call data (CODE_TOOLS_MAX_MB)");
        }
        Outcome o = record("?", "?", System.nanoTime(), 0, length, 429, "byte_limit", "the call's arguments (" + length
                + " bytes) are more than this run's " + (tools.maxBytes() >> 20) + " MiB of tool call data (CODE_TOOLS_MAX_MB)");
        return error(o.status(), o.reason(), o.message());
    }

    @Override
    public Response handle(Request request) {
        if (isRoute(request.target())) return route(request);
        return handle(request.method(), request.target(), request.body());
    }

    private static boolean isRoute(String target) {
        return target.equals(ApiRoutes.PREFIX) || target.startsWith(ApiRoutes.PREFIX + "/") || target.startsWith(ApiRoutes.PREFIX + "?");
    }

    /** A call through a credentialed API route: checked, counted, made by the server, recorded. */
    private Response route(Request request) {
        long started = System.nanoTime();
        String method = request.method();
        String target = request.target();
        if (!target.startsWith(ApiRoutes.PREFIX + "/") || target.startsWith(ApiRoutes.PREFIX + "/?")
                || target.equals(ApiRoutes.PREFIX + "/")) {
            if (method.equals("GET")) return json(200, Map.of("apis", tools.routes().describe(tenant)));
            return error(405, "bad_request", "GET " + ApiRoutes.PREFIX + " lists the APIs; call one at " + ApiRoutes.PREFIX + "/NAME/PATH");
        }
        ApiRoutes.Target t;
        try {
            t = ApiRoutes.Target.parse(target);
        } catch (IllegalArgumentException e) {
            String name = target.substring(ApiRoutes.PREFIX.length() + 1).split("[/?]", 2)[0];
            return apiRefused(name, method, "?", started, request.body().length, 400, "bad_request", e.getMessage());
        }
        long sent = request.body().length;
        Optional<String> refusal = tools.routes().refusal(tenant, t.api(), method, t.path());
        if (refusal.isPresent()) return apiRefused(t.api(), method, t.rawPath(), started, sent, 403, "not_allowed", refusal.get());
        UpstreamConfig.HttpApi api = tools.upstreams().config().api(t.api()).orElseThrow();
        long room;
        synchronized (this) {
            if (closed) return apiRefused(t.api(), method, t.rawPath(), started, sent, 410, "run_ended", "the run has ended");
            if (calls >= tools.maxCalls())
                return apiRefused(t.api(), method, t.rawPath(), started, sent, 429, "call_limit", "this run has made its "
                        + tools.maxCalls() + " tool and API calls (CODE_TOOLS_MAX_CALLS)");
            if (bytes + sent > tools.maxBytes() || bytes >= tools.maxBytes()) // nothing left: no room for an answer
                return apiRefused(t.api(), method, t.rawPath(), started, sent, 429, "byte_limit", "this run has used its "
                        + (tools.maxBytes() >> 20) + " MiB of tool call data (CODE_TOOLS_MAX_MB)");
            calls++;
            bytes += sent;
            room = tools.maxBytes() - bytes;
        }
        FutureTask<ApiRoutes.Answer> f = new FutureTask<>(() -> tools.routes().forward(api, method, t, request.headers(),
                request.body(), room, tools.callTimeout()));
        inFlight.add(f);
        Thread.ofVirtual().name("api-call-" + t.api()).start(f);
        if (closed) f.cancel(true); // closed between the check and the add
        ApiRoutes.Answer a;
        try {
            a = f.get(tools.callTimeout().toMillis(), TimeUnit.MILLISECONDS);
        } catch (TimeoutException e) {
            f.cancel(true);
            return apiRefused(t.api(), method, t.rawPath(), started, sent, 504, "timeout", "API " + t.api() + " did not answer "
                    + "within " + tools.callTimeout().toMillis() + " ms (CODE_TOOLS_CALL_TIMEOUT_MS)");
        } catch (CancellationException | InterruptedException e) {
            f.cancel(true);
            return apiRefused(t.api(), method, t.rawPath(), started, sent, 410, "run_ended", "the run has ended");
        } catch (ExecutionException e) {
            Throwable c = e.getCause();
            if (c instanceof IllegalArgumentException)
                return apiRefused(t.api(), method, t.rawPath(), started, sent, 400, "bad_request", "the request cannot be sent: "
                        + tools.upstreams().config().secrets().scrub(String.valueOf(c.getMessage())));
            if (c instanceof java.net.http.HttpTimeoutException)
                return apiRefused(t.api(), method, t.rawPath(), started, sent, 504, "timeout", "API " + t.api()
                        + " did not answer within " + tools.callTimeout().toMillis() + " ms (CODE_TOOLS_CALL_TIMEOUT_MS)");
            return apiRefused(t.api(), method, t.rawPath(), started, sent, 502, "upstream_unavailable", "API " + t.api()
                    + " (" + api.shownUrl() + ") could not be reached: " + tools.upstreams().config().secrets().scrub(
                    c.getClass().getSimpleName() + (c.getMessage() == null ? "" : ": " + c.getMessage())));
        } finally {
            inFlight.remove(f);
        }
        synchronized (this) {
            if (a.cut() || bytes + a.body().length > tools.maxBytes()) {
                bytes = tools.maxBytes();
                return apiRefused(t.api(), method, t.rawPath(), started, sent, 429, "byte_limit", "API " + t.api()
                        + "'s answer (status " + a.status() + ") would pass this run's " + (tools.maxBytes() >> 20)
                        + " MiB of tool call data (CODE_TOOLS_MAX_MB); it was cut off and not passed on");
            }
            bytes += a.body().length;
        }
        addApi(new ApiCall(t.api(), method, t.rawPath(), a.status(), ms(started), a.body().length, sent));
        return new Response(a.status(), a.contentType(), a.body(), a.headers());
    }

    private Response apiRefused(String api, String method, String path, long started, long sent, int status, String reason,
            String message) {
        addApi(new ApiCall(api, method, path, status, ms(started), 0, sent));
        return error(status, reason, message);
    }

    private synchronized void addApi(ApiCall c) {
        if (apiRecords.size() < ToolCall.Report.MAX_RECORDS) apiRecords.add(c);
        else apiLeftOut++;
        AUDIT.info("api_call run={} tenant={} api={} method={} path={} status={} ms={} bytesIn={} bytesOut={}", runId, tenant,
                c.api(), c.method(), c.path(), c.status(), c.ms(), c.bytesIn(), c.bytesOut());
    }

    @Override
    public Response handle(String method, String path, byte[] body) {
        if (path.equals(PREFIX + "/servers") && method.equals("GET"))
            return json(200, Map.of("servers", tools.describe(tenant)));
        if (path.equals(PREFIX + "/call") && method.equals("POST")) return call(body);
        return error(404, "bad_request", "no " + method + " " + path + " here: GET " + PREFIX + "/servers, POST " + PREFIX + "/call"
                + (tools.upstreams().config().apis().isEmpty() ? "" : ", " + ApiRoutes.PREFIX + "/NAME/PATH"));
    }

    private Response call(byte[] body) {
        JsonNode req;
        try {
            req = JSON.readTree(body);
        } catch (JacksonException e) {
            req = null;
        }
        if (req == null || !req.isObject() || !req.path("server").isString() || !req.path("tool").isString()
                || !(req.path("arguments").isMissingNode() || req.path("arguments").isObject() || req.path("arguments").isNull()))
            return error(400, "bad_request", "the body must be JSON {\"server\": ..., \"tool\": ..., \"arguments\": {...}}");
        @SuppressWarnings("unchecked")
        Map<String, Object> arguments = req.path("arguments").isObject()
                ? JSON.convertValue(req.get("arguments"), LinkedHashMap.class) : Map.of();
        Outcome o = invoke(req.get("server").asString(), req.get("tool").asString(), arguments, body.length);
        if (o.result().isEmpty()) return error(o.status(), o.reason(), o.message());
        return new Response(200, "application/json", o.answer());
    }

    /**
     * One call's end: the upstream's result with the answer the run's code gets ({@code {"result", "structured"}},
     * counted against the run's bytes), or a refusal or failure (an HTTP status, a reason word and a message).
     */
    public record Outcome(Optional<McpSchema.CallToolResult> result, byte[] answer, int status, String reason, String message) {
        static Outcome failed(int status, String reason, String message) {
            return new Outcome(Optional.empty(), new byte[0], status, reason, message);
        }
    }

    /**
     * Calls {@code tool} of {@code server} for this run's tenant, as the run's code would: the same allow-list, caps,
     * timeout, record and audit line. For callers that are not code in a sandbox (a direct tool call of the chat
     * agent or of {@code /mcp-no-code-execute}).
     */
    public Outcome call(String server, String tool, Map<String, Object> arguments) {
        return invoke(server, tool, arguments, JSON.writeValueAsBytes(arguments).length);
    }

    private Outcome invoke(String server, String tool, Map<String, Object> arguments, long sent) {
        long started = System.nanoTime();
        Optional<String> refusal = tools.refusal(tenant, server, tool);
        if (refusal.isPresent()) return record(server, tool, started, 0, sent, 403, "not_allowed", refusal.get());
        UpstreamConfig.Upstream upstream = tools.upstreams().config().server(server).orElseThrow();
        server = upstream.name();
        List<McpSchema.Tool> listed = tools.upstreams().tools(server);
        if (tools.upstreams().connected(server)) { // else the call itself says why it cannot be made
            String name = tool;
            if (listed.stream().noneMatch(t -> t.name().equals(name)))
                return record(server, tool, started, 0, sent, 404, "unknown_tool", "no tool '" + tool + "' of " + server
                        + " (its tools: " + String.join(", ", listed.stream().map(McpSchema.Tool::name)
                        .filter(upstream::allowsTool).toList()) + ")");
        }
        synchronized (this) {
            if (closed) return record(server, tool, started, 0, sent, 410, "run_ended", "the run has ended");
            if (calls >= tools.maxCalls())
                return record(server, tool, started, 0, sent, 429, "call_limit", "this run has made its "
                        + tools.maxCalls() + " tool calls (CODE_TOOLS_MAX_CALLS)");
            if (bytes + sent > tools.maxBytes())
                return record(server, tool, started, 0, sent, 429, "byte_limit", "this run has used its "
                        + (tools.maxBytes() >> 20) + " MiB of tool call data (CODE_TOOLS_MAX_MB)");
            calls++;
            bytes += sent;
        }
        CompletableFuture<McpSchema.CallToolResult> f = tools.upstreams().call(server, tool, arguments);
        inFlight.add(f);
        if (closed) f.cancel(true); // closed between the check and the add
        McpSchema.CallToolResult result;
        try {
            result = f.get(tools.callTimeout().toMillis(), TimeUnit.MILLISECONDS);
        } catch (TimeoutException e) {
            f.cancel(true);
            return record(server, tool, started, 0, sent, 504, "timeout", server + "." + tool + " did not answer within "
                    + tools.callTimeout().toMillis() + " ms (CODE_TOOLS_CALL_TIMEOUT_MS)"
                    + (tools.upstreams().connected(server) ? "" : "; " + server + " was still connecting"));
        } catch (CancellationException | InterruptedException e) {
            f.cancel(true);
            return record(server, tool, started, 0, sent, 410, "run_ended", "the run has ended");
        } catch (ExecutionException e) {
            Throwable c = e.getCause();
            if (c instanceof Upstreams.UpstreamRefused)
                return record(server, tool, started, 0, sent, 422, "tool_error", server + "." + tool + ": " + c.getMessage());
            return record(server, tool, started, 0, sent, 502, "upstream_unavailable", tools.upstreams().message(c));
        } finally {
            inFlight.remove(f);
        }
        Map<String, Object> answer = new LinkedHashMap<>();
        String text = text(result);
        if (Boolean.TRUE.equals(result.isError())) {
            return record(server, tool, started, text.getBytes(StandardCharsets.UTF_8).length, sent, 422, "tool_error",
                    text.isEmpty() ? server + "." + tool + " failed (no message)" : text);
        }
        if (result.structuredContent() != null) {
            answer.put("result", result.structuredContent());
            answer.put("structured", true);
        } else {
            answer.put("result", text);
            answer.put("structured", false);
        }
        byte[] body = JSON.writeValueAsBytes(answer);
        synchronized (this) {
            if (bytes + body.length > tools.maxBytes()) {
                bytes = tools.maxBytes();
                return record(server, tool, started, body.length, sent, 429, "byte_limit", server + "." + tool
                        + "'s answer would pass this run's " + (tools.maxBytes() >> 20) + " MiB of tool call data (CODE_TOOLS_MAX_MB)");
            }
            bytes += body.length;
        }
        add(new ToolCall(server, tool, ms(started), true, body.length, sent, Optional.empty()));
        return new Outcome(Optional.of(result), body, 200, "", "");
    }

    /** The text parts of a result, joined by newlines (other content kinds are named in brackets). */
    static String text(McpSchema.CallToolResult r) {
        StringBuilder sb = new StringBuilder();
        if (r.content() != null) for (McpSchema.Content c : r.content()) {
            if (!sb.isEmpty()) sb.append('\n');
            if (c instanceof McpSchema.TextContent t) sb.append(t.text());
            else sb.append('[').append(c.type()).append(" content]");
        }
        return sb.toString();
    }

    private Outcome record(String server, String tool, long started, long in, long out, int status, String reason, String message) {
        add(new ToolCall(server, tool, ms(started), false, in, out, Optional.of(reason)));
        return Outcome.failed(status, reason, message);
    }

    private synchronized void add(ToolCall c) {
        if (records.size() < ToolCall.Report.MAX_RECORDS) records.add(c);
        else leftOut++;
        AUDIT.info("tool_call run={} tenant={} server={} tool={} ok={} reason={} ms={} bytesIn={} bytesOut={}", runId, tenant,
                c.server(), c.tool(), c.ok(), c.reason().orElse("-"), c.ms(), c.bytesIn(), c.bytesOut());
    }

    private static long ms(long started) {
        return (System.nanoTime() - started) / 1_000_000;
    }

    private static Response error(int status, String reason, String message) {
        return json(status, Map.of("error", message, "reason", reason));
    }

    private static Response json(int status, Object value) {
        return new Response(status, "application/json", JSON.writeValueAsString(value).getBytes(StandardCharsets.UTF_8));
    }

    /** The calls so far. */
    public synchronized ToolCall.Report report() {
        return new ToolCall.Report(records, leftOut, apiRecords, apiLeftOut);
    }

    @Override
    public void close() {
        closed = true;
        for (Future<?> f : List.copyOf(inFlight)) f.cancel(true);
    }
}
