package dev.codeexec.http;

import dev.codeexec.auth.Principal;
import dev.codeexec.engine.Executor;
import dev.codeexec.engine.WorkerStatus;
import dev.codeexec.packages.PackageStore;
import dev.codeexec.surface.ResultMaps;
import dev.codeexec.surface.ServerSetup;
import dev.codeexec.ops.RunHistory;
import dev.codeexec.ops.RunHistory.Run;
import dev.codeexec.workspace.Workspace;
import dev.codeexec.workspace.Workspaces;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;

import java.io.IOException;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalInt;
import java.util.OptionalLong;

/**
 * The data behind the admin console: {@code GET /api/admin/stats} (with {@code mode} and the gateway's
 * {@code workers}), {@code /api/admin/executions[/{id}]} (each run with the {@code worker} that ran it),
 * {@code /api/admin/workspaces}, and the playground's {@code POST /api/execute} ({@link ExecuteStream}). Reached
 * through {@link ApiServlet}, which has authenticated the caller and maps errors to statuses. An admin key sees
 * every tenant (or one, with {@code ?tenant=}); a tenant key sees only its own runs, counters and workspaces, and
 * another tenant's run is "not found" rather than "forbidden", so ids do not reveal what exists elsewhere.
 */
final class AdminApi {

    static final String ADMIN_PREFIX = JsonErrors.API_PATH + "/admin/";
    static final String EXECUTE_PATH = JsonErrors.API_PATH + "/execute";
    static final int DEFAULT_LIMIT = 50;
    static final int MAX_LIMIT = 500;

    private final ServerSetup setup;
    private final Executor executor;
    private final RunHistory history;
    private final ExecuteStream.Endpoint execute;
    private final Instant started = Instant.now();

    AdminApi(ServerSetup setup, RunHistory history, long maxBodyBytes, Bodies bodies) {
        this.setup = setup;
        this.executor = setup.executor();
        this.history = history;
        this.execute = new ExecuteStream.Endpoint(setup, maxBodyBytes, bodies);
    }

    static boolean handles(String uri) {
        return uri.startsWith(ADMIN_PREFIX) || uri.equals(EXECUTE_PATH);
    }

    /**
     * The tenant a request acts in: the caller's own, or, with {@code ?tenant=NAME}, another one when the key is
     * an admin key. A tenant key may name only itself.
     */
    static String actingTenant(Principal who, String requested) {
        if (requested == null || requested.isEmpty()) return who.tenant();
        Workspaces.checkName("tenant", requested);
        if (!who.admin() && !requested.equals(who.tenant()))
            throw new ApiException(403, "forbidden", "only an admin key may act on another tenant");
        return requested;
    }

    /** Whose data a view shows: empty for all tenants (an admin key without {@code ?tenant=}). */
    static Optional<String> viewScope(Principal who, String requested) {
        if ((requested == null || requested.isEmpty()) && who.admin()) return Optional.empty();
        return Optional.of(actingTenant(who, requested));
    }

    void handle(String method, Principal who, HttpServletRequest req, HttpServletResponse resp) throws IOException {
        String uri = req.getRequestURI();
        Map<String, String> query = ApiRoute.query(req.getQueryString());
        if (uri.equals(EXECUTE_PATH)) {
            requireMethod("POST", method);
            execute.handle(actingTenant(who, query.get("tenant")), req, resp);
            return;
        }
        String rest = uri.substring(ADMIN_PREFIX.length());
        if (rest.equals("packages") || rest.startsWith("packages/")) {
            packages(method, who, rest.substring("packages".length()), resp);
            return;
        }
        requireMethod("GET", method);
        Optional<String> scope = viewScope(who, query.get("tenant"));
        switch (rest) {
            case "stats" -> ApiServlet.json(resp, 200, stats(scope));
            case "executions" -> ApiServlet.json(resp, 200, executions(scope, query));
            case "workspaces" -> ApiServlet.json(resp, 200, Map.of("workspaces", workspaces(scope)));
            default -> {
                if (!rest.startsWith("executions/")) throw new ApiException(404, "not_found", "no such API route");
                String id = ApiRoute.decode(rest.substring("executions/".length()));
                Run run = history.find(id).filter(r -> scope.isEmpty() || scope.get().equals(r.tenant()))
                        .orElseThrow(() -> new ApiException(404, "not_found", "no such execution in the history"));
                ApiServlet.json(resp, 200, detail(run));
            }
        }
    }

