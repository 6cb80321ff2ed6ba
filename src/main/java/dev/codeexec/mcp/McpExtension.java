package dev.codeexec.mcp;

import io.modelcontextprotocol.server.McpServer;

/**
 * Adds tools, resources, prompts or completions to the MCP server after ours are in place. Production passes
 * none; tests (the conformance fixtures) register theirs here so that they never ship in the jar. An extension may
 * also replace the server capabilities.
 */
@FunctionalInterface
public interface McpExtension extends dev.codeexec.surface.SurfaceExtension {
    void apply(McpServer.SyncSpecification<?> spec);
}
