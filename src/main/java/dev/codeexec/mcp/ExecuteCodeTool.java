package dev.codeexec.mcp;

import dev.codeexec.config.Config;
import dev.codeexec.engine.ExecutionException;
import dev.codeexec.engine.ExecutionRequest;
import dev.codeexec.engine.ExecutionRequest.AuditInfo;
import dev.codeexec.engine.ExecutionResult;
import dev.codeexec.engine.Executor;
import dev.codeexec.engine.OutputListener;
import dev.codeexec.engine.RunHandle;
import io.modelcontextprotocol.server.McpServerFeatures.SyncToolSpecification;
import io.modelcontextprotocol.server.McpSyncServerExchange;
import io.modelcontextprotocol.spec.McpSchema.CallToolRequest;
import io.modelcontextprotocol.spec.McpSchema.CallToolResult;
import io.modelcontextprotocol.spec.McpSchema.Tool;
import io.modelcontextprotocol.spec.McpSchema.ToolAnnotations;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CancellationException;

/**
 * The {@code execute_code} tool: validate through the engine's converter, submit, stream output as progress,
 * register the run for cancellation, await the result. A program that fails is a normal result; {@code isError}
 * is only for calls that could not run, and its text is the engine's client-safe message, never a stack trace.
 */
final class ExecuteCodeTool {

    static final String NAME = "execute_code";
    private static final Logger LOG = LoggerFactory.getLogger(ExecuteCodeTool.class);

    private final Executor executor;
    private final RequestConverter converter;
    private final RunRegistry registry;
    private final Tool tool;

    ExecuteCodeTool(ServerSetup setup, RunRegistry registry) {
        this.executor = setup.executor();
        this.converter = setup.converter();
        this.registry = registry;
        this.tool = Tool.builder()
                .name(NAME)
                .title("Execute code")
                .description("Runs a program in a sandbox (no network, no access to the host) and returns its "
                        + "exit code, stdout and stderr. A non-zero exit code is a normal result. Output streams as "
                        + "progress notifications when the call carries a progressToken.")
                .inputSchema(inputSchema(setup))
                .outputSchema(outputSchema())
                .annotations(new ToolAnnotations("Execute code", false, false, false, false, null))
                .build();
    }

    SyncToolSpecification specification() {
        return new SyncToolSpecification(tool, this::call);
    }

    private static Map<String, Object> inputSchema(ServerSetup setup) {
        Map<String, Object> props = new LinkedHashMap<>();
        props.put("language", Map.of("type", "string", "enum", setup.languages(),
                "description", "Language of the code."));
        props.put("code", Map.of("type", "string", "description", "The program text."));
        props.put("stdin", Map.of("type", "string", "description", "Standard input for the program."));
        props.put("timeout_ms", Map.of("type", "integer", "minimum", 1,
                "maximum", setup.config().get(Config.MAX_TIMEOUT_MS),
                "default", setup.config().get(Config.DEFAULT_TIMEOUT_MS),
                "description", "Wall-clock timeout in milliseconds."));
        props.put("args", Map.of("type", "array", "items", Map.of("type", "string"),
                "description", "Program arguments."));
        props.put("env", Map.of("type", "object", "additionalProperties", Map.of("type", "string"),
                "description", "Extra environment variables (names like [A-Za-z_][A-Za-z0-9_]*)."));
        return Map.of("type", "object", "properties", props, "required", List.of("language", "code"),
                "additionalProperties", false);
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
        props.put("outcome", Map.of("type", "string", "enum", List.of("exited", "timeout", "cancelled", "memory_limit",
                "cpu_limit", "output_limit", "killed_by_signal", "failed_to_start")));
        props.put("peakMemoryBytes", Map.of("type", "integer"));
        props.put("cpuTimeMs", Map.of("type", "number"));
        props.put("sandbox", Map.of("type", "string"));
        return Map.of("type", "object", "properties", props, "required", List.of("language", "exitCode", "stdout",
                "stderr", "durationMs", "timedOut", "truncated", "outcome", "sandbox"));
    }

