package dev.codeexec.mcp;

import dev.codeexec.surface.ServerSetup;
import io.modelcontextprotocol.common.McpTransportContext;
import io.modelcontextprotocol.json.McpJsonDefaults;
import io.modelcontextprotocol.json.McpJsonMapper;
import io.modelcontextprotocol.json.TypeRef;
import io.modelcontextprotocol.modern.McpSchema;
import io.modelcontextprotocol.modern.server.McpAsyncNotifier;
import io.modelcontextprotocol.modern.server.McpAsyncResponse;
import io.modelcontextprotocol.modern.server.McpRequestContext;
import io.modelcontextprotocol.modern.server.McpServer;
import io.modelcontextprotocol.modern.server.McpSyncNotifier;
import io.modelcontextprotocol.modern.server.McpSyncResponse;
import io.modelcontextprotocol.modern.server.feature.McpSyncCompletionHandler;
import io.modelcontextprotocol.modern.server.feature.McpSyncPrompt;
import io.modelcontextprotocol.modern.server.feature.McpSyncPromptRepository;
import io.modelcontextprotocol.modern.server.feature.McpSyncResource;
import io.modelcontextprotocol.modern.server.feature.McpSyncResourceRepository;
import io.modelcontextprotocol.modern.server.feature.McpSyncResourceTemplate;
import io.modelcontextprotocol.modern.server.feature.McpAsyncTool;
import io.modelcontextprotocol.modern.server.feature.McpAsyncToolRepository;
import io.modelcontextprotocol.modern.server.feature.McpChangeFeed;
import io.modelcontextprotocol.modern.server.feature.ServerChange;
import io.modelcontextprotocol.modern.server.feature.PromptsFeature;
import io.modelcontextprotocol.modern.server.feature.PromptsPage;
import io.modelcontextprotocol.modern.server.feature.ResourceTemplatesPage;
import io.modelcontextprotocol.modern.server.feature.ResourcesFeature;
import io.modelcontextprotocol.modern.server.feature.ResourcesPage;
import io.modelcontextprotocol.modern.server.feature.ToolsFeature;
import io.modelcontextprotocol.modern.server.feature.ToolsPage;
import io.modelcontextprotocol.server.McpAsyncServerExchange;
import io.modelcontextprotocol.server.McpServerFeatures.SyncCompletionSpecification;
import io.modelcontextprotocol.server.McpServerFeatures.SyncPromptSpecification;
import io.modelcontextprotocol.server.McpServerFeatures.SyncResourceSpecification;
import io.modelcontextprotocol.server.McpServerFeatures.SyncToolSpecification;
import io.modelcontextprotocol.server.McpSyncServerExchange;
import io.modelcontextprotocol.spec.McpLoggableSession;
import io.modelcontextprotocol.util.McpUriTemplateManager;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Scheduler;
import reactor.core.scheduler.Schedulers;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Executors;
import java.util.function.BiFunction;

/**
 * MCP revision 2026-07-28 (stateless: no initialize, no session; each request carries its protocol version, client
 * info and capabilities in {@code _meta}) served by the SDK 2.2.0's {@code modern} server over the very handlers the
 * 2025-11-25 server dispatches to: a call's request and result are carried between the two schemas through JSON, and
 * the handler gets an exchange whose "session" passes progress to the request's own stream.
 *
 * <p>The tasks extension ({@link McpTasks}) makes execute_code a task for a client that declares it; extensions
 * may add tools of this revision only ({@link McpExtension#modernTools}).
 */
public final class ModernMcp {

    static final String REVISION = "2026-07-28";
    /** Where tool calls run: a virtual thread each. */
    private static final Scheduler CALLS = Schedulers.fromExecutorService(
            Executors.newThreadPerTaskExecutor(Thread.ofVirtual().name("mcp-2026-call-", 0).factory()), "mcp-2026-calls");
    private static final McpSyncNotifier SILENT = new McpSyncNotifier() {
        @Override
        public void progress(double progress, Double total, String message) {
        }

        @Override
        public void notify(String method, Object params) {
        }
    };

