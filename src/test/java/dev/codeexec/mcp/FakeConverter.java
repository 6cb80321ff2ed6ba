package dev.codeexec.mcp;

import dev.codeexec.surface.RequestConverter;
import dev.codeexec.engine.ExecutionException.InvalidRequest;
import dev.codeexec.engine.ExecutionRequest;
import dev.codeexec.sandbox.Limits;

import java.time.Duration;
import java.util.List;
import java.util.Map;

/** Stands in for the engine's RequestValidator: the checks and messages the surface tests rely on. */
public final class FakeConverter implements RequestConverter {

    public static final List<String> LANGUAGES = List.of("python", "nodejs", "typescript", "go", "java", "shell", "bash");

    @Override
    public ExecutionRequest convert(Map<String, Object> a) {
        if (!(a.get("language") instanceof String lang) || !LANGUAGES.contains(lang))
            throw new InvalidRequest("unknown language '" + a.get("language") + "'; supported: " + String.join(", ", LANGUAGES));
        if (!(a.get("code") instanceof String code)) throw new InvalidRequest("code is required");
        long timeout = 30000;
        if (a.containsKey("timeout_ms")) {
            if (!(a.get("timeout_ms") instanceof Number n) || n.longValue() < 1 || n.longValue() > 120000)
                throw new InvalidRequest("timeout_ms must be an integer between 1 and 120000, got " + a.get("timeout_ms"));
            timeout = n.longValue();
        }
        Limits limits = new Limits(Duration.ofMillis(timeout), 30, 2048L << 20, 128, 256 << 10, 512L << 20);
        return ExecutionRequest.builder(lang, code, limits).stdin((String) a.get("stdin")).build();
    }
}
