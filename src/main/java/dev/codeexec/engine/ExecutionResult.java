package dev.codeexec.engine;

import dev.codeexec.codemode.ToolCall;
import dev.codeexec.egress.NetworkReport;
import java.util.List;
import java.util.Optional;
import java.util.OptionalDouble;
import java.util.OptionalLong;

/**
 * What a run produced and how it ended.
 *
 * @param language       the language id that ran
 * @param exitCode       the process exit code; 128+signal when killed by a signal; -1 when it never started
 * @param stdout         captured standard output (valid UTF-8 text; invalid bytes replaced), at most the cap
 * @param stderr         captured standard error, plus a "[terminated] ..." line when a limit ended the run
 * @param durationMs     wall time from start to end of the run
 * @param outcome        how it ended
 * @param truncated      true when stdout or stderr went over the cap
 * @param peakMemoryBytes peak memory of the run's cgroup, where known
 * @param cpuTimeMs      CPU time (user+system) of the run, where known
 * @param sandbox        the sandbox that ran it (bwrap, gvisor, none)
 * @param files          files the run created or changed in its workspace (empty for stateless runs)
 * @param filesTruncated true when the workspace had more entries than a run's file scan covers
 * @param session        what a call in a stateful session returned besides its output; empty for other runs
 * @param worker         the name of the worker that ran it, when a gateway sent it to one; empty for local runs
 * @param network        the run's policy and connections when it had network access; empty when it had none
 * @param toolCalls      the tool calls its code made (code mode); empty when the run had no code tools
 * @param packages       the declared packages the run had; empty when it declared none
 */
