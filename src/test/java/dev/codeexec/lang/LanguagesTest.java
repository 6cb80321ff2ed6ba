package dev.codeexec.lang;

import org.junit.jupiter.api.Test;

import java.io.ByteArrayInputStream;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Map;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

class LanguagesTest {

    private final Languages table = Languages.load();

    @Test
    void typescriptRunsOnTheStrippingNodeWhereItIsElseOnDebiansNode(@org.junit.jupiter.api.io.TempDir java.nio.file.Path dir)
            throws Exception {
        assertThat(Placeholders.typescriptNode(dir.resolve("missing"))).isEqualTo(java.nio.file.Path.of("/usr/bin/node"));
        java.nio.file.Path notExecutable = java.nio.file.Files.writeString(dir.resolve("node"), "");
        assertThat(Placeholders.typescriptNode(notExecutable)).isEqualTo(java.nio.file.Path.of("/usr/bin/node"));
        notExecutable.toFile().setExecutable(true);
        assertThat(Placeholders.typescriptNode(notExecutable)).isEqualTo(notExecutable);
        // every argv of the typescript row runs on it
        Language ts = Languages.load().find("typescript").orElseThrow();
        assertThat(ts.run().getFirst()).isEqualTo("{tsNode}");
    }

    @Test
    void tableHasTheSupportedLanguagesInOrder() {
        assertThat(table.ids()).containsExactly("python", "nodejs", "typescript", "go", "java", "shell", "bash", "c");
    }

    @Test
    void aliasesResolveCaseInsensitively() {
        Map<String, String> expected = Map.of("py", "python", "python3", "python", "js", "nodejs", "node", "nodejs",
                "ts", "typescript", "golang", "go", "sh", "shell", "BASH", "bash", " Python ", "python");
        expected.forEach((alias, id) -> assertThat(table.find(alias)).get().extracting(Language::id).isEqualTo(id));
        assertThat(table.find("cobol")).isEmpty();
        assertThat(table.find(null)).isEmpty();
    }

    @Test
    void namesAreIdsThenAliasesAndAllResolve() {
        assertThat(table.names()).startsWith("python", "nodejs", "typescript", "go", "java", "shell", "bash", "c")
                .contains("py", "python3", "js", "node", "ts", "golang", "sh").doesNotHaveDuplicates();
        table.names().forEach(n -> assertThat(table.find(n)).as(n).isPresent());
    }

    @Test
    void goAndCHaveACompileStep() {
        assertThat(table.all().stream().filter(Language::compiled).map(Language::id)).containsExactly("go", "c");
    }

    @Test
    void goUsesTheSharedCacheOfflineAndLocalToolchain() {
        Language go = table.find("go").orElseThrow();
        assertThat(go.env()).containsEntry("GOCACHE", "{goCache}").containsEntry("GOTOOLCHAIN", "local")
                .containsEntry("GOPROXY", "off").containsEntry("GOFLAGS", "-mod=mod").containsEntry("GO111MODULE", "on")
                .containsEntry("GOTELEMETRY", "off");
        assertThat(go.env().get("GOPATH")).startsWith("/tmp");
        assertThat(go.binds()).containsExactly("{goCache}");
    }

    @Test
    void unknownPlaceholderIsRejectedAtLoad() {
        String json = """
                {"languages": [{"id": "x", "extension": "x", "run": ["/bin/x", "{fiel}"], "version": []}]}""";
        assertThatThrownBy(() -> Languages.parse(new ByteArrayInputStream(json.getBytes(StandardCharsets.UTF_8))))
                .hasMessageContaining("unknown placeholder {fiel}");
    }

    @Test
    void duplicateNameIsRejectedAtLoad() {
        String json = """
                {"languages": [{"id": "a", "aliases": ["b"], "extension": "a", "run": ["/bin/a"]},
                               {"id": "b", "extension": "b", "run": ["/bin/b"]}]}""";
        assertThatThrownBy(() -> Languages.parse(new ByteArrayInputStream(json.getBytes(StandardCharsets.UTF_8))))
                .hasMessageContaining("'b' is used twice");
    }

    @Test
    void placeholdersAreFilledButShellVariablesAreLeftAlone() {
        assertThat(Placeholders.fill(List.of("{dir}/{name}", "${Version}", "{file}"),
                Map.of("dir", "/work", "name", "code_1", "file", "/work/code_1.c")))
                .containsExactly("/work/code_1", "${Version}", "/work/code_1.c");
    }
}
