package dev.codeexec.http;

import dev.codeexec.auth.ApiKeys;
import dev.codeexec.auth.Principal;
import dev.codeexec.config.Config;
import jakarta.servlet.FilterChain;
import jakarta.servlet.ServletException;
import jakarta.servlet.http.HttpFilter;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Optional;
import java.util.Set;
import java.util.stream.Collectors;

/**
 * The checks every request passes before anything else sees it, in this order: Host (DNS rebinding), Origin and
 * CORS, body size by Content-Length, then the API key. /healthz and the console's static files (/admin) need no
 * key; /metrics needs an admin key or METRICS_TOKEN (see {@link #metricsAllowed}). An authenticated request carries
 * its {@link Principal} as the request attribute {@link Principal#ATTRIBUTE}; without any key configured (a loopback
 * server, or ALLOW_UNAUTHENTICATED) every request is {@link #OPEN}: the default tenant with admin rights, as the
 * single API_KEY would be (whoever can reach such a server can do everything anyway).
 *
 * <p><b>Body size.</b> /api file uploads may be up to MAX_UPLOAD_MB (the API counts while streaming too);
 * everything else, /mcp above all, MAX_BODY_MB.
 *
 * <p><b>Host check.</b> A page on an attacker's domain that re-resolves to 127.0.0.1 sends its own name in Host;
 * refusing unknown names stops it. Accepted: localhost, loopback addresses, the configured HOST and ALLOWED_HOSTS,
 * with any port. A server bound to a non-loopback HOST with an API_KEY accepts any Host: a rebinding page cannot
 * know the key, and such servers sit behind proxies and DNS names the operator may not list. A loopback server
 * keeps the check even with a key (defence in depth, and what MCP clients and the conformance suite expect).
 *
 * <p><b>Origin.</b> Browsers send Origin on cross-origin requests. An Origin that is not in CORS_ORIGINS gets no
 * CORS headers and, on /mcp, a 403, even without API_KEY (so a page in the user's browser cannot drive a local
 * server). Requests without Origin (MCP clients, curl) are not browser requests and pass.
 */
final class EdgeFilter extends HttpFilter {

    static final String HEALTH_PATH = "/healthz";
    static final String MCP_PATH = "/mcp";
    static final String METRICS_PATH = "/metrics";
    private static final List<String> ALLOWED_REQUEST_HEADERS = List.of("Mcp-Session-Id", "Authorization",
            "Content-Type", "Mcp-Protocol-Version", "Last-Event-ID", "Accept", "Range", "If-None-Match", "If-Range");

    /** The caller on a server without keys. */
    static final Principal OPEN = new Principal(Principal.DEFAULT.tenant(), true);

    /**
     * Request attribute: which key the caller presented, as the SHA-256 the keys file lists (never the key itself),
     * for what belongs to one key rather than to its tenant: the MCP sessions it opened ({@link McpSessionOwners}).
     */
    static final String KEY_ID_ATTRIBUTE = "dev.codeexec.keyId";
    /** The key id of every caller of a server without keys: they are all the same caller. */
    static final String OPEN_KEY_ID = "open";

    private final ApiKeys keys;
    private final Set<String> corsOrigins;
    private final boolean anyOrigin;
    private final Set<String> allowedHosts;
    private final long maxBodyBytes;
    private final long maxUploadBytes;
    /** SHA-256 of METRICS_TOKEN, or null when it is not set. */
    private final byte[] metricsTokenHash;

    EdgeFilter(Config config, ApiKeys keys) {
        this.keys = keys;
        String metricsToken = config.get(Config.METRICS_TOKEN);
        this.metricsTokenHash = metricsToken.isEmpty() ? null : sha256(metricsToken);
        this.corsOrigins = config.corsOrigins().stream().map(EdgeFilter::normalizeOrigin).collect(Collectors.toSet());
        this.anyOrigin = corsOrigins.contains("*");
        this.allowedHosts = keys.required() && !Config.isLoopback(config.get(Config.HOST)) ? null : hostNames(config);
        this.maxBodyBytes = maxBodyBytes(config);
        this.maxUploadBytes = maxUploadBytes(config);
    }

    static long maxBodyBytes(Config config) {
        return config.get(Config.MAX_BODY_MB) * 1024L * 1024L;
    }

    static long maxUploadBytes(Config config) {
        return config.get(Config.MAX_UPLOAD_MB) * 1024L * 1024L;
    }

    /**
     * Room for a multipart envelope (boundaries, part headers) around MAX_UPLOAD_MB of file content, so a file of
     * exactly the limit can be sent from a browser form. File bytes themselves are capped at MAX_UPLOAD_MB exactly.
     */
    static final long ENVELOPE_BYTES = 64 * 1024;

