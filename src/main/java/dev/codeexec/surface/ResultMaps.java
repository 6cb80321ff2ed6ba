package dev.codeexec.surface;

import dev.codeexec.egress.ConnectionRecord;
import dev.codeexec.codemode.ToolCall;
import dev.codeexec.egress.NetworkReport;
import dev.codeexec.engine.ExecutionResult;
import dev.codeexec.engine.Executor;
import dev.codeexec.engine.WorkerStatus;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;

/**
 * A run's result as the plain map every surface sends: {@code execute_code}'s {@code structuredContent} and the
 * {@code result} line of the REST playground stream are this one map, so a field added here reaches both. Likewise
 * one worker's map ({@link #worker}) is what runtime_info, /healthz and the admin stats show.
 */
public final class ResultMaps {

    private ResultMaps() {
    }

    /**
     * Images a result shows inline at most (a result with many charts would otherwise grow without bound; the rest
     * stay reachable as links): the MCP surface's rule, which the {@code shown} flag of each figure reports.
     */
    public static final int MAX_INLINE_IMAGES = 10;

    /** Mode value of a server that runs code itself. */
    public static final String LOCAL = "local";
    /** Mode value of a gateway, which sends runs to workers. */
    public static final String GATEWAY = "gateway";

    /**
     * {@link #GATEWAY} when the executor sends runs to workers (it says so, or it knows some), else {@link #LOCAL}.
     *
     * @param workers the executor's {@link Executor#workers()}, already read by the caller (one snapshot per answer)
     */
    public static String mode(Executor executor, List<WorkerStatus> workers) {
        return !workers.isEmpty() || executor.status().remote() ? GATEWAY : LOCAL;
    }

