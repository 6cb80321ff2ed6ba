package dev.codeexec.mcp;

import io.modelcontextprotocol.util.McpUriTemplateManager;
import org.junit.jupiter.api.Test;

import java.util.Map;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

class UriTemplatesTest {

    private final McpUriTemplateManager files = new UriTemplates().create("ws://{workspace}/{+path}");

    @Test
    void reservedExpansionSpansSegmentsAndSimpleExpansionDoesNot() {
        assertThat(files.getVariableNames()).containsExactly("workspace", "path");
        assertThat(files.matches("ws://proj/a/b/c.txt")).isTrue();
        assertThat(files.extractVariableValues("ws://proj/a/b/c.txt")).isEqualTo(Map.of("workspace", "proj", "path", "a/b/c.txt"));
        assertThat(files.extractVariableValues("ws://proj/x")).isEqualTo(Map.of("workspace", "proj", "path", "x"));
        assertThat(files.matches("ws://proj/")).isFalse();
        assertThat(files.matches("ws://proj")).isFalse();
        assertThat(files.matches("http://proj/a")).isFalse();
        McpUriTemplateManager simple = new UriTemplates().create("x://{a}/{b}");
        assertThat(simple.matches("x://1/2")).isTrue();
        assertThat(simple.matches("x://1/2/3")).isFalse();
        assertThat(simple.extractVariableValues("x://1/2/3")).isEmpty();
    }

    @Test
    void valuesArePercentDecodedAsUtf8WithoutFormEncoding() {
        assertThat(files.extractVariableValues("ws://proj/my%20file%2B1+2.txt").get("path")).isEqualTo("my file+1+2.txt");
        assertThat(files.extractVariableValues("ws://proj/caf%C3%A9/%E2%82%AC.txt").get("path")).isEqualTo("café/€.txt");
        assertThat(files.extractVariableValues("ws://proj/a%2Fb").get("path")).isEqualTo("a/b");
        assertThatThrownBy(() -> files.extractVariableValues("ws://proj/a%2")).isInstanceOf(IllegalArgumentException.class);
        assertThatThrownBy(() -> files.extractVariableValues("ws://proj/a%zz")).isInstanceOf(IllegalArgumentException.class);
        assertThatThrownBy(() -> files.extractVariableValues("ws://proj/a%C3")).isInstanceOf(IllegalArgumentException.class);
    }

    @Test
    void encodedPathsReadBackAsTheSamePath() {
        for (String p : java.util.List.of("a/b/c.txt", "my file.txt", "50%.csv", "q?x#y.txt", "café/€ 1.txt", "a+b=c;d.txt")) {
            String uri = "ws://proj/" + UriTemplates.encodePath(p);
            assertThat(uri).doesNotContain(" ").doesNotContain("?").doesNotContain("#");
            assertThat(files.extractVariableValues(uri).get("path")).as(uri).isEqualTo(p);
        }
    }

    @Test
    void theTemplateMatchesItselfAsTheSdkLooksUpCompletionReferences() {
        assertThat(files.matches("ws://{workspace}/{+path}")).isTrue();
        assertThat(files.isUriTemplate("ws://{workspace}/{+path}")).isTrue();
        assertThat(files.isUriTemplate("code-exec://info")).isFalse();
        McpUriTemplateManager fixed = new UriTemplates().create("code-exec://info");
        assertThat(fixed.matches("code-exec://info")).isTrue();
        assertThat(fixed.matches("code-exec://infoX")).isFalse();
        assertThat(fixed.getVariableNames()).isEmpty();
    }

    @Test
    void unsupportedOrDuplicateExpressionsAreRefused() {
        for (String t : java.util.List.of("x://{#frag}", "x://{?q}", "x://{a,b}", "x://{/p}", "x://{a}/{+a}", "x://{}")) {
            assertThatThrownBy(() -> new UriTemplates().create(t)).as(t).isInstanceOf(IllegalArgumentException.class);
        }
    }
}