    private final McpJsonMapper json = McpJsonDefaults.getMapper();
    private final McpCatalog catalog;
    private final McpTasks tasks;
    private final List<McpAsyncTool> modernTools;
    private final List<McpSyncPrompt> modernPrompts;
    private final UriTemplates templates = new UriTemplates();

    ModernMcp(McpCatalog catalog, McpTasks tasks, List<McpAsyncTool> modernTools, List<McpSyncPrompt> modernPrompts) {
        this.catalog = catalog;
        this.tasks = tasks;
        this.modernTools = modernTools;
        this.modernPrompts = modernPrompts;
    }

    /**
     * The modern server over {@code setup}'s tools, resources, prompts and completions (and its extensions'), with
     * the tasks extension.
     */
    public static McpServer server(ServerSetup setup, RunRegistry registry) {
        McpTasks tasks = new McpTasks(setup);
        List<McpAsyncTool> modernTools = new ArrayList<>();
        List<McpSyncPrompt> modernPrompts = new ArrayList<>();
        for (var e : setup.extensions()) {
            if (!(e instanceof McpExtension x)) continue;
            modernTools.addAll(x.modernTools(tasks));
            modernPrompts.addAll(x.modernPrompts());
        }
        ModernMcp m = new ModernMcp(McpServers.catalog(setup, registry).plus(McpServers.extensions(setup)), tasks,
                modernTools, modernPrompts);
        // subscriptions/listen: a job's changes as notifications/resources/updated of job://{job}, to its tenant only
        McpChangeFeed changes = new McpChangeFeed();
        setup.jobs().ifPresent(j -> j.onChange(job -> changes.broadcast(new ServerChange.ResourceUpdated(JobTools.uri(job)))));
        return McpServer.builder()
                .serverInfo(McpSchema.Implementation.builder(McpServers.SERVER_NAME, setup.version()).build())
                .supportedVersions(List.of(REVISION))
                .feature(ToolsFeature.ofAsync(m.tools()))
                .feature(ResourcesFeature.ofSync(m.resources()))
                .feature(PromptsFeature.ofSync(m.prompts()))
                .feature(tasks)
                // requestState of a result that asks for input, sealed with a key of this process: none of our tools
                // asks for input, so no state has to be opened by another instance behind the same address
                .requestStateCodec(io.modelcontextprotocol.modern.server.HmacRequestStateCodec.builder()
                        .key(randomKey()).jsonMapper(McpJsonDefaults.getMapper()).build())
                .subscriptions(changes)
                .restrictSubscriptions((ctx, a, b) -> Mono.just(mayWatch(setup, ctx, a)))
                .build();
    }

    private static byte[] randomKey() {
        byte[] key = new byte[32];
        new java.security.SecureRandom().nextBytes(key);
        return key;
    }

    /**
     * A listen request's filter with only the resources its tenant may watch (its own jobs): a URI it may not is
     * dropped, so that nothing of another tenant's job reaches it, as under 2025-11-25's resources/subscribe.
     */
    static McpSchema.SubscriptionFilter mayWatch(ServerSetup setup, McpRequestContext ctx, McpSchema.SubscriptionFilter f) {
        if (f == null || f.resourceSubscriptionsOrEmpty().isEmpty()) return f;
        String tenant = MessageInterceptor.principalOf(ctx.meta()).tenant();
        List<String> allowed = f.resourceSubscriptionsOrEmpty().stream()
                .filter(uri -> McpServers.mayWatch(setup, tenant, uri)).toList();
        return f.with(McpSchema.SubscriptionFilter.RESOURCE_SUBSCRIPTIONS, allowed);
    }

