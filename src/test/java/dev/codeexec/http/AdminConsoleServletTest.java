package dev.codeexec.http;

import dev.codeexec.mcp.FakeExecutor;
import dev.codeexec.mcp.TestServers;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.net.Socket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The console's static files through the real server stack (EdgeFilter with a key configured, ApiUriGuard).
 * The files are the fixtures in src/test/resources/admin/, which come before the real build on the test class
 * path, so the test does not depend on npm having run.
 */
class AdminConsoleServletTest {

    static final String KEY = "console-test-key";
    static HttpServer server;
    static final HttpClient HTTP = HttpClient.newHttpClient();

    @BeforeAll
    static void start() throws Exception {
        server = TestServers.start(new FakeExecutor(), "API_KEY", KEY);
    }

    @AfterAll
    static void stop() {
        if (server != null) server.close();
    }

    static HttpResponse<String> get(String path, String... headers) throws Exception {
        HttpRequest.Builder b = HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + server.port() + path));
        if (headers.length > 0) b.headers(headers);
        return HTTP.send(b.GET().build(), HttpResponse.BodyHandlers.ofString());
    }

    /** A request whose target reaches the server byte for byte (java.net.http would normalise the dots). */
    static String raw(String method, String target) throws IOException {
        return raw(server.port(), method, target);
    }

    /** As {@link #raw(String, String)}, to any local server, with extra header lines ("Name: value"). */
    static String raw(int port, String method, String target, String... headerLines) throws IOException {
        try (Socket s = new Socket("127.0.0.1", port)) {
            StringBuilder head = new StringBuilder(method + " " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\n");
            for (String h : headerLines) head.append(h).append("\r\n");
            s.getOutputStream().write((head + "Connection: close\r\n\r\n").getBytes(StandardCharsets.ISO_8859_1));
            ByteArrayOutputStream out = new ByteArrayOutputStream();
            InputStream in = s.getInputStream();
            in.transferTo(out);
            return out.toString(StandardCharsets.ISO_8859_1);
        }
    }

    static void assertSecurityHeaders(HttpResponse<String> r) {
        assertThat(r.headers().firstValue("Content-Security-Policy")).hasValue("default-src 'self'; script-src 'self'; "
                + "style-src 'self'; img-src 'self' data: blob:; connect-src 'self'; object-src 'none'; "
                + "frame-ancestors 'none'; base-uri 'none'; form-action 'self'");
        assertThat(r.headers().firstValue("X-Content-Type-Options")).hasValue("nosniff");
        assertThat(r.headers().firstValue("Referrer-Policy")).hasValue("no-referrer");
    }

    @Test
    void indexNeedsNoKeyAndCarriesTheStrictHeaders() throws Exception {
        HttpResponse<String> r = get("/admin/");
        assertThat(r.statusCode()).isEqualTo(200);
        assertThat(r.body()).contains("CONSOLE-TEST-INDEX");
        assertThat(r.headers().firstValue("Content-Type")).hasValueSatisfying(t -> assertThat(t).startsWith("text/html"));
        assertThat(r.headers().firstValue("Cache-Control")).hasValue("no-cache");
        assertSecurityHeaders(r);
        // The data behind the page still needs the key.
        assertThat(get("/api/auth/verify").statusCode()).isEqualTo(401);
        assertThat(get("/api/auth/verify", "Authorization", "Bearer " + KEY).statusCode()).isEqualTo(200);
    }

    @Test
    void bareAdminRedirectsToTheSlash() throws Exception {
        HttpResponse<String> r = get("/admin");
        assertThat(r.statusCode()).isEqualTo(301);
        assertThat(r.headers().firstValue("Location")).hasValueSatisfying(l -> assertThat(l).endsWith("/admin/"));
    }

    @Test
    void clientSideRoutesWithoutADotServeIndex() throws Exception {
        for (String p : new String[] {"/admin/workspaces", "/admin/executions/abc", "/admin/a/b/c"}) {
            HttpResponse<String> r = get(p);
            assertThat(r.statusCode()).as(p).isEqualTo(200);
            assertThat(r.body()).as(p).contains("CONSOLE-TEST-INDEX");
            assertSecurityHeaders(r);
        }
    }

    @Test
    void hashedAssetsAreImmutableAndRevalidateByEtag() throws Exception {
        HttpResponse<String> r = get("/admin/assets/app-AbCd12_-.js");
        assertThat(r.statusCode()).isEqualTo(200);
        assertThat(r.body()).contains("CONSOLE-TEST-SCRIPT");
        assertThat(r.headers().firstValue("Content-Type")).hasValueSatisfying(t -> assertThat(t).startsWith("text/javascript"));
        assertThat(r.headers().firstValue("Cache-Control")).hasValue("public, max-age=31536000, immutable");
        assertSecurityHeaders(r);
        String etag = r.headers().firstValue("ETag").orElseThrow();
        HttpResponse<String> again = get("/admin/assets/app-AbCd12_-.js", "If-None-Match", etag);
        assertThat(again.statusCode()).isEqualTo(304);
        assertThat(again.body()).isEmpty();

        HttpResponse<String> plain = get("/admin/notes.txt");
        assertThat(plain.statusCode()).isEqualTo(200);
        assertThat(plain.headers().firstValue("Cache-Control")).hasValue("no-cache");
    }

    @Test
    void aMissingAssetIsAJson404NotIndex() throws Exception {
        HttpResponse<String> r = get("/admin/assets/gone-12345678.js");
        assertThat(r.statusCode()).isEqualTo(404);
        assertThat(r.body()).contains("\"error\":\"not_found\"").doesNotContain("CONSOLE-TEST-INDEX");
        assertThat(r.headers().firstValue("Content-Type")).hasValueSatisfying(t -> assertThat(t).startsWith("application/json"));
        assertSecurityHeaders(r);
        // A folder of the build is not a file: no listing, no index.html.
        assertThat(get("/admin/assets.js").statusCode()).isEqualTo(404);
    }

    @Test
    void headHasTheHeadersWithoutABodyAndOtherMethodsAreRefused() throws Exception {
        String head = raw("HEAD", "/admin/assets/app-AbCd12_-.js");
        assertThat(head).startsWith("HTTP/1.1 200");
        String length = head.lines().filter(l -> l.toLowerCase().startsWith("content-length:")).findFirst().orElseThrow();
        assertThat(Integer.parseInt(length.substring(15).trim())).isGreaterThan(20);
        assertThat(head).doesNotContain("CONSOLE-TEST-SCRIPT").contains("Content-Security-Policy:");

        HttpResponse<String> post = HTTP.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + server.port() + "/admin/"))
                .POST(HttpRequest.BodyPublishers.ofString("x")).build(), HttpResponse.BodyHandlers.ofString());
        assertThat(post.statusCode()).isEqualTo(405);
        assertThat(post.headers().firstValue("Allow")).hasValue("GET, HEAD");
    }

    @Test
    void traversalNeitherLeavesTheConsoleNorBorrowsItsExemptionFromTheKey() throws Exception {
        // Plain dots are resolved before routing: the request is then for /api or /, and needs the key there.
        assertThat(raw("GET", "/admin/../api/auth/verify")).startsWith("HTTP/1.1 401");
        assertThat(raw("GET", "/admin/assets/../../api/workspaces")).startsWith("HTTP/1.1 401");
        assertThat(raw("GET", "/admin/../languages.json")).startsWith("HTTP/1.1 401").doesNotContain("\"aliases\"");
        // Encoded dots, slashes and backslashes are refused outright.
        for (String t : new String[] {"/admin/%2e%2e/languages.json", "/admin/%2E%2E/api/auth/verify",
                "/admin/assets/..%2f..%2flanguages.json", "/admin/..%5clanguages.json", "/admin/%2e%2e%2f%2e%2e%2fetc/passwd"}) {
            String r = raw("GET", t);
            assertThat(r).as(t).startsWith("HTTP/1.1 400").doesNotContain("\"aliases\"").doesNotContain("root:");
        }
    }

    @Test
    void theConsolesOwnOriginMayCallTheApiAlsoBehindATlsProxy() throws Exception {
        String self = "127.0.0.1:" + server.port();
        for (String origin : new String[] {"http://" + self, "https://" + self}) {
            HttpResponse<String> r = get("/api/auth/verify", "Authorization", "Bearer " + KEY, "Origin", origin);
            assertThat(r.statusCode()).as(origin).isEqualTo(200);
        }
        HttpResponse<String> foreign = get("/api/auth/verify", "Authorization", "Bearer " + KEY,
                "Origin", "https://evil.example");
        assertThat(foreign.statusCode()).isEqualTo(403);
        assertThat(EdgeFilter.sameOrigin("https://127.0.0.1:8080/", "127.0.0.1:8080")).isTrue();
        assertThat(EdgeFilter.sameOrigin("https://127.0.0.1:8081", "127.0.0.1:8080")).isFalse();
        assertThat(EdgeFilter.sameOrigin("https://127.0.0.1:8080", null)).isFalse();
    }

    @Test
    void onlyPlainSegmentsWithAKnownExtensionAreLookedUp() {
        assertThat(AdminConsoleServlet.safe("assets/app-AbCd12_-.js")).isTrue();
        assertThat(AdminConsoleServlet.safe("index.html")).isTrue();
        assertThat(AdminConsoleServlet.safe("../languages.json")).isFalse();
        assertThat(AdminConsoleServlet.safe("assets/../../languages.json")).isFalse();
        assertThat(AdminConsoleServlet.safe("./index.html")).isFalse();
        assertThat(AdminConsoleServlet.safe("assets//x.js")).isFalse();
        assertThat(AdminConsoleServlet.safe("assets\\x.js")).isFalse();
        assertThat(AdminConsoleServlet.safe(".hidden.js")).isFalse();
        assertThat(AdminConsoleServlet.safe("assets")).isFalse();
        assertThat(AdminConsoleServlet.safe("languages.json.class")).isFalse();
        assertThat(AdminConsoleServlet.safe("x%2e.js")).isFalse();
    }
}
