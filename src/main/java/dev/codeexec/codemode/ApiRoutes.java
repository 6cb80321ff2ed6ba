package dev.codeexec.codemode;

import dev.codeexec.egress.EgressChannel;
import dev.codeexec.egress.LocalEndpoint;

import java.io.IOException;
import java.io.InputStream;
import java.net.URI;
import java.net.URLDecoder;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.Executors;

/**
 * Credentialed HTTP API routes, server-wide: the {@code httpApis} of UPSTREAM_MCP_FILE, who may call which, and the
 * call itself. A run's code sends a plain request to {@code http://127.0.0.1:3128/apis/{name}/{path}?{query}}; its
 * run's {@link CodeToolsRun} checks it and its caps and has this class make it to {@code {url}/{path}?{query}}, so
 * the API's credentials ({@code headers}) live only in the server.
 *
 * <p>What a call carries on, and why. The caller's own {@code Authorization}, {@code Cookie}, {@code Proxy-*} and
 * {@code Host} fields are dropped (the route speaks for the operator, not the code; a host field would name another
 * site), as are the hop-by-hop fields, the framing ones (the body is sent whole) and {@code Accept-Encoding} (so an
 * answer comes uncompressed and can be scrubbed); the configured headers are added and replace any of the same names.
 * Redirects are never followed: a {@code Location} under the API's own URL is rewritten to the route (a client that
 * follows it stays on the route, checked again), any other goes back as it came and is not followed by the server.
 * In the answer, hop-by-hop and framing fields and {@code Set-Cookie} are dropped (cookies are not carried the other
 * way either), and every field value, and a text body (by Content-Type) that holds one, has the file's secrets
 * replaced ({@link Secrets}), so an API that echoes its request does not show the token to code.
 */
public final class ApiRoutes {

    static final String PREFIX = "/apis";
    /** The routes as a run's code reaches them: through its channel's relay (CODE_APIS_URL). */
    static final String URL = EgressChannel.PROXY_URL + PREFIX;
    private static final Set<String> DROPPED_REQUEST = Set.of("authorization", "cookie", "host", "connection", "keep-alive",
            "te", "trailer", "transfer-encoding", "upgrade", "content-length", "expect", "accept-encoding", "http2-settings");
    private static final Set<String> DROPPED_RESPONSE = Set.of("connection", "keep-alive", "te", "trailer",
            "transfer-encoding", "upgrade", "content-length", "content-type", "set-cookie", "set-cookie2", "proxy-authenticate",
            "proxy-connection", ":status");

    private final UpstreamConfig config;
    /** Null when the file has no APIs: a client holds a selector thread of its own. */
    private final HttpClient client;

    ApiRoutes(UpstreamConfig config, Duration connectTimeout) {
        this.config = config;
        this.client = config.apis().isEmpty() ? null : HttpClient.newBuilder().followRedirects(HttpClient.Redirect.NEVER).version(HttpClient.Version.HTTP_1_1)
                .connectTimeout(connectTimeout).executor(Executors.newThreadPerTaskExecutor(
                        Thread.ofVirtual().name("api-route-", 0).factory())).build();
    }

    public List<UpstreamConfig.HttpApi> visible(String tenant) {
        return config.apis().stream().filter(a -> a.allowsTenant(tenant)).toList();
    }

    /** What list_code_tools, code-exec://info and {@code GET /apis} show of the APIs {@code tenant} may call. */
    public List<Map<String, Object>> describe(String tenant) {
        List<Map<String, Object>> out = new ArrayList<>();
        for (UpstreamConfig.HttpApi a : visible(tenant)) {
            Map<String, Object> m = new LinkedHashMap<>();
            m.put("name", a.name());
            m.put("description", a.description());
            m.put("url", a.shownUrl());
            m.put("route", URL + "/" + a.name());
            m.put("methods", a.methods().map(List::copyOf).orElse(List.of("*")));
            m.put("paths", a.paths().orElse(List.of("/**")));
            out.add(m);
        }
        return out;
    }

