package dev.codeexec.local;

import com.sun.net.httpserver.HttpsConfigurator;
import com.sun.net.httpserver.HttpsServer;
import dev.codeexec.config.Config;
import dev.codeexec.config.DataDir;
import dev.codeexec.egress.ConnectionRecord;
import dev.codeexec.egress.EgressPolicy;
import dev.codeexec.egress.InterceptCa;
import dev.codeexec.engine.ExecutionRequest;
import dev.codeexec.engine.ExecutionResult;
import dev.codeexec.engine.OutputListener;
import dev.codeexec.engine.SessionRef;
import dev.codeexec.lang.Languages;
import dev.codeexec.sandbox.Sandbox;
import dev.codeexec.testing.LogCapture;
import dev.codeexec.testing.Poll;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.Queue;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.Executors;
import java.util.zip.GZIPOutputStream;

import static dev.codeexec.local.TestSupport.await;
import static org.assertj.core.api.Assertions.assertThat;

/**
 * The proxy puts a placeholder secret's real value in on the way to the secret's host, against the real bwrap
 * sandbox, curl and Python: the fixtures are HTTPS servers on 127.0.0.1 (names pinned with EGRESS_RESOLVE) whose
 * certificates come from a throwaway CA the proxy trusts through EGRESS_UPSTREAM_CA_FILE; the program trusts the
 * server's own CA through the variables a run with egress gets. A fixture that echoes the header returns the
 * placeholder to the program, never the value (also to a client that asks for gzip: the host is asked for an
 * uncompressed answer, and a compressed text body is not passed on); a placeholder sent elsewhere is refused; a host whose certificate
 * the proxy cannot verify gets nothing. A session holds one placeholder for its interpreter's life, swapped in each
 * call, and gets a new one when it is reset.
 */
