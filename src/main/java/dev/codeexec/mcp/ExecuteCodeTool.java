package dev.codeexec.mcp;

import dev.codeexec.codemode.ToolCall;
import dev.codeexec.egress.ConnectionRecord;
import dev.codeexec.egress.NetworkReport;
import dev.codeexec.surface.ResultMaps;
import dev.codeexec.surface.ServerSetup;
import dev.codeexec.engine.ExecutionException;
import dev.codeexec.engine.ExecutionRequest;
import dev.codeexec.engine.ExecutionRequest.AuditInfo;
import dev.codeexec.engine.ExecutionResult;
import dev.codeexec.boot.LogContext;
import dev.codeexec.engine.Executor;
import dev.codeexec.engine.OutputListener;
import dev.codeexec.engine.RunHandle;
import dev.codeexec.auth.Principal;
import dev.codeexec.workspace.Workspace;
import io.modelcontextprotocol.server.McpServerFeatures.SyncToolSpecification;
import io.modelcontextprotocol.server.McpSyncServerExchange;
import io.modelcontextprotocol.spec.McpSchema.CallToolRequest;
import io.modelcontextprotocol.spec.McpSchema.CallToolResult;
import io.modelcontextprotocol.spec.McpSchema.Content;
import io.modelcontextprotocol.spec.McpSchema.TextContent;
import io.modelcontextprotocol.spec.McpSchema.Tool;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CancellationException;

/**
 * The {@code execute_code} tool: its arguments checked by the one definition of them ({@link ServerSetup#request}),
 * submit, stream output as progress, register the run for cancellation, await the result. A program that fails is a
 * normal result; {@code isError} is only for calls that could not run ({@link ToolErrors}) and for a lost worker.
 */
final class ExecuteCodeTool {

    static final String NAME = "execute_code";

    /** Content items (images, links) a result carries at most; the structured {@code files} list has them all. */
    static final int MAX_FILE_CONTENTS = 50;

    private final Executor executor;
    private final ServerSetup setup;
    private final RunRegistry registry;
    private final Artifacts artifacts;
    private final Tool tool;

    ExecuteCodeTool(ServerSetup setup, RunRegistry registry) {
        this.executor = setup.executor();
        this.setup = setup;
        this.registry = registry;
        this.artifacts = Artifacts.of(setup.config());
        this.tool = Tool.builder()
                .name(NAME)
                .title("Execute code")
                .description(description(setup))
                .inputSchema(setup.arguments().inputSchema())
                .outputSchema(outputSchema())
                .annotations(ToolHints.additive().annotations("Execute code"))
                .build();
    }

