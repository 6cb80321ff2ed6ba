package dev.codeexec.http;

import org.eclipse.jetty.http.HttpHeader;
import org.eclipse.jetty.http.HttpURI;
import org.eclipse.jetty.http.UriCompliance;
import org.eclipse.jetty.server.Handler;
import org.eclipse.jetty.server.Request;
import org.eclipse.jetty.server.Response;
import org.eclipse.jetty.util.Callback;

import java.nio.charset.StandardCharsets;

/**
 * Refuses request targets that Jetty flags as ambiguous or suspicious (an encoded {@code .} or {@code /},
 * {@code %5C}, bad percent-encoding, ...) with a JSON body: the REST error on /api, JSON-RPC elsewhere. Jetty would
 * refuse them too, but with an empty 400 body, and a client of the file API should learn that its path was the
 * problem. The connector therefore lets every URI through ({@link UriCompliance#UNSAFE}); this guard applies
 * Jetty's {@link UriCompliance#DEFAULT} to everything but /api, and refuses any violation at all on /api.
 */
final class ApiUriGuard extends Handler.Wrapper {

    @Override
    public boolean handle(Request request, Response response, Callback callback) throws Exception {
        HttpURI uri = request.getHttpURI();
        boolean api = JsonErrors.isApi(uri.getPath());
        // NUL is not a violation to Jetty, but the servlet layer refuses it later with a body of the wrong shape.
        if (api ? uri.isAmbiguous() || uri.hasViolations() || uri.getPath().contains("%00")
                : uri.getViolations().stream().anyMatch(v -> !UriCompliance.DEFAULT.allows(v))) {
            byte[] body = (api ? JsonErrors.apiBody("bad_path", "bad path: encoded '.', '/', '\\' or NUL, or bad "
                    + "percent-encoding, are not allowed") : JsonErrors.body(-32600, "Bad request: ambiguous URI"))
                    .getBytes(StandardCharsets.UTF_8);
            response.setStatus(400);
            response.getHeaders().put(HttpHeader.CONTENT_TYPE, "application/json");
            response.getHeaders().put(HttpHeader.CACHE_CONTROL, "no-store");
            response.getHeaders().put(HttpHeader.CONTENT_LENGTH, body.length);
            response.write(true, java.nio.ByteBuffer.wrap(body), callback);
            return true;
        }
        return super.handle(request, response, callback);
    }
}
