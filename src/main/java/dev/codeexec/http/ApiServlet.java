package dev.codeexec.http;

import dev.codeexec.auth.Principal;
import dev.codeexec.workspace.RelPath;
import dev.codeexec.workspace.Workspace;
import dev.codeexec.workspace.WorkspaceException;
import dev.codeexec.workspace.WorkspaceException.Kind;
import dev.codeexec.workspace.WorkspaceFs;
import dev.codeexec.workspace.Workspaces;
import jakarta.servlet.ServletException;
import jakarta.servlet.http.HttpServlet;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import jakarta.servlet.http.Part;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import tools.jackson.core.JacksonException;
import tools.jackson.databind.JsonNode;

import java.io.BufferedOutputStream;
import java.io.FilterInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.security.DigestInputStream;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.zip.ZipEntry;
import java.util.zip.ZipOutputStream;

/**
 * The REST file API under /api, a plain servlet on the server's Jetty. The edge filter has authenticated the
 * caller; every route works only in the caller's tenant, taken from the {@link Principal} request attribute and
 * never from the URL or body, except that an admin key may name another tenant with {@code ?tenant=}
 * ({@link AdminApi#actingTenant}). The admin console's routes ({@code /api/admin/...}, {@code /api/execute}) are
 * {@link AdminApi}'s. Every path goes through {@link RelPath} and {@link WorkspaceFs}. Errors are
 * {@code {"error", "message"}} with the status of their cause ({@link #fail}), never a stack trace.
 *
 * <p>Routes: {@code GET /api/auth/verify}; {@code GET /api/workspaces}; {@code GET|DELETE /api/workspaces/{ws}};
 * {@code GET|POST|DELETE /api/workspaces/{ws}/files/{path}}; {@code GET /api/workspaces/{ws}/tree?path=};
 * {@code GET /api/workspaces/{ws}/archive?path=}; {@code POST /api/workspaces/{ws}/rename}.
 */
final class ApiServlet extends HttpServlet {

    private static final Logger LOG = LoggerFactory.getLogger(ApiServlet.class);
    /** Entries of one tree listing, and of one archive: bounds the work a single request can cause. */
    static final int TREE_LIMIT = 10_000;
    static final int ARCHIVE_LIMIT = 100_000;
    private static final int JSON_BODY_LIMIT = 64 * 1024;
    private static final HexFormat HEX = HexFormat.of();

    private final Workspaces workspaces;
    private final long maxUploadBytes;
    private final Path multipartDir;
    private final AdminApi admin;

    /**
     * @param multipartDir where multipart parts larger than the in-memory threshold are spooled before they are
     *                     copied into the workspace (under DATA_DIR, never visible to sandboxed code)
     */
    ApiServlet(Workspaces workspaces, long maxUploadBytes, Path multipartDir, AdminApi admin) {
        this.workspaces = workspaces;
        this.maxUploadBytes = maxUploadBytes;
        this.multipartDir = multipartDir;
        this.admin = admin;
    }

    @Override
    protected void doGet(HttpServletRequest req, HttpServletResponse resp) throws IOException {
        handle("GET", req, resp);
    }

    @Override
    protected void doPost(HttpServletRequest req, HttpServletResponse resp) throws IOException {
        handle("POST", req, resp);
    }

    @Override
    protected void doDelete(HttpServletRequest req, HttpServletResponse resp) throws IOException {
        handle("DELETE", req, resp);
    }

    @Override
    protected void doPut(HttpServletRequest req, HttpServletResponse resp) throws IOException {
        fail(resp, 405, "method_not_allowed", "use POST to upload");
    }

    /** The HTTP status of each cause of a refused workspace operation: an exhaustive switch, so none is forgotten. */
    static int status(Kind kind) {
        return switch (kind) {
            case BAD_PATH, BAD_NAME -> 400;
            case NOT_FOUND -> 404;
            case CONFLICT -> 409;
            case TOO_LARGE -> 413;
            case QUOTA_EXCEEDED -> 507;
            case IO -> 500;
        };
    }

