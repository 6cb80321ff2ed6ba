package dev.codeexec.mcp;

import dev.codeexec.auth.Principal;
import dev.codeexec.engine.ExecutionRequest;
import dev.codeexec.engine.OutputListener;
import dev.codeexec.engine.JobHandle;
import dev.codeexec.engine.JobState;
import dev.codeexec.engine.LogChunk;
import dev.codeexec.surface.JobMaps;
import dev.codeexec.surface.ServerSetup;
import io.modelcontextprotocol.server.McpServerFeatures.SyncResourceTemplateSpecification;
import io.modelcontextprotocol.server.McpServerFeatures.SyncToolSpecification;
import io.modelcontextprotocol.server.McpSyncServerExchange;
import io.modelcontextprotocol.spec.McpError;
import io.modelcontextprotocol.spec.McpSchema.CallToolRequest;
import io.modelcontextprotocol.spec.McpSchema.CallToolResult;
import io.modelcontextprotocol.spec.McpSchema.ReadResourceRequest;
import io.modelcontextprotocol.spec.McpSchema.ReadResourceResult;
import io.modelcontextprotocol.spec.McpSchema.ResourceTemplate;
import io.modelcontextprotocol.spec.McpSchema.TextResourceContents;
import io.modelcontextprotocol.spec.McpSchema.Tool;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/**
 * The background-job tools: job_status, job_wait, job_cancel, job_list (jobs are started by execute_code with
 * {@code background: true}). Each acts on the caller's tenant only: another tenant's job id is {@code not_found},
 * the same answer as an id that never existed.
 */
final class JobTools {

    /** The longest job_wait: clients that give up on a call after 60 s still get its answer. */
    static final int MAX_WAIT_MS = 55_000;
    /** How long job_cancel waits for the killed job to end before it answers (it answers either way). */
    static final long CANCEL_WAIT_MS = 10_000;

    private final ServerSetup setup;
    private final Artifacts artifacts;

    JobTools(ServerSetup setup) {
        this.setup = setup;
        this.artifacts = Artifacts.of(setup.config());
    }

    /** execute_code with {@code background: true}: the job started (or queued), answered at once. */
    static CallToolResult started(ServerSetup setup, ExecutionRequest request) {
        JobState job = setup.jobsOrFail().start(request).state();
        Map<String, Object> s = JobMaps.status(job);
        // execute_code's answer: a job that ended already is read through job_status (`result` means a session's here)
        s.remove("result");
        return FileTools.ok(s, "job " + job.id() + " " + job.status()
                + (s.containsKey("position") ? " (place " + s.get("position") + " in the queue)" : "")
                + ": " + job.declared().get("language") + ", timeout " + job.declared().get("timeoutMs") + " ms. "
                + "job_wait waits for it (streaming its output), job_status reads its output, job_cancel stops it.");
    }

