package dev.codeexec.mcp;

import com.fasterxml.jackson.annotation.JsonValue;
import dev.codeexec.auth.Principal;
import dev.codeexec.engine.JobHandle;
import dev.codeexec.engine.JobState;
import dev.codeexec.surface.ServerSetup;
import io.modelcontextprotocol.json.McpJsonDefaults;
import io.modelcontextprotocol.json.McpJsonMapper;
import io.modelcontextprotocol.modern.McpException;
import io.modelcontextprotocol.modern.McpSchema;
import io.modelcontextprotocol.modern.server.McpAsyncResponse;
import io.modelcontextprotocol.modern.server.McpFeature;
import io.modelcontextprotocol.modern.server.McpHeader;
import io.modelcontextprotocol.modern.server.McpHeaders;
import io.modelcontextprotocol.modern.server.McpRequestContext;
import reactor.core.publisher.Mono;

import java.time.Duration;
import java.time.Instant;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ThreadLocalRandom;

/**
 * The tasks extension of MCP 2026-07-28 ({@code io.modelcontextprotocol/tasks}, SEP-2663): a tool call the server
 * makes a task answers at once with a {@code CreateTaskResult} ({@code resultType: "task"}, the task's id, status and
 * times), and the client follows it with {@code tasks/get} (status; once terminal the tool's result or the protocol
 * error inline), {@code tasks/update} (answers to the input it asks for) and {@code tasks/cancel}.
 *
 * <p>Two kinds of task, one surface:
 * <ul>
 *   <li>an {@code execute_code} call becomes a background job (the job's id is the task's id; job_status and
 *       job://{job} show the same job), so a task outlives the call, its worker's queue and limits apply, and it is
 *       kept JOB_RETENTION_HOURS after it ends;</li>
 *   <li>anything else (a session's call, which is no job; an extension's tool) runs here on a virtual thread of its
 *       own ({@link #start}), may park for input ({@code input_required} with {@code inputRequests}), and is kept
 *       {@link #KEPT} after it ends, at most {@link #MAX_PER_TENANT} per tenant.</li>
 * </ul>
 * A task is the caller's tenant's, as a job is: another tenant's id is unknown ({@code -32602}), the same answer as
 * one that never existed. The methods answer {@code -32021} to a request that did not declare the extension, and a
 * request whose {@code Mcp-Name} header is not its {@code taskId} gets {@code -32020}.
 */
public final class McpTasks implements McpFeature {

    /** The extension's name, in capabilities. */
    public static final String EXTENSION = "io.modelcontextprotocol/tasks";
    /** What a client declares to take part (and what a tool that needs it requires). */
    public static final McpSchema.ClientCapabilities REQUIRED = new McpSchema.ClientCapabilities(null, null, null, null, Map.of(EXTENSION, Map.of()));
    /** How often a client should poll, as the task says. */
    static final long POLL_INTERVAL_MS = 1000;
    /** How long a task run here is kept after it ended. */
    static final Duration KEPT = Duration.ofHours(1);
    /** The most tasks run here a tenant has kept at once (the oldest ended ones go first). */
    static final int MAX_PER_TENANT = 200;

    static final String WORKING = "working", INPUT_REQUIRED = "input_required", COMPLETED = "completed",
            FAILED = "failed", CANCELLED = "cancelled";

    private final McpJsonMapper json = McpJsonDefaults.getMapper();
    private final ServerSetup setup;
    private final JobTools jobs;
    private final Map<String, Local> local = new ConcurrentHashMap<>();

    McpTasks(ServerSetup setup) {
        this.setup = setup;
        this.jobs = new JobTools(setup);
    }

    /** Whether the request declared the extension (in its own {@code _meta} client capabilities). */
    public static boolean declared(McpRequestContext ctx) {
        McpSchema.ClientCapabilities c = ctx.clientCapabilities();
        return c != null && c.extensions() != null && c.extensions().containsKey(EXTENSION);
    }

    // ---------------------------------------------------------------------------------------------------------
    // Creating tasks

    /** What a task run here does: its tool's result (as JSON), asking for input through {@code input} if need be. */
    @FunctionalInterface
    public interface Body {
        /**
         * @throws McpException a protocol error: the task ends {@code failed} with it
         */
        Object run(Input input) throws Exception;
    }

    /** How a task's body asks its client for input. */
    public interface Input {
        /**
         * Parks the task {@code input_required} with these requests (key → request, as an InputRequiredResult carries
         * them: {@code {method, params}} or the SDK's InputRequest) until every one is answered through tasks/update, and returns the answers by key.
         *
         * @throws InterruptedException the task was cancelled meanwhile
         */
        Map<String, Object> ask(Map<String, ?> requests) throws InterruptedException;
    }

