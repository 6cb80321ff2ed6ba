package dev.codeexec.http;

import dev.codeexec.workspace.MimeTypes;
import dev.codeexec.workspace.RelPath;
import dev.codeexec.workspace.Workspace;
import dev.codeexec.workspace.WorkspaceFs;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;

import java.io.EOFException;
import java.io.IOException;
import java.io.OutputStream;
import java.net.URLEncoder;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.HexFormat;

/**
 * File downloads: conditional (strong ETag, If-None-Match → 304), ranged (one range; several are answered with
 * the whole file, which HTTP allows), and safe to open in a browser: always {@code nosniff} and a restrictive
 * Content-Security-Policy; inline only with {@code ?preview=1} and only for {@link MimeTypes#isPreviewable} types,
 * so HTML and SVG (which can carry scripts) are always attachments.
 *
 * <p>The ETag is a hash of the inode identity, size and modification time (nanoseconds) of the very file that is
 * sent, not of its content: hashing gigabytes per request would cost more than it saves, and every API write
 * replaces the file (a new inode), so two versions never share a tag.
 */
final class Downloads {

    static final String CSP = "default-src 'none'; img-src 'self'; style-src 'unsafe-inline'; sandbox";

    private Downloads() {
    }

    static void send(Workspace ws, RelPath path, boolean preview, HttpServletRequest req, HttpServletResponse resp)
            throws IOException {
        if (path.isRoot()) throw ApiException.badRequest("the workspace root is a directory: use /tree or /archive");
        try (WorkspaceFs.OpenFile f = ws.fs().openFile(path)) {
            long size = f.size();
            String etag = etag(f);
            String mime = MimeTypes.of(path.name());
            boolean inline = preview && MimeTypes.isPreviewable(mime);

            resp.setHeader("ETag", etag);
            resp.setDateHeader("Last-Modified", f.modified().toMillis());
            resp.setHeader("Accept-Ranges", "bytes");
            resp.setHeader("Cache-Control", "private, no-cache");
            resp.setHeader("X-Content-Type-Options", "nosniff");
            resp.setHeader("Content-Security-Policy", CSP);
            if (matches(req.getHeader("If-None-Match"), etag)) {
                resp.setStatus(304);
                return;
            }
            long start = 0;
            long end = size - 1;
            String range = req.getHeader("Range");
            String ifRange = req.getHeader("If-Range");
            if (range != null && (ifRange == null || ifRange.trim().equals(etag))) {
                long[] r = parseRange(range, size);
                if (r == UNSATISFIABLE) {
                    resp.setHeader("Content-Range", "bytes */" + size);
                    resp.setHeader("ETag", null);
                    resp.setHeader("Last-Modified", null);
                    JsonErrors.writeApi(resp, 416, "range_not_satisfiable",
                            "range not satisfiable: the file has " + size + " bytes");
                    return;
                }
                if (r != null) {
                    start = r[0];
                    end = r[1];
                    resp.setStatus(206);
                    resp.setHeader("Content-Range", "bytes " + start + "-" + end + "/" + size);
                }
            }
            resp.setContentType(mime);
            resp.setHeader("Content-Disposition", disposition(inline ? "inline" : "attachment", path.name()));
            long length = end - start + 1;
            resp.setContentLengthLong(length);
            if ("HEAD".equals(req.getMethod())) return;
            copy(f, start, length, resp.getOutputStream());
        }
    }

    private static void copy(WorkspaceFs.OpenFile f, long start, long length, OutputStream out) throws IOException {
        byte[] buf = new byte[64 * 1024];
        ByteBuffer bb = ByteBuffer.wrap(buf);
        long pos = start;
        long left = length;
        while (left > 0) {
            bb.clear().limit((int) Math.min(buf.length, left));
            int n = f.channel().read(bb, pos);
            // The file shrank under us (a run is rewriting it): abort rather than send a short body as complete.
            if (n < 0) throw new EOFException("file shrank during download");
            out.write(buf, 0, n);
            pos += n;
            left -= n;
        }
    }

    private static final long[] UNSATISFIABLE = new long[0];

    /**
     * {@code bytes=a-b}, {@code bytes=a-} or {@code bytes=-n} → {start, end}; null to ignore the header (syntax
     * not understood, or several ranges); {@link #UNSATISFIABLE} when no byte of the file is in the range.
     */
    static long[] parseRange(String header, long size) {
        String h = header.trim();
        if (!h.regionMatches(true, 0, "bytes=", 0, 6)) return null;
        String spec = h.substring(6).trim();
        if (spec.contains(",")) return null;
        int dash = spec.indexOf('-');
        if (dash < 0) return null;
        String a = spec.substring(0, dash).trim();
        String b = spec.substring(dash + 1).trim();
        try {
            if (a.isEmpty()) {
                if (b.isEmpty()) return null;
                long n = Long.parseLong(b);
                if (n < 0) return null;
                if (n == 0 || size == 0) return UNSATISFIABLE;
                return new long[]{Math.max(0, size - n), size - 1};
            }
            long start = Long.parseLong(a);
            if (start < 0) return null;
            long end = b.isEmpty() ? Long.MAX_VALUE : Long.parseLong(b);
            if (end < start) return null;
            if (start >= size) return UNSATISFIABLE;
            return new long[]{start, Math.min(end, size - 1)};
        } catch (NumberFormatException e) {
            return null;
        }
    }

    private static boolean matches(String ifNoneMatch, String etag) {
        if (ifNoneMatch == null) return false;
        for (String t : ifNoneMatch.split(",")) {
            String tag = t.trim();
            if (tag.equals("*")) return true;
            if (tag.startsWith("W/")) tag = tag.substring(2);
            if (tag.equals(etag)) return true;
        }
        return false;
    }

    static String etag(WorkspaceFs.OpenFile f) {
        String id = f.fileKey() + ":" + f.size() + ":" + f.modified().to(java.util.concurrent.TimeUnit.NANOSECONDS);
        byte[] h = Uploads.sha256().digest(id.getBytes(StandardCharsets.UTF_8));
        return "\"" + HexFormat.of().formatHex(h, 0, 16) + "\"";
    }

    /** RFC 6266: an ASCII fallback name plus the exact UTF-8 name. */
    static String disposition(String type, String fileName) {
        String ascii = fileName.replaceAll("[^A-Za-z0-9._ -]", "_");
        String utf8 = URLEncoder.encode(fileName, StandardCharsets.UTF_8).replace("+", "%20");
        return type + "; filename=\"" + ascii + "\"; filename*=UTF-8''" + utf8;
    }
}
