package dev.codeexec.engine;

import dev.codeexec.lang.Languages;
import dev.codeexec.egress.EgressPolicy;
import dev.codeexec.packages.PackageSet;
import dev.codeexec.sandbox.Limits;
import dev.codeexec.workspace.Workspace;

import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;

/**
 * One request to run code. Built and validated by a surface (see {@link RequestValidator}); the engine trusts it.
 *
 * @param language  a language id from the {@link Languages} table (aliases already resolved by the caller or not)
 * @param code      the program text
 * @param stdin     fed to the program's standard input, then closed (empty when absent)
 * @param args      program arguments
 * @param env       extra environment variables (names already validated)
 * @param limits    resolved limits for this run
 * @param audit     who asked (tenant, MCP session, request id), for logs and cancellation; never affects the run
 * @param workspace the persistent workspace to run in (its directory becomes the working directory, read-write),
 *                  already resolved for the caller's tenant; empty for a stateless run in a fresh tmpfs
 * @param session   the stateful session (tenant and name) to run the code in; empty for a run in its own process
 * @param egress    the hosts the run may reach through the egress proxy, already narrowed to the caller's
 *                  allow-list by the surface; {@link EgressPolicy#OFF} for no network (the default)
 * @param egressAsked the call named its policy ({@code network}) rather than getting its caller's whole list: a
 *                  session created earlier with another policy then refuses the call instead of ignoring it
 * @param packages  the packages the run declared ({@code packages}), checked and normalised; empty for none. In a
 *                  session: the set its interpreter is created with, and a call naming another set is refused
 */
public record ExecutionRequest(String language, String code, String stdin, List<String> args,
        Map<String, String> env, Limits limits, AuditInfo audit, Optional<Workspace> workspace,
        Optional<SessionRef> session, EgressPolicy egress, boolean egressAsked, Optional<PackageSet> packages) {

    /** A request without declared packages. */
    public ExecutionRequest(String language, String code, String stdin, List<String> args, Map<String, String> env,
            Limits limits, AuditInfo audit, Optional<Workspace> workspace, Optional<SessionRef> session,
            EgressPolicy egress, boolean egressAsked) {
        this(language, code, stdin, args, env, limits, audit, workspace, session, egress, egressAsked, Optional.empty());
    }

    /** A request without network access. */
    public ExecutionRequest(String language, String code, String stdin, List<String> args, Map<String, String> env,
            Limits limits, AuditInfo audit, Optional<Workspace> workspace, Optional<SessionRef> session) {
        this(language, code, stdin, args, env, limits, audit, workspace, session, EgressPolicy.OFF, false);
    }

    /** A request without a session. */
    public ExecutionRequest(String language, String code, String stdin, List<String> args, Map<String, String> env,
            Limits limits, AuditInfo audit, Optional<Workspace> workspace) {
        this(language, code, stdin, args, env, limits, audit, workspace, Optional.empty());
    }

    /** A stateless run. */
    public ExecutionRequest(String language, String code, String stdin, List<String> args, Map<String, String> env,
            Limits limits, AuditInfo audit) {
        this(language, code, stdin, args, env, limits, audit, Optional.empty());
    }

    public ExecutionRequest {
        Objects.requireNonNull(language, "language");
        Objects.requireNonNull(code, "code");
        stdin = stdin == null ? "" : stdin;
        args = args == null ? List.of() : List.copyOf(args);
        env = env == null ? Map.of() : Map.copyOf(env);
        Objects.requireNonNull(limits, "limits");
        audit = audit == null ? AuditInfo.NONE : audit;
        workspace = workspace == null ? Optional.empty() : workspace;
        session = session == null ? Optional.empty() : session;
        egress = egress == null ? EgressPolicy.OFF : egress;
        packages = packages == null ? Optional.empty() : packages;
    }

    /** The same request, run in the given workspace. */
    public ExecutionRequest inWorkspace(Workspace ws) {
        return new ExecutionRequest(language, code, stdin, args, env, limits, audit, Optional.of(ws), session, egress, egressAsked, packages);
    }

    /** The same request, run in the tenant's session of that name (created by its first call). */
    public ExecutionRequest inSession(SessionRef ref) {
        return new ExecutionRequest(language, code, stdin, args, env, limits, audit, workspace, Optional.of(ref), egress, egressAsked, packages);
    }

    /** The same request with other audit information. */
    public ExecutionRequest withAudit(AuditInfo a) {
        return new ExecutionRequest(language, code, stdin, args, env, limits, a, workspace, session, egress, egressAsked, packages);
    }

    /** The same request with this network policy; {@code asked}: the call named it. */
    public ExecutionRequest withEgress(EgressPolicy policy, boolean asked) {
        return new ExecutionRequest(language, code, stdin, args, env, limits, audit, workspace, session, policy, asked, packages);
    }

    /** The same request declaring these packages (empty: none). */
    public ExecutionRequest withPackages(Optional<PackageSet> set) {
        return new ExecutionRequest(language, code, stdin, args, env, limits, audit, workspace, session, egress, egressAsked, set);
    }

    /**
     * Who asked for a run: only for logs, metrics and cancellation.
     *
     * @param tenant        the caller's tenant
     * @param session       the MCP session of the call
     * @param requestId     the JSON-RPC id of the MCP call (what {@code notifications/cancelled} names); the audit
     *                      line writes it as {@code requestId=}
     * @param httpRequestId the HTTP request's {@code X-Request-Id}, which is also the {@code requestId} in the MDC of
     *                      JSON log lines; the audit line writes it as {@code httpRequestId=} and puts it in its MDC
     */
    public record AuditInfo(Optional<String> tenant, Optional<String> session, Optional<String> requestId,
            Optional<String> httpRequestId) {
        public static final AuditInfo NONE = new AuditInfo(Optional.empty(), Optional.empty(), Optional.empty(),
                Optional.empty());

        public AuditInfo {
            tenant = tenant == null ? Optional.empty() : tenant;
            session = session == null ? Optional.empty() : session;
            requestId = requestId == null ? Optional.empty() : requestId;
            httpRequestId = httpRequestId == null ? Optional.empty() : httpRequestId;
        }

        /** Without an HTTP request (stdio, in-process callers). */
        public AuditInfo(Optional<String> tenant, Optional<String> session, Optional<String> requestId) {
            this(tenant, session, requestId, Optional.empty());
        }
    }
}
