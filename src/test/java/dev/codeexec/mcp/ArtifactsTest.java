package dev.codeexec.mcp;

import dev.codeexec.workspace.RelPath;
import dev.codeexec.workspace.Workspace;
import dev.codeexec.workspace.Workspaces;
import io.modelcontextprotocol.spec.McpSchema.Content;
import io.modelcontextprotocol.spec.McpSchema.ImageContent;
import io.modelcontextprotocol.spec.McpSchema.ResourceLink;
import org.junit.jupiter.api.Test;

import java.io.ByteArrayInputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;

import static org.assertj.core.api.Assertions.assertThat;

class ArtifactsTest {

    private final Workspaces workspaces = TestServers.workspaces(1 << 30);
    private final Workspace ws = workspaces.open("t1", "proj", true);

    private Artifacts.FileInfo put(String path, byte[] data, String mime) {
        ws.write(RelPath.parse(path), new ByteArrayInputStream(data), 1 << 30);
        return new Artifacts.FileInfo(path, data.length, mime);
    }

    @Test
    void smallImagesInlineEverythingElseAsResourceLinks() {
        byte[] png = {(byte) 0x89, 'P', 'N', 'G', 1, 2, 3};
        byte[] big = new byte[2048];
        List<Content> out = new Artifacts(1024).contents(ws, List.of(
                put("out/chart.png", png, "image/png"),
                put("plot.svg", "<svg/>".getBytes(), "image/svg+xml"),
                put("big.png", big, "image/png"),
                put("data/result file.csv", "a,b\n".getBytes(), "text/csv")));
        assertThat(out).hasSize(4);
        ImageContent chart = (ImageContent) out.get(0);
        assertThat(chart.mimeType()).isEqualTo("image/png");
        assertThat(Base64.getDecoder().decode(chart.data())).isEqualTo(png);
        assertThat(((ImageContent) out.get(1)).mimeType()).isEqualTo("image/svg+xml");
        ResourceLink large = (ResourceLink) out.get(2);
        assertThat(large.uri()).isEqualTo("ws://proj/big.png");
        assertThat(large.size()).isEqualTo(2048L);
        assertThat(large.mimeType()).isEqualTo("image/png");
        ResourceLink csv = (ResourceLink) out.get(3);
        assertThat(csv.uri()).isEqualTo("ws://proj/data/result%20file.csv");
        assertThat(csv.name()).isEqualTo("result file.csv");
        assertThat(new UriTemplates().create(WorkspaceResources.FILE_TEMPLATE).extractVariableValues(csv.uri()).get("path"))
                .isEqualTo("data/result file.csv");
    }

    @Test
    void anImageReplacedByALinkIsLinkedNotRead() throws Exception {
        Path dir = ws.fs().root();
        Files.createSymbolicLink(dir.resolve("evil.png"), Path.of("/etc/passwd"));
        List<Content> out = new Artifacts(1 << 20).contents(ws, List.of(new Artifacts.FileInfo("evil.png", 10, "image/png")));
        assertThat(out).singleElement().isInstanceOf(ResourceLink.class);
    }

    @Test
    void atMostTenImagesInline() {
        List<Artifacts.FileInfo> files = new ArrayList<>();
        for (int i = 0; i < 12; i++) files.add(put("c" + i + ".png", new byte[]{1, 2}, "image/png"));
        List<Content> out = new Artifacts(1024).contents(ws, files);
        assertThat(out.stream().filter(c -> c instanceof ImageContent).count()).isEqualTo(Artifacts.MAX_INLINE_IMAGES);
        assertThat(out.subList(10, 12)).allMatch(c -> c instanceof ResourceLink);
    }
}