    List<SyncToolSpecification> specifications() {
        Map<String, Object> jobProp = Map.of("type", "string", "description", "The job's id (execute_code with "
                + "`background: true` answered it; job_list lists yours).");
        Map<String, Object> sinceProp = Map.of("type", "object", "description", "Offsets to read the output from, "
                + "as the last answer's `offsets` gave them (each byte is then read once); omitted: from the start.",
                "properties", Map.of("stdout", Map.of("type", "integer", "minimum", 0),
                        "stderr", Map.of("type", "integer", "minimum", 0)), "additionalProperties", false);
        return List.of(
                FileTools.spec(tool("job_status", "Job status", "A background job's status (queued with its place, "
                                + "running, or how it ended: exited, timeout, cancelled, memory_limit, ..., lost when "
                                + "its server went away, failed when it could not start), exit code, times, CPU and "
                                + "peak memory, the sizes of its output, and the output written since `since` (at "
                                + "most " + (JobMaps.READ_MAX >> 10) + " KB per stream per answer; `more` says when "
                                + "there is more). Once ended, `result` is what a foreground run returns (files "
                                + "changed in its workspace, network, tool calls, packages).",
                        Map.of("job", jobProp, "since", sinceProp), List.of("job"), ToolHints.readOnly()),
                        Set.of("job", "since"), this::status),
                new SyncToolSpecification(tool("job_wait", "Wait for job", "Waits until a background job ends or "
                                + "`timeout_ms` passes (at most " + MAX_WAIT_MS + ", so that a client's 60 s limit "
                                + "is never hit), whichever is first, then answers as job_status. While it waits, "
                                + "the job's new output streams as progress notifications (with a progressToken), "
                                + "as a foreground run's does. Call it again to keep waiting.",
                        Map.of("job", jobProp, "timeout_ms", Map.of("type", "integer", "minimum", 0,
                                "maximum", MAX_WAIT_MS, "default", MAX_WAIT_MS, "description", "How long to wait."),
                                "since", sinceProp), List.of("job"), ToolHints.readOnly()), this::await),
                FileTools.spec(tool("job_cancel", "Cancel job", "Cancels a background job: a queued one leaves the "
                                + "queue, a running one's whole process tree is killed. Its record and output stay "
                                + "(job_status reads them). A job that has ended is left as it is.",
                        Map.of("job", jobProp), List.of("job"), ToolHints.destructive().idempotent()),
                        Set.of("job"), this::cancel),
                FileTools.spec(tool("job_list", "List jobs", "Your background jobs, newest first: running and queued "
                                + "ones and ended ones still kept (JOB_RETENTION_HOURS after their end).",
                        Map.of(), List.of(), ToolHints.readOnly()), Set.of(), this::list));
    }

    private JobHandle find(Principal who, String id) {
        return find(setup, who.tenant(), id).orElseThrow(() -> new NotFound(id));
    }

    /** The tenant's job of that id; empty when there is none (or jobs are not kept here). */
    static Optional<JobHandle> find(ServerSetup setup, String tenant, String id) {
        return setup.jobs().flatMap(j -> j.find(Optional.of(tenant), id).map(JobHandle.class::cast));
    }

    /** A job id that is not the caller's (or not any): {@code not_found}, the same for both. */
    static final class NotFound extends RuntimeException {
        NotFound(String id) {
            super("no job '" + (id.length() > 80 ? id.substring(0, 80) + "..." : id) + "' (job_list shows yours)",
                    null, false, false);
        }
    }

    private CallToolResult status(Principal who, ToolArgs args) {
        return answer(find(who, args.required("job")), args);
    }

    /** An ended job as job_status answers it with no offsets (its result, output and files): a task's result. */
    CallToolResult ended(JobHandle handle) {
        return answer(handle, new ToolArgs(Map.of(), Set.of()));
    }

    /** job_status's answer: the status map with the output since the offsets asked. */
    private CallToolResult answer(JobHandle handle, ToolArgs args) {
        JobState job = handle.state();
        Map<String, Object> s = JobMaps.status(job);
        long out = 0, err = 0;
        if (args.raw("since") instanceof Map<?, ?> since) {
            out = offset(since.get("stdout"), "stdout");
            err = offset(since.get("stderr"), "stderr");
        } else if (args.raw("since") != null) {
            throw new ToolArgs.Invalid("'since' must be an object {stdout, stderr} of byte offsets");
        }
        s.putAll(JobMaps.output(handle, out, err));
        List<Map<String, Object>> pv = SessionTools.previews(setup.previews(), job.tenant(),
                new dev.codeexec.engine.PreviewControl.Sandbox(dev.codeexec.engine.PreviewControl.Kind.JOB, job.id()));
        if (!pv.isEmpty()) s.put("previews", pv);
        StringBuilder text = new StringBuilder("job ").append(job.id()).append(": ").append(job.status());
        if (s.containsKey("position")) text.append(" (place ").append(s.get("position")).append(" in the queue)");
        if (s.containsKey("exitCode")) text.append(", exit code ").append(s.get("exitCode"));
        if (s.containsKey("durationMs")) text.append(", ").append(s.get("durationMs")).append(" ms");
        job.message().ifPresent(m -> text.append("\n").append(m));
        if (!((String) s.get("stdout")).isEmpty()) text.append("\n--- stdout ---\n").append(s.get("stdout"));
        if (!((String) s.get("stderr")).isEmpty()) text.append("\n--- stderr ---\n").append(s.get("stderr"));
        text.append("\n(offsets ").append(s.get("offsets")).append(Boolean.TRUE.equals(s.get("more"))
                ? "; more output: call again with these as `since`)" : ")");
        List<io.modelcontextprotocol.spec.McpSchema.Content> content = new ArrayList<>();
        content.add(new io.modelcontextprotocol.spec.McpSchema.TextContent(text.toString()));
        content.addAll(files(job));
        return CallToolResult.builder().structuredContent(s).content(content).isError(false).build();
    }