    /**
     * The tools. A call runs on a virtual thread of its own: a run blocks its handler for up to its timeout, and the
     * SDK's sync adapter would hold one of Reactor's bounded elastic threads (ten per core) for it instead.
     */
    McpAsyncToolRepository tools() {
        List<McpSchema.Tool> listed = new ArrayList<>();
        Map<String, McpAsyncTool> byName = new LinkedHashMap<>();
        for (SyncToolSpecification spec : catalog.tools()) {
            McpSchema.Tool t = json.convertValue(spec.tool(), McpSchema.Tool.class);
            listed.add(t);
            if (t.name().equals(ExecuteCodeTool.NAME)) {
                byName.put(t.name(), McpAsyncTool.of(t, (ctx, request) -> McpTasks.declared(ctx)
                        ? Mono.fromCallable(() -> asTask(ctx, spec, request)).subscribeOn(CALLS).map(McpAsyncResponse::result)
                        : call(ctx, spec, request)));
            } else {
                byName.put(t.name(), McpAsyncTool.of(t, (ctx, request) -> call(ctx, spec, request)));
            }
        }
        for (McpAsyncTool t : modernTools) {
            listed.add(t.definition());
            byName.put(t.definition().name(), t);
        }
        ToolsPage page = ToolsPage.of(listed);
        return new McpAsyncToolRepository() {
            @Override
            public Mono<ToolsPage> list(McpRequestContext ctx, String cursor) {
                return Mono.just(page);
            }

            @Override
            public Mono<McpAsyncTool> find(McpRequestContext ctx, String name) {
                return Mono.justOrEmpty(byName.get(name));
            }
        };
    }

    /** A tool call answered on its request's stream (progress goes there while it runs). */
    private Mono<McpAsyncResponse<McpSchema.CallToolOutcome>> call(McpRequestContext ctx, SyncToolSpecification spec,
            McpSchema.CallToolRequest request) {
        return Mono.just(McpAsyncResponse.streaming(notifier -> Mono.fromCallable(() -> (McpSchema.CallToolOutcome) modern(
                spec.callHandler().apply(exchange(ctx, blocking(notifier)),
                        legacy(request, io.modelcontextprotocol.spec.McpSchema.CallToolRequest.class)),
                McpSchema.CallToolResult.class)).subscribeOn(CALLS)));
    }

    /**
     * execute_code from a client that declared the tasks extension: a task (a background job, or for a session's
     * call a task run here) whose CreateTaskResult is the answer; a call refused before it started is answered as
     * without tasks. A task's handler has nowhere to send progress: the call's stream ends with the answer.
     */
    private McpSchema.CallToolOutcome asTask(McpRequestContext ctx, SyncToolSpecification spec,
            McpSchema.CallToolRequest request) {
        Object answer = tasks.executeCode(ctx, request.arguments(), args -> spec.callHandler().apply(exchange(ctx, SILENT),
                legacy(McpSchema.CallToolRequest.builder(request.name()).arguments(args).meta(request.meta()).build(),
                        io.modelcontextprotocol.spec.McpSchema.CallToolRequest.class)));
        return answer instanceof McpTasks.CreateTaskResult created ? created : modern(answer, McpSchema.CallToolResult.class);
    }

    /** A notifier for a handler on its own thread: each notification is on the stream before the handler goes on. */
    private static McpSyncNotifier blocking(McpAsyncNotifier notifier) {
        return new McpSyncNotifier() {
            @Override
            public void progress(double progress, Double total, String message) {
                notifier.progress(progress, total, message).block();
            }

            @Override
            public void notify(String method, Object params) {
                notifier.notify(method, params).block();
            }
        };
    }

