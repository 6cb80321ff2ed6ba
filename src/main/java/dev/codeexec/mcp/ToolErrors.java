package dev.codeexec.mcp;

import dev.codeexec.engine.ExecutionException;
import dev.codeexec.workspace.WorkspaceException;
import io.modelcontextprotocol.spec.McpSchema.CallToolResult;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The one mapping from what stopped a tool call to the tool error its client sees, for every tool: {@code isError}
 * and the text {@code Error [KIND]: message}, the kind first so a client (or a model) can tell the causes apart
 * without reading the message. The kinds: an {@link ExecutionException}'s ({@code invalid_request}, {@code busy},
 * {@code unavailable}), a {@link WorkspaceException}'s ({@code bad_path}, {@code bad_name}, {@code not_found},
 * {@code conflict}, {@code too_large}, {@code quota_exceeded}, {@code io}), an argument that does not fit the tool's
 * schema ({@code invalid_arguments}, {@link ToolArgs.Invalid}), what a tool names itself ({@code not_found}), and
 * {@code internal} for anything else, whose detail goes to the server log only. Messages are the exceptions'
 * client-safe ones, never a stack trace.
 */
final class ToolErrors {

    private static final Logger LOG = LoggerFactory.getLogger(ToolErrors.class);

    static final String INVALID_ARGUMENTS = "invalid_arguments";
    static final String NOT_FOUND = "not_found";
    static final String INTERNAL = "internal";

    private ToolErrors() {
    }

    /** The tool error for an exception that ended a call of {@code tool}. */
    static CallToolResult of(String tool, RuntimeException e) {
        return switch (e) {
            case ExecutionException x -> error(x.code(), x.getMessage());
            case WorkspaceException x -> error(x.code(), x.getMessage());
            case ToolArgs.Invalid x -> error(INVALID_ARGUMENTS, x.getMessage());
            case JobTools.NotFound x -> error(NOT_FOUND, x.getMessage());
            default -> {
                LOG.error("{} failed unexpectedly", tool, e);
                yield error(INTERNAL, "the call could not be completed (details are in the server log)");
            }
        };
    }

    /** A tool error of this kind. */
    static CallToolResult error(String kind, String message) {
        return CallToolResult.builder().addTextContent("Error [" + kind + "]: " + message).isError(true).build();
    }
}
