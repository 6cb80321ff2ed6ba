package dev.codeexec.local;

import com.sun.net.httpserver.HttpServer;
import dev.codeexec.codemode.ApiCall;
import dev.codeexec.codemode.CodeTools;
import dev.codeexec.config.Config;
import dev.codeexec.config.DataDir;
import dev.codeexec.engine.ExecutionResult;
import dev.codeexec.engine.OutputListener;
import dev.codeexec.lang.Languages;
import dev.codeexec.sandbox.Sandbox;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import tools.jackson.databind.JsonNode;
import tools.jackson.databind.json.JsonMapper;

import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.Executors;

import static dev.codeexec.local.TestSupport.await;
import static org.assertj.core.api.Assertions.assertThat;

/**
 * Credentialed API routes in real runs: curl, Python requests, the Python and Node helpers and Node fetch inside
 * the bwrap sandbox reach the test's HTTP server on 127.0.0.1 through {@code $CODE_APIS_URL/fx/...} with
 * EGRESS=off (the server makes the call); the fixture sees the configured header and never the code's own; the
 * sandbox's environment, files, /proc and the memory of a process that made calls hold no trace of the token.
 */
@Tag("sandbox")
@Timeout(value = 180, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
class ApiRoutesRunTest {

    private static final JsonMapper JSON = JsonMapper.shared();
    /** Random per run: a literal header value in the file is a secret as a ${VAR} one is. */
    private static final String TOKEN = "apitok-" + HexFormat.of().formatHex(java.security.SecureRandom.getSeed(12));

    static HttpServer fixture;
    static Path dataDir;
    static Sandbox sandbox;
    static LocalExecutor executor;
    static CodeTools codeTools;
    /** Path and Authorization of each request that reached the fixture. */
    static final ConcurrentLinkedQueue<List<String>> SEEN = new ConcurrentLinkedQueue<>();

    @BeforeAll
    static void setUp() throws Exception {
        fixture = HttpServer.create(new InetSocketAddress(InetAddress.ofLiteral("127.0.0.1"), 0), 50);
        fixture.setExecutor(Executors.newVirtualThreadPerTaskExecutor());
        fixture.createContext("/", ex -> {
            String auth = String.valueOf(ex.getRequestHeaders().getFirst("Authorization"));
            SEEN.add(List.of(ex.getRequestURI().toString(), auth));
            byte[] body = JSON.writeValueAsBytes(Map.of("path", ex.getRequestURI().getPath(), "method", ex.getRequestMethod(),
                    "authorized", auth.equals("Bearer " + TOKEN), "body", new String(ex.getRequestBody().readAllBytes(),
                            StandardCharsets.UTF_8)));
            ex.getResponseHeaders().add("Content-Type", "application/json");
            ex.sendResponseHeaders(200, body.length);
            try (OutputStream o = ex.getResponseBody()) {
                o.write(body);
            }
        });
        fixture.start();
        dataDir = Files.createTempDirectory("code-exec-api-routes-test-");
        Files.setPosixFilePermissions(dataDir, java.nio.file.attribute.PosixFilePermissions.fromString("rwx--x--x"));
        Path file = dataDir.resolve("upstreams.json");
        Files.writeString(file, """
                {"httpApis": {
                  "fx": {"url": "http://127.0.0.1:%d/v1", "headers": {"Authorization": "Bearer %s"},
                         "methods": ["GET", "POST"], "description": "the test's fixture"},
                  "theirs": {"url": "http://127.0.0.1:%1$d/other", "tenants": ["someone-else"]}}}
                """.formatted(fixture.getAddress().getPort(), TOKEN));
        Config config = TestSupport.config("DATA_DIR", dataDir.toString(), "WARM_POOL", "off", "EGRESS", "off",
                "SANDBOX", "bwrap", "UPSTREAM_MCP_FILE", file.toString());
        sandbox = TestSandboxes.required(config, Sandbox::supportsControl, "a sandbox with a control channel (bwrap)");
        codeTools = CodeTools.of(config).orElseThrow();
        executor = LocalExecutor.create(config, sandbox, Languages.load(), Optional.of(codeTools));
    }

    @AfterAll
    static void tearDown() throws Exception {
        if (executor != null) executor.close();
        if (sandbox != null) sandbox.close();
        if (codeTools != null) codeTools.close();
        if (fixture != null) fixture.stop(0);
        if (dataDir != null) DataDir.deleteTree(dataDir);
    }

    private static ExecutionResult run(String language, String code) throws Exception {
        return await(executor.submit(TestSupport.request(executor.config, language, code), OutputListener.NONE));
    }

    private static JsonNode lastLine(ExecutionResult r) {
        String[] lines = r.stdout().strip().split("\n");
        return JSON.readTree(lines[lines.length - 1]);
    }

    @Test
    void curlRequestsAndThePythonHelperReachTheApiWithTheServersTokenWhichTheSandboxNeverHolds() throws Exception {
        String hex = HexFormat.of().formatHex(TOKEN.getBytes(StandardCharsets.UTF_8)); // the code never holds it literally
        ExecutionResult r = run("python", """
                import glob, json, os, subprocess, requests, mcp_tools
                U = os.environ["CODE_APIS_URL"]
                tok = bytes.fromhex("%s").decode()
                res = {}
                c = subprocess.run(["curl", "-sS", "-H", "Authorization: Bearer the-codes-own", U + "/fx/curl?x=1"],
                                   capture_output=True, text=True)
                res["curl"] = json.loads(c.stdout or "{}")
                g = requests.get(U + "/fx/requests", headers={"Authorization": "Bearer the-codes-own"})
                res["requests"] = [g.status_code, g.json()]
                p = requests.post(U + "/fx/post", json={"a": 1})
                res["post"] = [p.status_code, p.json()]
                res["helper"] = mcp_tools.apis.fx.get("/helper")
                res["listed"] = [a["name"] for a in mcp_tools.apis()]
                d = requests.delete(U + "/fx/x")
                res["delete"] = [d.status_code, d.json()]
                t = requests.get(U + "/theirs/x")
                res["theirs"] = [t.status_code, t.json()["reason"]]
                env_out = subprocess.run(["env"], capture_output=True, text=True).stdout
                res["inEnv"] = tok in env_out or any(tok in v for v in os.environ.values())
                node_mod = subprocess.run(["node", "-e", "console.log(require.resolve('mcp-tools'))"], capture_output=True,
                                          text=True).stdout.strip()
                roots = ["/etc", "/run", "/tmp", os.getcwd(), os.path.dirname(mcp_tools.__file__)] + ([os.path.dirname(node_mod)] if node_mod else [])
                roots += glob.glob("/proc/[0-9]*/environ") + glob.glob("/proc/[0-9]*/cmdline")
                gr = subprocess.run(["timeout", "25", "grep", "-rsl", "-D", "skip", "-F", "-e", tok, *roots], capture_output=True, text=True)
                res["grep"] = {"rc": gr.returncode, "files": gr.stdout.split(), "roots": len(roots)}
                open("/tmp/planted-marker.txt", "w").write("".join(reversed("rekram-detnalp")))
                ctl = subprocess.run(["grep", "-rsl", "-F", "-e", "".join(reversed("rekram-detnalp")), "/tmp"], capture_output=True, text=True)
                res["control"] = ctl.stdout.split()
                child = subprocess.Popen(["python3", "-c", "import mcp_tools, requests, os, sys, time\\n"
                                          "mcp_tools.apis.fx.get('/child')\\n"
                                          "requests.get(os.environ['CODE_APIS_URL'] + '/fx/child2')\\n"
                                          "print('child-ready', flush=True)\\ntime.sleep(60)"], stdout=subprocess.PIPE)
                child.stdout.readline()
                found, control, regions = False, False, 0
                with open("/proc/%%d/maps" %% child.pid) as maps, open("/proc/%%d/mem" %% child.pid, "rb", 0) as mem:
                    for line in maps:
                        addr, perms = line.split()[:2]
                        if not perms.startswith("r"):
                            continue
                        lo, hi = (int(x, 16) for x in addr.split("-"))
                        try:
                            mem.seek(lo)
                            chunk = mem.read(min(hi - lo, 256 << 20))
                        except (OSError, ValueError, OverflowError):
                            continue
                        regions += 1
                        found = found or tok.encode() in chunk
                        control = control or b"child-ready" in chunk
                child.kill()
                res["memory"] = {"found": found, "control": control, "regions": regions}
                print(json.dumps(res))
                """.formatted(hex));
        assertThat(r.exitCode()).as(r.stderr()).isZero();
        JsonNode out = lastLine(r);
        assertThat(out.get("curl").get("path").asString()).isEqualTo("/v1/curl");
        assertThat(out.get("curl").get("authorized").asBoolean()).as("the fixture saw the configured header").isTrue();
        assertThat(out.get("requests").toString()).contains("200", "\"authorized\":true", "/v1/requests");
        assertThat(out.get("post").toString()).contains("200", "\"method\":\"POST\"", "{\\\"a\\\": 1}");
        assertThat(out.get("helper").get("authorized").asBoolean()).isTrue();
        assertThat(out.get("listed").toString()).isEqualTo("[\"fx\"]");
        assertThat(out.get("delete").toString()).contains("403", "DELETE is not allowed on API fx (allowed: GET, POST)");
        assertThat(out.get("theirs").toString()).isEqualTo("[403,\"not_allowed\"]");
        assertThat(out.get("inEnv").asBoolean()).as("no token in the sandbox's environment").isFalse();
        assertThat(out.get("control").toString()).as("the grep control works").contains("/tmp/planted-marker.txt");
        assertThat(out.get("grep").get("rc").asInt()).as("the grep finished").isNotEqualTo(124);
        assertThat(out.get("grep").get("files").size()).as("no file readable in the sandbox holds the token: " + out.get("grep"))
                .isZero();
        assertThat(out.get("memory").get("control").asBoolean()).as("the memory scan reads the child's memory").isTrue();
        assertThat(out.get("memory").get("found").asBoolean()).as("no token in the memory of a process that called the API")
                .isFalse();
        assertThat(SEEN).as("every request that reached the fixture carried the server's token, none the code's own")
                .isNotEmpty().allSatisfy(s -> assertThat(s.get(1)).isEqualTo("Bearer " + TOKEN));
        assertThat(SEEN).extracting(s -> s.get(0)).contains("/v1/curl?x=1", "/v1/requests", "/v1/post", "/v1/helper");
        assertThat(r.toolCalls().orElseThrow().apiCalls()).extracting(ApiCall::path, ApiCall::status)
                .contains(org.assertj.core.groups.Tuple.tuple("/curl", 200), org.assertj.core.groups.Tuple.tuple("/x", 403));
        assertThat(r.stdout() + r.stderr()).doesNotContain(TOKEN);
    }

    @Test
    void aChunkedRequestBodyFromCurlAndRequestsReachesTheApiWhole() throws Exception {
        // curl -T - reads stdin of unknown length and sends it chunked (with Expect: 100-continue); requests sends a
        // generator's body chunked
        ExecutionResult r = run("python", """
                import os, subprocess, json, requests
                url = os.environ["CODE_APIS_URL"]
                data = "0123456789abcdef" * 12500
                c = subprocess.run(["curl", "-sS", "-v", "-X", "POST", "-T", "-", "-H", "Content-Type: text/plain",
                                    url + "/fx/chunked-curl"], input=data.encode(), capture_output=True, check=True)
                assert b"transfer-encoding: chunked" in c.stderr.lower(), c.stderr
                a = json.loads(c.stdout)
                def pieces():
                    for i in range(0, len(data), 7000):
                        yield data[i:i + 7000].encode()
                b = requests.post(url + "/fx/chunked-requests", data=pieces(), headers={"Content-Type": "text/plain"}).json()
                print(json.dumps({"curl": [a["path"], a["body"] == data, len(a["body"])],
                                  "requests": [b["path"], b["body"] == data, len(b["body"])]}))
                """);
        assertThat(r.exitCode()).as(r.stderr()).isZero();
        JsonNode out = lastLine(r);
        assertThat(out.get("curl").toString()).isEqualTo("[\"/v1/chunked-curl\",true,200000]");
        assertThat(out.get("requests").toString()).isEqualTo("[\"/v1/chunked-requests\",true,200000]");
        assertThat(r.toolCalls().orElseThrow().apiCalls()).extracting(ApiCall::path, ApiCall::status, ApiCall::bytesOut)
                .containsExactly(org.assertj.core.groups.Tuple.tuple("/chunked-curl", 200, 200000L),
                        org.assertj.core.groups.Tuple.tuple("/chunked-requests", 200, 200000L));
    }

    @Test
    void nodeFetchAndTheNodeHelperReachTheApi() throws Exception {
        ExecutionResult r = run("javascript", """
                (async () => {
                  const res = await fetch(process.env.CODE_APIS_URL + '/fx/node?y=2', { headers: { Authorization: 'Bearer mine' } });
                  const { apis } = require('mcp-tools');
                  const helper = await apis.fx.post('/node-helper', { b: 2 });
                  let refused;
                  try { await apis.fx.delete('/z'); } catch (e) { refused = [e.name, e.status]; }
                  // a stream body: fetch sends it chunked
                  const parts = ['first part, ', 'second part'];
                  const stream = new ReadableStream({ pull(c) { parts.length ? c.enqueue(new TextEncoder().encode(parts.shift())) : c.close(); } });
                  const streamed = await (await fetch(process.env.CODE_APIS_URL + '/fx/node-stream',
                      { method: 'POST', body: stream, duplex: 'half', headers: { 'Content-Type': 'text/plain' } })).json();
                  console.log(JSON.stringify({ status: res.status, body: await res.json(), helper, refused, streamed: streamed.body }));
                })();
                """);
        assertThat(r.exitCode()).as(r.stderr()).isZero();
        JsonNode out = lastLine(r);
        assertThat(out.get("status").asInt()).isEqualTo(200);
        assertThat(out.get("body").get("authorized").asBoolean()).isTrue();
        assertThat(out.get("body").get("path").asString()).isEqualTo("/v1/node");
        assertThat(out.get("helper").get("authorized").asBoolean()).isTrue();
        assertThat(out.get("helper").get("body").asString()).isEqualTo("{\"b\":2}");
        assertThat(out.get("refused").toString()).isEqualTo("[\"ApiError\",403]");
        assertThat(out.get("streamed").asString()).isEqualTo("first part, second part");
        assertThat(SEEN).extracting(s -> s.get(0)).contains("/v1/node?y=2", "/v1/node-helper");
    }
}