    McpSyncResourceRepository resources() {
        List<McpSchema.Resource> listed = catalog.resources().stream()
                .map(r -> json.convertValue(r.resource(), McpSchema.Resource.class)).toList();
        List<McpSchema.ResourceTemplate> listedTemplates = catalog.templates().stream()
                .map(t -> json.convertValue(t.resourceTemplate(), McpSchema.ResourceTemplate.class)).toList();
        // each template's matcher made once, not on every read
        List<McpUriTemplateManager> matchers = catalog.templates().stream()
                .map(t -> templates.create(t.resourceTemplate().uriTemplate())).toList();
        return new McpSyncResourceRepository() {
            @Override
            public ResourcesPage list(McpRequestContext ctx, String cursor) {
                return ResourcesPage.of(listed);
            }

            @Override
            public ResourceTemplatesPage listTemplates(McpRequestContext ctx, String cursor) {
                return ResourceTemplatesPage.of(listedTemplates);
            }

            @Override
            public McpSyncResource find(McpRequestContext ctx, String uri) {
                for (SyncResourceSpecification r : catalog.resources())
                    if (r.resource().uri().equals(uri)) return read(r.readHandler());
                for (int i = 0; i < matchers.size(); i++)
                    if (matchers.get(i).matches(uri)) return read(catalog.templates().get(i).readHandler());
                return null;
            }

            @Override
            public McpSyncResourceTemplate findTemplate(McpRequestContext ctx, String uriTemplate) {
                for (int i = 0; i < catalog.templates().size(); i++) {
                    if (!catalog.templates().get(i).resourceTemplate().uriTemplate().equals(uriTemplate)) continue;
                    McpSyncResourceTemplate found = McpSyncResourceTemplate.of(listedTemplates.get(i));
                    McpSyncCompletionHandler c = completion(new io.modelcontextprotocol.spec.McpSchema.ResourceReference(uriTemplate));
                    return c == null ? found : found.withCompletionHandler(c);
                }
                return null;
            }

            @Override
            public boolean supportsCompletion() {
                return true;
            }

            @Override
            public boolean supportsSubscribe() {
                return true; // job://{job}'s changes, through subscriptions/listen
            }
        };
    }

    private McpSyncResource read(BiFunction<McpSyncServerExchange, io.modelcontextprotocol.spec.McpSchema.ReadResourceRequest,
            io.modelcontextprotocol.spec.McpSchema.ReadResourceResult> handler) {
        return McpSyncResource.of((ctx, request) -> McpSyncResponse.result(modern(handler.apply(exchange(ctx, SILENT),
                legacy(request, io.modelcontextprotocol.spec.McpSchema.ReadResourceRequest.class)), McpSchema.ReadResourceResult.class)));
    }

    McpSyncPromptRepository prompts() {
        List<McpSchema.Prompt> listed = new ArrayList<>();
        Map<String, McpSyncPrompt> byName = new LinkedHashMap<>();
        for (SyncPromptSpecification spec : catalog.prompts()) {
            McpSchema.Prompt p = json.convertValue(spec.prompt(), McpSchema.Prompt.class);
            listed.add(p);
            McpSyncPrompt prompt = McpSyncPrompt.of(p, (ctx, request) -> McpSyncResponse.result(modern(
                    spec.promptHandler().apply(exchange(ctx, SILENT), legacy(request,
                            io.modelcontextprotocol.spec.McpSchema.GetPromptRequest.class)),
                    McpSchema.GetPromptResult.class)));
            McpSyncCompletionHandler c = completion(new io.modelcontextprotocol.spec.McpSchema.PromptReference(p.name()));
            byName.put(p.name(), c == null ? prompt : prompt.withCompletionHandler(c));
        }
        for (McpSyncPrompt p : modernPrompts) {
            listed.add(p.definition());
            byName.put(p.definition().name(), p);
        }
        return new McpSyncPromptRepository() {
            @Override
            public PromptsPage list(McpRequestContext ctx, String cursor) {
                return PromptsPage.of(listed);
            }

            @Override
            public McpSyncPrompt find(McpRequestContext ctx, String name) {
                return byName.get(name);
            }

            @Override
            public boolean supportsCompletion() {
                return true;
            }
        };
    }