    private static String description(ServerSetup setup) {
        String network = setup.egress().enabled() && setup.egress().unavailable().isEmpty()
                ? "Network: the program may reach the hosts of your allow-list (runtime_info shows it) through an HTTP "
                        + "proxy that HTTP_PROXY/HTTPS_PROXY name (pip, npm, curl, git, requests, urllib and fetch use "
                        + "it); nothing else. `network: false` or a narrower list of host patterns limits a run further. "
                        + "A refused connection's HTTP 403 says why; the result's `network` lists every connection. "
                : "";
        String tools = setup.codeTools().isEmpty() ? ""
                : "Code mode: the program can call the tools of the MCP servers this server connects to, as functions "
                        + "(Python `import mcp_tools` / `from mcp_tools import SERVER`, then SERVER.TOOL(arg=...); Node and "
                        + "TypeScript `const { SERVER } = require('mcp-tools')`, then `await SERVER.TOOL({...})`): loop, "
                        + "filter and join their results in code and print only what matters. list_code_tools shows the "
                        + "servers, their tools and a tool's signature; the result's `toolCalls` lists the calls made. ";
        if (setup.codeTools().filter(t -> !t.upstreams().config().apis().isEmpty()).isPresent())
            tools += "HTTP APIs with the server's credentials: plain HTTP to $CODE_APIS_URL/NAME/PATH (curl, requests, "
                    + "fetch; no token needed: the server adds it) or `mcp_tools.apis.NAME.get(PATH)` / `apis.NAME.get(PATH)` "
                    + "of 'mcp-tools'; list_code_tools lists them (`apis`), the result's `apiCalls` the calls made. ";
        return "Runs a program in a sandbox (" + (network.isEmpty() ? "no network, " : "")
                + "no access to the host) and returns its "
                        + "exit code, stdout and stderr. A non-zero exit code is a normal result. Output streams as "
                        + "progress notifications when the call carries a progressToken. With `workspace`, the "
                        + "program runs in that persistent workspace (created if new): files it writes are kept "
                        + "between calls, the files it created or changed are listed, and images it saved "
                        + "(png, jpeg, gif, svg) come back as image content. With `session` (python, nodejs, typescript, bash), the "
                        + "code runs in a persistent interpreter of that name (created by its first call): "
                        + "variables, imports and functions stay for the next call; the value of a final expression "
                        + "is returned as `result`, and matplotlib figures (plt.show() or left open) as images; in "
                        + "python, display(obj) (built in, IPython.display works too) and a final rich value "
                        + "(a DataFrame, a PIL image, an object with _repr_html_) also come back as `outputs`. "
                        + "A timeout interrupts the call and keeps the session. See session_list, session_reset, "
                        + "session_close. A library that is not preinstalled (runtime_info lists what is): name it "
                        + "in `packages` (pip requirements for python, npm packages for nodejs/typescript) instead of "
                        + "installing it in the code; the first run with a set installs it, later ones reuse it at once. "
                        + network + tools;
    }

    SyncToolSpecification specification() {
        return new SyncToolSpecification(tool, this::call);
    }

