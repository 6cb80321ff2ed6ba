package dev.codeexec.surface;

import dev.codeexec.codemode.CodeTools;
import dev.codeexec.config.Config;
import dev.codeexec.egress.EgressPolicy;
import dev.codeexec.egress.EgressSettings;
import dev.codeexec.engine.ExecutionException;
import dev.codeexec.engine.ExecutionRequest;
import dev.codeexec.engine.ExecutionRequest.AuditInfo;
import dev.codeexec.engine.Executor;
import dev.codeexec.engine.SessionRef;
import dev.codeexec.packages.PackageSet;
import dev.codeexec.sandbox.Sandbox;
import dev.codeexec.workspace.Workspaces;

import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;

/**
 * Everything the surfaces (MCP over HTTP or stdio, the REST API, the admin API) need, built once in {@code Main} or
 * in a test.
 *
 * @param config     validated configuration
 * @param executor   runs code; the surfaces only submit, await and cancel
 * @param converter  raw {@code execute_code} arguments to a validated request (the engine's validator)
 * @param languages  language ids and aliases shown as the {@code language} enum of the input schema
 * @param sandbox    sandbox name and availability for /healthz and the start-up log
 * @param version    server version (from the jar manifest)
 * @param extensions features the surfaces add after their own (test fixtures); empty in production
 * @param workspaces the tenants' workspaces: one instance shared by the MCP tools and the REST API
 * @param egress     the server's egress settings: each caller's allow-list and what a call's {@code network} may ask
 * @param codeTools  code mode's upstreams, when UPSTREAM_MCP_FILE is set (list_code_tools answers from them)
 */
public record ServerSetup(Config config, Executor executor, RequestConverter converter, List<String> languages,
        Sandbox.Status sandbox, String version, List<? extends SurfaceExtension> extensions, Workspaces workspaces,
        EgressSettings egress, Optional<CodeTools> codeTools) {

    /** A setup without code mode. */
    public ServerSetup(Config config, Executor executor, RequestConverter converter, List<String> languages,
            Sandbox.Status sandbox, String version, List<? extends SurfaceExtension> extensions, Workspaces workspaces,
            EgressSettings egress) {
        this(config, executor, converter, languages, sandbox, version, extensions, workspaces, egress, Optional.empty());
    }

    /** A setup whose runs have no network (EGRESS=off). */
    public ServerSetup(Config config, Executor executor, RequestConverter converter, List<String> languages,
            Sandbox.Status sandbox, String version, List<? extends SurfaceExtension> extensions, Workspaces workspaces) {
        this(config, executor, converter, languages, sandbox, version, extensions, workspaces, EgressSettings.OFF);
    }

    public ServerSetup {
        Objects.requireNonNull(config, "config");
        Objects.requireNonNull(executor, "executor");
        Objects.requireNonNull(converter, "converter");
        languages = List.copyOf(languages);
        Objects.requireNonNull(sandbox, "sandbox");
        Objects.requireNonNull(version, "version");
        extensions = List.copyOf(extensions);
        Objects.requireNonNull(workspaces, "workspaces");
        Objects.requireNonNull(egress, "egress");
        codeTools = codeTools == null ? Optional.empty() : codeTools;
    }

    /**
     * The request an {@code execute_code} call asks for, whichever surface it came through (an MCP tool call, the
     * REST playground): the arguments validated by the converter, then its {@code workspace} (opened for the
     * caller's tenant, created when new), its {@code session} (the tenant's session of that name) and its
     * {@code network} (inside the caller's allow-list: {@code tenantEgress}, else the server's).
     *
     * @throws ExecutionException.InvalidRequest          arguments the engine cannot accept, or a {@code network}
     *                                                   that would widen the caller's allow-list
     * @throws dev.codeexec.workspace.WorkspaceException a workspace or session name that is not valid, or a
     *                                                   workspace that cannot be opened
     */
    public ExecutionRequest request(Map<String, Object> arguments, String tenant, Optional<EgressPolicy> tenantEgress,
            AuditInfo audit) {
        Map<String, Object> args = arguments == null ? Map.of() : arguments;
        ExecutionRequest request = converter.convert(args).withAudit(audit);
        Object network = args.get("network");
        try {
            request = request.withEgress(egress.forCall(egress.policyFor(tenantEgress), network), network != null);
        } catch (IllegalArgumentException e) {
            throw new ExecutionException.InvalidRequest(e.getMessage());
        }
        request = request.withPackages(packages(request.language(), args.get("packages")));
        String ws = name(args, "workspace");
        if (ws != null) request = request.inWorkspace(workspaces.open(tenant, Workspaces.checkName("workspace", ws), true));
        String session = name(args, "session");
        if (session != null) request = request.inSession(new SessionRef(tenant, Workspaces.checkName("session", session)));
        return request;
    }

    /**
     * A call's {@code packages}, checked and normalised for its language; empty when absent or an empty list.
     *
     * @throws ExecutionException.InvalidRequest not a list of strings, or a requirement that is refused
     */
    public static Optional<PackageSet> packages(String language, Object value) {
        if (value == null) return Optional.empty();
        if (!(value instanceof List<?> list)) throw new ExecutionException.InvalidRequest("'packages' must be an array of strings");
        if (list.isEmpty()) return Optional.empty();
        List<String> specs = new java.util.ArrayList<>();
        for (Object o : list) {
            if (!(o instanceof String s)) throw new ExecutionException.InvalidRequest("'packages' must be an array of strings");
            specs.add(s);
        }
        try {
            return Optional.of(PackageSet.parse(language, specs));
        } catch (IllegalArgumentException e) {
            throw new ExecutionException.InvalidRequest(e.getMessage());
        }
    }

    private static String name(Map<String, Object> args, String key) {
        Object v = args.get(key);
        if (v == null || v instanceof String) return (String) v;
        throw new ExecutionException.InvalidRequest("'" + key + "' must be a string");
    }

    /**
     * How long the SDK may wait on one request: the longest run plus the longest wait for a slot, plus slack for
     * compiling and reporting. The SDK's 10 s default would cut runs short.
     */
    public Duration requestTimeout() {
        return Duration.ofMillis((long) config.get(Config.MAX_TIMEOUT_MS) + config.get(Config.QUEUE_TIMEOUT_MS))
                .plusSeconds(60);
    }

    /** The same setup with another executor (a decorator of this one, such as {@link dev.codeexec.engine.ObservedExecutor}). */
    public ServerSetup withExecutor(Executor other) {
        return new ServerSetup(config, other, converter, languages, sandbox, version, extensions, workspaces, egress, codeTools);
    }

    /** The version in the jar manifest, or "dev" when running from classes (tests, IDE). */
    public static String versionOf(Class<?> type) {
        String v = type.getPackage() == null ? null : type.getPackage().getImplementationVersion();
        return v == null ? "dev" : v;
    }
}
