package dev.codeexec.local;

import com.sun.net.httpserver.HttpExchange;
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
import dev.codeexec.lang.Languages;
import dev.codeexec.sandbox.Sandbox;
import dev.codeexec.testing.Requires;
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
import java.security.MessageDigest;
import java.util.ArrayList;
import java.util.Base64;
import java.util.HexFormat;
import java.util.List;
import java.util.Optional;
import java.util.Queue;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.zip.ZipEntry;
import java.util.zip.ZipOutputStream;

import static dev.codeexec.local.TestSupport.await;
import static org.assertj.core.api.Assertions.assertThat;

/**
 * Clients that send a token given in a URL as Basic credentials, through a host the proxy intercepts, against the
 * real bwrap sandbox: git over HTTPS (the dumb protocol: a static server over a bare repository after
 * {@code git update-server-info}) and pip (a PEP 503 simple index with one wheel the test builds). Both fixtures
 * are HTTPS servers on 127.0.0.1 (names pinned with EGRESS_RESOLVE, certificates of a throwaway CA the proxy trusts
 * through EGRESS_UPSTREAM_CA_FILE) that answer 401 with a Basic challenge unless a request carries the real value,
 * so a clone or a download that lands shows the value reached them; the clients trust the server's CA through the
 * variables a run with egress gets (GIT_SSL_CAINFO, PIP_CERT), nothing else set.
 */
