package dev.codeexec.codemode;

/**
 * One call a run's code made through a credentialed API route ({@code /apis/{api}/...}): the API, the method, the
 * path under the API's URL (without its query, which may carry what the caller put there), the status the code got
 * (the upstream's, or the route's own refusal: 403, 429, 504, ...), how long it took, and the bytes of the request's
 * body (out) and of the response's body (in).
 */
public record ApiCall(String api, String method, String path, int status, long ms, long bytesIn, long bytesOut) {
}
