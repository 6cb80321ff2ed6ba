package dev.codeexec.mcp;

import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import tools.jackson.databind.JsonNode;
import tools.jackson.databind.json.JsonMapper;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;

/** Main in a subprocess with TRANSPORT=stdio: stdout carries JSON-RPC lines only, logs go to stderr. */
@Tag("slow")
class StdioTest {

    static final JsonMapper JSON = JsonMapper.builder().build();

    @Test
    void stdioServesToolsAndCancelsAndKeepsStdoutClean() throws Exception {
        Path java = Path.of(System.getProperty("java.home"), "bin", "java");
        ProcessBuilder pb = new ProcessBuilder(java.toString(), "-cp", System.getProperty("java.class.path"),
                StdioFakeMain.class.getName());
        pb.environment().put("TRANSPORT", "stdio");
        pb.environment().put("LOG_FORMAT", "json");
        Process p = pb.start();
        CompletableFuture<String> stderr = CompletableFuture.supplyAsync(() -> {
            try {
                return new String(p.getErrorStream().readAllBytes(), StandardCharsets.UTF_8);
            } catch (Exception e) {
                return "";
            }
        });
        try {
            OutputStream in = p.getOutputStream();
            BufferedReader out = new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8));
            List<String> lines = new ArrayList<>();

            send(in, """
                    {"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2024-11-05","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}""");
            lines.add(out.readLine());
            send(in, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}");
            send(in, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/list\"}");
            lines.add(out.readLine());
            send(in, RawClient.call(3, "block"));
            send(in, RawClient.call(4, "print:hi"));
            String four = out.readLine();
            lines.add(four);
            send(in, RawClient.cancel(3));
            String three = out.readLine();
            lines.add(three);
            in.close();
            assertThat(p.waitFor(20, TimeUnit.SECONDS)).isTrue();
            assertThat(p.exitValue()).isZero();
            String rest;
            while ((rest = out.readLine()) != null) lines.add(rest);

            for (String line : lines) {
                JsonNode node = JSON.readTree(line);
                assertThat(node.path("jsonrpc").asString()).isEqualTo("2.0");
            }
            assertThat(JSON.readTree(lines.get(0)).path("result").path("serverInfo").path("name").asString())
                    .isEqualTo("code-exec-mcp");
            assertThat(lines.get(1)).contains("\"execute_code\"").contains("\"runtime_info\"");
            JsonNode r4 = JSON.readTree(four);
            assertThat(r4.path("id").asInt()).isEqualTo(4);
            assertThat(r4.path("result").path("structuredContent").path("stdout").asString()).isEqualTo("hi");
            JsonNode r3 = JSON.readTree(three);
            assertThat(r3.path("id").asInt()).isEqualTo(3);
            assertThat(r3.path("result").path("structuredContent").path("outcome").asString()).isEqualTo("cancelled");

            String err = stderr.get(10, TimeUnit.SECONDS);
            assertThat(err).contains("a stray print that must not reach the protocol channel");
            assertThat(err).contains("\"formattedMessage\":\"serving MCP over stdio\"");
            assertThat(err.lines().filter(l -> l.contains("audit line")).findFirst()).hasValueSatisfying(l -> {
                assertThat(JSON.readTree(l).path("loggerName").asString()).isEqualTo("audit");
                assertThat(JSON.readTree(l).path("formattedMessage").asString()).isEqualTo("audit line language=python exit=0");
            });
        } finally {
            p.destroyForcibly();
        }
    }

    private static void send(OutputStream in, String line) throws Exception {
        in.write((line + "\n").getBytes(StandardCharsets.UTF_8));
        in.flush();
    }
}
