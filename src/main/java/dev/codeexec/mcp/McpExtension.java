package dev.codeexec.mcp;

import io.modelcontextprotocol.spec.McpSchema.ServerCapabilities;

import java.util.Optional;

/**
 * Adds tools, resources, prompts or completions to the MCP server (both revisions) after ours are in place.
 * Production passes none; tests (the conformance fixtures) register theirs here so that they never ship in the jar.
 * An extension may also replace the server capabilities the 2025-11-25 server announces.
 */
public interface McpExtension extends dev.codeexec.surface.SurfaceExtension {

    /** What it adds. */
    McpCatalog features();

    /** The capabilities to announce instead of ours, if any. */
    default Optional<ServerCapabilities> capabilities() {
        return Optional.empty();
    }
}
