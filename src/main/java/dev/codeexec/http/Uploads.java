package dev.codeexec.http;

import dev.codeexec.config.DataDir;
import dev.codeexec.workspace.RelPath;
import dev.codeexec.workspace.Workspace;
import dev.codeexec.workspace.WorkspaceException;
import dev.codeexec.workspace.WorkspaceException.Kind;
import dev.codeexec.workspace.Workspaces;
import jakarta.servlet.ServletException;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import jakarta.servlet.http.Part;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.io.FilterInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.security.DigestInputStream;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * {@code POST /api/workspaces/{ws}/files/{path}}: a raw body becomes one file; {@code multipart/form-data} puts
 * each file part into the directory {@code path}. Nothing is held whole in memory: raw bodies stream through a
 * size counter and a SHA-256 digest into {@link Workspace#write} (temp file + rename); multipart parts are spooled
 * by Jetty to {@link DataDir#uploadSpool()} beyond a small threshold, then copied the same way. A new workspace
 * that ends up with nothing is removed. The answer lists each stored file with its size and SHA-256.
 */
final class Uploads {

    private static final Logger LOG = LoggerFactory.getLogger(Uploads.class);
    private static final HexFormat HEX = HexFormat.of();

    private final Workspaces workspaces;
    private final long maxUploadBytes;
    private final DataDir data;

    Uploads(Workspaces workspaces, long maxUploadBytes, DataDir data) {
        this.workspaces = workspaces;
        this.maxUploadBytes = maxUploadBytes;
        this.data = data;
    }

    void handle(String tenant, ApiRoute r, HttpServletRequest req, HttpServletResponse resp) throws IOException {
        String type = req.getContentType();
        boolean multipart = type != null && type.toLowerCase(Locale.ROOT).startsWith("multipart/form-data");
        if (!multipart && r.directory())
            throw ApiException.badRequest("a path ending in '/' names a directory: upload multipart/form-data there");
        boolean existed = workspaces.find(tenant, r.workspace()).isPresent();
        Workspace ws = workspaces.open(tenant, r.workspace(), true);
        Workspaces.Hold hold = ws.hold();
        boolean stored = false;
        try {
            Object result = multipart ? storeParts(ws, r.path(), req) : storeRaw(ws, r.path(), req);
            stored = true;
            ApiServlet.json(resp, 201, result);
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

    private Map<String, Object> storeRaw(Workspace ws, RelPath path, HttpServletRequest req) throws IOException {
        if (path.isRoot()) throw ApiException.badRequest("name a file to upload to");
        MessageDigest sha = sha256();
        InputStream body = new CappedInputStream(req.getInputStream(), maxUploadBytes);
        long size = ws.write(path, new DigestInputStream(body, sha), maxUploadBytes);
        return stored(path, size, sha);
    }

    private Object storeParts(Workspace ws, RelPath dir, HttpServletRequest req) throws IOException {
        List<Part> parts = new ArrayList<>();
        List<RelPath> targets = new ArrayList<>();
        data.prepareUploadSpool();
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

    /** Whether all parts fit under the workspace's limits together (bytes and entries), checked before the first is written. */
    private static void checkRoom(Workspace ws, List<Part> parts, List<RelPath> targets) {
        long needed = 0;
        for (Part p : parts) needed += p.getSize();
        ws.checkRoom(targets, needed);
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

    private static Map<String, Object> stored(RelPath path, long size, MessageDigest sha) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("path", path.toString());
        m.put("size", size);
        m.put("sha256", HEX.formatHex(sha.digest()));
        return m;
    }

    /** SHA-256: the checksum an upload reports; Downloads hashes its ETags with it too. */
    static MessageDigest sha256() {
        try {
            return MessageDigest.getInstance("SHA-256");
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
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
