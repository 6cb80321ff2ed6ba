package dev.codeexec.surface;

/**
 * Something a surface adds after its own features: production passes none; tests register fixtures this way (the
 * MCP conformance suite's tools) so that they never ship in the jar. Each surface takes the kinds it knows
 * ({@code mcp.McpExtension} for the MCP server) and ignores the rest.
 */
public interface SurfaceExtension {
}