    private static Set<String> hostNames(Config config) {
        List<String> names = new ArrayList<>(List.of("localhost", "127.0.0.1", "::1", "[::1]"));
        names.add(config.get(Config.HOST));
        names.addAll(config.allowedHosts());
        return names.stream().map(h -> h.trim().toLowerCase(Locale.ROOT)).collect(Collectors.toSet());
    }

    @Override
    protected void doFilter(HttpServletRequest request, HttpServletResponse response, FilterChain chain)
            throws IOException, ServletException {
        try {
            edge(request, response, chain);
        } finally {
            if (response.getStatus() >= 400) drainUnreadBody(request);
        }
    }

    /** Most of an unread request body that is read and dropped after an error answer (see drainUnreadBody). */
    static final long DRAIN_LIMIT_BYTES = 16L * 1024 * 1024;
    private static final long DRAIN_LIMIT_NANOS = 5_000_000_000L;

    /**
     * After an error answer to a request whose body was not read (401, 413, a refused upload, ...), reads and drops
     * the rest of the body, up to a bound. Closing with unread data makes the kernel reset the connection, which
     * discards the answer already sent: a client still sending its upload would see a dead connection instead of
     * its 401 or 413. Clients that send {@code Expect: 100-continue} never send the body in the first place.
     */
    private static void drainUnreadBody(HttpServletRequest request) {
        long deadline = System.nanoTime() + DRAIN_LIMIT_NANOS;
        try {
            var in = request.getInputStream();
            byte[] buf = new byte[64 * 1024];
            long total = 0;
            int n;
            while (total < DRAIN_LIMIT_BYTES && System.nanoTime() < deadline && (n = in.read(buf)) >= 0) total += n;
        } catch (IOException | IllegalStateException e) {
            // the body was read another way, or the connection is gone: nothing left to do
        }
    }

    private void edge(HttpServletRequest request, HttpServletResponse response, FilterChain chain)
            throws IOException, ServletException {
        // Every decision below is made on the path the servlet mapping uses (decoded, normalised, without ;params),
        // never on the raw URI: /%6detrics, /metrics;x or /x/../metrics reach the metrics servlet as /metrics does.
        String path = canonicalPath(request);
        boolean api = JsonErrors.isApi(path);
        if (!hostAllowed(request.getHeader("Host"))) {
            reject(response, api, 403, "Forbidden: Host header not allowed");
            return;
        }
        String origin = request.getHeader("Origin");
        boolean preflight = "OPTIONS".equals(request.getMethod())
                && request.getHeader("Access-Control-Request-Method") != null;
        if (origin != null && !sameOrigin(origin, request.getHeader("Host"))) { // same-origin needs no CORS
            if (!originAllowed(origin)) {
                if (preflight || path.startsWith(MCP_PATH) || api) {
                    reject(response, api, 403, "Forbidden: origin not allowed");
                    return;
                }
            } else {
                response.setHeader("Access-Control-Allow-Origin", origin);
                response.addHeader("Vary", "Origin");
                response.setHeader("Access-Control-Expose-Headers", api
                        ? "Content-Disposition, Content-Range, ETag, Content-Length" : "Mcp-Session-Id");
                if (preflight) {
                    answerPreflight(request, response);
                    return;
                }
            }
        }
        if (request.getContentLengthLong() > (api ? maxUploadBytes + ENVELOPE_BYTES : maxBodyBytes)) {
            reject(response, api, 413, api ? "Request body exceeds MAX_UPLOAD_MB" : "Request body exceeds MAX_BODY_MB");
            return;
        }
        if (METRICS_PATH.equals(path)) {
            if (!metricsAllowed(request.getHeader("Authorization"))) {
                response.setHeader("WWW-Authenticate", "Bearer");
                reject(response, true, 401, "Unauthorized: /metrics needs an admin key or METRICS_TOKEN");
                return;
            }
            chain.doFilter(request, response);
            return;
        }
        if (!keys.required()) {
            request.setAttribute(Principal.ATTRIBUTE, OPEN);
            request.setAttribute(KEY_ID_ATTRIBUTE, OPEN_KEY_ID);
        } else if (!HEALTH_PATH.equals(path) && !AdminConsoleServlet.isConsolePath(path)) {
            String token = bearer(request.getHeader("Authorization"));
            Optional<Principal> who = token == null ? Optional.empty() : keys.authenticate(token);
            if (who.isEmpty()) {
                response.setHeader("WWW-Authenticate", "Bearer");
                reject(response, api, 401, "Unauthorized: missing or wrong bearer token");
                return;
            }
            request.setAttribute(Principal.ATTRIBUTE, who.get());
            request.setAttribute(KEY_ID_ATTRIBUTE, ApiKeys.hashHex(token));
        }
        chain.doFilter(request, response);
    }