    private static Map<String, Object> outputSchema() {
        Map<String, Object> props = new LinkedHashMap<>();
        props.put("language", Map.of("type", "string"));
        props.put("exitCode", Map.of("type", "integer", "description", "128+signal when killed; -1 when it never started."));
        props.put("stdout", Map.of("type", "string"));
        props.put("stderr", Map.of("type", "string"));
        props.put("durationMs", Map.of("type", "integer"));
        props.put("timedOut", Map.of("type", "boolean"));
        props.put("truncated", Map.of("type", "boolean"));
        props.put("outcome", Map.of("type", "string", "enum",
                java.util.Arrays.stream(dev.codeexec.engine.Outcome.values()).map(dev.codeexec.engine.Outcome::wireName).toList()));
        props.put("peakMemoryBytes", Map.of("type", "integer"));
        props.put("cpuTimeMs", Map.of("type", "number"));
        props.put("sandbox", Map.of("type", "string"));
        props.put("worker", Map.of("type", "string",
                "description", "Gateway mode: the name of the worker that ran the code (absent when the server ran it)."));
        props.put("workspace", Map.of("type", "string"));
        props.put("files", Map.of("type", "array", "description", "Files the run created or changed in its workspace.",
                "items", Map.of("type", "object", "properties", Map.of("path", Map.of("type", "string"),
                        "size", Map.of("type", "integer"), "mimeType", Map.of("type", "string"),
                        "status", Map.of("type", "string", "enum", List.of("created", "modified"))))));
        props.put("filesTruncated", Map.of("type", "boolean"));
        props.put("session", Map.of("type", "string", "description", "The session the call ran in."));
        props.put("sessionCreated", Map.of("type", "boolean",
                "description", "True when this call started the session's interpreter (its state was empty)."));
        props.put("result", Map.of("type", "string",
                "description", "In a session: the value of the code's final expression, as text (absent when none)."));
        props.put("executionCount", Map.of("type", "integer",
                "description", "In a python or nodejs session: the call's number in the session, as a notebook numbers its cells."));
        props.put("error", Map.of("type", "object", "description", "In a python or nodejs session, when the call "
                + "raised: the error's name (NameError, TypeError, ...), its message, and the traceback the call printed.",
                "properties", Map.of("name", Map.of("type", "string"), "value", Map.of("type", "string"),
                        "traceback", Map.of("type", "string"))));
        props.put("outputs", Map.of("type", "array", "description", "In a python session: the rich outputs of the call in "
                + "the order it made them: each display(...) ('display') and a final value that offers more than text, "
                + "e.g. a DataFrame's HTML or a PIL image ('result'). data maps MIME types (text/plain always; "
                + "text/html, text/markdown, text/latex, image/svg+xml, application/json when offered) to their text; "
                + "an image (png, jpeg, gif) is described in image and sent as image content when shown.",
                "items", Map.of("type", "object", "properties", Map.of(
                        "kind", Map.of("type", "string", "enum", List.of("display", "result")),
                        "data", Map.of("type", "object", "additionalProperties", Map.of("type", "string")),
                        "image", Map.of("type", "object", "properties", Map.of("mimeType", Map.of("type", "string"),
                                "size", Map.of("type", "integer"), "shown", Map.of("type", "boolean")))))));
        props.put("figures", Map.of("type", "array", "description", "In a session: the figures the call produced "
                + "(shown as image content unless over the image size limit).", "items", Map.of("type", "object",
                "properties", Map.of("mimeType", Map.of("type", "string"), "size", Map.of("type", "integer"),
                        "shown", Map.of("type", "boolean")))));
        props.put("toolCalls", Map.of("type", "object", "description", "Code mode (when the server has upstream MCP "
                + "servers): the tool calls the run's code made (at most 100; callsLeftOut counts the rest).",
                "properties", Map.of("calls", Map.of("type", "array", "items", Map.of("type", "object", "properties", Map.of(
                                "server", Map.of("type", "string"), "tool", Map.of("type", "string"),
                                "ms", Map.of("type", "integer"), "ok", Map.of("type", "boolean"),
                                "bytesIn", Map.of("type", "integer"), "bytesOut", Map.of("type", "integer"),
                                "reason", Map.of("type", "string")))),
                        "callsLeftOut", Map.of("type", "integer"))));
        props.put("apiCalls", Map.of("type", "array", "description", "Code mode with credentialed HTTP APIs: the calls "
                + "the run's code made through CODE_APIS_URL (at most 100; apiCallsLeftOut counts the rest). Present when "
                + "there were any.", "items", Map.of("type", "object", "properties", Map.of(
                        "api", Map.of("type", "string"), "method", Map.of("type", "string"), "path", Map.of("type", "string"),
                        "status", Map.of("type", "integer"), "ms", Map.of("type", "integer"),
                        "bytesIn", Map.of("type", "integer"), "bytesOut", Map.of("type", "integer")))));
        props.put("apiCallsLeftOut", Map.of("type", "integer", "description", "API calls past the first 100."));
        props.put("packages", Map.of("type", "object", "additionalProperties", Map.of("type", "string"),
                "description", "With declared packages: name → version of everything installed for the set "
                        + "(dependencies included)."));
        props.put("installMs", Map.of("type", "integer", "description", "With declared packages: how long this call "
                + "waited for their install; 0 when they came from the store."));
        props.put("network", Map.of("type", "object", "description", "The run's network: the patterns it was allowed "
                + "and each connection through the proxy (at most 100; connectionsLeftOut counts the rest).",
                "properties", Map.of("allow", Map.of("type", "array", "items", Map.of("type", "string")),
                        "connections", Map.of("type", "array", "items", Map.of("type", "object", "properties", Map.of(
                                "host", Map.of("type", "string"), "port", Map.of("type", "integer"),
                                "decision", Map.of("type", "string", "enum", List.of("allowed", "refused", "failed")),
                                "reason", Map.of("type", "string"), "message", Map.of("type", "string"),
                                "bytesOut", Map.of("type", "integer"), "bytesIn", Map.of("type", "integer"),
                                "ms", Map.of("type", "integer")))),
                        "connectionsLeftOut", Map.of("type", "integer"),
                        "bytesOut", Map.of("type", "integer"), "bytesIn", Map.of("type", "integer"),
                        "note", Map.of("type", "string"))));
        props.put("job", Map.of("type", "string", "description", "With `background: true`: the job's id (the answer "
                + "is then the job's status, as job_status gives it)."));
        props.put("status", Map.of("type", "string", "description", "With `background: true`: queued or running."));
        // one of two shapes: a run's result, or (background) a job that was started
        return Map.of("type", "object", "properties", props, "anyOf", List.of(
                Map.of("required", List.of("language", "exitCode", "stdout", "stderr", "durationMs", "timedOut",
                        "truncated", "outcome", "sandbox")),
                Map.of("required", List.of("job", "status"))));
    }

