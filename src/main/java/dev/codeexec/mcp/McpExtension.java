package dev.codeexec.mcp;

import io.modelcontextprotocol.spec.McpSchema.ServerCapabilities;

import java.util.List;
import java.util.Optional;

/**
 * Adds tools, resources, prompts or completions to the MCP server (both revisions) after ours are in place.
 * Production passes none; tests (the conformance fixtures) register theirs here so that they never ship in the jar.
 * An extension may also replace the server capabilities the 2025-11-25 server announces.
 */
public interface McpExtension extends dev.codeexec.surface.SurfaceExtension {

    /** What it adds. */
    McpCatalog features();

    /**
     * Tools only the 2026-07-28 server offers: ones that answer with what 2025-11-25 has no form for (a result that
     * asks for input, a task made with {@code tasks}).
     */
    default List<io.modelcontextprotocol.modern.server.feature.McpAsyncTool> modernTools(McpTasks tasks) {
        return List.of();
    }

    /** Prompts only the 2026-07-28 server offers (one that asks for input first, say). */
    default List<io.modelcontextprotocol.modern.server.feature.McpSyncPrompt> modernPrompts() {
        return List.of();
    }

    /** The capabilities to announce instead of ours, if any. */
    default Optional<ServerCapabilities> capabilities() {
        return Optional.empty();
    }
}
