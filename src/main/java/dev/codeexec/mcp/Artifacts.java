package dev.codeexec.mcp;

import dev.codeexec.surface.ResultMaps;
import dev.codeexec.config.Config;
import dev.codeexec.workspace.MimeTypes;
import dev.codeexec.workspace.RelPath;
import dev.codeexec.workspace.Workspace;
import dev.codeexec.workspace.WorkspaceException;
import io.modelcontextprotocol.spec.McpSchema.Content;
import io.modelcontextprotocol.spec.McpSchema.ImageContent;
import io.modelcontextprotocol.spec.McpSchema.ResourceLink;

import java.util.ArrayList;
import java.util.Base64;
import java.util.List;

/**
 * The files a run created or changed, as MCP content for its result: images (png, jpeg, gif, svg) up to
 * MAX_IMAGE_KB inline as image content, so a chart is shown to the user; every other file, a larger image, or one
 * beyond the first {@link #MAX_INLINE_IMAGES}, as a resource link to {@code ws://{workspace}/{path}} that the client
 * can read (or download over REST). Images are read through the workspace's safe path component; one that cannot
 * be read that way (removed, replaced by a link) is linked instead, and the link's read will say why.
 */
public final class Artifacts {

    /** One file of a run's result. */
    public record FileInfo(String path, long size, String mimeType) {
    }

    /** See {@link ResultMaps#MAX_INLINE_IMAGES}. */
    static final int MAX_INLINE_IMAGES = ResultMaps.MAX_INLINE_IMAGES;

    private final long maxImageBytes;

    public Artifacts(long maxImageBytes) {
        this.maxImageBytes = maxImageBytes;
    }

    public static Artifacts of(Config config) {
        return new Artifacts((long) config.get(Config.MAX_IMAGE_KB) << 10);
    }

    public List<Content> contents(Workspace ws, List<FileInfo> files) {
        List<Content> out = new ArrayList<>();
        int inlined = 0;
        for (FileInfo f : files) {
            if (inlined < MAX_INLINE_IMAGES && MimeTypes.isInlineImage(f.mimeType()) && f.size() <= maxImageBytes) {
                ImageContent image = image(ws, f);
                if (image != null) {
                    out.add(image);
                    inlined++;
                    continue;
                }
            }
            out.add(link(ws, f));
        }
        return out;
    }

    /**
     * A session call's figures as image content, with the same caps as saved images (MAX_IMAGE_KB each, at most
     * {@link #MAX_INLINE_IMAGES}); a figure over a cap is left out.
     */
    public List<Content> figures(List<dev.codeexec.engine.ExecutionResult.Figure> figures) {
        List<Content> out = new ArrayList<>();
        for (dev.codeexec.engine.ExecutionResult.Figure f : figures) {
            if (out.size() >= MAX_INLINE_IMAGES) break;
            if (f.data().length > maxImageBytes) continue;
            out.add(new ImageContent(null, Base64.getEncoder().encodeToString(f.data()), f.mimeType()));
        }
        return out;
    }

    /** Largest image shown inline, in KB. */
    public long maxImageKb() {
        return maxImageBytes >> 10;
    }

    private ImageContent image(Workspace ws, FileInfo f) {
        try {
            WorkspaceFiles.Loaded file = WorkspaceFiles.read(ws, RelPath.parse(f.path()), (int) Math.min(Integer.MAX_VALUE, maxImageBytes));
            return new ImageContent(null, Base64.getEncoder().encodeToString(file.bytes()), f.mimeType());
        } catch (WorkspaceException e) {
            return null;
        }
    }

    static ResourceLink link(Workspace ws, FileInfo f) {
        String name = f.path().contains("/") ? f.path().substring(f.path().lastIndexOf('/') + 1) : f.path();
        return ResourceLink.builder().name(name).title(f.path())
                .uri("ws://" + ws.name() + "/" + UriTemplates.encodePath(f.path()))
                .mimeType(f.mimeType()).size(f.size()).build();
    }
}