    /** The completion handler of the catalog for a prompt or resource template, or null. */
    private McpSyncCompletionHandler completion(io.modelcontextprotocol.spec.McpSchema.CompleteReference ref) {
        for (SyncCompletionSpecification c : catalog.completions()) {
            if (!sameReference(c.referenceKey(), ref)) continue;
            return (ctx, request) -> modern(c.completionHandler().apply(exchange(ctx, SILENT),
                    legacy(request, io.modelcontextprotocol.spec.McpSchema.CompleteRequest.class)), McpSchema.CompleteResult.class);
        }
        return null;
    }

    private static boolean sameReference(io.modelcontextprotocol.spec.McpSchema.CompleteReference a,
            io.modelcontextprotocol.spec.McpSchema.CompleteReference b) {
        return a.type().equals(b.type()) && a.identifier().equals(b.identifier());
    }

    /** A 2026-07-28 request as the 2025-11-25 handlers take it: the same JSON (with the _meta the edge wrote). */
    private <T> T legacy(Object request, Class<T> type) {
        return json.convertValue(request, type);
    }

    private <T> T modern(Object result, Class<T> type) {
        return json.convertValue(result, type);
    }

    /** What a 2025-11-25 handler gets as its exchange: the caller's info, and a "session" that is this request. */
    private McpSyncServerExchange exchange(McpRequestContext ctx, McpSyncNotifier notifier) {
        return new McpSyncServerExchange(new McpAsyncServerExchange(null, new Notifying(notifier, logLevel(ctx)),
                json.convertValue(ctx.clientCapabilities(), io.modelcontextprotocol.spec.McpSchema.ClientCapabilities.class),
                json.convertValue(ctx.clientInfo(), io.modelcontextprotocol.spec.McpSchema.Implementation.class),
                ctx.transportContext() == null ? McpTransportContext.EMPTY : ctx.transportContext()));
    }

    /** The least level of log messages the request asked for ({@code _meta} logLevel), or null: none at all. */
    private static io.modelcontextprotocol.spec.McpSchema.LoggingLevel logLevel(McpRequestContext ctx) {
        Object level = ctx.meta() == null ? null : ctx.meta().get(McpSchema.MetaKeys.LOG_LEVEL);
        if (!(level instanceof String name)) return null;
        for (var l : io.modelcontextprotocol.spec.McpSchema.LoggingLevel.values())
            if (l.name().equalsIgnoreCase(name)) return l;
        return null;
    }

    /**
     * A handler's "session" within one request: progress and notifications go to the request's stream; log messages
     * only when the request asked for them at their level (revision 2026-07-28 has no logging/setLevel).
     *
     * @param minLevel the request's _meta logLevel, or null: no log messages
     */
    private record Notifying(McpSyncNotifier notifier, io.modelcontextprotocol.spec.McpSchema.LoggingLevel minLevel)
            implements McpLoggableSession {
        @Override
        public <T> Mono<T> sendRequest(String method, Object params, TypeRef<T> type) {
            return Mono.error(new UnsupportedOperationException(method + ": a server asks for input with an "
                    + "InputRequiredResult in revision " + REVISION));
        }

        @Override
        public Mono<Void> sendNotification(String method, Object params) {
            if (params instanceof io.modelcontextprotocol.spec.McpSchema.LoggingMessageNotification m
                    && !isNotificationForLevelAllowed(m.level())) return Mono.empty();
            if (params instanceof io.modelcontextprotocol.spec.McpSchema.ProgressNotification p) {
                notifier.progress(p.progress(), p.total(), p.message());
            } else {
                notifier.notify(method, params);
            }
            return Mono.empty();
        }

        @Override
        public Mono<Void> closeGracefully() {
            return Mono.empty();
        }

        @Override
        public void close() {
        }

        @Override
        public void setMinLoggingLevel(io.modelcontextprotocol.spec.McpSchema.LoggingLevel level) {
        }

        @Override
        public boolean isNotificationForLevelAllowed(io.modelcontextprotocol.spec.McpSchema.LoggingLevel level) {
            return minLevel != null && level.level() >= minLevel.level();
        }
    }
}
