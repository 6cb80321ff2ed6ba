package dev.codeexec.codemode;

import java.util.List;
import java.util.Optional;

/**
 * One tool call a run's code made: which, how long it took, whether it gave a result, and the bytes of the
 * request's arguments (out) and of the answer (in). {@code reason} says why it did not ({@code not_allowed},
 * {@code call_limit}, {@code timeout}, ...).
 */
public record ToolCall(String server, String tool, long ms, boolean ok, long bytesIn, long bytesOut, Optional<String> reason) {

    /**
     * A run's calls: the first {@link #MAX_RECORDS} tool calls and how many more there were, and the same for its
     * calls of credentialed HTTP APIs ({@link ApiCall}).
     */
    public record Report(List<ToolCall> calls, int leftOut, List<ApiCall> apiCalls, int apiLeftOut) {
        public static final int MAX_RECORDS = 100;
        public static final Report NONE = new Report(List.of(), 0);

        public Report {
            calls = List.copyOf(calls);
            apiCalls = List.copyOf(apiCalls);
        }

        /** Tool calls only (a run that called no API). */
        public Report(List<ToolCall> calls, int leftOut) {
            this(calls, leftOut, List.of(), 0);
        }

        public int total() {
            return calls.size() + leftOut;
        }

        public int apiTotal() {
            return apiCalls.size() + apiLeftOut;
        }
    }
}
