package dev.codeexec.mcp;

import dev.codeexec.surface.ServerSetup;
import io.modelcontextprotocol.json.McpJsonDefaults;
import io.modelcontextprotocol.server.McpServer;
import io.modelcontextprotocol.server.McpSyncServer;
import io.modelcontextprotocol.server.transport.HttpServletStreamableServerTransportProvider;
import io.modelcontextprotocol.server.transport.StdioServerTransportProvider;
import io.modelcontextprotocol.spec.McpSchema;
import io.modelcontextprotocol.spec.McpSchema.ServerCapabilities;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Builds the MCP server for one transport: our tools, resources, prompts and completions, the capabilities, the
 * request timeout, then the extensions (which may add features or replace the capabilities).
 */
public final class McpServers {

    private static final Logger LOG = LoggerFactory.getLogger(McpServers.class);

    static final String SERVER_NAME = "code-exec-mcp";

    /** Whether a tenant may subscribe to a resource of this server (its own jobs' only, of job:// URIs). */
    public static boolean mayWatch(ServerSetup setup, String tenant, String uri) {
        return JobTools.mayWatch(setup, tenant, uri);
    }

    private McpServers() {
    }

    /**
     * Streamable HTTP. Tool handlers run on the request's own thread ({@code immediateExecution}): Jetty serves each
     * request on a virtual thread, so a two-minute run blocks only its own cheap thread, and the SDK's bounded
     * elastic pool (10 threads per core) never caps how many calls can wait for the executor's queue.
     */
    public static McpSyncServer http(HttpServletStreamableServerTransportProvider transport, ServerSetup setup,
            RunRegistry registry) {
        return configure(McpServer.sync(transport), setup, registry, true);
    }

    /**
     * Stdio. The SDK reads stdin on one thread and runs handlers inline when asked to; a blocking tool would then
     * stop it from reading the next line (a cancel, a second call). So tool handlers run on the SDK's worker pool.
     */
    public static McpSyncServer stdio(StdioServerTransportProvider transport, ServerSetup setup, RunRegistry registry) {
        return configure(McpServer.sync(transport), setup, registry, false);
    }

    private static McpSyncServer configure(McpServer.SyncSpecification<?> spec, ServerSetup setup,
            RunRegistry registry, boolean immediate) {
        // Set before any tool is added: the SDK checks a tool's schemas as it is added.
        OwnSchemas schemas = new OwnSchemas(McpJsonDefaults.getSchemaValidator());
        spec.jsonSchemaValidator(schemas);
        spec.serverInfo(SERVER_NAME, setup.version())
                .instructions("Run code with execute_code (python, nodejs, typescript, go, java, shell/bash); "
                        + "see runtime_info for versions, tools and limits. Keep files between calls in named "
                        + "workspaces: write_file, read_file, list_files, delete_file, workspace_info; files are "
                        + "also resources ws://{workspace}/{+path}. Keep variables between calls (python, nodejs, typescript, bash) "
                        + "with execute_code's 'session' argument; session_list, session_reset, session_close. Run "
                        + "longer work as a background job (execute_code with 'background': true, up to an hour): "
                        + "job_wait, job_status, job_cancel, job_list; it outlives the call and the MCP session.")
                .capabilities(ServerCapabilities.builder()
                        .tools(false)
                        .resources(true, false) // subscribe: job://{job} (see JobTools)
                        .prompts(false)
                        .completions()
                        .logging()
                        .build())
                .requestTimeout(setup.requestTimeout())
                .immediateExecution(immediate)
                // Our tools validate through the engine's converter, whose messages are the contract; extensions
                // validate their own arguments.
                .validateToolInputs(false)
                .tools(schemas.own(new ExecuteCodeTool(setup, registry).specification()),
                        schemas.own(new RuntimeInfoTool(setup.executor(), setup.workspaces(), setup.egress()).specification()))
                .tools(schemas.own(new FileTools(setup).specifications()))
                .tools(schemas.own(new SessionTools(setup).specifications()))

                // The SDK's default matcher cannot match {+path} (values spanning several segments).
                .uriTemplateManagerFactory(new UriTemplates());
        JobTools jobs = new JobTools(setup);
        spec.tools(schemas.own(jobs.specifications()));
        spec.tools(schemas.own(new PreviewTools(setup).specifications()));
        WorkspaceResources resources = new WorkspaceResources(setup);
        spec.resources(resources.info())
                .resourceTemplates(resources.files())
                .resourceTemplates(jobs.resources())
                .prompts(new CodePrompts(setup).specifications())
                .completions(new Completions(setup).specifications());
        setup.codeTools().ifPresent(t -> {
            CodeToolsTool c = new CodeToolsTool(t);
            spec.tools(schemas.own(c.specification())).resources(c.serversResource()).resourceTemplates(c.templates());
        });
        for (var e : setup.extensions()) if (e instanceof McpExtension m) m.apply(spec);
        McpSyncServer server = spec.build();
        // a client subscribed to job://{job} hears of each change of the job's status
        setup.jobs().ifPresent(j -> j.onChange(job -> Thread.ofVirtual().name("job-notify").start(() -> {
            try {
                server.notifyResourcesUpdated(new McpSchema.ResourcesUpdatedNotification(JobTools.uri(job)));
            } catch (RuntimeException e) {
                LOG.debug("resources/updated for {} not sent: {}", job.id(), e.toString());
            }
        })));
        return server;
    }
}
