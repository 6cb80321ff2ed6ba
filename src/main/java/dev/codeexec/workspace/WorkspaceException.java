package dev.codeexec.workspace;

/**
 * Why a workspace operation was refused, named by cause; surfaces map each kind to one status (REST) or one
 * tool error (MCP). Messages are safe to show to clients: they name the user's relative path, never a host path.
 */
public final class WorkspaceException extends RuntimeException {

    /** The cause, with the HTTP status a REST surface answers with. */
    public enum Kind {
        BAD_PATH(400), BAD_NAME(400), NOT_FOUND(404), CONFLICT(409), TOO_LARGE(413), QUOTA_EXCEEDED(507), IO(500);

        public final int httpStatus;

        Kind(int httpStatus) {
            this.httpStatus = httpStatus;
        }
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
