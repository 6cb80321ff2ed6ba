package dev.codeexec.http;

import jakarta.servlet.http.HttpServletResponse;
import tools.jackson.databind.json.JsonMapper;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * The two shapes of every HTTP error we send, both with a short message and never exception text or a stack:
 * on /mcp (and elsewhere) a JSON-RPC error object with {@code id: null}, so MCP clients can parse it; on /api the
 * REST shape {@code {"error": "<code>", "message": "..."}}.
 */
final class JsonErrors {

    static final JsonMapper JSON = JsonMapper.builder().build();

    private JsonErrors() {
    }

    static String body(int jsonRpcCode, String message) {
        Map<String, Object> error = new LinkedHashMap<>();
        error.put("code", jsonRpcCode);
        error.put("message", message);
        Map<String, Object> body = new LinkedHashMap<>();
        body.put("jsonrpc", "2.0");
        body.put("error", error);
        body.put("id", null);
        return JSON.writeValueAsString(body);
    }

    /** The JSON-RPC code that goes with an HTTP status when nothing more precise is known. */
    static int codeFor(int status) {
        return switch (status) {
            case 400, 413, 415 -> -32600;
            case 404 -> -32001;
            case 500 -> -32603;
            default -> -32000;
        };
    }

    static String messageFor(int status) {
        return switch (status) {
            case 400 -> "Bad request";
            case 401 -> "Unauthorized";
            case 403 -> "Forbidden";
            case 404 -> "Not found";
            case 405 -> "Method not allowed";
            case 406 -> "Not acceptable";
            case 413 -> "Request body too large";
            case 415 -> "Unsupported media type";
            case 431 -> "Request header fields too large";
            case 503 -> "Service unavailable";
            default -> status >= 500 ? "Internal server error" : "Request failed";
        };
    }

    static void write(HttpServletResponse response, int status, int jsonRpcCode, String message) throws IOException {
        byte[] bytes = body(jsonRpcCode, message).getBytes(StandardCharsets.UTF_8);
        response.setStatus(status);
        response.setContentType("application/json");
        response.setCharacterEncoding("UTF-8");
        response.setContentLength(bytes.length);
        response.getOutputStream().write(bytes);
        response.getOutputStream().flush();
    }

    /** The error shape for the request's path: REST under /api, JSON-RPC elsewhere. */
    static void write(HttpServletResponse response, int status, String message) throws IOException {
        write(response, status, codeFor(status), message);
    }

    static boolean isApi(String path) {
        return path != null && (path.equals(API_PATH) || path.startsWith(API_PATH + "/"));
    }

    static final String API_PATH = "/api";

    static String apiBody(String code, String message) {
        Map<String, Object> body = new LinkedHashMap<>();
        body.put("error", code);
        body.put("message", message);
        return JSON.writeValueAsString(body);
    }

    /** The REST wire code for a status when nothing more precise is known, e.g. {@code unauthorized}. */
    static String apiCodeFor(int status) {
        return switch (status) {
            case 400 -> "bad_request";
            case 401 -> "unauthorized";
            case 403 -> "forbidden";
            case 404 -> "not_found";
            case 405 -> "method_not_allowed";
            case 409 -> "conflict";
            case 413 -> "too_large";
            case 416 -> "range_not_satisfiable";
            case 415 -> "unsupported_media_type";
            case 507 -> "quota_exceeded";
            default -> status >= 500 ? "internal" : "request_failed";
        };
    }

    static void writeApi(HttpServletResponse response, int status, String code, String message) throws IOException {
        byte[] bytes = apiBody(code, message).getBytes(StandardCharsets.UTF_8);
        response.setStatus(status);
        response.setContentType("application/json");
        response.setCharacterEncoding("UTF-8");
        response.setHeader("Cache-Control", "no-store");
        response.setContentLength(bytes.length);
        response.getOutputStream().write(bytes);
        response.getOutputStream().flush();
    }
}