    /** Starts {@code body} as a task of the caller's tenant, on a virtual thread; answers its CreateTaskResult. */
    public CreateTaskResult start(McpRequestContext ctx, Body body) {
        String tenant = tenant(ctx);
        prune(tenant);
        Local task = new Local(newId(), tenant, Instant.now());
        local.put(task.id, task);
        // the task exists (tasks/get finds it) before its CreateTaskResult is answered
        task.thread = Thread.ofVirtual().name("mcp-task-" + task.id).unstarted(() -> task.run(body));
        task.thread.start();
        return created(task.snapshot());
    }

    /**
     * execute_code as a task: started as a background job when it can be one (it names no session; jobs are kept
     * here), else run here by {@code call}. Answers the CreateTaskResult, or when the call was refused before anything
     * started
     * (the refusal is then the call's own answer, as without tasks, returned as {@code call} gave it).
     */
    Object executeCode(McpRequestContext ctx, Map<String, Object> arguments,
            java.util.function.Function<Map<String, Object>, Object> call) {
        Map<String, Object> args = arguments == null ? Map.of() : arguments;
        if (setup.jobs().isPresent() && args.get("session") == null) {
            Map<String, Object> background = new LinkedHashMap<>(args);
            background.put("background", true);
            Object answer = call.apply(background);
            Map<?, ?> m = json.convertValue(answer, Map.class);
            if (Boolean.TRUE.equals(m.get("isError")) || !(m.get("structuredContent") instanceof Map<?, ?> s)
                    || !(s.get("job") instanceof String id))
                return answer;
            return created(job(tenant(ctx), id).map(this::snapshot).orElseThrow());
        }
        return start(ctx, input -> json.convertValue(call.apply(args), Map.class));
    }

    // ---------------------------------------------------------------------------------------------------------
    // The methods

    @Override
    public Set<String> methods() {
        return Set.of("tasks/get", "tasks/update", "tasks/cancel");
    }

    @Override
    public void capabilities(McpSchema.ServerCapabilities.Builder builder) {
        builder.extension(EXTENSION, Map.of());
    }

    @Override
    public Mono<? extends McpAsyncResponse<? extends McpSchema.Result>> handle(McpRequestContext ctx, Object params) {
        return Mono.fromCallable(() -> McpAsyncResponse.<McpSchema.Result>result(answer(ctx, params)));
    }

    private McpSchema.Result answer(McpRequestContext ctx, Object params) {
        if (!declared(ctx)) throw McpException.missingClientCapability(REQUIRED);
        Map<?, ?> p = params == null ? Map.of() : json.convertValue(params, Map.class);
        if (!(p.get("taskId") instanceof String id) || id.isEmpty())
            throw McpException.invalidParams("taskId is required (a string)");
        checkNameHeader(ctx, id);
        String tenant = tenant(ctx);
        switch (ctx.method()) {
            case "tasks/get" -> {
                return new Answer(detailed(find(tenant, id)));
            }
            case "tasks/update" -> {
                if (!(p.get("inputResponses") instanceof Map<?, ?> responses))
                    throw McpException.invalidParams("inputResponses is required (an object of answers by key)");
                Local task = local.get(id);
                if (task != null && task.tenant.equals(tenant)) task.answer(responses);
                else find(tenant, id); // a job asks for no input: its answers are acknowledged and ignored
                return Answer.ACK;
            }
            case "tasks/cancel" -> {
                cancel(tenant, id);
                return Answer.ACK;
            }
            default -> throw new McpException(McpSchema.ErrorCodes.METHOD_NOT_FOUND, "Method not found: " + ctx.method());
        }
    }

    /** SEP-2243: a tasks request that carries {@code Mcp-Name} must carry its own task's id there. */
    private static void checkNameHeader(McpRequestContext ctx, String taskId) {
        if (ctx.transportContext() == null
                || !(ctx.transportContext().get(McpHeaders.TRANSPORT_CONTEXT_KEY) instanceof McpHeaders headers)) return;
        McpHeader name = headers.get("Mcp-Name");
        if (name == null) return;
        if (name.isMalformed() || !taskId.equals(name.value()))
            throw new McpException(McpSchema.ErrorCodes.HEADER_MISMATCH, "the Mcp-Name header is not the request's taskId");
    }

    private Snapshot find(String tenant, String id) {
        Local task = local.get(id);
        if (task != null && task.tenant.equals(tenant)) return task.snapshot();
        return job(tenant, id).map(this::snapshot).orElseThrow(() -> unknown(id));
    }