    /** The one place where causes become statuses. */
    private void handle(String method, HttpServletRequest req, HttpServletResponse resp) throws IOException {
        try {
            if (!(req.getAttribute(Principal.ATTRIBUTE) instanceof Principal who)) {
                fail(resp, 401, "unauthorized", "not authenticated");
                return;
            }
            if (AdminApi.handles(req.getRequestURI())) {
                admin.handle(method, who, req, resp);
                return;
            }
            ApiRoute r = ApiRoute.parse(req.getRequestURI(), req.getQueryString());
            route(method, r, AdminApi.actingTenant(who, r.query().get("tenant")), who, req, resp);
        } catch (WorkspaceException e) {
            if (e.kind() == Kind.IO) LOG.warn("REST {} {}: {}", method, req.getRequestURI(), e.getMessage());
            fail(resp, status(e.kind()), e.code(), e.getMessage());
        } catch (ApiException e) {
            fail(resp, e.status, e.code, e.getMessage());
        } catch (UncheckedIOException e) {
            throw e.getCause();
        } catch (RuntimeException e) {
            LOG.error("REST {} {} failed", method, req.getRequestURI(), e);
            fail(resp, 500, "internal", "internal error");
        }
    }

    /**
     * Before anything is sent: a clean JSON error. After the response is committed (a download or archive broke
     * off mid-stream) the status cannot change: the connection is aborted, so the client sees a truncated
     * transfer rather than a complete-looking one.
     */
    private static void fail(HttpServletResponse resp, int status, String code, String message) throws IOException {
        if (resp.isCommitted()) throw new IOException("response aborted after commit: " + code);
        resp.resetBuffer();
        resp.setHeader("Content-Disposition", null);
        resp.setHeader("ETag", null);
        resp.setHeader("Content-Range", null);
        resp.setHeader("Last-Modified", null);
        // A refused upload leaves part of the body unread: that connection cannot carry another request.
        if (status == 413 || status == 507) resp.setHeader("Connection", "close");
        JsonErrors.writeApi(resp, status, code, message);
    }

    private void route(String method, ApiRoute r, String tenant, Principal who, HttpServletRequest req,
            HttpServletResponse resp) throws IOException {
        switch (r.resource() + " " + method) {
            case "auth/verify GET" -> json(resp, 200, Map.of("tenant", who.tenant(), "admin", who.admin()));
            case "workspaces GET" -> listWorkspaces(tenant, resp);
            case "workspace GET" -> json(resp, 200, infoMap(workspaces.open(tenant, r.workspace(), false).info()));
            case "workspace DELETE" -> {
                workspaces.delete(tenant, r.workspace());
                resp.setStatus(204);
            }
            case "files GET" -> withWorkspace(tenant, r, false, ws -> {
                Downloads.send(ws, r.path(), r.flag("preview"), req, resp);
                touch(ws);
            });
            case "files POST" -> upload(tenant, r, req, resp);
            case "files DELETE" -> withWorkspace(tenant, r, false, ws -> {
                ws.fs().delete(r.path(), r.flag("recursive"));
                ws.fs().touch();
                resp.setStatus(204);
            });
            case "tree GET" -> withWorkspace(tenant, r, false, ws -> tree(ws, r.path(), resp));
            case "archive GET" -> withWorkspace(tenant, r, false, ws -> archive(ws, r.path(), resp));
            case "rename POST" -> withWorkspace(tenant, r, false, ws -> rename(ws, req, resp));
            default -> fail(resp, 405, "method_not_allowed", method + " is not allowed on this route");
        }
    }

    private interface WorkspaceAction {
        void run(Workspace ws) throws IOException;
    }