    /**
     * The package store, shared by every tenant's runs (an entry is built from its normalised request only), so
     * only an admin key may see or clear it: {@code GET /api/admin/packages} lists the entries and counts,
     * {@code DELETE /api/admin/packages} removes every entry no run or session holds, {@code DELETE
     * /api/admin/packages/{key}} one (409 while in use).
     */
    private void packages(String method, Principal who, String rest, HttpServletResponse resp) throws IOException {
        if (!who.admin()) throw new ApiException(403, "forbidden", "only an admin key may see or clear the package store");
        PackageStore store = executor.status().packageStore().orElseThrow(() -> new ApiException(404, "not_found",
                executor.status().remote() ? "the package stores are kept by the workers; this gateway has none"
                        : "this server has no package store (PACKAGES=off, or a sandbox other than bwrap)"));
        if (rest.isEmpty() && method.equals("GET")) {
            List<Map<String, Object>> entries = new ArrayList<>();
            for (PackageStore.Entry e : store.list()) {
                Map<String, Object> m = new LinkedHashMap<>();
                m.put("key", e.key());
                m.put("ecosystem", e.ecosystem());
                m.put("specs", e.specs());
                m.put("resolved", e.resolved());
                m.put("bytes", e.bytes());
                m.put("created", e.created().toString());
                m.put("lastUsed", e.lastUsed().toString());
                m.put("inUse", e.inUse());
                entries.add(m);
            }
            Map<String, Object> out = new LinkedHashMap<>();
            out.put("entries", entries);
            out.put("counts", store.counts());
            out.put("maxBytes", store.maxBytes());
            ApiServlet.json(resp, 200, out);
            return;
        }
        requireMethod("DELETE", method);
        if (rest.isEmpty()) {
            int removed = 0;
            int kept = 0;
            for (PackageStore.Entry e : store.list()) {
                if (store.remove(e.key())) removed++;
                else kept++;
            }
            ApiServlet.json(resp, 200, Map.of("removed", removed, "kept", kept));
            return;
        }
        String key = ApiRoute.decode(rest.substring(1));
        Optional<PackageStore.Entry> entry = store.list().stream().filter(e -> e.key().equals(key)).findFirst();
        if (entry.isEmpty()) throw new ApiException(404, "not_found", "no such entry in the package store");
        if (!store.remove(key))
            throw new ApiException(409, "in_use", "a run or session is using this entry; it can be removed when it ends");
        ApiServlet.json(resp, 200, Map.of("key", key, "removed", true));
    }

    private static void requireMethod(String expected, String method) {
        if (!expected.equals(method))
            throw new ApiException(405, "method_not_allowed", method + " is not allowed on this route");
    }

    private Map<String, Object> stats(Optional<String> scope) {
        RunHistory.Stats s = history.stats(scope);
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("tenant", scope.orElse(null));
        out.put("version", setup.version());
        out.put("uptimeSeconds", Duration.between(started, Instant.now()).toSeconds());
        out.put("sandbox", setup.sandbox().name());
        // Workers are shared infrastructure like the queue: every key sees them, a tenant's view included.
        List<WorkerStatus> workers = executor.status().workers();
        out.put("mode", ResultMaps.mode(executor, workers));
        out.put("workers", ResultMaps.workers(workers));
        Map<String, Object> ex = new LinkedHashMap<>();
        ex.put("total", s.total());
        ex.put("failed", s.failed());
        ex.put("timedOut", s.timedOut());
        ex.put("running", s.running());
        ex.put("byLanguage", s.byLanguage());
        ex.put("byOutcome", s.byOutcome());
        Map<String, Object> duration = new LinkedHashMap<>();
        duration.put("p50", orNull(s.p50()));
        duration.put("p95", orNull(s.p95()));
        duration.put("window", s.window());
        ex.put("durationMs", duration);
        out.put("executions", ex);
        out.put("queue", Map.of("running", executor.status().running(), "queued", executor.status().queued(),
                "maxConcurrent", executor.status().maxConcurrent()));
        Map<String, Object> info = executor.runtimeInfo();
        out.put("limits", info.getOrDefault("limits", Map.of()));
        out.put("warmPool", executor.status().warmPoolLevels());
        out.put("sessions", ResultMaps.sessions(executor, info, scope));
        out.put("history", Map.of("size", s.size(), "capacity", s.capacity()));
        return out;
    }

