package dev.codeexec.workspace;

/**
 * Why a workspace operation was refused, named by cause; surfaces map each kind to one status (REST) or one
 * tool error (MCP). Messages are safe to show to clients: they name the user's relative path, never a host path.
 */
public final class WorkspaceException extends RuntimeException {

    /** The cause (the REST surface gives each one status: {@code http.ApiErrors}). */
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
