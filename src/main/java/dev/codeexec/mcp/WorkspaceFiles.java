package dev.codeexec.mcp;

import dev.codeexec.workspace.MimeTypes;
import dev.codeexec.workspace.RelPath;
import dev.codeexec.workspace.Workspace;
import dev.codeexec.workspace.WorkspaceException;
import dev.codeexec.workspace.WorkspaceException.Kind;
import dev.codeexec.workspace.WorkspaceFs;

import java.io.IOException;
import java.io.InputStream;
import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.util.Optional;

/**
 * Reading a whole file for the MCP surfaces (read_file, resources, prompts, artifacts): always through
 * {@link WorkspaceFs#openRead} (no links, no FIFOs), bounded, and with one rule for "is this text".
 */
final class WorkspaceFiles {

    /** Largest file read_file and resource reads return; larger ones travel over the REST API. */
    static final int READ_LIMIT = 1 << 20;

    private WorkspaceFiles() {
    }

    /** A file read into memory, with its MIME type by extension and its text when it is text. */
    record Loaded(RelPath path, byte[] bytes, String mimeType, Optional<String> text) {
    }

    /**
     * Reads a regular file of at most {@code limit} bytes. Larger: TOO_LARGE, with a message that names the REST
     * download of this very file. The size is checked before reading and again while reading (a run may be
     * growing the file).
     */
    static Loaded read(Workspace ws, RelPath path, int limit) {
        WorkspaceFs.Entry e = ws.fs().stat(path);
        if (e.isDirectory()) throw new WorkspaceException(Kind.BAD_PATH, "is a directory: " + path + " (use list_files)");
        if (e.size() > limit) throw tooLarge(ws, path, limit);
        byte[] bytes;
        try (InputStream in = ws.fs().openRead(path)) {
            bytes = in.readNBytes(limit + 1);
        } catch (IOException x) {
            throw new WorkspaceException(Kind.IO, "I/O error reading " + path);
        }
        if (bytes.length > limit) throw tooLarge(ws, path, limit);
        String mime = MimeTypes.of(path.isRoot() ? "" : path.name());
        return new Loaded(path, bytes, mime, asText(mime, bytes));
    }

    private static WorkspaceException tooLarge(Workspace ws, RelPath path, int limit) {
        return new WorkspaceException(Kind.TOO_LARGE, "'" + path + "' is larger than " + (limit >> 10) + " KB, the most MCP returns; download it with GET " + restPath(ws.name(), path));
    }

    /** The REST download of a file (relative to the server's base URL). */
    static String restPath(String workspace, RelPath path) {
        return "/api/workspaces/" + workspace + "/files/" + UriTemplates.encodePath(path.toString());
    }

    /**
     * Text when the type is a text type and the bytes are valid UTF-8; for types the extension does not tell,
     * when the bytes are valid UTF-8 without NUL (a Makefile, a LICENSE). Known binary types are never text.
     */
    static Optional<String> asText(String mime, byte[] bytes) {
        boolean unknown = mime.equals("application/octet-stream");
        if (!MimeTypes.isText(mime) && !unknown) return Optional.empty();
        if (unknown) {
            for (byte b : bytes) if (b == 0) return Optional.empty();
        }
        return utf8(bytes);
    }

    static Optional<String> utf8(byte[] bytes) {
        try {
            return Optional.of(StandardCharsets.UTF_8.newDecoder().onMalformedInput(CodingErrorAction.REPORT)
                    .onUnmappableCharacter(CodingErrorAction.REPORT).decode(ByteBuffer.wrap(bytes)).toString());
        } catch (CharacterCodingException e) {
            return Optional.empty();
        }
    }

    /** The resource URI of a workspace file, as the {@code ws://{workspace}/{+path}} template reads it back. */
    static String uri(String workspace, RelPath path) {
        return "ws://" + workspace + "/" + UriTemplates.encodePath(path.toString());
    }
}
