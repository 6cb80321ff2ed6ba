package dev.codeexec.mcp;

import dev.codeexec.surface.ServerSetup;
import io.modelcontextprotocol.json.McpJsonDefaults;
import io.modelcontextprotocol.server.McpServer;
import io.modelcontextprotocol.server.McpServerFeatures.SyncResourceSpecification;
import io.modelcontextprotocol.server.McpServerFeatures.SyncResourceTemplateSpecification;
import io.modelcontextprotocol.server.McpServerFeatures.SyncToolSpecification;
import io.modelcontextprotocol.server.McpSyncServer;
import io.modelcontextprotocol.server.transport.HttpServletStreamableServerTransportProvider;
import io.modelcontextprotocol.server.transport.StdioServerTransportProvider;
import io.modelcontextprotocol.spec.McpSchema;
import io.modelcontextprotocol.spec.McpSchema.ServerCapabilities;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.util.ArrayList;
import java.util.List;

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

    /**
     * Ours, for either revision's server: the tools in the order they are listed (execute_code, runtime_info, the
     * file, session, job and preview tools, list_code_tools with code mode), code-exec://info and the workspace,
     * job and code-tools resources, the prompts and the completions.
     */
    static McpCatalog catalog(ServerSetup setup, RunRegistry registry) {
        List<SyncToolSpecification> tools = new ArrayList<>();
        List<SyncResourceSpecification> resources = new ArrayList<>();
        List<SyncResourceTemplateSpecification> templates = new ArrayList<>();
        JobTools jobs = new JobTools(setup);
        WorkspaceResources workspaces = new WorkspaceResources(setup);
        tools.add(new ExecuteCodeTool(setup, registry).specification());
        tools.add(new RuntimeInfoTool(setup.executor(), setup.workspaces(), setup.egress()).specification());
        tools.addAll(new FileTools(setup).specifications());
        tools.addAll(new SessionTools(setup).specifications());
        tools.addAll(jobs.specifications());
        tools.addAll(new PreviewTools(setup).specifications());
        resources.add(workspaces.info());
        templates.add(workspaces.files());
        templates.addAll(jobs.resources());
        setup.codeTools().ifPresent(t -> {
            CodeToolsTool c = new CodeToolsTool(t);
            tools.add(c.specification());
            resources.add(c.serversResource());
            templates.addAll(c.templates());
        });
        return new McpCatalog(tools, resources, templates, new CodePrompts(setup).specifications(),
                new Completions(setup).specifications());
    }

    /** What the extensions add (tests' fixtures), after ours. */
    static McpCatalog extensions(ServerSetup setup) {
        McpCatalog out = McpCatalog.EMPTY;
        for (var e : setup.extensions()) if (e instanceof McpExtension m) out = out.plus(m.features());
        return out;
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
                // The SDK's default matcher cannot match {+path} (values spanning several segments).
                .uriTemplateManagerFactory(new UriTemplates());
        McpCatalog ours = catalog(setup, registry);
        McpCatalog added = extensions(setup);
        spec.tools(schemas.own(ours.tools())).tools(added.tools());
        McpCatalog all = ours.plus(added);
        spec.resources(all.resources()).resourceTemplates(all.templates()).prompts(all.prompts()).completions(all.completions());
        for (var e : setup.extensions())
            if (e instanceof McpExtension m) m.capabilities().ifPresent(spec::capabilities);
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
