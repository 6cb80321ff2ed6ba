package dev.codeexec.surface;

import dev.codeexec.engine.ExecutionException;
import dev.codeexec.engine.ExecutionRequest;

import java.util.Map;

/**
 * Turns the raw arguments of an {@code execute_code} call into a validated request. The engine's request
 * validator is the one implementation in production; the MCP layer never second-guesses it.
 */
@FunctionalInterface
public interface RequestConverter {

    /** @throws ExecutionException.InvalidRequest with a message fit for the client */
    ExecutionRequest convert(Map<String, Object> arguments);
}