    /** Opens the caller's workspace and marks it in use (expiry skips it) for the length of the request. */
    private void withWorkspace(String tenant, ApiRoute r, boolean create, WorkspaceAction action) throws IOException {
        Workspace ws = workspaces.open(tenant, r.workspace(), create);
        Workspaces.Hold hold = ws.hold();
        try {
            action.run(ws);
        } finally {
            hold.close();
        }
    }

    private static void touch(Workspace ws) {
        try {
            ws.fs().touch();
        } catch (WorkspaceException e) {
            // deleted meanwhile: nothing to mark
        }
    }

    private void listWorkspaces(String tenant, HttpServletResponse resp) throws IOException {
        List<Map<String, Object>> out = new ArrayList<>();
        for (Workspace.Info info : workspaces.infos(tenant)) out.add(infoMap(info));
        json(resp, 200, out);
    }

    static Map<String, Object> infoMap(Workspace.Info info) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("name", info.name());
        m.put("size", info.sizeBytes());
        m.put("quota", info.quotaBytes());
        m.put("files", info.files());
        m.put("directories", info.directories());
        m.put("lastUsed", info.lastUsed().toInstant().toString());
        return m;
    }

    private static void tree(Workspace ws, RelPath dir, HttpServletResponse resp) throws IOException {
        List<Map<String, Object>> out = new ArrayList<>();
        for (WorkspaceFs.Entry e : ws.fs().list(dir, TREE_LIMIT)) {
            Map<String, Object> m = new LinkedHashMap<>();
            m.put("name", e.name());
            m.put("type", e.type());
            m.put("size", e.size());
            m.put("modified", e.modified().toInstant().toString());
            out.add(m);
        }
        touch(ws);
        json(resp, 200, out);
    }

    private static void rename(Workspace ws, HttpServletRequest req, HttpServletResponse resp) throws IOException {
        JsonNode body = readJson(req);
        String from = body.path("from").asString(null);
        String to = body.path("to").asString(null);
        if (from == null || to == null || !body.get("from").isString() || !body.get("to").isString())
            throw ApiException.badRequest("expected {\"from\": \"old/path\", \"to\": \"new/path\"}");
        RelPath a = RelPath.parse(from);
        RelPath b = RelPath.parse(to);
        ws.fs().rename(a, b);
        ws.fs().touch();
        json(resp, 200, Map.of("from", a.toString(), "to", b.toString()));
    }

    private static JsonNode readJson(HttpServletRequest req) throws IOException {
        byte[] bytes = req.getInputStream().readNBytes(JSON_BODY_LIMIT + 1);
        if (bytes.length > JSON_BODY_LIMIT) throw new ApiException(413, "too_large", "JSON body over 64 KB");
        try {
            JsonNode node = JsonErrors.JSON.readTree(bytes);
            if (node == null || !node.isObject()) throw ApiException.badRequest("the body must be a JSON object");
            return node;
        } catch (JacksonException e) {
            throw ApiException.badRequest("the body is not valid JSON");
        }
    }

    /**
     * Streams a zip of a directory straight into the response. Entries come from {@link WorkspaceFs#walkTree},
     * which never follows a link; links and special files are left out, and a file that vanished or was swapped
     * for a link between listing and opening is skipped. Names are relative to the archived directory.
     */
    private static void archive(Workspace ws, RelPath dir, HttpServletResponse resp) throws IOException {
        if (!ws.fs().stat(dir).isDirectory()) throw new WorkspaceException(Kind.BAD_PATH, "not a directory: " + dir);
        String base = dir.isRoot() ? ws.name() : ws.name() + "-" + dir.name();
        resp.setStatus(200);
        resp.setContentType("application/zip");
        resp.setHeader("Content-Disposition", Downloads.disposition("attachment", base + ".zip"));
        resp.setHeader("X-Content-Type-Options", "nosniff");
        resp.setHeader("Cache-Control", "no-store");
        int prefix = dir.parts().size();
        ZipOutputStream zip = new ZipOutputStream(new BufferedOutputStream(resp.getOutputStream(), 64 * 1024));
        byte[] buf = new byte[64 * 1024];
        ws.fs().walkTree(dir, ARCHIVE_LIMIT, e -> {
            String name = String.join("/", e.path().parts().subList(prefix, e.path().parts().size()));
            try {
                if (e.isDirectory()) {
                    ZipEntry z = new ZipEntry(name + "/");
                    z.setLastModifiedTime(e.modified());
                    zip.putNextEntry(z);
                    zip.closeEntry();
                } else if (e.type().equals("file")) {
                    InputStream in;
                    try {
                        in = ws.fs().openRead(e.path());
                    } catch (WorkspaceException gone) {
                        return;
                    }
                    try (in) {
                        ZipEntry z = new ZipEntry(name);
                        z.setLastModifiedTime(e.modified());
                        zip.putNextEntry(z);
                        int n;
                        while ((n = in.read(buf)) > 0) zip.write(buf, 0, n);
                        zip.closeEntry();
                    }
                }
            } catch (IOException io) {
                throw new UncheckedIOException(io);
            }
        });
        zip.finish();
        zip.flush();
        touch(ws);
    }

    /**
     * Raw body → one file; {@code multipart/form-data} → each file part into the directory {@code path}. Nothing
     * is held whole in memory: raw bodies stream through a size counter and a SHA-256 digest into
     * {@link Workspace#write} (temp file + rename); multipart parts are spooled by Jetty to {@link #multipartDir}
     * beyond a small threshold, then copied the same way. A new workspace that ends up with nothing is removed.
     */
    private void upload(String tenant, ApiRoute r, HttpServletRequest req, HttpServletResponse resp)
            throws IOException {
        String type = req.getContentType();
        boolean multipart = type != null && type.toLowerCase(Locale.ROOT).startsWith("multipart/form-data");
        if (!multipart && r.directory())
            throw ApiException.badRequest("a path ending in '/' names a directory: upload multipart/form-data there");
        boolean existed = workspaces.find(tenant, r.workspace()).isPresent();
        Workspace ws = workspaces.open(tenant, r.workspace(), true);
        Workspaces.Hold hold = ws.hold();
        boolean stored = false;
        try {
            Object result = multipart ? uploadParts(ws, r.path(), req) : uploadRaw(ws, r.path(), req);
            stored = true;
            json(resp, 201, result);
        } finally {
            hold.close();
            if (!stored && !existed) removeIfEmpty(tenant, r.workspace());
        }
    }

    private void removeIfEmpty(String tenant, String name) {
        try {
            Workspace ws = workspaces.open(tenant, name, false);
            if (ws.fs().list(RelPath.ROOT, 1).isEmpty()) workspaces.delete(tenant, name);
        } catch (WorkspaceException e) {
            // already gone, or someone else put something in it
        }
    }

    private Map<String, Object> uploadRaw(Workspace ws, RelPath path, HttpServletRequest req) throws IOException {
        if (path.isRoot()) throw ApiException.badRequest("name a file to upload to");
        MessageDigest sha = sha256();
        InputStream body = new CappedInputStream(req.getInputStream(), maxUploadBytes);
        long size = ws.write(path, new DigestInputStream(body, sha), maxUploadBytes);
        return stored(path, size, sha);
    }

    private Object uploadParts(Workspace ws, RelPath dir, HttpServletRequest req) throws IOException {
        List<Part> parts = new ArrayList<>();
        List<RelPath> targets = new ArrayList<>();
        ensureMultipartDir();
        try {
            for (Part p : req.getParts()) {
                String name = p.getSubmittedFileName();
                if (name == null) continue; // a plain form field, not a file
                if (name.isEmpty()) throw ApiException.badRequest("a file part has an empty file name");
                RelPath target = RelPath.parse(dir.isRoot() ? name : dir + "/" + name);
                if (target.isRoot()) throw ApiException.badRequest("bad file name '" + name + "'");
                parts.add(p);
                targets.add(target);
            }
        } catch (ServletException | IllegalStateException e) {
            throw multipartError(e);
        }
        if (parts.isEmpty()) throw ApiException.badRequest("the multipart body has no file part");
        checkRoom(ws, parts, targets);
        List<Map<String, Object>> files = new ArrayList<>();
        for (int i = 0; i < parts.size(); i++) {
            MessageDigest sha = sha256();
            try (InputStream in = parts.get(i).getInputStream()) {
                long size = ws.write(targets.get(i), new DigestInputStream(in, sha), maxUploadBytes);
                files.add(stored(targets.get(i), size, sha));
            }
        }
        return Map.of("files", files);
    }

    /** Whether all parts fit under the quota together, checked before the first is written. */
    private static void checkRoom(Workspace ws, List<Part> parts, List<RelPath> targets) {
        long needed = 0;
        long replaced = 0;
        for (int i = 0; i < parts.size(); i++) {
            needed += parts.get(i).getSize();
            try {
                WorkspaceFs.Entry old = ws.fs().stat(targets.get(i));
                if (!old.isDirectory()) replaced += old.size();
            } catch (WorkspaceException e) {
                if (e.kind() != Kind.NOT_FOUND) throw e;
            }
        }
        if (needed > ws.remaining() + replaced)
            throw new WorkspaceException(Kind.QUOTA_EXCEEDED,
                    "workspace quota of " + (ws.quotaBytes() >> 20) + " MB exceeded");
    }

    /** Jetty reports an oversized or malformed multipart body as an exception whose text says which. */
    private static RuntimeException multipartError(Exception e) {
        for (Throwable t = e; t != null; t = t.getCause()) {
            String m = String.valueOf(t.getMessage()).toLowerCase(Locale.ROOT);
            if (m.contains("max") && (m.contains("size") || m.contains("length") || m.contains("exceed")))
                return new ApiException(413, "too_large", "upload exceeds MAX_UPLOAD_MB");
        }
        LOG.debug("multipart body refused: {}", e.toString());
        return ApiException.badRequest("malformed multipart/form-data body");
    }

    private void ensureMultipartDir() throws IOException {
        if (Files.isDirectory(multipartDir)) return;
        Files.createDirectories(multipartDir.getParent());
        try {
            Files.createDirectory(multipartDir,
                    PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rwx------")));
        } catch (java.nio.file.FileAlreadyExistsException raced) {
            // created by a concurrent upload
        }
    }

    private static Map<String, Object> stored(RelPath path, long size, MessageDigest sha) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("path", path.toString());
        m.put("size", size);
        m.put("sha256", HEX.formatHex(sha.digest()));
        return m;
    }

    static MessageDigest sha256() {
        try {
            return MessageDigest.getInstance("SHA-256");
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
    }

    static void json(HttpServletResponse resp, int status, Object body) throws IOException {
        byte[] bytes = JsonErrors.JSON.writeValueAsBytes(body);
        resp.setStatus(status);
        resp.setContentType("application/json");
        resp.setCharacterEncoding(StandardCharsets.UTF_8.name());
        resp.setHeader("Cache-Control", "no-store");
        resp.setContentLength(bytes.length);
        resp.getOutputStream().write(bytes);
    }

    /** Counts a body while it streams: a chunked body (no Content-Length) is capped too. */
    private static final class CappedInputStream extends FilterInputStream {
        private final long max;
        private long count;

        CappedInputStream(InputStream in, long max) {
            super(in);
            this.max = max;
        }

        @Override
        public int read() throws IOException {
            int b = super.read();
            if (b >= 0) count(1);
            return b;
        }

        @Override
        public int read(byte[] b, int off, int len) throws IOException {
            int n = super.read(b, off, len);
            if (n > 0) count(n);
            return n;
        }

        private void count(int n) {
            count += n;
            if (count > max) throw new WorkspaceException(Kind.TOO_LARGE, "upload exceeds MAX_UPLOAD_MB");
        }
    }
}
