package dev.codeexec.workspace;

/**
 * Why a workspace operation was refused, named by cause; each surface maps a kind in one switch: the REST API to an
 * HTTP status ({@code http.ApiServlet.status}), MCP resources and prompts to a JSON-RPC error
 * ({@code mcp.WorkspaceResources.error}), and the file tools answer a tool error carrying {@link #code()}. Messages
 * are safe to show to clients: they name the user's relative path, never a host path.
 */
public final class WorkspaceException extends RuntimeException {

    /** The cause (the REST API gives each one HTTP status: {@code http.ApiServlet.status}). */
    public enum Kind {
        BAD_PATH, BAD_NAME, NOT_FOUND, CONFLICT, TOO_LARGE, QUOTA_EXCEEDED, IO
    }

    private final Kind kind;

    public WorkspaceException(Kind kind, String message) {
        super(message, null, false, false);
        this.kind = kind;
    }

    public Kind kind() {
        return kind;
    }

    /** The wire name of the kind, e.g. {@code quota_exceeded}. */
    public String code() {
        return kind.name().toLowerCase();
    }
}
