package dev.codeexec.http;

/** A REST request refused for a reason that is not a workspace's: a bad route, body or header. */
final class ApiException extends RuntimeException {

    final int status;
    final String code;

    ApiException(int status, String code, String message) {
        super(message, null, false, false);
        this.status = status;
        this.code = code;
    }

    static ApiException badRequest(String message) {
        return new ApiException(400, "bad_request", message);
    }
}