    private Map<String, Object> executions(Optional<String> scope, Map<String, String> query) {
        int limit = Math.min(MAX_LIMIT, intParam(query, "limit", DEFAULT_LIMIT, 1));
        int offset = intParam(query, "offset", 0, 0);
        Optional<String> q = param(query, "q");
        if (q.isPresent() && q.get().length() > RunHistory.Filter.MAX_QUERY)
            throw ApiException.badRequest("q: at most " + RunHistory.Filter.MAX_QUERY + " characters");
        RunHistory.Filter filter = new RunHistory.Filter(scope, param(query, "language"), param(query, "outcome"), q,
                param(query, "worker"));
        RunHistory.Page page = history.query(filter, offset, limit);
        List<Map<String, Object>> list = new ArrayList<>();
        for (Run r : page.runs()) list.add(entry(r));
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("executions", list);
        out.put("total", page.total());
        out.put("capacity", history.capacity());
        return out;
    }

    private static Optional<String> param(Map<String, String> query, String name) {
        String v = query.get(name);
        return v == null || v.isEmpty() ? Optional.empty() : Optional.of(v);
    }

    private static int intParam(Map<String, String> query, String name, int fallback, int min) {
        String v = query.get(name);
        if (v == null || v.isEmpty()) return fallback;
        try {
            int n = Integer.parseInt(v);
            if (n >= min) return n;
        } catch (NumberFormatException e) {
            // answered below
        }
        throw ApiException.badRequest("'" + name + "' must be a whole number of at least " + min);
    }

    static Map<String, Object> entry(Run r) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("id", r.id());
        m.put("time", r.submittedAt().toString());
        m.put("tenant", r.tenant());
        m.put("language", r.language());
        m.put("outcome", r.outcome());
        m.put("exitCode", r.end().map(e -> orNull(e.exitCode())).orElse(null));
        m.put("durationMs", r.end().map(e -> orNull(e.durationMs())).orElse(null));
        m.put("codeExcerpt", RunHistory.excerpt(r.code()));
        m.put("workspace", r.workspace().orElse(null));
        m.put("session", r.session().orElse(null));
        m.put("worker", r.worker().orElse(null));
        m.put("running", r.running());
        m.put("failed", r.failed());
        return m;
    }

    static Map<String, Object> detail(Run r) {
        Map<String, Object> m = entry(r);
        m.put("code", r.code());
        m.put("codeTruncated", r.codeTruncated());
        m.put("stdout", r.end().map(RunHistory.End::stdout).orElse(""));
        m.put("stderr", r.end().map(RunHistory.End::stderr).orElse(""));
        m.put("outputTruncated", r.end().map(RunHistory.End::outputTruncated).orElse(false));
        m.put("timedOut", r.end().map(RunHistory.End::timedOut).orElse(false));
        m.put("cpuTimeMs", r.end().map(e -> e.cpuTimeMs().isPresent() ? (Object) e.cpuTimeMs().getAsDouble() : null)
                .orElse(null));
        m.put("peakMemoryBytes", r.end().map(e -> orNull(e.peakMemoryBytes())).orElse(null));
        m.put("requestId", r.requestId().orElse(null));
        m.put("error", r.end().flatMap(RunHistory.End::error).orElse(null));
        m.put("endedAt", r.end().map(e -> e.endedAt().toString()).orElse(null));
        return m;
    }

    private static Object orNull(OptionalInt v) {
        return v.isPresent() ? v.getAsInt() : null;
    }

    private static Object orNull(OptionalLong v) {
        return v.isPresent() ? v.getAsLong() : null;
    }

    /** Every workspace of the tenants in scope, with size against quota. */
    private List<Map<String, Object>> workspaces(Optional<String> scope) {
        Workspaces all = setup.workspaces();
        List<String> tenants = scope.map(List::of).orElseGet(all::tenants);
        List<Map<String, Object>> out = new ArrayList<>();
        for (String tenant : tenants) {
            for (Workspace.Info info : all.infos(tenant)) {
                Map<String, Object> m = new LinkedHashMap<>();
                m.put("tenant", tenant);
                m.putAll(ApiServlet.infoMap(info));
                out.add(m);
            }
        }
        return out;
    }
}