    private void cancel(String tenant, String id) {
        Local task = local.get(id);
        if (task != null && task.tenant.equals(tenant)) {
            task.cancel();
            return;
        }
        JobHandle job = job(tenant, id).orElseThrow(() -> unknown(id));
        try {
            job.cancel(JobTools.CANCEL_WAIT_MS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    /** A task id that is not the caller's (or not any): the same error for both. */
    private static McpException unknown(String id) {
        return McpException.invalidParams("no task '" + (id.length() > 80 ? id.substring(0, 80) + "..." : id) + "'");
    }

    private Optional<JobHandle> job(String tenant, String id) {
        return JobTools.find(setup, tenant, id);
    }

    private static String tenant(McpRequestContext ctx) {
        Principal who = MessageInterceptor.principalOf(ctx.meta());
        return who.tenant();
    }

    // ---------------------------------------------------------------------------------------------------------
    // What a task looks like

    /** A task at one moment, as the extension's DetailedTask. */
    record Snapshot(String taskId, String status, String statusMessage, Instant createdAt, Instant lastUpdatedAt,
            long ttlMs, Object result, Map<String, Object> error, Map<String, Object> inputRequests) {
    }

    /** A job as a task: working while queued or running; failed when it was lost or could not start. */
    private Snapshot snapshot(JobHandle handle) {
        JobState job = handle.state();
        long ttl = Duration.ofHours(setup.config().get(dev.codeexec.config.Config.JOB_RETENTION_HOURS)).toMillis();
        Instant updated = job.endedAt().or(job::startedAt).orElse(job.createdAt());
        String message = job.status() + job.position().map(p -> " (place " + p + " in the queue)").orElse("")
                + job.message().map(m -> ": " + m).orElse("");
        if (!job.ended()) return new Snapshot(job.id(), WORKING, message, job.createdAt(), updated, ttl, null, null, null);
        if (job.status().equals(JobState.LOST) || job.status().equals(JobState.FAILED))
            return new Snapshot(job.id(), FAILED, message, job.createdAt(), updated, ttl, null,
                    error(McpSchema.ErrorCodes.INTERNAL_ERROR, "job " + job.status() + job.message().map(m -> ": " + m).orElse("")),
                    null);
        if (job.status().equals(dev.codeexec.engine.Outcome.CANCELLED.wireName()))
            return new Snapshot(job.id(), CANCELLED, message, job.createdAt(), updated, ttl, null, null, null);
        return new Snapshot(job.id(), COMPLETED, message, job.createdAt(), updated, ttl,
                json.convertValue(jobs.ended(handle), Map.class), null, null);
    }

    private static Map<String, Object> error(int code, String message) {
        Map<String, Object> e = new LinkedHashMap<>();
        e.put("code", code);
        e.put("message", message);
        return e;
    }

    private static Map<String, Object> base(Snapshot s) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("taskId", s.taskId());
        m.put("status", s.status());
        if (s.statusMessage() != null) m.put("statusMessage", s.statusMessage());
        m.put("createdAt", s.createdAt().toString());
        m.put("lastUpdatedAt", s.lastUpdatedAt().toString());
        m.put("ttlMs", s.ttlMs());
        m.put("pollIntervalMs", POLL_INTERVAL_MS);
        return m;
    }

    private static CreateTaskResult created(Snapshot s) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("resultType", CreateTaskResult.TYPE);
        m.putAll(base(s));
        return new CreateTaskResult(m);
    }

    private static Map<String, Object> detailed(Snapshot s) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("resultType", McpSchema.ResultType.COMPLETE);
        m.putAll(base(s));
        if (s.result() != null) m.put("result", s.result());
        if (s.error() != null) m.put("error", s.error());
        if (s.inputRequests() != null && !s.inputRequests().isEmpty()) m.put("inputRequests", s.inputRequests());
        return m;
    }

    /** {@code tools/call}'s answer when it made a task: the task itself, flat ({@code Result & Task}). */
    public record CreateTaskResult(@JsonValue Map<String, Object> body) implements McpSchema.CallToolOutcome {
        static final String TYPE = "task";

        @Override
        public String resultType() {
            return TYPE;
        }

        @Override
        public Map<String, Object> meta() {
            return null;
        }

    }

    /** Any other answer of the methods: a DetailedTask, or the empty acknowledgement. */
    private record Answer(@JsonValue Map<String, Object> body) implements McpSchema.Result {
        static final Answer ACK = new Answer(Map.of("resultType", McpSchema.ResultType.COMPLETE));

        @Override
        public String resultType() {
            return McpSchema.ResultType.COMPLETE;
        }