    /**
     * One worker as every surface shows it. Fields a worker has not told yet (name, instance id, last seen, error)
     * are null rather than missing, so a table has the same columns for every row.
     */
    public static Map<String, Object> worker(WorkerStatus w) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("address", w.address());
        m.put("name", w.name().orElse(null));
        m.put("instanceId", w.instanceId().orElse(null));
        m.put("healthy", w.healthy());
        m.put("draining", w.draining());
        m.put("running", w.running());
        m.put("queued", w.queued());
        m.put("slots", w.slots());
        m.put("sessions", w.sessions());
        m.put("warmPool", w.warmPool());
        m.put("lastSeen", w.lastSeen().map(Object::toString).orElse(null));
        m.put("error", w.error().orElse(null));
        return m;
    }

    /**
     * The {@code sessions} part of runtime_info and the admin stats, as one caller may see it: the executor's
     * (limits, languages, availability) with {@code count} the scope's own sessions; the server-wide count only for
     * an empty scope (an admin key's view of every tenant). Other tenants' sessions are not a tenant's business.
     *
     * @param scope the tenant whose view it is, or empty for every tenant's
     */
    public static Map<String, Object> sessions(Executor executor, Map<String, Object> runtimeInfo,
            Optional<String> scope) {
        Map<String, Object> sessions = new LinkedHashMap<>();
        if (runtimeInfo.get("sessions") instanceof Map<?, ?> m) m.forEach((k, v) -> sessions.put(String.valueOf(k), v));
        if (scope.isPresent()) sessions.put("count", executor.sessions().list(scope.get()).size());
        else sessions.putIfAbsent("count", 0);
        return sessions;
    }

    /** {@link #worker} of each, in the executor's order (sorted by address). */
    public static List<Map<String, Object>> workers(List<WorkerStatus> workers) {
        List<Map<String, Object>> out = new ArrayList<>(workers.size());
        for (WorkerStatus w : workers) out.add(worker(w));
        return out;
    }

    /**
     * @param workspace     the workspace the run used, if any (adds {@code workspace}, {@code files}, {@code filesTruncated})
     * @param maxImageBytes the inline image cap, which decides each session figure's {@code shown}
     */
    public static Map<String, Object> structured(ExecutionResult r, Optional<String> workspace, long maxImageBytes) {
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
        r.worker().ifPresent(w -> s.put("worker", w));
        if (workspace.isPresent()) {
            s.put("workspace", workspace.get());
            List<Map<String, Object>> files = new ArrayList<>();
            for (ExecutionResult.FileArtifact f : r.files()) {
                files.add(Map.of("path", f.path(), "size", f.size(), "mimeType", f.mimeType(), "status", f.status()));
            }
            s.put("files", files);
            s.put("filesTruncated", r.filesTruncated());
        }
        r.session().ifPresent(so -> {
            s.put("session", so.name());
            s.put("sessionCreated", so.created());
            so.result().ifPresent(v -> s.put("result", v));
            so.executionCount().ifPresent(n -> s.put("executionCount", n));
            so.error().ifPresent(e -> s.put("error", Map.of("name", e.name(), "value", e.value(), "traceback", e.traceback())));
            // the rule of the MCP surface's images: the outputs' images then the figures, in order, up to the count,
            // none over the size limit
            int[] shown = {0};
            java.util.function.Function<ExecutionResult.Figure, Map<String, Object>> describe = f -> {
                boolean inline = shown[0] < MAX_INLINE_IMAGES && f.data().length <= maxImageBytes;
                if (inline) shown[0]++;
                return Map.of("mimeType", f.mimeType(), "size", f.data().length, "shown", inline);
            };
            if (!so.outputs().isEmpty()) {
                List<Map<String, Object>> outputs = new ArrayList<>();
                for (ExecutionResult.RichOutput o : so.outputs()) {
                    Map<String, Object> m = new LinkedHashMap<>();
                    m.put("kind", o.kind());
                    m.put("data", o.texts());
                    o.image().ifPresent(f -> m.put("image", describe.apply(f)));
                    outputs.add(m);
                }
                s.put("outputs", outputs);
            }
            List<Map<String, Object>> figures = new ArrayList<>();
            for (ExecutionResult.Figure f : so.figures()) figures.add(describe.apply(f));
            s.put("figures", figures);
        });
        s.put("network", network(r));
        r.toolCalls().ifPresent(t -> s.put("toolCalls", toolCalls(t)));
        r.toolCalls().filter(t -> t.apiTotal() > 0).ifPresent(t -> {
            s.put("apiCalls", apiCalls(t));
            s.put("apiCallsLeftOut", t.apiLeftOut());
        });
        r.packages().ifPresent(p -> {
            s.put("packages", new java.util.TreeMap<>(p.resolved()));
            s.put("installMs", p.installMs());
        });
        return s;
    }

    /** The tool calls a run's code made (code mode): each with its outcome, the first 100, and a count of the rest. */
    public static Map<String, Object> toolCalls(ToolCall.Report report) {
        List<Map<String, Object>> calls = new ArrayList<>();
        for (ToolCall c : report.calls()) {
            Map<String, Object> e = new LinkedHashMap<>();
            e.put("server", c.server());
            e.put("tool", c.tool());
            e.put("ms", c.ms());
            e.put("ok", c.ok());
            e.put("bytesIn", c.bytesIn());
            e.put("bytesOut", c.bytesOut());
            c.reason().ifPresent(x -> e.put("reason", x));
            calls.add(e);
        }
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("calls", calls);
        m.put("callsLeftOut", report.leftOut());
        return m;
    }

    /** The calls a run's code made through credentialed API routes, the first 100 (code mode with httpApis). */
    public static List<Map<String, Object>> apiCalls(ToolCall.Report report) {
        List<Map<String, Object>> calls = new ArrayList<>();
        for (dev.codeexec.codemode.ApiCall c : report.apiCalls()) {
            Map<String, Object> e = new LinkedHashMap<>();
            e.put("api", c.api());
            e.put("method", c.method());
            e.put("path", c.path());
            e.put("status", c.status());
            e.put("ms", c.ms());
            e.put("bytesIn", c.bytesIn());
            e.put("bytesOut", c.bytesOut());
            calls.add(e);
        }
        return calls;
    }

    /** The run's network as the structured result shows it; a run without any says so. */
    public static Map<String, Object> network(ExecutionResult r) {
        Map<String, Object> m = new LinkedHashMap<>();
        if (r.network().isEmpty()) {
            m.put("allow", List.of());
            m.put("note", "this run had no network access");
            return m;
        }
        NetworkReport n = r.network().get();
        m.put("allow", n.policy());
        List<Map<String, Object>> conns = new ArrayList<>();
        for (ConnectionRecord c : n.connections()) {
            Map<String, Object> e = new LinkedHashMap<>();
            e.put("host", c.host());
            e.put("port", c.port());
            e.put("decision", c.decision());
            e.put("reason", c.reason());
            e.put("message", c.message());
            e.put("bytesOut", c.bytesOut());
            e.put("bytesIn", c.bytesIn());
            e.put("ms", c.ms());
            if (!c.secrets().isEmpty()) e.put("secrets", c.secrets());
            conns.add(e);
        }
        m.put("connections", conns);
        m.put("connectionsLeftOut", n.leftOut());
        m.put("bytesOut", n.bytesOut());
        m.put("bytesIn", n.bytesIn());
        if (n.policy().isEmpty()) m.put("note", "this run had no network access");
        return m;
    }
}