public record ExecutionResult(String language, int exitCode, String stdout, String stderr, long durationMs,
        Outcome outcome, boolean truncated, OptionalLong peakMemoryBytes, OptionalDouble cpuTimeMs, String sandbox,
        List<FileArtifact> files, boolean filesTruncated, Optional<SessionOutput> session, Optional<String> worker,
        Optional<NetworkReport> network, Optional<ToolCall.Report> toolCalls, Optional<PackagesUsed> packages) {

    /**
     * The declared packages of a run.
     *
     * @param resolved  name → version of everything in the set's store entry (dependencies included)
     * @param installMs how long this run's request waited for the install; 0 when the entry came from the store
     */
    public record PackagesUsed(java.util.Map<String, String> resolved, long installMs) {
        public PackagesUsed {
            resolved = java.util.Map.copyOf(resolved);
        }
    }

    public ExecutionResult {
        toolCalls = toolCalls == null ? Optional.empty() : toolCalls;
        packages = packages == null ? Optional.empty() : packages;
        files = files == null ? List.of() : List.copyOf(files);
        session = session == null ? Optional.empty() : session;
        worker = worker == null ? Optional.empty() : worker;
        network = network == null ? Optional.empty() : network;
    }

    /** A result of a run in {@code language} that ended as {@code outcome}; the rest as the builder is told. */
    public static Builder builder(String language, Outcome outcome) {
        return new Builder(language, outcome);
    }

    /** A builder holding this result, to change some of it. */
    public Builder toBuilder() {
        return new Builder(language, outcome).exitCode(exitCode).stdout(stdout).stderr(stderr).durationMs(durationMs)
                .truncated(truncated).peakMemoryBytes(peakMemoryBytes).cpuTimeMs(cpuTimeMs).sandbox(sandbox)
                .files(files, filesTruncated).session(session).worker(worker).network(network).toolCalls(toolCalls)
                .packages(packages);
    }

    /** The same result with the files a workspace run created or changed. */
    public ExecutionResult withFiles(List<FileArtifact> changed, boolean scanTruncated) {
        return toBuilder().files(changed, scanTruncated).build();
    }

    /** The same result with what a session call returned (final-expression value, figures). */
    public ExecutionResult withSession(SessionOutput out) {
        return toBuilder().session(Optional.of(out)).build();
    }

    /** The same result, naming the worker that ran it. */
    public ExecutionResult withWorker(String name) {
        return toBuilder().worker(Optional.of(name)).build();
    }

    /** The same result with what the run did with its network. */
    public ExecutionResult withNetwork(NetworkReport report) {
        return toBuilder().network(Optional.of(report)).build();
    }

    /** The same result with the tool calls its code made. */
    public ExecutionResult withToolCalls(ToolCall.Report report) {
        return toBuilder().toolCalls(Optional.of(report)).build();
    }

    /** The same result with the declared packages the run had. */
    public ExecutionResult withPackages(PackagesUsed used) {
        return toBuilder().packages(Optional.of(used)).build();
    }

    /** Builds a result; what it is not told is empty, zero or false. */
    public static final class Builder {
        private final String language;
        private final Outcome outcome;
        private int exitCode;
        private String stdout = "";
        private String stderr = "";
        private long durationMs;
        private boolean truncated;
        private OptionalLong peakMemoryBytes = OptionalLong.empty();
        private OptionalDouble cpuTimeMs = OptionalDouble.empty();
        private String sandbox = "";
        private List<FileArtifact> files = List.of();
        private boolean filesTruncated;
        private Optional<SessionOutput> session = Optional.empty();
        private Optional<String> worker = Optional.empty();
        private Optional<NetworkReport> network = Optional.empty();
        private Optional<ToolCall.Report> toolCalls = Optional.empty();
        private Optional<PackagesUsed> packages = Optional.empty();

        private Builder(String language, Outcome outcome) {
            this.language = language;
            this.outcome = outcome;
        }

        public Builder exitCode(int exitCode) {
            this.exitCode = exitCode;
            return this;
        }

        public Builder stdout(String stdout) {
            this.stdout = stdout;
            return this;
        }

        public Builder stderr(String stderr) {
            this.stderr = stderr;
            return this;
        }

        public Builder durationMs(long durationMs) {
            this.durationMs = durationMs;
            return this;
        }

        public Builder truncated(boolean truncated) {
            this.truncated = truncated;
            return this;
        }

        public Builder peakMemoryBytes(OptionalLong peakMemoryBytes) {
            this.peakMemoryBytes = peakMemoryBytes;
            return this;
        }

        public Builder cpuTimeMs(OptionalDouble cpuTimeMs) {
            this.cpuTimeMs = cpuTimeMs;
            return this;
        }

        public Builder sandbox(String sandbox) {
            this.sandbox = sandbox;
            return this;
        }

        /** The files the run created or changed; {@code scanTruncated}: the workspace had more than a scan covers. */
        public Builder files(List<FileArtifact> files, boolean scanTruncated) {
            this.files = files;
            this.filesTruncated = scanTruncated;
            return this;
        }

        public Builder session(Optional<SessionOutput> session) {
            this.session = session;
            return this;
        }

        public Builder worker(Optional<String> worker) {
            this.worker = worker;
            return this;
        }

        public Builder network(Optional<NetworkReport> network) {
            this.network = network;
            return this;
        }

        public Builder toolCalls(Optional<ToolCall.Report> toolCalls) {
            this.toolCalls = toolCalls;
            return this;
        }

        public Builder packages(Optional<PackagesUsed> packages) {
            this.packages = packages;
            return this;
        }

        public ExecutionResult build() {
            return new ExecutionResult(language, exitCode, stdout, stderr, durationMs, outcome, truncated,
                    peakMemoryBytes, cpuTimeMs, sandbox, files, filesTruncated, session, worker, network, toolCalls,
                    packages);
        }
    }

    /**
     * What a call in a stateful session returned besides its output.
     *
     * @param name    the session's name
     * @param created true when this call started the session's interpreter (first call, or after it ended)
     * @param result  the text of the value of the call's final expression, when it had one
     * @param figures images the call produced (matplotlib figures shown or left open)
     * @param executionCount the call's number in its session, as a notebook numbers its cells (Python and Node)
     * @param error          a failed call's error: the exception's name, its message and its traceback
     * @param outputs        rich outputs in the order the call made them: each display() and a final value that offers
     *                       more than text (Python sessions)
     */
    public record SessionOutput(String name, boolean created, Optional<String> result, List<Figure> figures,
            java.util.OptionalInt executionCount, Optional<CellError> error, List<RichOutput> outputs) {
        public SessionOutput {
            result = result == null ? Optional.empty() : result;
            figures = figures == null ? List.of() : List.copyOf(figures);
            executionCount = executionCount == null ? java.util.OptionalInt.empty() : executionCount;
            error = error == null ? Optional.empty() : error;
            outputs = outputs == null ? List.of() : List.copyOf(outputs);
        }

        public SessionOutput(String name, boolean created, Optional<String> result, List<Figure> figures,
                java.util.OptionalInt executionCount, Optional<CellError> error) {
            this(name, created, result, figures, executionCount, error, List.of());
        }

        /**
         * Every image of the call in the order surfaces show them: the images of the rich outputs (one per output at
         * most: its first image type), then the figures. Data that is not base64 is left out.
         */
        public List<Figure> images() {
            List<Figure> all = new java.util.ArrayList<>();
            for (RichOutput o : outputs) o.image().ifPresent(all::add);
            all.addAll(figures);
            return all;
        }

        /** Without a cell number or error (a call that never reached the interpreter). */
        public SessionOutput(String name, boolean created, Optional<String> result, List<Figure> figures) {
            this(name, created, result, figures, java.util.OptionalInt.empty(), Optional.empty());
        }
    }

    /**
     * One rich output of a session call, as a notebook keeps it: {@code kind} is {@code display} (a display() call)
     * or {@code result} (the final value); {@code data} maps MIME types to their data: text forms as text,
     * {@code application/json} as its JSON text, images ({@code image/png}, {@code image/jpeg}, {@code image/gif})
     * as base64. {@code text/plain} is always there.
     */
    public record RichOutput(String kind, java.util.Map<String, String> data) {
        public RichOutput {
            data = java.util.Collections.unmodifiableMap(new java.util.LinkedHashMap<>(data));
        }

        /** The MIME types whose data is base64 of an image, in the order one is chosen to show. */
        public static final List<String> IMAGES = List.of("image/png", "image/jpeg", "image/gif");

        /** The output's image (its first of {@link #IMAGES}), decoded. */
        public Optional<Figure> image() {
            for (String mime : IMAGES) {
                String b64 = data.get(mime);
                if (b64 == null) continue;
                try {
                    return Optional.of(new Figure(mime, java.util.Base64.getDecoder().decode(b64)));
                } catch (IllegalArgumentException e) {
                    return Optional.empty();
                }
            }
            return Optional.empty();
        }

        /** The text forms (everything but the images). */
        public java.util.Map<String, String> texts() {
            java.util.Map<String, String> t = new java.util.LinkedHashMap<>(data);
            t.keySet().removeAll(IMAGES);
            return t;
        }
    }

    /** A failed session call's error, as a notebook kernel reports it ({@code NameError}, its message, the traceback). */
    public record CellError(String name, String value, String traceback) {
    }

    /** An image a session call produced; {@code data} is the encoded image (PNG). */
    public record Figure(String mimeType, byte[] data) {
    }

    /**
     * A file a run created or changed.
     *
     * @param path     relative to the workspace root
     * @param status   {@code created} or {@code modified}
     */
    public record FileArtifact(String path, long size, String mimeType, String status) {
    }

    public boolean timedOut() {
        return outcome == Outcome.TIMEOUT;
    }
}
