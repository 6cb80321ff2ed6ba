package dev.codeexec.http;

import jakarta.servlet.http.HttpServlet;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.net.URL;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.HexFormat;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ConcurrentHashMap;
import java.util.regex.Pattern;

/**
 * The admin console's static files (a Vite build of {@code console/}, packed into the jar under {@code /admin/})
 * at {@code /admin} and {@code /admin/*}. Loading them needs no key: the page is public, the data behind it is not
 * (every /api call it makes carries the key the user typed).
 *
 * <p>Paths whose last segment has no dot are the SPA's own routes and get index.html, so a reload of
 * {@code /admin/workspaces} works. A path with a dot names an asset: it is served, or answered with a JSON 404,
 * never with index.html (a missing script must fail loudly, not parse HTML as JavaScript). Only names made of
 * plain segments with a known extension are looked up at all: {@code ..}, {@code .}, empty segments, backslashes
 * and anything percent-encoded are refused before the class loader sees them, since a file: class path would
 * resolve {@code admin/../x} outside the console.
 *
 * <p>Every answer carries a strict CSP (the build has no inline script or style); hashed files under
 * {@code assets/} are cached for a year, everything else is revalidated by ETag.
 */
final class AdminConsoleServlet extends HttpServlet {

    static final String PATH = "/admin";
    static final String CSP = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; "
            + "connect-src 'self'; object-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'";
    private static final String INDEX = "index.html";
    private static final Pattern SEGMENT = Pattern.compile("[A-Za-z0-9_][A-Za-z0-9_.-]*");
    /** Vite's output names: {@code assets/index-D_jtF5wL.js}, content-hashed, so they never change. */
    private static final Pattern HASHED = Pattern.compile("assets/[^/]+-[A-Za-z0-9_-]{8,}\\.[a-z0-9]+");
    private static final Map<String, String> TYPES = Map.ofEntries(
            Map.entry("html", "text/html;charset=utf-8"),
            Map.entry("js", "text/javascript;charset=utf-8"),
            Map.entry("mjs", "text/javascript;charset=utf-8"),
            Map.entry("css", "text/css;charset=utf-8"),
            Map.entry("json", "application/json"),
            Map.entry("map", "application/json"),
            Map.entry("txt", "text/plain;charset=utf-8"),
            Map.entry("svg", "image/svg+xml"),
            Map.entry("png", "image/png"),
            Map.entry("jpg", "image/jpeg"),
            Map.entry("gif", "image/gif"),
            Map.entry("webp", "image/webp"),
            Map.entry("ico", "image/x-icon"),
            Map.entry("woff", "font/woff"),
            Map.entry("woff2", "font/woff2"));

    /** A file of the build, read once: the jar does not change while the server runs. */
    private record Asset(byte[] bytes, String type, String etag) {
    }

    private final String root;
    private final ClassLoader loader;
    /** Only files that exist are kept, so requests for made-up names cannot grow it. */
    private final Map<String, Asset> cache = new ConcurrentHashMap<>();

    /** @param root the class path folder holding the build ({@code admin}) */
    AdminConsoleServlet(String root) {
        this.root = root;
        this.loader = AdminConsoleServlet.class.getClassLoader();
    }

    /** Whether the decoded, normalised request path is the console's: EdgeFilter lets it pass without a key. */
    static boolean isConsolePath(String path) {
        return path != null && (path.equals(PATH) || path.startsWith(PATH + "/"));
    }

    @Override
    protected void service(HttpServletRequest req, HttpServletResponse resp) throws IOException {
        securityHeaders(resp);
        String method = req.getMethod();
        boolean head = "HEAD".equals(method);
        if (!head && !"GET".equals(method)) {
            resp.setHeader("Allow", "GET, HEAD");
            JsonErrors.writeApi(resp, 405, "method_not_allowed", "the console's files are read with GET or HEAD");
            return;
        }
        String info = req.getPathInfo();
        if (info == null) {
            // "/admin" → "/admin/": the SPA's router and the relative parts of URLs expect the slash.
            String q = req.getQueryString();
            resp.setHeader("Location", PATH + "/" + (q == null ? "" : "?" + q));
            resp.setStatus(301);
            return;
        }
        String rel = info.substring(1);
        String last = rel.substring(rel.lastIndexOf('/') + 1);
        String name = last.contains(".") ? rel : INDEX;
        Optional<Asset> asset = safe(name) ? find(name) : Optional.empty();
        if (asset.isEmpty()) {
            JsonErrors.writeApi(resp, 404, "not_found", name.equals(INDEX)
                    ? "the console is not built into this jar (build without -Dconsole.skip=true)"
                    : "no such console file");
            return;
        }
        Asset a = asset.get();
        resp.setHeader("ETag", a.etag());
        resp.setHeader("Cache-Control", HASHED.matcher(name).matches() ? "public, max-age=31536000, immutable" : "no-cache");
        resp.setContentType(a.type());
        String inm = req.getHeader("If-None-Match");
        if (inm != null && (inm.equals(a.etag()) || inm.trim().equals("*"))) {
            resp.setStatus(304);
            return;
        }
        resp.setStatus(200);
        resp.setContentLength(a.bytes().length);
        if (!head) resp.getOutputStream().write(a.bytes());
    }

    private static void securityHeaders(HttpServletResponse resp) {
        resp.setHeader("Content-Security-Policy", CSP);
        resp.setHeader("X-Content-Type-Options", "nosniff");
        resp.setHeader("Referrer-Policy", "no-referrer");
        resp.setHeader("X-Frame-Options", "DENY");
        resp.setHeader("Cross-Origin-Opener-Policy", "same-origin");
    }

    /** Plain segments only, and a last segment with a known extension (directories and odd names never resolve). */
    static boolean safe(String rel) {
        if (rel.isEmpty() || rel.length() > 200) return false;
        String[] segments = rel.split("/", -1);
        for (String s : segments) {
            if (!SEGMENT.matcher(s).matches() || s.contains("..")) return false;
        }
        return TYPES.containsKey(extension(rel));
    }

    private static String extension(String name) {
        int dot = name.lastIndexOf('.');
        return dot < 0 ? "" : name.substring(dot + 1).toLowerCase(Locale.ROOT);
    }

    private Optional<Asset> find(String rel) {
        Asset known = cache.get(rel);
        if (known != null) return Optional.of(known);
        Optional<Asset> found = load(rel);
        found.ifPresent(a -> cache.put(rel, a));
        return found;
    }

    private Optional<Asset> load(String rel) {
        URL url = loader.getResource(root + "/" + rel);
        if (url == null) return Optional.empty();
        try {
            // An exploded class path (tests, mvn exec) would hand out a directory listing for a folder name.
            if ("file".equals(url.getProtocol())) {
                Path p = Paths.get(url.toURI());
                if (!Files.isRegularFile(p)) return Optional.empty();
            }
            byte[] bytes;
            try (InputStream in = url.openStream()) {
                bytes = in.readAllBytes();
            }
            return Optional.of(new Asset(bytes, TYPES.get(extension(rel)), etag(bytes)));
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        } catch (java.net.URISyntaxException e) {
            return Optional.empty();
        }
    }

    private static String etag(byte[] bytes) {
        try {
            byte[] d = MessageDigest.getInstance("SHA-256").digest(bytes);
            return "\"" + HexFormat.of().formatHex(d, 0, 12) + "\"";
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
    }
}
