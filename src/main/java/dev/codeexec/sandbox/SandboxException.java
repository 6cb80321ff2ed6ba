package dev.codeexec.sandbox;

/** The sandbox could not be set up or started; the message is safe to show to a client. */
public final class SandboxException extends Exception {
    public SandboxException(String message) {
        super(message);
    }

    public SandboxException(String message, Throwable cause) {
        super(message, cause);
    }
}