@Tag("sandbox")
@Tag("slow")
@Timeout(value = 240, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
class SecretClientsTest {

    static final String GIT_VALUE = "ghs_real_git_value_0123456789";
    static final String PYPI_VALUE = "pypi-AgEIcHlwaS5vcmc_real_value";
    static final String README = "hello from the fixture repository";
    static final String WHEEL = "tinypkg-1.0-py3-none-any.whl";
    static LocalExecutor executor;
    static Sandbox sandbox;
    static Path dataDir;
    static final List<HttpsServer> fixtures = new ArrayList<>();
    /** The Authorization field of every request each fixture got ("-" when none): what reached the network. */
    static final Queue<String> gitSeen = new ConcurrentLinkedQueue<>();
    static final Queue<String> pypiSeen = new ConcurrentLinkedQueue<>();
    static int gitPort;
    static int pypiPort;
    static byte[] wheel;

    @BeforeAll
    static void setUp() throws Exception {
        Requires.that(Files.isExecutable(Path.of("/usr/bin/git")), "git (scripts/install-deps.sh installs it)");
        dataDir = Files.createTempDirectory("code-exec-secret-clients-test-");
        Files.setPosixFilePermissions(dataDir, java.nio.file.attribute.PosixFilePermissions.fromString("rwx--x--x"));
        Path fixtureCaDir = Files.createDirectory(dataDir.resolve("fixture-ca"));
        InterceptCa fixtureCa = InterceptCa.loadOrCreate(fixtureCaDir);
        Path repo = bareRepository(dataDir.resolve("git"));
        wheel = wheel();
        gitPort = fixture(fixtureCa, "git.test", ex -> serveRepository(ex, repo), gitSeen,
                List.of("Basic " + base64("x-access-token:" + GIT_VALUE), "Bearer " + GIT_VALUE));
        pypiPort = fixture(fixtureCa, "pypi.test", SecretClientsTest::serveIndex, pypiSeen,
                List.of("Basic " + base64("__token__:" + PYPI_VALUE)));
        Path secrets = dataDir.resolve("secrets.json");
        Files.writeString(secrets, """
                {"GITHUB_TOKEN": {"value": "%s", "hosts": ["git.test:%d"]},
                 "PYPI_TOKEN": {"value": "%s", "hosts": ["pypi.test:%d"]}}
                """.formatted(GIT_VALUE, gitPort, PYPI_VALUE, pypiPort));
        Config config = TestSupport.config("DATA_DIR", dataDir.toString(), "WARM_POOL", "off", "EGRESS", "on",
                "EGRESS_ALLOW", "git.test:" + gitPort + ",pypi.test:" + pypiPort,
                "EGRESS_ALLOW_CIDRS", "127.0.0.1/32",
                "EGRESS_RESOLVE", "git.test=127.0.0.1,pypi.test=127.0.0.1",
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

    interface Handler {
        void handle(HttpExchange ex) throws IOException;
    }

    /** An HTTPS fixture for {@code name}: 401 with a Basic challenge unless the request carries one of {@code accepted}. */
    static int fixture(InterceptCa ca, String name, Handler handler, Queue<String> seen, List<String> accepted)
            throws Exception {
        HttpsServer s = HttpsServer.create(new InetSocketAddress(InetAddress.ofLiteral("127.0.0.1"), 0), 50);
        s.setHttpsConfigurator(new HttpsConfigurator(ca.serverContext(name)));
        s.setExecutor(Executors.newVirtualThreadPerTaskExecutor());
        s.createContext("/", ex -> {
            try (ex) {
                String auth = Optional.ofNullable(ex.getRequestHeaders().getFirst("Authorization")).orElse("-");
                seen.add(auth);
                if (!accepted.contains(auth)) {
                    ex.getResponseHeaders().add("WWW-Authenticate", "Basic realm=\"" + name + "\"");
                    ex.sendResponseHeaders(401, -1);
                    return;
                }
                handler.handle(ex);
            }
        });
        s.start();
        fixtures.add(s);
        return s.getAddress().getPort();
    }

    static void send(HttpExchange ex, int status, String type, byte[] body) throws IOException {
        ex.getResponseHeaders().add("Content-Type", type);
        ex.sendResponseHeaders(status, body.length == 0 ? -1 : body.length);
        if (body.length > 0) {
            try (OutputStream o = ex.getResponseBody()) {
                o.write(body);
            }
        }
    }

    /** git's dumb protocol: the bare repository's files as they are (info/refs, HEAD, objects/...). */
    static void serveRepository(HttpExchange ex, Path repo) throws IOException {
        String path = ex.getRequestURI().getPath();
        Path file = path.startsWith("/repo.git/") ? repo.resolve(path.substring("/repo.git/".length())).normalize() : null;
        if (file == null || !file.startsWith(repo) || !Files.isRegularFile(file)) {
            send(ex, 404, "text/plain", new byte[0]);
            return;
        }
        send(ex, 200, path.endsWith("/info/refs") ? "text/plain" : "application/octet-stream", Files.readAllBytes(file));
    }

    /** A PEP 503 simple index with one project and its one wheel. */
    static void serveIndex(HttpExchange ex) throws IOException {
        String path = ex.getRequestURI().getPath();
        if (path.equals("/simple/tinypkg/")) {
            String sha = HexFormat.of().formatHex(sha256(wheel));
            send(ex, 200, "text/html", ("<!DOCTYPE html><html><body><a href=\"/files/" + WHEEL + "#sha256=" + sha + "\">"
                    + WHEEL + "</a></body></html>").getBytes(StandardCharsets.UTF_8));
        } else if (path.equals("/files/" + WHEEL)) {
            send(ex, 200, "application/octet-stream", wheel);
        } else {
            send(ex, 404, "text/plain", new byte[0]);
        }
    }

    /** A bare repository with one commit of README, prepared for the dumb protocol. */
    static Path bareRepository(Path dir) throws Exception {
        Path work = dir.resolve("work");
        Files.createDirectories(work);
        Files.writeString(work.resolve("README"), README + "\n");
        git(work, "init", "-q", "-b", "main", ".");
        git(work, "add", "README");
        git(work, "-c", "user.name=test", "-c", "user.email=test@example.invalid", "commit", "-q", "-m", "init");
        Path bare = dir.resolve("repo.git");
        git(dir, "clone", "-q", "--bare", work.toString(), bare.toString());
        git(bare, "update-server-info");
        return bare;
    }

    static void git(Path in, String... args) throws Exception {
        List<String> cmd = new ArrayList<>(List.of("/usr/bin/git"));
        cmd.addAll(List.of(args));
        Process p = new ProcessBuilder(cmd).directory(in.toFile()).redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertThat(p.waitFor(60, TimeUnit.SECONDS)).isTrue();
        assertThat(p.exitValue()).as("git " + String.join(" ", args) + ": " + out).isZero();
    }

    /** A wheel with one module and the metadata pip reads: tinypkg 1.0. */
    static byte[] wheel() throws IOException {
        ByteArrayOutputStream b = new ByteArrayOutputStream();
        try (ZipOutputStream z = new ZipOutputStream(b)) {
            String info = "tinypkg-1.0.dist-info/";
            String[][] files = {
                    {"tinypkg/__init__.py", "VALUE = 1\n"},
                    {info + "METADATA", "Metadata-Version: 2.1\nName: tinypkg\nVersion: 1.0\n"},
                    {info + "WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"},
                    {info + "RECORD", "tinypkg/__init__.py,,\n" + info + "METADATA,,\n" + info + "WHEEL,,\n" + info + "RECORD,,\n"}};
            for (String[] f : files) {
                z.putNextEntry(new ZipEntry(f[0]));
                z.write(f[1].getBytes(StandardCharsets.UTF_8));
                z.closeEntry();
            }
        }
        return b.toByteArray();
    }

    static byte[] sha256(byte[] b) {
        try {
            return MessageDigest.getInstance("SHA-256").digest(b);
        } catch (java.security.NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
    }

    static String base64(String s) {
        return Base64.getEncoder().encodeToString(s.getBytes(StandardCharsets.UTF_8));
    }

    private static ExecutionResult run(String code) throws Exception {
        ExecutionRequest r = TestSupport.request(executor.config, "bash", code).toBuilder()
                .audit(new ExecutionRequest.AuditInfo(Optional.of("team"), Optional.empty(), Optional.empty()))
                .egress(EgressPolicy.parse("git.test:" + gitPort + ",pypi.test:" + pypiPort), false).build();
        ExecutionResult result = await(executor.submit(r, OutputListener.NONE));
        assertThat(result.stdout() + result.stderr()).doesNotContain(GIT_VALUE).doesNotContain(PYPI_VALUE);
        return result;
    }

    private static void assertSecretRecorded(ExecutionResult r, String host, String secret) {
        assertThat(r.network().orElseThrow().connections()).filteredOn(c -> c.host().equals(host))
                .isNotEmpty()
                .allSatisfy(c -> assertThat(c.decision()).isEqualTo(ConnectionRecord.ALLOWED))
                .anySatisfy(c -> assertThat(c.secrets()).containsExactly(secret));
    }

    @Test
    void gitClonesOverHttpsWithThePlaceholderInTheUrlAndTheHostGetsTheRealValue() throws Exception {
        gitSeen.clear();
        ExecutionResult r = run("""
                export GIT_TERMINAL_PROMPT=0
                git clone -q https://x-access-token:$GITHUB_TOKEN@git.test:%d/repo.git /tmp/clone
                cat /tmp/clone/README
                """.formatted(gitPort));
        assertThat(r.exitCode()).as(r.stdout() + r.stderr()).isZero();
        assertThat(r.stdout()).contains(README);
        assertThat(gitSeen).contains("Basic " + base64("x-access-token:" + GIT_VALUE))
                .allSatisfy(a -> assertThat(a).doesNotContain("cxs_"));
        assertSecretRecorded(r, "git.test", "GITHUB_TOKEN");
    }

    @Test
    void gitClonesWithThePlaceholderInAnExtraHeader() throws Exception {
        gitSeen.clear();
        ExecutionResult r = run("""
                export GIT_TERMINAL_PROMPT=0
                git -c http.extraHeader="Authorization: Bearer $GITHUB_TOKEN" clone -q https://git.test:%d/repo.git /tmp/clone
                cat /tmp/clone/README
                """.formatted(gitPort));
        assertThat(r.exitCode()).as(r.stdout() + r.stderr()).isZero();
        assertThat(r.stdout()).contains(README);
        assertThat(gitSeen).isNotEmpty().allSatisfy(a -> assertThat(a).isEqualTo("Bearer " + GIT_VALUE));
        assertSecretRecorded(r, "git.test", "GITHUB_TOKEN");
    }

    @Test
    void pipDownloadsFromAnIndexUrlWithThePlaceholderAndTheIndexGetsTheRealValue() throws Exception {
        pypiSeen.clear();
        ExecutionResult r = run("""
                /usr/bin/python3 -m pip download --no-deps --no-cache-dir --disable-pip-version-check -q -d /tmp/dl \\
                    --index-url https://__token__:$PYPI_TOKEN@pypi.test:%d/simple/ tinypkg
                ls /tmp/dl
                """.formatted(pypiPort));
        assertThat(r.exitCode()).as(r.stdout() + r.stderr()).isZero();
        assertThat(r.stdout()).contains(WHEEL);
        assertThat(pypiSeen).contains("Basic " + base64("__token__:" + PYPI_VALUE))
                .allSatisfy(a -> assertThat(a).doesNotContain("cxs_"));
        assertSecretRecorded(r, "pypi.test", "PYPI_TOKEN");
    }

    @Test
    void aPlaceholderInBasicCredentialsForAnotherSecretsHostIsRefusedAndReachesNothing() throws Exception {
        pypiSeen.clear();
        ExecutionResult r = run("""
                curl -sS https://__token__:$GITHUB_TOKEN@pypi.test:%d/simple/tinypkg/; echo
                """.formatted(pypiPort));
        assertThat(r.stdout()).contains("refused (secret_not_allowed): the placeholder of GITHUB_TOKEN may only be sent to git.test:" + gitPort);
        assertThat(pypiSeen).isEmpty();
        assertThat(r.network().orElseThrow().counts()).containsEntry("refused/secret_not_allowed", 1);
    }
}
