package dev.codeexec.codemode;

import dev.codeexec.config.ConfigException;
import org.junit.jupiter.api.Test;

import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

class UpstreamConfigTest {

    private static final Map<String, String> ENV = Map.of("TOKEN", "s3cret", "ROOT", "/srv/data");

    private static UpstreamConfig parse(String json) {
        return UpstreamConfig.parse(json, ENV::get);
    }

    @Test
    void readsTheDesktopClientFormatWithVariablesFromTheEnvironment() {
        UpstreamConfig c = parse("""
                {"mcpServers": {
                  "git-hub": {"url": "https://mcp.example.test/mcp", "headers": {"Authorization": "Bearer ${TOKEN}"},
                              "tenants": ["team-a"], "tools": ["search_issues"], "description": "issues"},
                  "files": {"type": "stdio", "command": "node", "args": ["server.js", "--root=${ROOT}"],
                            "env": {"KEY": "${TOKEN}"}, "cwd": "${ROOT}"},
                  "off": {"url": "http://127.0.0.1:1/mcp", "disabled": true}}}
                """);
        assertThat(c.servers()).hasSize(2);
        UpstreamConfig.Upstream gh = c.server("git-hub").orElseThrow();
        assertThat(gh.module()).isEqualTo("git_hub");
        assertThat(c.server("git_hub")).contains(gh);
        assertThat(gh.transport()).isInstanceOfSatisfying(UpstreamConfig.Transport.Http.class, h -> {
            assertThat(h.url().toString()).isEqualTo("https://mcp.example.test/mcp");
            assertThat(h.headers()).containsEntry("Authorization", "Bearer s3cret");
        });
        assertThat(gh.allowsTenant("team-a")).isTrue();
        assertThat(gh.allowsTenant("team-b")).isFalse();
        assertThat(gh.allowsTool("search_issues")).isTrue();
        assertThat(gh.allowsTool("delete_repo")).isFalse();
        assertThat(gh.description()).isEqualTo("issues");

        UpstreamConfig.Upstream files = c.server("files").orElseThrow();
        assertThat(files.transport()).isEqualTo(new UpstreamConfig.Transport.Stdio("node",
                List.of("server.js", "--root=/srv/data"), Map.of("KEY", "s3cret"), Optional.of(Path.of("/srv/data"))));
        assertThat(files.allowsTenant("anyone")).isTrue();
        assertThat(files.allowsTool("anything")).isTrue();
        assertThat(files.tools()).isEmpty();
        assertThat(c.server("off")).isEmpty();
    }

    @Test
    void aSecretNeverAppearsInTheTransportsTextForm() {
        UpstreamConfig c = parse("""
                {"mcpServers": {"a": {"url": "https://h.test/mcp?key=${TOKEN}", "headers": {"X-Key": "${TOKEN}"}},
                                "b": {"command": "srv", "env": {"K": "${TOKEN}"}}}}
                """);
        for (UpstreamConfig.Upstream u : c.servers()) assertThat(u.toString()).doesNotContain("s3cret");
    }

    @Test
    void anUnsetVariableStopsTheStartNamingServerAndVariable() {
        assertThatThrownBy(() -> parse("""
                {"mcpServers": {"gh": {"url": "https://h.test/mcp", "headers": {"Authorization": "Bearer ${NOPE}"}}}}
                """)).isInstanceOf(ConfigException.class)
                .hasMessageContaining("\"gh\"").hasMessageContaining("headers.Authorization").hasMessageContaining("${NOPE}");
    }

    @Test
    void badEntriesAreRefusedWithTheirReason() {
        Map<String, String> cases = Map.of(
                "{\"servers\": {}}", "must be an object with \"mcpServers\"",
                "{\"mcpServers\": {\"a\": {}}}", "needs either \"url\"",
                "{\"mcpServers\": {\"a\": {\"url\": \"u\", \"command\": \"c\"}}}", "needs either \"url\"",
                "{\"mcpServers\": {\"a\": {\"url\": \"ftp://h/x\"}}}", "http:// or https://",
                "{\"mcpServers\": {\"a\": {\"type\": \"sse\", \"url\": \"http://h/sse\"}}}", "SSE-only",
                "{\"mcpServers\": {\"a\": {\"url\": \"http://h/mcp\", \"tennants\": [\"x\"]}}}", "unknown field \"tennants\"",
                "{\"mcpServers\": {\"9a\": {\"url\": \"http://h/mcp\"}}}", "a name must start",
                "{\"mcpServers\": {\"call\": {\"url\": \"http://h/mcp\"}}}", "reserved",
                "{\"mcpServers\": {\"a-b\": {\"url\": \"http://h/mcp\"}, \"a_b\": {\"command\": \"x\"}}}", "imports as a_b",
                "{\"mcpServers\": {\"a\": {\"command\": \"x\", \"args\": \"-v\"}}}", "\"args\" must be a list");
        cases.forEach((json, message) -> assertThatThrownBy(() -> parse(json)).as(json)
                .isInstanceOf(ConfigException.class).hasMessageContaining(message));
        assertThatThrownBy(() -> parse("{not json")).isInstanceOf(ConfigException.class).hasMessageContaining("not valid JSON");
        assertThatThrownBy(() -> parse("{\"mcpServers\": {\"a\": {\"url\": \"http://h/mcp\", \"tools\": [1]}}}"))
                .hasMessageContaining("\"tools\" must be a list of non-empty strings");
    }

    @Test
    void anEmptyListOfTenantsAllowsNobody() {
        UpstreamConfig c = parse("{\"mcpServers\": {\"a\": {\"url\": \"http://h/mcp\", \"tenants\": []}}}");
        assertThat(c.servers().get(0).tenants()).contains(Set.of());
        assertThat(c.servers().get(0).allowsTenant("default")).isFalse();
    }
}