    /**
     * The HTTP request id the edge gave the call comes through {@code _meta} (see {@link MessageInterceptor}), not
     * through the thread: it must reach the run's audit line on an engine thread, and the handler runs on the
     * request's own thread only because {@link McpServers#http} asks for immediate execution. It is also put into
     * this thread's MDC for the call.
     */
    CallToolResult call(McpSyncServerExchange exchange, CallToolRequest call) {
        Map<String, Object> meta = call.meta() == null ? Map.of() : call.meta();
        Optional<String> httpRequestId = Optional.ofNullable(meta.get(MessageInterceptor.HTTP_REQUEST_ID_META))
                .map(Object::toString);
        try (LogContext.Scope ignored = LogContext.requestId(httpRequestId)) {
            return execute(exchange, call, meta, httpRequestId);
        }
    }

    private CallToolResult execute(McpSyncServerExchange exchange, CallToolRequest call, Map<String, Object> meta,
            Optional<String> httpRequestId) {
        try {
            String mcpSession = Optional.ofNullable(meta.get(MessageInterceptor.SESSION_META)).map(Object::toString)
                    .orElseGet(exchange::sessionId);
            Optional<String> requestId = Optional.ofNullable(meta.get(MessageInterceptor.REQUEST_ID_META))
                    .map(Object::toString);
            Principal who = MessageInterceptor.principalOf(meta);
            ExecutionRequest request = setup.request(call.arguments(), who.tenant(), who.egress(), new AuditInfo(
                    Optional.of(who.tenant()), Optional.ofNullable(mcpSession), requestId, httpRequestId));
            if (request.background()) return JobTools.started(setup, request);
            Optional<Workspace> ws = request.workspace();
            Object token = meta.get("progressToken");
            try (ProgressForwarder progress = token == null ? null
                    : new ProgressForwarder(token, exchange::progressNotification)) {
                RunHandle handle = executor.submit(request, progress == null ? OutputListener.NONE : progress);
                ExecutionResult result;
                try (RunRegistry.Registration ignored = requestId.isEmpty() || mcpSession == null
                        ? () -> { } : registry.register(mcpSession, requestId.get(), handle)) {
                    result = await(handle);
                }
                if (progress != null) progress.close();
                return success(result, ws);
            }
        } catch (RuntimeException e) {
            return ToolErrors.of(NAME, e);
        }
    }

    /** The run's result; a run that was not attempted ends the call with its {@link ExecutionException}. */
    private static ExecutionResult await(RunHandle handle) {
        try {
            return handle.result().get();
        } catch (InterruptedException e) {
            handle.cancel();
            Thread.currentThread().interrupt();
            throw new ExecutionException.Unavailable("the server is shutting down");
        } catch (java.util.concurrent.ExecutionException e) {
            if (e.getCause() instanceof ExecutionException ee) throw ee;
            if (e.getCause() instanceof RuntimeException re) throw re;
            throw new IllegalStateException(e.getCause());
        } catch (CancellationException e) {
            throw new ExecutionException.Unavailable("the run was cancelled before it started");
        }
    }

