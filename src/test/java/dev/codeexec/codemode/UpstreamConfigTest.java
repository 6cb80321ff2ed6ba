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
                {"mcpServers": {"a": {"url": "https://me:${TOKEN}@h.test/mcp?key=${TOKEN}", "headers": {"X-Key": "${TOKEN}"}},
                                "b": {"command": "srv", "env": {"K": "${TOKEN}"}}}}
                """);
        for (UpstreamConfig.Upstream u : c.servers()) assertThat(u.toString()).doesNotContain("s3cret");
    }

    @Test
    void theFilesCredentialsAreItsSecretsAndItsPlainSettingsAreNot() {
        UpstreamConfig c = UpstreamConfig.parse("""
                {"mcpServers": {
                  "a": {"url": "https://user:pa55word@h.test/mcp?key=qk-123456&v=2",
                        "headers": {"Authorization": "Bearer ${TOKEN}", "X-Org": "acme-corp"}},
                  "b": {"command": "srv", "args": ["--root=/srv/data"], "env": {"K": "${OTHER}", "ROOT": "/srv/data", "S": "${SHORT}"}}}}
                """, Map.of("TOKEN", "tok/en+1234", "OTHER", "other-secret", "SHORT", "abc")::get);
        Secrets s = c.secrets();
        // every ${VAR} value, as it is, as JSON escapes it and URL-encoded; a header's value whole and after its scheme
        for (String secret : List.of("tok/en+1234", "tok\\/en+1234", "tok%2Fen%2B1234", "Bearer tok/en+1234", "other-secret",
                "acme-corp", "user:pa55word", "pa55word", "qk-123456"))
            assertThat(s.scrub("<" + secret + ">")).as(secret).isEqualTo("<" + Secrets.MASK + ">");
        // literal settings other than headers, and values too short to be credentials, stay
        assertThat(s.scrub("--root=/srv/data abc v=2")).isEqualTo("--root=/srv/data abc v=2");
        assertThat(s.scrubJson(Map.of("k", List.of("x other-secret"), "other-secret", 1)))
                .isEqualTo(Map.of("k", List.of("x [redacted]"), "[redacted]", 1));
        assertThat(s.toString()).doesNotContain("tok", "other", "acme", "pa55");
        assertThat(UpstreamConfig.NONE.secrets().scrub("tok/en+1234")).isEqualTo("tok/en+1234");
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

    @Test
    void httpApisAreReadNextToServersOrAloneWithTheirSecrets() {
        UpstreamConfig c = parse("""
                {"httpApis": {
                  "github": {"url": "https://api.github.test", "headers": {"Authorization": "Bearer ${TOKEN}"},
                             "tenants": ["team-a"], "methods": ["get", "POST"], "paths": ["/repos/**", "/user", "/orgs/*/teams"],
                             "description": "GitHub"},
                  "keyed": {"url": "http://10.0.0.5:8080/v2/?api_key=${ROOT}"},
                  "off": {"url": "http://h.test", "disabled": true}}}
                """);
        assertThat(c.servers()).isEmpty();
        assertThat(c.isEmpty()).isFalse();
        assertThat(c.apis()).extracting(UpstreamConfig.HttpApi::name).containsExactly("github", "keyed");
        UpstreamConfig.HttpApi gh = c.api("github").orElseThrow();
        assertThat(gh.headers()).containsEntry("Authorization", "Bearer s3cret");
        assertThat(gh.allowsTenant("team-a")).isTrue();
        assertThat(gh.allowsTenant("team-b")).isFalse();
        assertThat(gh.allowsMethod("GET")).isTrue();
        assertThat(gh.allowsMethod("DELETE")).isFalse();
        assertThat(gh.allowsPath("/repos")).as("/** takes none too").isTrue();
        assertThat(gh.allowsPath("/repos/o/r/issues")).isTrue();
        assertThat(gh.allowsPath("/user")).isTrue();
        assertThat(gh.allowsPath("/user/keys")).isFalse();
        assertThat(gh.allowsPath("/orgs/acme/teams")).isTrue();
        assertThat(gh.allowsPath("/orgs/acme/x/teams")).as("* is one segment").isFalse();
        assertThat(gh.allowsPath("/reposx")).isFalse();
        UpstreamConfig.HttpApi keyed = c.api("keyed").orElseThrow();
        assertThat(keyed.allowsMethod("PATCH")).isTrue();
        assertThat(keyed.allowsPath("/anything/at/all")).isTrue();
        assertThat(keyed.shownUrl()).isEqualTo("http://10.0.0.5:8080/v2/");
        assertThat(keyed.toString()).doesNotContain("/srv/data");
        assertThat(c.secrets().scrub("Bearer s3cret, key /srv/data")).isEqualTo("[redacted], key [redacted]");

        UpstreamConfig both = parse("""
                {"mcpServers": {"a": {"url": "http://h/mcp"}}, "httpApis": {"a": {"url": "http://h/api"}}}
                """);
        assertThat(both.servers()).hasSize(1);
        assertThat(both.apis()).hasSize(1);
    }

    @Test
    void aGatewayReadsTheApisForWhatItListsWithoutTheirCredentialsVariables() {
        String file = """
                {"mcpServers": {"a": {"url": "https://mcp.test/mcp", "headers": {"Authorization": "Bearer ${TOKEN}"}}},
                 "httpApis": {
                   "github": {"url": "https://api.github.test/v3", "headers": {"Authorization": "Bearer ${GH_TOKEN}"},
                              "tenants": ["team-a"], "methods": ["GET"], "paths": ["/user"], "description": "GitHub"},
                   "keyed": {"url": "https://${API_HOST}/v2/?api_key=${API_KEY}"}}}
                """;
        Map<String, String> workerEnv = Map.of("TOKEN", "s3cret", "GH_TOKEN", "gh-s3cret", "API_HOST", "keyed.test",
                "API_KEY", "k3y-s3cret");
        Map<String, String> gatewayEnv = Map.of("TOKEN", "s3cret", "API_HOST", "keyed.test");
        assertThatThrownBy(() -> UpstreamConfig.parse(file, gatewayEnv::get)).as("a worker needs every variable")
                .hasMessageContaining("${GH_TOKEN}");
        UpstreamConfig worker = UpstreamConfig.parse(file, workerEnv::get);
        UpstreamConfig gateway = UpstreamConfig.parseForGateway(file, gatewayEnv::get);
        // what a listing shows is the same on both
        for (String name : List.of("github", "keyed")) {
            UpstreamConfig.HttpApi w = worker.api(name).orElseThrow(), g = gateway.api(name).orElseThrow();
            assertThat(g.shownUrl()).isEqualTo(w.shownUrl());
            assertThat(List.of(g.tenants(), g.methods(), g.paths(), g.description()))
                    .isEqualTo(List.of(w.tenants(), w.methods(), w.paths(), w.description()));
        }
        assertThat(gateway.api("keyed").orElseThrow().shownUrl()).isEqualTo("https://keyed.test/v2/");
        // the gateway holds no API credential: headers as written, no query
        assertThat(gateway.api("github").orElseThrow().headers()).containsExactly(Map.entry("Authorization", "Bearer ${GH_TOKEN}"));
        assertThat(gateway.api("keyed").orElseThrow().url().getRawQuery()).isNull();
        assertThat(gateway.toString()).doesNotContain("gh-s3cret").doesNotContain("k3y-s3cret");
        // the servers are read in full: the gateway connects to them
        assertThat(gateway.server("a").orElseThrow().transport()).isInstanceOfSatisfying(UpstreamConfig.Transport.Http.class,
                h -> assertThat(h.headers()).containsEntry("Authorization", "Bearer s3cret"));
        assertThat(gateway.secrets().scrub("s3cret")).isEqualTo("[redacted]");
        // checked as strictly, and a variable of the URL before its query is still needed
        assertThatThrownBy(() -> UpstreamConfig.parseForGateway(file.replace("\"description\"", "\"descripton\""), gatewayEnv::get))
                .hasMessageContaining("unknown field \"descripton\"");
        assertThatThrownBy(() -> UpstreamConfig.parseForGateway(file, Map.of("TOKEN", "s3cret")::get))
                .hasMessageContaining("API \"keyed\"").hasMessageContaining("${API_HOST}");
    }

    @Test
    void badHttpApisAreRefusedWithTheirReason() {
        Map<String, String> cases = Map.of(
                "{\"httpApis\": {\"a\": {\"url\": \"http://h\", \"header\": {}}}}", "API \"a\": unknown field \"header\"",
                "{\"httpApis\": {\"9a\": {\"url\": \"http://h\"}}}", "a name must start",
                "{\"httpApis\": {\"a\": {\"url\": \"ftp://h\"}}}", "http:// or https://",
                "{\"httpApis\": {\"a\": {\"url\": \"https://u:p@h\"}}}", "must not hold user info",
                "{\"httpApis\": {\"a\": {\"url\": \"http://h\", \"methods\": [\"GE T\"]}}}", "is not an HTTP method",
                "{\"httpApis\": {\"a\": {\"url\": \"http://h\", \"paths\": [\"repos/**\"]}}}", "must start with /",
                "{\"httpApis\": {\"a\": {\"headers\": {}}}}", "\"url\" must be a non-empty string",
                "{\"httpApis\": []}", "and/or \"httpApis\"");
        cases.forEach((json, message) -> assertThatThrownBy(() -> parse(json)).as(json)
                .isInstanceOf(ConfigException.class).hasMessageContaining(message));
        assertThatThrownBy(() -> parse("""
                {"httpApis": {"gh": {"url": "https://h.test", "headers": {"Authorization": "Bearer ${NOPE}"}}}}
                """)).isInstanceOf(ConfigException.class)
                .hasMessageContaining("API \"gh\"").hasMessageContaining("headers.Authorization").hasMessageContaining("${NOPE}");
    }
}
