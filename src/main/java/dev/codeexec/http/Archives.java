package dev.codeexec.http;

import dev.codeexec.workspace.RelPath;
import dev.codeexec.workspace.Workspace;
import dev.codeexec.workspace.WorkspaceException;
import dev.codeexec.workspace.WorkspaceException.Kind;
import dev.codeexec.workspace.WorkspaceFs;
import jakarta.servlet.http.HttpServletResponse;

import java.io.BufferedOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.util.ArrayList;
import java.util.List;
import java.util.zip.ZipEntry;
import java.util.zip.ZipException;
import java.util.zip.ZipOutputStream;

/**
 * {@code GET /api/workspaces/{ws}/archive?path=}: a zip of a workspace directory, streamed straight into the
 * response. Entries come from {@link WorkspaceFs#walkTree}, which never follows a link, never recurses and stops at
 * {@link #ARCHIVE_LIMIT} entries and {@link WorkspaceFs#MAX_WALK_DEPTH} levels; links and special files are left
 * out, and a file that vanished, was swapped for a link or cannot be read is skipped — one entry never fails the
 * archive. Names are relative to the archived directory, as listings show them: a name that is not valid UTF-8 is
 * escaped ({@code \xHH}), so two different files never become one entry. When anything was left out, the zip's
 * comment says what.
 */
final class Archives {

    /** Entries of one archive: bounds the work a single request can cause. */
    static final int ARCHIVE_LIMIT = 100_000;

    private Archives() {
    }

    static void send(Workspace ws, RelPath dir, HttpServletResponse resp) throws IOException {
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
        int[] skipped = {0};
        WorkspaceFs.Walked walked = ws.fs().walkTree(dir, ARCHIVE_LIMIT, e -> {
            String name = new RelPath(e.path().parts().subList(prefix, e.path().parts().size())).toString();
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
                        skipped[0]++;
                        return;
                    }
                    try (in) {
                        ZipEntry z = new ZipEntry(name);
                        z.setLastModifiedTime(e.modified());
                        zip.putNextEntry(z);
                        copy(in, zip, buf);
                        zip.closeEntry();
                    }
                }
            } catch (ZipException duplicate) {
                skipped[0]++;
            } catch (IOException io) {
                throw new UncheckedIOException(io);
            }
        });
        String comment = omissions(walked, skipped[0]);
        if (!comment.isEmpty()) zip.setComment(comment);
        zip.finish();
        zip.flush();
    }

    /**
     * Copies a file into the open entry. A read error ends the entry with what was read (the archive goes on); a
     * write error is the client's connection and ends the response.
     */
    private static void copy(InputStream in, ZipOutputStream zip, byte[] buf) throws IOException {
        while (true) {
            int n;
            try {
                n = in.read(buf);
            } catch (IOException unreadable) {
                return;
            }
            if (n <= 0) return;
            zip.write(buf, 0, n);
        }
    }

    /** The zip comment: what the archive lacks, or "" when it holds everything. */
    static String omissions(WorkspaceFs.Walked walked, int skipped) {
        List<String> out = new ArrayList<>();
        if (walked.limitReached()) out.add("only the first " + ARCHIVE_LIMIT + " entries");
        if (walked.tooDeep()) out.add("directories " + WorkspaceFs.MAX_WALK_DEPTH + " levels deep without their content");
        if (skipped > 0) out.add(skipped + " file(s) that could not be read");
        return out.isEmpty() ? "" : "incomplete: " + String.join("; ", out);
    }
}