@Tag("sandbox")
@Tag("slow")
@Timeout(value = 240, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
class SecretSwapTest {

    static final String VALUE = "ghp_the_real_value_0123456789";
    static final String OTHER_VALUE = "other-real-value";
    static final int BIG = 3 << 19;
    static LocalExecutor executor;
    static Sandbox sandbox;
    static Path dataDir;
    static final List<HttpsServer> fixtures = new ArrayList<>();
    /** The Authorization headers each fixture received: what reached the network. */
    static final Queue<String> github = new ConcurrentLinkedQueue<>();
    static final Queue<String> other = new ConcurrentLinkedQueue<>();
    static final Queue<String> bad = new ConcurrentLinkedQueue<>();
    /** The Accept-Encoding of every request the fixtures received ("null" when none). */
    static final Queue<String> acceptEncodings = new ConcurrentLinkedQueue<>();
    static int githubPort;
    static int otherPort;
    static int badPort;

    /**
     * An HTTPS fixture for {@code name} with a certificate of {@code ca}, echoing the Authorization it gets: gzipped
     * whenever the request accepts gzip (as most servers do), and under /always-gzip whatever the request accepts.
     */
    static int fixture(InterceptCa ca, String name, Queue<String> seen) throws Exception {
        HttpsServer s = HttpsServer.create(new InetSocketAddress(InetAddress.ofLiteral("127.0.0.1"), 0), 50);
        s.setHttpsConfigurator(new HttpsConfigurator(ca.serverContext(name)));
        s.setExecutor(Executors.newVirtualThreadPerTaskExecutor());
        s.createContext("/", ex -> {
            String auth = String.valueOf(ex.getRequestHeaders().getFirst("Authorization"));
            String accepts = String.valueOf(ex.getRequestHeaders().getFirst("Accept-Encoding"));
            seen.add(auth);
            acceptEncodings.add(accepts);
            String echo = "you sent " + auth + "\n";
            // /big: a text body past the proxy's scan bound (1 MiB), with a Content-Length
            byte[] body = (ex.getRequestURI().getPath().startsWith("/big") ? echo + "x".repeat(BIG) + "\n" : echo)
                    .getBytes(StandardCharsets.UTF_8);
            if (accepts.contains("gzip") || ex.getRequestURI().getPath().startsWith("/always-gzip")) {
                body = gzip(body);
                ex.getResponseHeaders().add("Content-Encoding", "gzip");
            }
            ex.getResponseHeaders().add("Content-Type", "text/plain");
            ex.getResponseHeaders().add("X-Echo", auth);
            // /chunked: the JDK's server sends a body of unknown length chunked
            ex.sendResponseHeaders(200, ex.getRequestURI().getPath().startsWith("/chunked") ? 0 : body.length);
            try (OutputStream o = ex.getResponseBody()) {
                o.write(body);
            }
        });
        s.start();
        fixtures.add(s);
        return s.getAddress().getPort();
    }

    static byte[] gzip(byte[] b) throws IOException {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        try (GZIPOutputStream z = new GZIPOutputStream(out)) {
            z.write(b);
        }
        return out.toByteArray();
    }

    @BeforeAll
    static void setUp() throws Exception {
        dataDir = Files.createTempDirectory("code-exec-secret-swap-test-");
        Files.setPosixFilePermissions(dataDir, java.nio.file.attribute.PosixFilePermissions.fromString("rwx--x--x"));
        Path fixtureCaDir = Files.createDirectory(dataDir.resolve("fixture-ca"));
        InterceptCa fixtureCa = InterceptCa.loadOrCreate(fixtureCaDir);
        InterceptCa untrusted = InterceptCa.loadOrCreate(Files.createDirectory(dataDir.resolve("untrusted-ca")));
        githubPort = fixture(fixtureCa, "api.github.test", github);
        otherPort = fixture(fixtureCa, "other.test", other);
        badPort = fixture(untrusted, "bad.test", bad);
        Path secrets = dataDir.resolve("secrets.json");
        Files.writeString(secrets, """
                {"GITHUB_TOKEN": {"value": "%s", "hosts": ["api.github.test:%d"]},
                 "OTHER_TOKEN": {"value": "%s", "hosts": ["other.test:%d", "bad.test:%d"]}}
                """.formatted(VALUE, githubPort, OTHER_VALUE, otherPort, badPort));
        Config config = TestSupport.config("DATA_DIR", dataDir.toString(), "WARM_POOL", "off", "EGRESS", "on",
                "EGRESS_ALLOW", "api.github.test:" + githubPort + ",other.test:" + otherPort + ",bad.test:" + badPort,
                "EGRESS_ALLOW_CIDRS", "127.0.0.1/32",
                "EGRESS_RESOLVE", "api.github.test=127.0.0.1,other.test=127.0.0.1,bad.test=127.0.0.1",
                "EGRESS_SECRETS_FILE", secrets.toString(),
                "EGRESS_UPSTREAM_CA_FILE", fixtureCaDir.resolve("ca.pem").toString());
        sandbox = TestSandboxes.required(config, Sandbox::supportsControl, "a sandbox with a control channel (bwrap)");
        executor = new LocalExecutor(config, sandbox, Languages.load());
    }

    @AfterAll
    static void tearDown() throws Exception {
        if (executor != null) {
            executor.close();
            sandbox.close();
        }
        fixtures.forEach(f -> f.stop(0));
        if (dataDir != null) DataDir.deleteTree(dataDir);
    }

    private static ExecutionResult run(String language, String code) throws Exception {
        ExecutionRequest r = TestSupport.request(executor.config, language, code).toBuilder()
                .audit(new ExecutionRequest.AuditInfo(Optional.of("team"), Optional.empty(), Optional.empty()))
                .egress(EgressPolicy.parse("api.github.test:" + githubPort + ",other.test:" + otherPort + ",bad.test:" + badPort),
                        false).build();
        ExecutionResult result = await(executor.submit(r, OutputListener.NONE));
        assertThat(result.stdout() + result.stderr()).doesNotContain(VALUE).doesNotContain(OTHER_VALUE);
        return result;
    }

    @Test
    void curlWithThePlaceholderReachesTheHostWithTheRealValueAndReadsBackOnlyThePlaceholder() throws Exception {
        github.clear();
        ExecutionResult r;
        try (LogCapture audit = LogCapture.named("audit")) {
            r = run("bash", """
                    curl -sS -D - -H "Authorization: Bearer $GITHUB_TOKEN" https://api.github.test:%d/user
                    curl -sS -H "Authorization: Bearer $GITHUB_TOKEN" https://api.github.test:%d/chunked | sed 's/^/chunked: /'
                    echo "token=$GITHUB_TOKEN"
                    """.formatted(githubPort, githubPort));
            // the connection's egress line names the secret put in, never its value
            Poll.until("the audit line of the connection with its secret", () -> audit.containsAll("egress run=",
                    " tenant=team host=api.github.test port=" + githubPort + " decision=allowed ", " secrets=GITHUB_TOKEN"));
            assertThat(audit.contains(VALUE)).isFalse();
        }
        assertThat(r.exitCode()).as(r.stderr()).isZero();
        assertThat(github).containsExactly("Bearer " + VALUE, "Bearer " + VALUE);
        String token = r.stdout().lines().filter(l -> l.startsWith("token=")).findFirst().orElseThrow().substring(6);
        assertThat(token).matches("cxs_[0-9a-f]{40}");
        assertThat(r.stdout()).contains("you sent Bearer " + token).containsIgnoringCase("x-echo: Bearer " + token)
                .contains("chunked: you sent Bearer " + token);
        ConnectionRecord c = r.network().orElseThrow().connections().stream()
                .filter(x -> x.host().equals("api.github.test")).findFirst().orElseThrow();
        assertThat(c.decision()).isEqualTo(ConnectionRecord.ALLOWED);
        assertThat(c.secrets()).containsExactly("GITHUB_TOKEN");
    }

    @Test
    void aClientAskingForGzipGetsTheEchoUncompressedAndScrubbedAndACompressedTextBodyIsNotPassedOn() throws Exception {
        github.clear();
        acceptEncodings.clear();
        ExecutionResult r = run("bash", """
                curl -sS --compressed -H "Authorization: Bearer $GITHUB_TOKEN" https://api.github.test:%d/gzip | sed 's/^/curl: /'
                /usr/bin/python3 - <<'PY'
                import os, requests
                r = requests.get('https://api.github.test:%d/gzip', headers={'Authorization': 'Bearer ' + os.environ['GITHUB_TOKEN']})
                print('requests:', r.request.headers['Accept-Encoding'], '->', r.headers.get('Content-Encoding', 'none'), r.text.strip())
                PY
                curl -sS --compressed -H "Authorization: Bearer $GITHUB_TOKEN" https://api.github.test:%d/always-gzip; echo
                echo "token=$GITHUB_TOKEN"
                """.formatted(githubPort, githubPort, githubPort));
        assertThat(r.exitCode()).as(r.stderr()).isZero();
        String token = tokenIn(r);
        // what reached the host: the value, and a request for an uncompressed answer whatever the client asked for
        assertThat(github).containsExactly("Bearer " + VALUE, "Bearer " + VALUE, "Bearer " + VALUE);
        assertThat(acceptEncodings).containsExactly("identity", "identity", "identity");
        assertThat(r.stdout()).contains("curl: you sent Bearer " + token)
                .containsPattern("requests: [a-z, ]*gzip[a-z, ]* -> none you sent Bearer " + token)
                .contains("failed (encoded_response): api.github.test answered with a compressed body (gzip)");
        assertThat(r.network().orElseThrow().counts()).containsEntry("failed/encoded_response", 1);
    }

    @Test
    void aTextBodyLongerThanTheScanBoundHasItsFirstMiBScrubbedAndAContentLengthThatFitsIt() throws Exception {
        github.clear();
        ExecutionResult r = run("bash", """
                curl -sS -o /tmp/big -H "Authorization: Bearer $GITHUB_TOKEN" https://api.github.test:%d/big
                echo "curl=$?"
                head -n 1 /tmp/big
                echo "size=$(wc -c < /tmp/big)"
                echo "token=$GITHUB_TOKEN"
                """.formatted(githubPort));
        assertThat(r.exitCode()).as(r.stderr()).isZero();
        assertThat(github).containsExactly("Bearer " + VALUE);
        String token = tokenIn(r);
        String first = "you sent Bearer " + token + "\n";
        // curl checks the length against what arrived: a Content-Length left as the host sent it would not fit
        assertThat(r.stdout()).contains("curl=0\n" + first).contains("size=" + (first.length() + BIG + 1));
    }

    @Test
    void pythonRequestsKeepsItsConnectionAcrossRequestsAndEachGetsTheValue() throws Exception {
        github.clear();
        ExecutionResult r = run("python", """
                import os, http.client, ssl
                # HTTPS_PROXY as Python's own client takes it: a CONNECT tunnel kept for three requests
                c = http.client.HTTPSConnection('127.0.0.1', 3128, context=ssl.create_default_context())
                c.set_tunnel('api.github.test', %d)
                for i in range(3):
                    c.request('GET', '/n/%%d' %% i, headers={'Authorization': 'token ' + os.environ['GITHUB_TOKEN']})
                    print(c.getresponse().read().decode().strip())
                """.formatted(githubPort));
        assertThat(r.exitCode()).as(r.stderr()).isZero();
        assertThat(github).containsExactly("token " + VALUE, "token " + VALUE, "token " + VALUE);
        assertThat(r.stdout().lines()).hasSize(3).allSatisfy(l -> assertThat(l).matches("you sent token cxs_[0-9a-f]{40}"));
    }

    @Test
    void nodesFetchTrustsTheServersCaAndGetsThroughWithThePlaceholder() throws Exception {
        github.clear();
        ExecutionResult r = run("nodejs", """
                const res = await fetch('https://api.github.test:%d/node', {headers: {Authorization: 'Bearer ' + process.env.GITHUB_TOKEN}});
                console.log(res.status, (await res.text()).trim());
                """.formatted(githubPort));
        assertThat(r.exitCode()).as(r.stderr()).isZero();
        assertThat(github).containsExactly("Bearer " + VALUE);
        assertThat(r.stdout().strip()).matches("200 you sent Bearer cxs_[0-9a-f]{40}");
    }

    /** A call in the tenant's bash session "gh" that may reach the fixtures. */
    private static ExecutionResult sessionCall(String code) throws Exception {
        ExecutionRequest r = TestSupport.request(executor.config, "bash", code).inSession(new SessionRef("team", "gh"))
                .withEgress(EgressPolicy.parse("api.github.test:" + githubPort + ",other.test:" + otherPort), false);
        ExecutionResult result = await(executor.submit(r, OutputListener.NONE));
        assertThat(result.exitCode()).as(result.stderr()).isZero();
        assertThat(result.stdout() + result.stderr()).doesNotContain(VALUE).doesNotContain(OTHER_VALUE);
        return result;
    }

    private static String tokenIn(ExecutionResult r) {
        return r.stdout().lines().filter(l -> l.startsWith("token=")).findFirst().orElseThrow().substring(6);
    }

    @Test
    void aSessionHoldsOnePlaceholderForItsLifeEachCallGetsTheValueThroughAndARestartMakesANewOne() throws Exception {
        github.clear();
        String call = """
                curl -sS -H "Authorization: Bearer $GITHUB_TOKEN" https://api.github.test:%d/session; echo
                echo "token=$GITHUB_TOKEN"
                """.formatted(githubPort);
        try {
            ExecutionResult first = sessionCall(call);
            ExecutionResult second = sessionCall(call);
            String token = tokenIn(first);
            assertThat(token).matches("cxs_[0-9a-f]{40}");
            assertThat(tokenIn(second)).as("the same placeholder in the session's second call").isEqualTo(token);
            assertThat(github).containsExactly("Bearer " + VALUE, "Bearer " + VALUE);
            for (ExecutionResult r : List.of(first, second)) {
                assertThat(r.stdout()).contains("you sent Bearer " + token);
                assertThat(r.network().orElseThrow().connections()).filteredOn(c -> c.host().equals("api.github.test"))
                        .singleElement().satisfies(c -> assertThat(c.secrets()).containsExactly("GITHUB_TOKEN"));
            }

            // restarted in place: a new interpreter, a new placeholder; the old one is worth nothing now
            assertThat(executor.sessions().reset("team", "gh")).isTrue();
            ExecutionResult third = sessionCall("""
                    curl -sS -H "Authorization: Bearer $GITHUB_TOKEN" https://api.github.test:%d/session; echo
                    curl -sS -H "Authorization: Bearer %s" https://api.github.test:%d/old; echo
                    echo "token=$GITHUB_TOKEN"
                    """.formatted(githubPort, token, githubPort));
            String renewed = tokenIn(third);
            assertThat(renewed).matches("cxs_[0-9a-f]{40}").isNotEqualTo(token);
            assertThat(github).containsExactly("Bearer " + VALUE, "Bearer " + VALUE, "Bearer " + VALUE, "Bearer " + token);
        } finally {
            executor.sessions().close("team", "gh");
        }
    }

    @Test
    void aPlaceholderSentToAnotherSecretsHostOrInPlainHttpIsRefusedNamingTheSecret() throws Exception {
        other.clear();
        ExecutionResult r = run("bash", """
                curl -sS -H "Authorization: Bearer $GITHUB_TOKEN" https://other.test:%d/x; echo
                curl -sS -H "Authorization: Bearer $GITHUB_TOKEN" http://api.github.test:%d/x; echo
                """.formatted(otherPort, githubPort));
        assertThat(other).isEmpty();
        assertThat(r.stdout()).contains("refused (secret_not_allowed): the placeholder of GITHUB_TOKEN may only be sent to api.github.test:" + githubPort);
        assertThat(r.stdout()).contains("not in a plain http:// request");
        assertThat(r.network().orElseThrow().counts()).containsEntry("refused/secret_not_allowed", 2);
        assertThat(r.network().orElseThrow().connections()).filteredOn(c -> c.reason().equals("secret_not_allowed"))
                .extracting(ConnectionRecord::host, ConnectionRecord::port)
                .containsExactlyInAnyOrder(org.assertj.core.groups.Tuple.tuple("other.test", otherPort),
                        org.assertj.core.groups.Tuple.tuple("api.github.test", githubPort));
    }

    @Test
    void aSecretsHostWhoseCertificateTheProxyCannotVerifyGetsNothing() throws Exception {
        bad.clear();
        ExecutionResult r = run("bash", """
                curl -sS -H "Authorization: Bearer $OTHER_TOKEN" https://bad.test:%d/x; echo
                """.formatted(badPort));
        assertThat(bad).isEmpty();
        assertThat(r.stdout()).contains("failed (upstream_tls): bad.test:" + badPort + " failed the proxy's TLS check");
        assertThat(r.network().orElseThrow().counts()).containsEntry("failed/upstream_tls", 1);
    }
}
