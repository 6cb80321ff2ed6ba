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
 * @param background a background job's run ({@code job.Jobs}): the engine runs it outside MAX_CONCURRENT's slots,
 *                  on a thread of its own, at a lower CPU weight than interactive runs; its limits allow the job's
 *                  longer timeout. Never with a session
 */
public record ExecutionRequest(String language, String code, String stdin, List<String> args,
        Map<String, String> env, Limits limits, AuditInfo audit, Optional<Workspace> workspace,
        Optional<SessionRef> session, EgressPolicy egress, boolean egressAsked, Optional<PackageSet> packages,
        boolean background) {

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
        if (background && session.isPresent()) throw new IllegalArgumentException("a background run has no session");
    }

    /** A request for {@code code} in {@code language} under {@code limits}; the rest as the builder is told. */
    public static Builder builder(String language, String code, Limits limits) {
        return new Builder(language, code, limits);
    }

    /** A builder holding this request, to change some of it. */
    public Builder toBuilder() {
        return new Builder(language, code, limits).stdin(stdin).args(args).env(env).audit(audit).workspace(workspace)
                .session(session).egress(egress, egressAsked).packages(packages).background(background);
    }

    /** The same request, run in the given workspace. */
    public ExecutionRequest inWorkspace(Workspace ws) {
        return toBuilder().workspace(Optional.of(ws)).build();
    }

    /** The same request, run in the tenant's session of that name (created by its first call). */
    public ExecutionRequest inSession(SessionRef ref) {
        return toBuilder().session(Optional.of(ref)).build();
    }

    /** The same request with this network policy; {@code asked}: the call named it. */
    public ExecutionRequest withEgress(EgressPolicy policy, boolean asked) {
        return toBuilder().egress(policy, asked).build();
    }

    /** The same request declaring these packages (empty: none). */
    public ExecutionRequest withPackages(Optional<PackageSet> set) {
        return toBuilder().packages(set).build();
    }

    /** Builds a request; what it is not told is the default of a stateless run without network or packages. */
    public static final class Builder {
        private String language;
        private String code;
        private Limits limits;
        private String stdin = "";
        private List<String> args = List.of();
        private Map<String, String> env = Map.of();
        private AuditInfo audit = AuditInfo.NONE;
        private Optional<Workspace> workspace = Optional.empty();
        private Optional<SessionRef> session = Optional.empty();
        private EgressPolicy egress = EgressPolicy.OFF;
        private boolean egressAsked;
        private Optional<PackageSet> packages = Optional.empty();
        private boolean background;

        private Builder(String language, String code, Limits limits) {
            this.language = language;
            this.code = code;
            this.limits = limits;
        }

        public Builder language(String language) {
            this.language = language;
            return this;
        }

        public Builder code(String code) {
            this.code = code;
            return this;
        }

        public Builder limits(Limits limits) {
            this.limits = limits;
            return this;
        }

        public Builder stdin(String stdin) {
            this.stdin = stdin;
            return this;
        }

        public Builder args(List<String> args) {
            this.args = args;
            return this;
        }

        public Builder env(Map<String, String> env) {
            this.env = env;
            return this;
        }

        public Builder audit(AuditInfo audit) {
            this.audit = audit;
            return this;
        }

        public Builder workspace(Optional<Workspace> workspace) {
            this.workspace = workspace;
            return this;
        }

        public Builder session(Optional<SessionRef> session) {
            this.session = session;
            return this;
        }

        /** The hosts the run may reach; {@code asked}: the call named its policy (see the record's egressAsked). */
        public Builder egress(EgressPolicy egress, boolean asked) {
            this.egress = egress;
            this.egressAsked = asked;
            return this;
        }

        public Builder packages(Optional<PackageSet> packages) {
            this.packages = packages;
            return this;
        }

        /** A background job's run (see the record's {@code background}). */
        public Builder background(boolean background) {
            this.background = background;
            return this;
        }

        public ExecutionRequest build() {
            return new ExecutionRequest(language, code, stdin, args, env, limits, audit, workspace, session, egress,
                    egressAsked, packages, background);
        }
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
