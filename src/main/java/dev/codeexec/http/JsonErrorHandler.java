package dev.codeexec.http;

import org.eclipse.jetty.server.Request;
import org.eclipse.jetty.server.Response;
import org.eclipse.jetty.util.Callback;

import java.io.IOException;
import java.io.PrintWriter;
import java.nio.charset.Charset;
import java.nio.charset.StandardCharsets;
import java.util.List;

/**
 * Jetty's error pages, as JSON, whatever the client accepts, never with a stack, a cause or the exception's
 * message (which can carry internals): only the status and a fixed text for it. One subclass for the server
 * (errors before any context, e.g. a malformed request line) and one for the servlet context.
 */
final class JsonErrorHandler {

    private JsonErrorHandler() {
    }

    static org.eclipse.jetty.server.handler.ErrorHandler server() {
        return new Core();
    }

    static org.eclipse.jetty.ee10.servlet.ErrorHandler context() {
        return new Servlet();
    }

    private static void configure(org.eclipse.jetty.server.handler.ErrorHandler h) {
        h.setShowStacks(false);
        h.setShowCauses(false);
        h.setShowMessageInTitle(false);
        h.setShowOrigin(false);
        h.setDefaultResponseMimeType("application/json");
    }

    /**
     * The path Jetty puts in place of a request target it could not parse: a NUL ({@code %00}) in the path fails
     * the request line itself, before any handler, and the real path is lost.
     */
    private static final String UNPARSED_TARGET = "/badMessage";
    /** Marks, through the error's message, an answer to an unparsable target. */
    private static final String BAD_TARGET = "bad request target";

    /**
     * Whether this 400 is Jetty's refusal of a request target it could not parse. Decision: such a request gets the
     * REST API's {@code bad_path} answer whatever its path was (it is lost): the REST API is the surface whose paths
     * clients build from data (file names); the MCP endpoint is one fixed URL that no client sends a NUL in.
     */
    private static boolean unparsedTarget(Request request, int code, Throwable cause) {
        if (code != 400 || request.getHttpURI() == null || !UNPARSED_TARGET.equals(request.getHttpURI().getPath()))
            return false;
        for (Throwable t = cause; t != null; t = t.getCause()) {
            if (t instanceof IllegalArgumentException) return true;
        }
        return false;
    }

    private static void json(Request request, PrintWriter writer, int code, String message) {
        if (BAD_TARGET.equals(message)) {
            writer.write(JsonErrors.apiBody("bad_path", "bad path: the request target cannot be parsed (a NUL, %00, "
                    + "is not allowed in a path)"));
            return;
        }
        String path = request.getHttpURI() == null ? null : request.getHttpURI().getPath();
        writer.write(JsonErrors.isApi(path)
                ? JsonErrors.apiBody(JsonErrors.apiCodeFor(code), JsonErrors.messageFor(code))
                : JsonErrors.body(JsonErrors.codeFor(code), JsonErrors.messageFor(code)));
    }

    private static final class Core extends org.eclipse.jetty.server.handler.ErrorHandler {
        Core() {
            configure(this);
        }

        @Override
        protected boolean generateAcceptableResponse(Request request, Response response, Callback callback,
                String contentType, List<Charset> charsets, int code, String message, Throwable cause)
                throws IOException {
            boolean unparsed = unparsedTarget(request, code, cause);
            // Jetty closes the connection after a request line it could not parse: say so, or a client that pools
            // connections sends its next request on this one and reads nothing
            if (unparsed) response.getHeaders().put(org.eclipse.jetty.http.HttpHeader.CONNECTION, "close");
            return super.generateAcceptableResponse(request, response, callback, "application/json",
                    List.of(StandardCharsets.UTF_8), code, unparsed ? BAD_TARGET : null, null);
        }

        @Override
        protected void writeErrorJson(Request request, PrintWriter writer, int code, String message, Throwable cause) {
            json(request, writer, code, message);
        }
    }

    private static final class Servlet extends org.eclipse.jetty.ee10.servlet.ErrorHandler {
        Servlet() {
            configure(this);
        }

        @Override
        protected boolean generateAcceptableResponse(Request request, Response response, Callback callback,
                String contentType, List<Charset> charsets, int code, String message, Throwable cause)
                throws IOException {
            return super.generateAcceptableResponse(request, response, callback, "application/json",
                    List.of(StandardCharsets.UTF_8), code, null, null);
        }

        @Override
        protected void writeErrorJson(Request request, PrintWriter writer, int code, String message, Throwable cause) {
            json(request, writer, code, null);
        }
    }
}
