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
import java.util.zip.ZipEntry;
import java.util.zip.ZipOutputStream;

/**
 * {@code GET /api/workspaces/{ws}/archive?path=}: a zip of a workspace directory, streamed straight into the
 * response. Entries come from {@link WorkspaceFs#walkTree}, which never follows a link; links and special files
 * are left out, and a file that vanished or was swapped for a link between listing and opening is skipped. Names
 * are relative to the archived directory.
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
    }
}
