package dev.codeexec.mcp;

import dev.codeexec.engine.ExecutionResult;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;

/**
 * A run's result as the plain map every surface sends: {@code execute_code}'s {@code structuredContent} and the
 * {@code result} line of the REST playground stream are this one map, so a field added here reaches both.
 */
public final class ResultMaps {

    private ResultMaps() {
    }

    /**
     * @param workspace     the workspace the run used, if any (adds {@code workspace}, {@code files}, {@code filesTruncated})
     * @param maxImageBytes the inline image cap, which decides each session figure's {@code shown}
     */
    public static Map<String, Object> structured(ExecutionResult r, Optional<String> workspace, long maxImageBytes) {
        Map<String, Object> s = new LinkedHashMap<>();
        s.put("language", r.language());
        s.put("exitCode", r.exitCode());
        s.put("stdout", r.stdout());
        s.put("stderr", r.stderr());
        s.put("durationMs", r.durationMs());
        s.put("timedOut", r.timedOut());
        s.put("truncated", r.truncated());
        s.put("outcome", r.outcome().wireName());
        r.peakMemoryBytes().ifPresent(v -> s.put("peakMemoryBytes", v));
        r.cpuTimeMs().ifPresent(v -> s.put("cpuTimeMs", v));
        s.put("sandbox", r.sandbox());
        r.worker().ifPresent(w -> s.put("worker", w));
        if (workspace.isPresent()) {
            s.put("workspace", workspace.get());
            List<Map<String, Object>> files = new ArrayList<>();
            for (ExecutionResult.FileArtifact f : r.files()) {
                files.add(Map.of("path", f.path(), "size", f.size(), "mimeType", f.mimeType(), "status", f.status()));
            }
            s.put("files", files);
            s.put("filesTruncated", r.filesTruncated());
        }
        r.session().ifPresent(so -> {
            s.put("session", so.name());
            s.put("sessionCreated", so.created());
            so.result().ifPresent(v -> s.put("result", v));
            List<Map<String, Object>> figures = new ArrayList<>();
            int shown = 0;
            for (ExecutionResult.Figure f : so.figures()) {
                // the rule of Artifacts.figures: in order, up to the count, none over the size limit
                boolean inline = shown < Artifacts.MAX_INLINE_IMAGES && f.data().length <= maxImageBytes;
                if (inline) shown++;
                figures.add(Map.of("mimeType", f.mimeType(), "size", f.data().length, "shown", inline));
            }
            s.put("figures", figures);
        });
        return s;
    }
}
