package dev.codeexec.mcp;

import io.modelcontextprotocol.spec.McpSchema.ToolAnnotations;

/**
 * What a tool tells clients about its effects (MCP tool annotations), named where each tool is defined: a client
 * may call a read-only tool without asking, and should confirm a destructive one. No tool here reaches beyond
 * the server (openWorldHint false).
 *
 * @param idempotentHint calling it again with the same arguments has no further effect
 */
record ToolHints(boolean readOnlyHint, boolean destructiveHint, boolean idempotentHint) {

    /** Changes nothing; reading again gives the same answer. */
    static ToolHints readOnly() {
        return new ToolHints(true, false, true);
    }

    /** May remove or overwrite what was there. */
    static ToolHints destructive() {
        return new ToolHints(false, true, false);
    }

    /** Changes things but only adds: running code (its files and output are new). */
    static ToolHints additive() {
        return new ToolHints(false, false, false);
    }

    ToolHints idempotent() {
        return new ToolHints(readOnlyHint, destructiveHint, true);
    }

    ToolAnnotations annotations(String title) {
        return new ToolAnnotations(title, readOnlyHint, destructiveHint, idempotentHint, false, null);
    }
}