    /**
     * An ended job's workspace files as a foreground run's result shows them: its images inline (within
     * MAX_IMAGE_KB), the rest as links; none when the job had no workspace or its workspace is gone.
     */
    private List<io.modelcontextprotocol.spec.McpSchema.Content> files(JobState job) {
        Optional<Map<String, Object>> result = job.result();
        if (result.isEmpty() || !(result.get().get("workspace") instanceof String ws)
                || !(result.get().get("files") instanceof List<?> files) || files.isEmpty()) return List.of();
        List<Artifacts.FileInfo> shown = new ArrayList<>();
        for (Object o : files) {
            if (shown.size() >= ExecuteCodeTool.MAX_FILE_CONTENTS) break;
            if (o instanceof Map<?, ?> f && f.get("path") instanceof String path && f.get("size") instanceof Number size
                    && f.get("mimeType") instanceof String mime)
                shown.add(new Artifacts.FileInfo(path, size.longValue(), mime));
        }
        try {
            return artifacts.contents(setup.workspaces().open(job.tenant(), ws, false), shown);
        } catch (RuntimeException e) {
            return List.of(); // the workspace went away since: the structured list still names the files
        }
    }

    private static long offset(Object v, String name) {
        if (v == null) return 0;
        if (v instanceof Number n && n.doubleValue() >= 0 && n.doubleValue() == Math.rint(n.doubleValue()))
            return n.longValue();
        throw new ToolArgs.Invalid("'since." + name + "' must be a byte offset (an integer, 0 or more)");
    }