    CallToolResult call(McpSyncServerExchange exchange, CallToolRequest call) {
        try {
            ExecutionRequest parsed = converter.convert(call.arguments() == null ? Map.of() : call.arguments());
            Map<String, Object> meta = call.meta() == null ? Map.of() : call.meta();
            String session = Optional.ofNullable(meta.get(MessageInterceptor.SESSION_META)).map(Object::toString)
                    .orElseGet(exchange::sessionId);
            Optional<String> requestId = Optional.ofNullable(meta.get(MessageInterceptor.REQUEST_ID_META))
                    .map(Object::toString);
            ExecutionRequest request = new ExecutionRequest(parsed.language(), parsed.code(), parsed.stdin(),
                    parsed.args(), parsed.env(), parsed.limits(),
                    new AuditInfo(parsed.audit().tenant(), Optional.ofNullable(session), requestId));
            Object token = meta.get("progressToken");
            try (ProgressForwarder progress = token == null ? null
                    : new ProgressForwarder(token, exchange::progressNotification)) {
                RunHandle handle = executor.submit(request, progress == null ? OutputListener.NONE : progress);
                ExecutionResult result;
                try (RunRegistry.Registration ignored = requestId.isEmpty() || session == null
                        ? () -> { } : registry.register(session, requestId.get(), handle)) {
                    result = await(handle);
                }
                if (progress != null) progress.close();
                return success(result);
            }
        } catch (ExecutionException e) {
            return error(e);
        } catch (IllegalArgumentException e) {
            return error("Invalid arguments: " + e.getMessage());
        } catch (RuntimeException e) {
            LOG.error("execute_code failed unexpectedly", e);
            return error("Internal error: the call could not be completed (details are in the server log).");
        }
    }

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

    static CallToolResult success(ExecutionResult r) {
        Map<String, Object> s = new LinkedHashMap<>();
        s.put("language", r.language());
        s.put("exitCode", r.exitCode());
        s.put("stdout", r.stdout());
        s.put("stderr", r.stderr());
        s.put("durationMs", r.durationMs());
        s.put("timedOut", r.timedOut());
        s.put("truncated", r.truncated());
        s.put("outcome", r.outcome().wireName());
        r.peakMemoryBytes().ifPresent(v -> s.put("peakMemoryBytes", v));
        r.cpuTimeMs().ifPresent(v -> s.put("cpuTimeMs", v));
        s.put("sandbox", r.sandbox());
        return CallToolResult.builder().structuredContent(s).addTextContent(summary(r)).isError(false).build();
    }

    /** What a person (or a model reading plain text) needs: how it ended, then the output. */
    static String summary(ExecutionResult r) {
        StringBuilder b = new StringBuilder();
        b.append("outcome: ").append(r.outcome().wireName())
                .append(", exit code ").append(r.exitCode())
                .append(", ").append(r.durationMs()).append(" ms")
                .append(" (").append(r.language()).append(", sandbox ").append(r.sandbox()).append(')');
        if (r.truncated()) b.append("\noutput was truncated at the output limit");
        if (!r.stdout().isEmpty()) b.append("\n--- stdout ---\n").append(r.stdout());
        if (!r.stderr().isEmpty()) {
            if (!r.stdout().isEmpty() && !r.stdout().endsWith("\n")) b.append('\n');
            b.append(r.stdout().isEmpty() ? "\n" : "").append("--- stderr ---\n").append(r.stderr());
        }
        if (r.stdout().isEmpty() && r.stderr().isEmpty()) b.append("\n(no output)");
        return b.toString();
    }

    static CallToolResult error(ExecutionException e) {
        String label = switch (e) {
            case ExecutionException.InvalidRequest x -> "Invalid request: ";
            case ExecutionException.Busy x -> "Server busy: ";
            case ExecutionException.Unavailable x -> "Cannot run code: ";
            default -> "Cannot run code: ";
        };
        return error(label + e.getMessage());
    }

    static CallToolResult error(String text) {
        return CallToolResult.builder().addTextContent(text).isError(true).build();
    }
}