    /**
     * The decoded, normalised path the servlet mapping uses. The console's exemption from the key is decided on
     * this, not on the raw URI, so that {@code /admin/../api/...} cannot borrow it for another servlet.
     */
    private static String canonicalPath(HttpServletRequest request) {
        String info = request.getPathInfo();
        return request.getServletPath() + (info == null ? "" : info);
    }

    private static void reject(HttpServletResponse response, boolean api, int status, String message)
            throws IOException {
        if (!api) {
            reject(response, status, message);
            return;
        }
        response.setHeader("Connection", "close");
        JsonErrors.writeApi(response, status, JsonErrors.apiCodeFor(status), message);
    }

    /**
     * Refuses before the body is read. The connection is closed afterwards: the unread body would otherwise be
     * taken for the next request, and a client that reuses the connection must learn it cannot.
     */
    static void reject(HttpServletResponse response, int status, String message) throws IOException {
        response.setHeader("Connection", "close");
        JsonErrors.write(response, status, message);
    }

    private void answerPreflight(HttpServletRequest request, HttpServletResponse response) {
        response.setHeader("Access-Control-Allow-Methods", "GET, POST, DELETE, OPTIONS");
        String requested = request.getHeader("Access-Control-Request-Headers");
        if (requested != null) {
            List<String> granted = new ArrayList<>();
            for (String h : requested.split(",")) {
                String name = h.trim();
                ALLOWED_REQUEST_HEADERS.stream().filter(a -> a.equalsIgnoreCase(name)).findFirst()
                        .ifPresent(granted::add);
            }
            if (!granted.isEmpty()) response.setHeader("Access-Control-Allow-Headers", String.join(", ", granted));
        }
        response.setHeader("Access-Control-Max-Age", "600");
        response.setStatus(204);
    }

    /**
     * A page served by this server calling it back (the admin console). https counts too: behind a TLS proxy that
     * keeps the Host header the console's origin is https://host while this server sees plain http.
     */
    static boolean sameOrigin(String origin, String hostHeader) {
        if (hostHeader == null) return false;
        String o = normalizeOrigin(origin);
        String host = hostHeader.trim().toLowerCase(Locale.ROOT);
        return o.equals("http://" + host) || o.equals("https://" + host);
    }

    boolean originAllowed(String origin) {
        return anyOrigin || corsOrigins.contains(normalizeOrigin(origin));
    }

    boolean hostAllowed(String hostHeader) {
        if (allowedHosts == null) return true;
        if (hostHeader == null) return false;
        return allowedHosts.contains(hostName(hostHeader));
    }

    /** "Example.com:8080" → "example.com"; "[::1]:8080" → "[::1]". */
    static String hostName(String hostHeader) {
        String h = hostHeader.trim().toLowerCase(Locale.ROOT);
        if (h.startsWith("[")) {
            int end = h.indexOf(']');
            return end < 0 ? h : h.substring(0, end + 1);
        }
        int colon = h.indexOf(':');
        return colon < 0 ? h : h.substring(0, colon);
    }

    private static String normalizeOrigin(String origin) {
        String o = origin.trim().toLowerCase(Locale.ROOT);
        return o.endsWith("/") ? o.substring(0, o.length() - 1) : o;
    }

    /**
     * /metrics: METRICS_TOKEN (compared as a hash in constant time) or an admin key; a tenant key is not enough.
     * A server without keys and without METRICS_TOKEN (loopback only) serves it to anyone, like everything else.
     */
    private boolean metricsAllowed(String header) {
        if (!keys.required() && metricsTokenHash == null) return true;
        String token = bearer(header);
        if (token == null) return false;
        if (metricsTokenHash != null && MessageDigest.isEqual(metricsTokenHash, sha256(token))) return true;
        return keys.required() && keys.authenticate(token).map(Principal::admin).orElse(false);
    }

    /** Hashing first gives equal lengths, so the comparison takes the same time wherever the token differs. */
    private static byte[] sha256(String s) {
        return ApiKeys.hashHex(s).getBytes(StandardCharsets.US_ASCII);
    }

    /** The token of an {@code Authorization: Bearer ...} header; null for none or another scheme. */
    private static String bearer(String header) {
        if (header == null) return null;
        String h = header.trim();
        if (h.length() < 7 || !h.regionMatches(true, 0, "Bearer ", 0, 7)) return null;
        return h.substring(7).trim();
    }

}