    private CallToolResult await(McpSyncServerExchange exchange, CallToolRequest call) {
        Principal who = MessageInterceptor.principalOf(call.meta());
        try {
            ToolArgs args = new ToolArgs(call.arguments(), Set.of("job", "timeout_ms", "since"));
            JobHandle job = find(who, args.required("job"));
            int ms = args.integer("timeout_ms", MAX_WAIT_MS, 0, MAX_WAIT_MS);
            Object token = call.meta() == null ? null : call.meta().get("progressToken");
            long cap = (long) setup.config().get(dev.codeexec.config.Config.MAX_OUTPUT_KB) << 10;
            try (ProgressForwarder progress = token == null ? null
                    : new ProgressForwarder(token, exchange::progressNotification);
                    AutoCloseable watching = progress == null ? () -> { } : job.watch(capped(progress, cap))) {
                try {
                    job.await(ms);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            }
            return answer(job, args);
        } catch (RuntimeException e) {
            return ToolErrors.of("job_wait", e);
        } catch (Exception e) {
            return ToolErrors.of("job_wait", new IllegalStateException(e));
        }
    }

    /** What one wait streams at most: MAX_OUTPUT_KB (in characters), as a foreground run's progress; then this notice. */
    static final String NOT_STREAMED = "\n[... more output is not streamed in this wait: job_status with `since` reads it ...]\n";

    /** {@code to}, given output until {@code cap} characters have passed, then one notice, then nothing. */
    static OutputListener capped(OutputListener to, long cap) {
        java.util.concurrent.atomic.AtomicLong passed = new java.util.concurrent.atomic.AtomicLong();
        java.util.concurrent.atomic.AtomicBoolean noticed = new java.util.concurrent.atomic.AtomicBoolean();
        return new OutputListener() {
            @Override
            public void onOutput(Stream stream, String text) {
                onOutput(stream, text, System.currentTimeMillis());
            }

            @Override
            public void onOutput(Stream stream, String text, long atMillis) {
                if (passed.getAndAdd(text.length()) < cap) to.onOutput(stream, text, atMillis);
                else if (noticed.compareAndSet(false, true)) to.onOutput(stream, NOT_STREAMED, atMillis);
            }
        };
    }

    private CallToolResult cancel(Principal who, ToolArgs args) {
        JobHandle handle = find(who, args.required("job"));
        boolean wasRunning = !handle.state().ended();
        JobState job;
        try {
            job = handle.cancel(CANCEL_WAIT_MS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            job = handle.state();
        }
        Map<String, Object> s = JobMaps.status(job);
        return FileTools.ok(s, "job " + job.id() + ": " + job.status()
                + (wasRunning ? "" : " (it had already ended; nothing was done)"));
    }

    private CallToolResult list(Principal who, ToolArgs args) {
        List<Map<String, Object>> out = new ArrayList<>();
        StringBuilder text = new StringBuilder();
        List<JobState> all = setup.jobsOrFail().list(Optional.of(who.tenant()));
        text.append(all.size()).append(all.size() == 1 ? " job" : " jobs");
        for (JobState j : all) {
            Map<String, Object> m = JobMaps.status(j);
            m.remove("result");
            out.add(m);
            text.append('\n').append(j.id()).append(": ").append(j.status()).append(", ")
                    .append(j.declared().get("language")).append(", created ").append(j.createdAt());
        }
        return FileTools.ok(Map.of("jobs", out), text.toString());
    }

    private static Tool tool(String name, String title, String description, Map<String, Object> props,
            List<String> required, ToolHints hints) {
        return Tool.builder().name(name).title(title).description(description)
                .inputSchema(FileTools.input(props, required))
                .outputSchema(name.equals("job_list") ? Map.of("type", "object", "properties", Map.of("jobs",
                        Map.of("type", "array", "items", statusSchema())), "required", List.of("jobs")) : statusSchema())
                .annotations(hints.annotations(title)).build();
    }

    /** A job's status as JobMaps gives it, with the output read since the offsets asked (job_status, job_wait). */
    static Map<String, Object> statusSchema() {
        Map<String, Object> str = Map.of("type", "string");
        Map<String, Object> integer = Map.of("type", "integer");
        Map<String, Object> offsets = Map.of("type", "object", "properties", Map.of("stdout", integer, "stderr", integer));
        Map<String, Object> p = new java.util.LinkedHashMap<>();
        p.put("job", str);
        p.put("status", Map.of("type", "string", "description", "queued, running, then a run outcome (exited, "
                + "timeout, cancelled, memory_limit, ...), lost or failed."));
        p.put("position", Map.of("type", "integer", "description", "While queued: its place (1 = next)."));
        p.put("language", str);
        p.put("timeoutMs", integer);
        p.put("workspace", str);
        p.put("network", Map.of("type", "array", "items", str));
        p.put("packages", Map.of("type", "array", "items", str));
        p.put("args", Map.of("type", "array", "items", str));
        p.put("createdAt", Map.of("type", "string", "format", "date-time"));
        p.put("startedAt", Map.of("type", "string", "format", "date-time"));
        p.put("endedAt", Map.of("type", "string", "format", "date-time"));
        p.put("durationMs", integer);
        p.put("message", str);
        p.put("exitCode", integer);
        p.put("cpuTimeMs", Map.of("type", "number"));
        p.put("peakMemoryBytes", integer);
        p.put("result", Map.of("type", "object", "description", "Once ended with a run: execute_code's result "
                + "without stdout and stderr (files, network, toolCalls, packages, ...)."));
        p.put("sizes", Map.of("type", "object", "description", "Bytes the job wrote to each stream so far.",
                "properties", Map.of("stdout", integer, "stderr", integer)));
        p.put("stdout", Map.of("type", "string", "description", "Output since `since.stdout`."));
        p.put("stderr", Map.of("type", "string", "description", "Output since `since.stderr`."));
        p.put("offsets", Map.of("type", "object", "description", "What to pass as `since` next time.",
                "properties", Map.of("stdout", integer, "stderr", integer)));
        p.put("skipped", Map.of("type", "object", "description", "Bytes dropped past JOB_LOG_MB before the text given.",
                "properties", Map.of("stdout", integer, "stderr", integer)));
        p.put("more", Map.of("type", "boolean", "description", "A stream has more output than this answer carried."));
        p.put("previews", SessionTools.previewsSchema());
        return Map.of("type", "object", "properties", p, "required", List.of("job", "status"));
    }

    // ---- resources: job://{job} (the status), job://{job}/stdout and job://{job}/stderr (the output) ----

    /** The most of a stream a resource read returns: its last this many bytes (job_status with `since` reads all). */
    static final int RESOURCE_MAX = 1 << 20;

    /**
     * Whether {@code tenant} may subscribe to {@code uri}: a job:// URI only for its own jobs (another tenant's id is
     * as unknown to it as one that never existed); any other URI as the SDK decides.
     */
    static boolean mayWatch(ServerSetup setup, String tenant, String uri) {
        if (!uri.startsWith("job://")) return true;
        java.util.regex.Matcher m = JOB_URI.matcher(uri);
        return m.matches() && find(setup, tenant, m.group(1)).isPresent();
    }

    /** The job's status resource. */
    static String uri(JobHandle job) {
        return "job://" + job.id();
    }

    List<SyncResourceTemplateSpecification> resources() {
        ResourceTemplate status = ResourceTemplate.builder().uriTemplate("job://{job}").name("job")
                .title("Background job").mimeType("application/json")
                .description("A background job's status, as job_status gives it (without output).").build();
        ResourceTemplate output = ResourceTemplate.builder().uriTemplate("job://{job}/{stream}").name("job-output")
                .title("Background job output").mimeType("text/plain")
                .description("A background job's stdout or stderr (job://{job}/stdout): its last "
                        + (RESOURCE_MAX >> 20) + " MB; all of it through job_status with `since`, or "
                        + "GET /api/jobs/{job}/stdout.").build();
        return List.of(new SyncResourceTemplateSpecification(status, (exchange, request) -> read(request)),
                new SyncResourceTemplateSpecification(output, (exchange, request) -> read(request)));
    }

    private static final java.util.regex.Pattern JOB_URI = java.util.regex.Pattern.compile(
            "^job://([A-Za-z0-9-]{1,80})(?:/(stdout|stderr))?$");

    private ReadResourceResult read(ReadResourceRequest request) {
        Principal who = MessageInterceptor.principalOf(request.meta());
        String uri = request.uri();
        java.util.regex.Matcher m = JOB_URI.matcher(uri);
        if (!m.matches()) throw McpError.RESOURCE_NOT_FOUND.apply(uri);
        Optional<JobHandle> job = find(setup, who.tenant(), m.group(1));
        if (job.isEmpty()) throw McpError.RESOURCE_NOT_FOUND.apply(uri);
        if (m.group(2) == null)
            return new ReadResourceResult(List.of(new TextResourceContents(uri, "application/json",
                    tools.jackson.databind.json.JsonMapper.shared().writeValueAsString(
                            JobMaps.status(job.get().state())))));
        OutputListener.Stream stream = m.group(2).equals("stdout") ? OutputListener.Stream.STDOUT
                : OutputListener.Stream.STDERR;
        try {
            long total = job.get().state().size(stream);
            long from = Math.max(0, total - RESOURCE_MAX);
            StringBuilder text = new StringBuilder();
            if (from > 0) text.append("[... the first ").append(from).append(" bytes are not shown here: job_status "
                    + "with `since`, or GET /api/jobs/").append(job.get().id()).append("/").append(m.group(2)).append(" ...]\n");
            long at = from;
            while (at < total) {
                LogChunk c = job.get().read(stream, at, JobMaps.READ_MAX);
                if (c.next() <= at) break;
                text.append(JobMaps.text(c));
                at = c.next();
            }
            return new ReadResourceResult(List.of(new TextResourceContents(uri, "text/plain", text.toString())));
        } catch (java.io.IOException e) {
            throw McpError.builder(-32603).message("io: the job's output cannot be read").build();
        }
    }
}