    /**
     * Why {@code tenant} may not call {@code method path} of API {@code name}, or empty when it may. An API the tenant
     * may not use and one that does not exist get the same answer.
     */
    Optional<String> refusal(String tenant, String name, String method, String path) {
        Optional<UpstreamConfig.HttpApi> api = config.api(name).filter(a -> a.allowsTenant(tenant));
        if (api.isEmpty()) {
            List<String> mine = visible(tenant).stream().map(UpstreamConfig.HttpApi::name).toList();
            return Optional.of("no API '" + name + "' for this caller" + (mine.isEmpty() ? " (it may call none)"
                    : " (it may call: " + String.join(", ", mine) + ")"));
        }
        UpstreamConfig.HttpApi a = api.get();
        if (!a.allowsMethod(method))
            return Optional.of(method + " is not allowed on API " + name + " (allowed: " + String.join(", ", a.methods().orElseThrow()) + ")");
        if (!a.allowsPath(path))
            return Optional.of("the path " + path + " is not allowed on API " + name + " (allowed: "
                    + String.join(", ", a.paths().orElseThrow()) + ")");
        return Optional.empty();
    }

    /**
     * A route's target after {@code /apis/}, split and checked: the API's name, the path under it as sent and
     * decoded, and the query as sent.
     */
    record Target(String api, String rawPath, String path, String rawQuery) {

        /**
         * @throws IllegalArgumentException a path that is not plain: a {@code .} or {@code ..} segment, or an encoded
         *                                  {@code /} or {@code \} (which an upstream could read as another path than
         *                                  the one checked), or one that does not decode
         */
        static Target parse(String target) {
            String rest = target.substring(PREFIX.length() + 1);
            int q = rest.indexOf('?');
            String query = q < 0 ? null : rest.substring(q + 1);
            if (q >= 0) rest = rest.substring(0, q);
            int slash = rest.indexOf('/');
            String name = slash < 0 ? rest : rest.substring(0, slash);
            String raw = slash < 0 ? "/" : rest.substring(slash);
            StringBuilder decoded = new StringBuilder();
            for (String seg : raw.substring(1).split("/", -1)) {
                String d;
                try {
                    d = URLDecoder.decode(seg.replace("+", "%2B"), StandardCharsets.UTF_8);
                } catch (IllegalArgumentException e) {
                    throw new IllegalArgumentException("the path does not decode (a stray %)");
                }
                if (d.equals(".") || d.equals("..") || d.contains("/") || d.contains("\\"))
                    throw new IllegalArgumentException("the path holds a '.' or '..' segment or an encoded / or \\; send the "
                            + "path as the API reads it");
                decoded.append('/').append(d);
            }
            return new Target(name, raw, decoded.toString(), query);
        }
    }

    /** An upstream's answer as the run's code gets it; {@code cut} when its body was longer than allowed. */
    record Answer(int status, String contentType, List<LocalEndpoint.Header> headers, byte[] body, boolean cut) {
    }

