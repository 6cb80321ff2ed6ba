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

    private static void json(PrintWriter writer, int code) {
        writer.write(JsonErrors.body(JsonErrors.codeFor(code), JsonErrors.messageFor(code)));
    }

    private static final class Core extends org.eclipse.jetty.server.handler.ErrorHandler {
        Core() {
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
            json(writer, code);
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
            json(writer, code);
        }
    }
}
