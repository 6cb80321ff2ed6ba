package dev.codeexec.http;

import jakarta.servlet.http.HttpServletResponse;
import tools.jackson.databind.json.JsonMapper;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * The one shape of every HTTP error we send: a JSON-RPC error object with a short message and {@code id: null},
 * so MCP clients can parse it and no exception text or stack trace can ride along.
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

    static void write(HttpServletResponse response, int status, String message) throws IOException {
        write(response, status, codeFor(status), message);
    }
}