    /**
     * A run's result: {@link ResultMaps#structured} as structuredContent, and as content the summary text (with
     * the workspace's changed files and the session's extras), the workspace's images or links, the session's figures.
     */
    CallToolResult success(ExecutionResult r, Optional<Workspace> ws) {
        Map<String, Object> s = ResultMaps.structured(r, ws.map(Workspace::name), artifacts.maxImageKb() << 10);
        StringBuilder text = new StringBuilder(summary(r));
        if (ws.isPresent() && !r.files().isEmpty()) {
            text.append("\n--- files created or changed in workspace ").append(ws.get().name()).append(" ---");
            for (ExecutionResult.FileArtifact f : r.files())
                text.append('\n').append(f.status()).append(' ').append(f.path()).append(" (").append(f.size()).append(" bytes)");
        }
        List<Content> images = List.of();
        if (r.session().isPresent()) {
            ExecutionResult.SessionOutput so = r.session().get();
            // decoded once: the outputs' images are base64 in the session's answer
            List<ExecutionResult.Figure> all = so.images();
            images = artifacts.figures(all);
            text.append("\nsession ").append(so.name()).append(so.created() ? " (new: its state was empty)" : "");
            outputs(text, so.outputs());
            so.result().ifPresent(v -> text.append("\n--- result ---\n").append(v));
            int omitted = all.size() - images.size();
            if (!so.figures().isEmpty())
                text.append("\n").append(so.figures().size()).append(so.figures().size() == 1 ? " figure" : " figures");
            if (omitted > 0)
                text.append(" (" + omitted + " not shown: over " + artifacts.maxImageKb()
                        + " KB or more than " + Artifacts.MAX_INLINE_IMAGES + ")");
        }
        List<Content> content = new ArrayList<>();
        content.add(new TextContent(text.toString()));
        if (ws.isPresent()) {
            List<Artifacts.FileInfo> shown = r.files().stream().limit(MAX_FILE_CONTENTS)
                    .map(f -> new Artifacts.FileInfo(f.path(), f.size(), f.mimeType())).toList();
            content.addAll(artifacts.contents(ws.get(), shown));
        }
        content.addAll(images);
        // A lost worker is the service's failure, not the program's: the call is an error (with what was streamed).
        boolean failed = r.outcome() == dev.codeexec.engine.Outcome.WORKER_LOST;
        return CallToolResult.builder().structuredContent(s).content(content).isError(failed).build();
    }

    /** Longest HTML of one output put into the readable summary. */
    static final int SUMMARY_HTML_CHARS = 4000;

    /**
     * The displayed outputs in the readable summary, so that a model reading text sees what a person would: each
     * one's markdown, else its plain text (a DataFrame's is a table), and its HTML too when the plain text says
     * little (a default repr such as {@code <R object at 0x...>}) and the HTML is short. The final value's text is
     * the result section after this; images follow as image content.
     */
    static void outputs(StringBuilder text, List<ExecutionResult.RichOutput> outputs) {
        int n = 0;
        for (ExecutionResult.RichOutput o : outputs) {
            n++;
            if (o.kind().equals("result")) continue;
            Map<String, String> d = o.data();
            String plain = d.getOrDefault("text/plain", "");
            text.append("\n--- display ").append(n).append(" ---\n").append(d.getOrDefault("text/markdown", plain));
            String html = d.get("text/html");
            if (html != null && !d.containsKey("text/markdown") && saysLittle(plain) && html.length() <= SUMMARY_HTML_CHARS)
                text.append("\n(text/html) ").append(html);
            o.image().ifPresent(f -> text.append("\n(").append(f.mimeType()).append(", ").append(f.data().length).append(" bytes)"));
        }
        for (ExecutionResult.RichOutput o : outputs) {
            if (!o.kind().equals("result")) continue;
            String html = o.data().get("text/html");
            String plain = o.data().getOrDefault("text/plain", "");
            if (o.data().containsKey("text/markdown")) text.append("\n--- result (text/markdown) ---\n").append(o.data().get("text/markdown"));
            else if (html != null && saysLittle(plain) && html.length() <= SUMMARY_HTML_CHARS)
                text.append("\n--- result (text/html) ---\n").append(html);
        }
    }

    /** A plain text that tells a reader nothing of the object: a default repr, or empty. */
    private static boolean saysLittle(String plain) {
        String p = plain.strip();
        return p.isEmpty() || (p.startsWith("<") && p.endsWith(">") && !p.contains("\n"));
    }

