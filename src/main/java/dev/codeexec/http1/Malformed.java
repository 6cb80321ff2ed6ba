package dev.codeexec.http1;

/** An HTTP/1.x message a proxy refuses to carry; the message says why, fit for the body of the error answer. */
public final class Malformed extends Exception {

    public Malformed(String message) {
        super(message, null, false, false);
    }
}