    /**
     * Makes the call and reads at most {@code maxBody} bytes of the answer's body ({@link Answer#cut} past it).
     * Blocks; an interrupt ends it.
     *
     * @throws IllegalArgumentException a request the HTTP client refuses (a header field or URL that is not valid)
     */
    Answer forward(UpstreamConfig.HttpApi api, String method, Target t, List<LocalEndpoint.Header> fields, byte[] body,
            long maxBody, Duration timeout) throws IOException, InterruptedException {
        URI base = api.url();
        String basePath = base.getRawPath() == null ? "" : base.getRawPath();
        if (basePath.endsWith("/")) basePath = basePath.substring(0, basePath.length() - 1);
        String query = base.getRawQuery() == null ? t.rawQuery()
                : t.rawQuery() == null || t.rawQuery().isEmpty() ? base.getRawQuery() : base.getRawQuery() + "&" + t.rawQuery();
        URI uri = URI.create(base.getScheme() + "://" + base.getRawAuthority() + basePath + t.rawPath()
                + (query == null ? "" : "?" + query));
        if (!base.getHost().equalsIgnoreCase(uri.getHost()) || base.getPort() != uri.getPort())
            throw new IllegalArgumentException("the path would leave the API's host");
        HttpRequest.Builder rb = HttpRequest.newBuilder(uri).timeout(timeout)
                .method(method, body.length == 0 ? HttpRequest.BodyPublishers.noBody() : HttpRequest.BodyPublishers.ofByteArray(body));
        Set<String> drop = new HashSet<>(DROPPED_REQUEST);
        for (String h : api.headers().keySet()) drop.add(h.toLowerCase(Locale.ROOT));
        for (LocalEndpoint.Header f : fields) {
            if (f.name().equalsIgnoreCase("connection"))
                for (String o : f.value().split(",")) drop.add(o.strip().toLowerCase(Locale.ROOT));
        }
        for (LocalEndpoint.Header f : fields) {
            String n = f.name().toLowerCase(Locale.ROOT);
            if (drop.contains(n) || n.startsWith("proxy-")) continue;
            rb.header(f.name(), f.value());
        }
        api.headers().forEach(rb::header);
        HttpResponse<InputStream> response = client.send(rb.build(), HttpResponse.BodyHandlers.ofInputStream());
        byte[] data;
        boolean cut;
        try (InputStream in = response.body()) {
            data = in.readNBytes((int) Math.min(Integer.MAX_VALUE - 8, maxBody + 1));
            cut = data.length > maxBody;
        }
        if (cut) return new Answer(response.statusCode(), "", List.of(), new byte[0], true);
        String type = response.headers().firstValue("content-type").orElse("");
        List<LocalEndpoint.Header> headers = new ArrayList<>();
        for (Map.Entry<String, List<String>> h : response.headers().map().entrySet()) {
            String n = h.getKey().toLowerCase(Locale.ROOT);
            if (DROPPED_RESPONSE.contains(n)) continue;
            for (String v : h.getValue()) {
                String value = n.equals("location") ? location(api, uri, v) : v;
                headers.add(new LocalEndpoint.Header(h.getKey(), config.secrets().scrub(value)));
            }
        }
        return new Answer(response.statusCode(), config.secrets().scrub(type), headers, scrubBody(type, data), false);
    }

    /**
     * A redirect's target under the API's own URL as the route's (a client that follows it stays on the route),
     * any other as it came.
     */
    static String location(UpstreamConfig.HttpApi api, URI request, String location) {
        URI to;
        try {
            to = request.resolve(location);
        } catch (IllegalArgumentException e) {
            return location;
        }
        URI base = api.url();
        String basePath = base.getRawPath() == null ? "" : base.getRawPath();
        if (basePath.endsWith("/")) basePath = basePath.substring(0, basePath.length() - 1);
        String path = to.getRawPath() == null ? "" : to.getRawPath();
        if (!base.getScheme().equalsIgnoreCase(to.getScheme()) || to.getHost() == null || !base.getHost().equalsIgnoreCase(to.getHost())
                || base.getPort() != to.getPort() || to.getRawUserInfo() != null
                || !(path.equals(basePath) || path.startsWith(basePath + "/")))
            return location;
        String under = path.substring(basePath.length());
        String query = to.getRawQuery();
        if (base.getRawQuery() != null && query != null && query.startsWith(base.getRawQuery()))
            query = query.substring(base.getRawQuery().length()).replaceFirst("^&", ""); // the route adds it again
        return URL + "/" + api.name() + (under.isEmpty() ? "/" : under) + (query == null || query.isEmpty() ? "" : "?" + query)
                + (to.getRawFragment() == null ? "" : "#" + to.getRawFragment());
    }

    /** A text body (by its type) with the secrets replaced; others, and text holding none, as they came. */
    private byte[] scrubBody(String type, byte[] body) {
        String t = type.toLowerCase(Locale.ROOT);
        boolean text = t.isEmpty() || t.startsWith("text/") || t.contains("json") || t.contains("xml") || t.contains("javascript")
                || t.contains("x-www-form-urlencoded") || t.contains("yaml");
        if (!text || body.length == 0) return body;
        String s = new String(body, StandardCharsets.UTF_8);
        String scrubbed = config.secrets().scrub(s);
        return scrubbed.equals(s) ? body : scrubbed.getBytes(StandardCharsets.UTF_8);
    }

    void close() {
        if (client != null) client.close();
    }
}