        @Override
        public Map<String, Object> meta() {
            return null;
        }
    }

    // ---------------------------------------------------------------------------------------------------------
    // Tasks run here

    private static String newId() {
        // the same form as a job's: 128 random bits, hex
        ThreadLocalRandom r = ThreadLocalRandom.current();
        return "task-" + Long.toHexString(r.nextLong() | Long.MIN_VALUE) + Long.toHexString(r.nextLong() | Long.MIN_VALUE);
    }

    /** Drops the tenant's tasks ended longer than {@link #KEPT} ago, and the oldest ended ones over the cap. */
    private void prune(String tenant) {
        Instant now = Instant.now();
        local.values().removeIf(t -> t.endedAt != null && t.endedAt.plus(KEPT).isBefore(now));
        List<Local> mine = local.values().stream().filter(t -> t.tenant.equals(tenant))
                .sorted(java.util.Comparator.comparing((Local t) -> t.createdAt)).toList();
        int over = mine.size() + 1 - MAX_PER_TENANT;
        for (Local t : mine) {
            if (over <= 0) break;
            if (t.endedAt != null) {
                local.remove(t.id);
                over--;
            }
        }
        if (over > 0)
            throw new McpException(McpSchema.ErrorCodes.INVALID_REQUEST, "too many tasks running (" + MAX_PER_TENANT
                    + " at most per tenant): wait for some to end or cancel them");
    }

    private final class Local implements Input {
        final String id;
        final String tenant;
        final Instant createdAt;
        volatile Thread thread;
        private String status = WORKING;
        private Instant updated;
        private Instant endedAt;
        private Object result;
        private Map<String, Object> error;
        /** What it waits for (key → request as JSON), and the answers given so far. */
        private final Map<String, Object> pending = new LinkedHashMap<>();
        private final Map<String, Object> answers = new LinkedHashMap<>();

        Local(String id, String tenant, Instant createdAt) {
            this.id = id;
            this.tenant = tenant;
            this.createdAt = createdAt;
            this.updated = createdAt;
        }

        void run(Body body) {
            try {
                Object r = body.run(this);
                end(COMPLETED, r, null);
            } catch (InterruptedException e) {
                end(CANCELLED, null, null);
            } catch (McpException e) {
                end(FAILED, null, error(e.error().code(), e.error().message()));
            } catch (Exception | Error e) {
                end(FAILED, null, error(McpSchema.ErrorCodes.INTERNAL_ERROR, "the task failed: "
                        + (e.getMessage() == null ? e.getClass().getSimpleName() : e.getMessage())));
            }
        }

        private synchronized void end(String how, Object r, Map<String, Object> err) {
            if (!status.equals(WORKING) && !status.equals(INPUT_REQUIRED)) return; // cancelled first
            status = how;
            result = r;
            error = err;
            pending.clear();
            updated = endedAt = Instant.now();
            notifyAll();
        }

        synchronized void cancel() {
            if (!status.equals(WORKING) && !status.equals(INPUT_REQUIRED)) return;
            status = CANCELLED;
            pending.clear();
            updated = endedAt = Instant.now();
            notifyAll();
            if (thread != null) thread.interrupt();
        }

        @Override
        public synchronized Map<String, Object> ask(Map<String, ?> requests) throws InterruptedException {
            if (!status.equals(WORKING)) throw new InterruptedException("the task ended");
            answers.clear();
            for (var e : requests.entrySet()) pending.put(e.getKey(), json.convertValue(e.getValue(), Map.class));
            status = INPUT_REQUIRED;
            updated = Instant.now();
            while (!pending.isEmpty()) {
                if (status.equals(CANCELLED)) throw new InterruptedException("cancelled");
                wait();
            }
            if (!status.equals(INPUT_REQUIRED)) throw new InterruptedException("cancelled");
            status = WORKING;
            updated = Instant.now();
            return Collections.unmodifiableMap(new LinkedHashMap<>(answers));
        }

        /** Answers for keys it waits for are taken; any other key is ignored. */
        synchronized void answer(Map<?, ?> responses) {
            boolean took = false;
            for (var e : responses.entrySet()) {
                if (e.getKey() instanceof String k && pending.remove(k) != null) {
                    answers.put(k, e.getValue());
                    took = true;
                }
            }
            if (took) {
                updated = Instant.now();
                notifyAll();
            }
        }

        synchronized Snapshot snapshot() {
            return new Snapshot(id, status, null, createdAt, updated, KEPT.toMillis(), result, error,
                    pending.isEmpty() ? null : new LinkedHashMap<>(pending));
        }
    }
}