    /** What a person (or a model reading plain text) needs: how it ended, then the output. */
    static String summary(ExecutionResult r) {
        StringBuilder b = new StringBuilder();
        b.append("outcome: ").append(r.outcome().wireName())
                .append(", exit code ").append(r.exitCode())
                .append(", ").append(r.durationMs()).append(" ms")
                .append(" (").append(r.language()).append(", sandbox ").append(r.sandbox())
                .append(r.worker().map(w -> ", worker " + w).orElse("")).append(')');
        if (r.truncated()) b.append("\noutput was truncated at the output limit");
        if (!r.stdout().isEmpty()) b.append("\n--- stdout ---\n").append(r.stdout());
        if (!r.stderr().isEmpty()) {
            if (!r.stdout().isEmpty() && !r.stdout().endsWith("\n")) b.append('\n');
            b.append(r.stdout().isEmpty() ? "\n" : "").append("--- stderr ---\n").append(r.stderr());
        }
        if (r.stdout().isEmpty() && r.stderr().isEmpty()) b.append("\n(no output)");
        r.network().ifPresent(n -> network(b, n));
        r.toolCalls().ifPresent(t -> toolCalls(b, t));
        r.packages().ifPresent(p -> b.append("\n--- packages").append(p.installMs() > 0
                ? " (installed in " + p.installMs() + " ms)" : " (from the store)").append(": ")
                .append(p.resolved().entrySet().stream().sorted(Map.Entry.comparingByKey())
                        .map(e -> e.getKey() + " " + e.getValue()).collect(java.util.stream.Collectors.joining(", "))));
        return b.toString();
    }

    /** The run's tool calls in a few lines: how many, and each one that failed with its reason. */
    private static void toolCalls(StringBuilder b, ToolCall.Report t) {
        apiCalls(b, t);
        if (t.total() == 0) return;
        long failed = t.calls().stream().filter(c -> !c.ok()).count();
        b.append("\n--- tool calls: ").append(t.total()).append(failed > 0 ? ", " + failed + " failed" : "").append(" ---");
        int listed = 0;
        for (ToolCall c : t.calls()) {
            if (c.ok()) continue;
            if (++listed > 10) break;
            b.append('\n').append(c.server()).append('.').append(c.tool()).append(": ").append(c.reason().orElse("failed"));
        }
    }

    /** The run's API route calls in a few lines: how many, and each one answered 4xx/5xx with its status. */
    private static void apiCalls(StringBuilder b, ToolCall.Report t) {
        if (t.apiTotal() == 0) return;
        long failed = t.apiCalls().stream().filter(c -> c.status() >= 400).count();
        b.append("\n--- API calls: ").append(t.apiTotal()).append(failed > 0 ? ", " + failed + " answered with an error" : "")
                .append(" ---");
        int listed = 0;
        for (dev.codeexec.codemode.ApiCall c : t.apiCalls()) {
            if (c.status() < 400) continue;
            if (++listed > 10) break;
            b.append('\n').append(c.api()).append(' ').append(c.method()).append(' ').append(c.path()).append(": ").append(c.status());
        }
    }

    /** The run's connections in a few lines: how many, and each one that was not allowed with its reason. */
    private static void network(StringBuilder b, NetworkReport n) {
        int total = n.counts().values().stream().mapToInt(Integer::intValue).sum();
        if (total == 0) return;
        b.append("\n--- network: ").append(total).append(total == 1 ? " connection" : " connections")
                .append(", ").append(n.bytesOut()).append(" bytes out, ").append(n.bytesIn()).append(" bytes in ---");
        int listed = 0;
        for (ConnectionRecord c : n.connections()) {
            if (c.decision().equals(ConnectionRecord.ALLOWED) && !c.reason().equals("byte_limit") && !c.reason().equals("idle_timeout"))
                continue;
            if (++listed > 10) break;
            b.append('\n').append(c.decision()).append(' ').append(c.host()).append(':').append(c.port())
                    .append(" (").append(c.reason()).append("): ").append(c.message());
        }
    }
}
