package dev.codeexec.surface;

import dev.codeexec.codemode.CodeTools;
import dev.codeexec.config.Config;
import dev.codeexec.egress.EgressPolicy;
import dev.codeexec.egress.EgressSettings;
import dev.codeexec.engine.ExecutionException;
import dev.codeexec.engine.ExecutionRequest.AuditInfo;
import dev.codeexec.engine.ExecutionRequest;
import dev.codeexec.engine.Executor;
import dev.codeexec.engine.RequestValidator;
import dev.codeexec.engine.SessionRef;
import dev.codeexec.engine.JobControl;
import dev.codeexec.job.Jobs;
import dev.codeexec.sandbox.Sandbox;
import dev.codeexec.workspace.Workspace;
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
 * @param arguments  {@code execute_code}'s arguments: their schema, and the raw arguments of a call to a request
 * @param sandbox    sandbox name and availability for /healthz and the start-up log
 * @param version    server version (from the jar manifest)
 * @param extensions features the surfaces add after their own (test fixtures); empty in production
 * @param workspaces the tenants' workspaces: one instance shared by the MCP tools and the REST API
 * @param egress     the server's egress settings: each caller's allow-list and what a call's {@code network} may ask
 * @param codeTools  code mode's upstreams, when UPSTREAM_MCP_FILE is set (list_code_tools answers from them)
 * @param jobs       the background jobs, opened by the server that serves this setup ({@link #withJobs}) over its
 *                   observed executor; empty until then
 * @param previews   the port previews' registry, made by the server that serves previews ({@link #withPreviews});
 *                   empty until then (expose_port then says previews are not available)
 */
public record ServerSetup(Config config, Executor executor, RequestValidator arguments, Sandbox.Status sandbox,
        String version, List<? extends SurfaceExtension> extensions, Workspaces workspaces, EgressSettings egress,
        Optional<CodeTools> codeTools, Optional<JobControl<?>> jobs, Optional<dev.codeexec.engine.PreviewControl> previews) {

    /** A setup without background jobs yet (a server opens them: {@link #withJobs}). */
    public ServerSetup(Config config, Executor executor, RequestValidator arguments, Sandbox.Status sandbox,
            String version, List<? extends SurfaceExtension> extensions, Workspaces workspaces, EgressSettings egress,
            Optional<CodeTools> codeTools) {
        this(config, executor, arguments, sandbox, version, extensions, workspaces, egress, codeTools, Optional.empty(),
                Optional.empty());
    }

    /** A setup without code mode. */
    public ServerSetup(Config config, Executor executor, RequestValidator arguments, Sandbox.Status sandbox,
            String version, List<? extends SurfaceExtension> extensions, Workspaces workspaces, EgressSettings egress) {
        this(config, executor, arguments, sandbox, version, extensions, workspaces, egress, Optional.empty());
    }

    /** A setup whose runs have no network (EGRESS=off). */
    public ServerSetup(Config config, Executor executor, RequestValidator arguments, Sandbox.Status sandbox,
            String version, List<? extends SurfaceExtension> extensions, Workspaces workspaces) {
        this(config, executor, arguments, sandbox, version, extensions, workspaces, EgressSettings.OFF);
    }

    public ServerSetup {
        Objects.requireNonNull(config, "config");
        Objects.requireNonNull(executor, "executor");
        Objects.requireNonNull(arguments, "arguments");
        Objects.requireNonNull(sandbox, "sandbox");
        Objects.requireNonNull(version, "version");
        extensions = List.copyOf(extensions);
        Objects.requireNonNull(workspaces, "workspaces");
        Objects.requireNonNull(egress, "egress");
        codeTools = codeTools == null ? Optional.empty() : codeTools;
        jobs = jobs == null ? Optional.empty() : jobs;
        previews = previews == null ? Optional.empty() : previews;
    }

    /** The language ids and aliases a call may name (the {@code language} enum of the input schema, completions). */
    public List<String> languages() {
        return arguments.languageNames();
    }

    /**
     * The request an {@code execute_code} call asks for, whichever surface it came through (an MCP tool call, the
     * REST playground): the arguments checked ({@link RequestValidator#parse}), then resolved for the caller: its
     * {@code network} inside the caller's allow-list ({@code tenantEgress}, else the server's), its
     * {@code workspace} opened for the caller's tenant (created when new), its {@code session} the tenant's session
     * of that name.
     *
     * @throws ExecutionException.InvalidRequest          arguments the engine cannot accept, or a {@code network}
     *                                                   that would widen the caller's allow-list
     * @throws dev.codeexec.workspace.WorkspaceException a workspace or session name that is not valid, or a
     *                                                   workspace that cannot be opened
     */
    public ExecutionRequest request(Map<String, Object> args, String tenant, Optional<EgressPolicy> tenantEgress,
            AuditInfo audit) {
        RequestValidator.Arguments a = arguments.parse(args, audit);
        ExecutionRequest request = a.request();
        try {
            request = request.withEgress(egress.forCall(egress.policyFor(tenantEgress), a.network()), a.network() != null);
        } catch (IllegalArgumentException e) {
            throw new ExecutionException.InvalidRequest(e.getMessage());
        }
        if (a.workspace().isPresent()) request = request.inWorkspace(workspaces.open(tenant, a.workspace().get(), true));
        if (a.session().isPresent()) request = request.inSession(new SessionRef(tenant, a.session().get()));
        return request;
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
        return new ServerSetup(config, other, arguments, sandbox, version, extensions, workspaces, egress, codeTools, jobs,
                previews);
    }

    /**
     * The same setup with its background jobs opened over its executor (DATA_DIR/jobs read back): what a server
     * does once, when it starts, after it has wrapped the executor it observes. A job's result is kept as
     * {@link ResultMaps#structured} shows it.
     */
    public ServerSetup withJobs() {
        JobControl<?> j = executor.jobs().orElseGet(() -> Jobs.open(config, executor, resultMap(config)));
        return new ServerSetup(config, executor, arguments, sandbox, version, extensions, workspaces, egress, codeTools,
                Optional.of(j), previews);
    }

    /**
     * The same setup with a registry of port previews over its executor and jobs (after {@link #withJobs}): what a
     * server that serves previews does once, when it starts; the server then tells the registry where it listens.
     */
    public ServerSetup withPreviews() {
        dev.codeexec.engine.PreviewControl p = executor.previews().orElseGet(
                () -> new Previews(config, executor, () -> jobs, java.time.Clock.systemUTC()));
        return new ServerSetup(config, executor, arguments, sandbox, version, extensions, workspaces, egress, codeTools,
                jobs, Optional.of(p));
    }

    /** A run's result as a job keeps it: as {@link ResultMaps#structured} shows it (a worker's jobs too). */
    public static java.util.function.BiFunction<dev.codeexec.engine.ExecutionRequest, dev.codeexec.engine.ExecutionResult,
            java.util.Map<String, Object>> resultMap(Config config) {
        long maxImage = (long) config.get(Config.MAX_IMAGE_KB) << 10;
        return (request, result) -> ResultMaps.structured(result, request.workspace().map(Workspace::name), maxImage);
    }

    /**
     * What a server closes of its engine when it stops: the jobs first (the runs the executor then kills end
     * {@code lost}, not {@code cancelled}), then the executor, which finishes or kills its runs within the grace.
     */
    public void closeEngine() {
        jobs.ifPresent(JobControl::close);
        try {
            executor.close();
        } catch (RuntimeException e) {
            org.slf4j.LoggerFactory.getLogger(ServerSetup.class).warn("executor did not close cleanly: {}", e.toString());
        }
    }

    /** The background jobs; a setup no server has started has none (an error a surface shows). */
    public JobControl<?> jobsOrFail() {
        return jobs.orElseThrow(() -> new ExecutionException.Unavailable("background jobs are not available here"));
    }
}
