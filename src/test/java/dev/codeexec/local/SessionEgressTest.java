package dev.codeexec.local;

import dev.codeexec.engine.ExecutionRequest;
import dev.codeexec.engine.ExecutionResult;
import dev.codeexec.engine.OutputListener;
import dev.codeexec.engine.SessionRef;
import dev.codeexec.lang.Languages;
import com.sun.net.httpserver.HttpServer;
import dev.codeexec.config.Config;
import dev.codeexec.config.DataDir;
import dev.codeexec.egress.ConnectionRecord;
import dev.codeexec.egress.EgressPolicy;
import dev.codeexec.egress.NetworkReport;
import dev.codeexec.sandbox.Sandbox;
import dev.codeexec.testing.LogCapture;
import dev.codeexec.testing.Poll;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;
import java.util.concurrent.Executors;
import java.util.concurrent.atomic.AtomicInteger;

import static dev.codeexec.local.TestSupport.await;
import static org.assertj.core.api.Assertions.assertThat;

/**
 * A session's network against the real bwrap sandbox and the egress proxy: it has network only while a call runs
 * (a thread the code leaves running is refused between calls), and each call gets its caller's allow-list as it is
 * now, so a tenant whose egress was revoked has none at its session's next call. The upstream is the test's own
 * HTTP server on 127.0.0.1, reached as fixture.test (EGRESS_RESOLVE, EGRESS_ALLOW_CIDRS); nothing else is reached.
 */
@Tag("sandbox")
@Timeout(value = 120, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
class SessionEgressTest {

    static LocalExecutor executor;
    static Sandbox sandbox;
    static Path dataDir;
    static HttpServer fixture;
    /** Requests the fixture has answered: what reached the network, whatever any record says. */
    static final AtomicInteger SERVED = new AtomicInteger();
    static EgressPolicy allowed;
    static String url;

    @BeforeAll
    static void setUp() throws Exception {
        fixture = HttpServer.create(new InetSocketAddress(InetAddress.ofLiteral("127.0.0.1"), 0), 50);
        fixture.setExecutor(Executors.newVirtualThreadPerTaskExecutor());
        fixture.createContext("/", ex -> {
            SERVED.incrementAndGet();
            byte[] body = "pong".getBytes(StandardCharsets.UTF_8);
            ex.sendResponseHeaders(200, body.length);
            try (OutputStream o = ex.getResponseBody()) {
                o.write(body);
            }
        });
        fixture.start();
        int port = fixture.getAddress().getPort();
        url = "http://fixture.test:" + port + "/ping";
        allowed = EgressPolicy.parse("fixture.test:" + port);
        dataDir = Files.createTempDirectory("code-exec-session-egress-test-");
        Files.setPosixFilePermissions(dataDir, java.nio.file.attribute.PosixFilePermissions.fromString("rwx--x--x"));
        Config config = TestSupport.config("DATA_DIR", dataDir.toString(), "WARM_POOL", "off", "SESSION_IDLE_SECONDS", "3600",
                "EGRESS", "on", "EGRESS_ALLOW", "fixture.test:" + port, "EGRESS_ALLOW_CIDRS", "127.0.0.1/32",
                "EGRESS_RESOLVE", "fixture.test=127.0.0.1");
        sandbox = TestSandboxes.required(config, Sandbox::supportsControl, "a sandbox with a control channel (bwrap)");
        executor = new LocalExecutor(config, sandbox, Languages.load());
    }

    @AfterAll
    static void tearDown() throws Exception {
        if (executor != null) {
            executor.close();
            sandbox.close();
        }
        if (fixture != null) fixture.stop(0);
        if (dataDir != null) DataDir.deleteTree(dataDir);
    }

    /** A call in the tenant's session "nb" whose caller's allow-list is {@code callerPolicy} now. */
    private static ExecutionResult call(String tenant, String code, EgressPolicy callerPolicy) throws Exception {
        ExecutionRequest r = TestSupport.request(executor.config, "python", code)
                .inSession(new SessionRef(tenant, "nb")).withEgress(callerPolicy, false);
        return await(executor.submit(r, OutputListener.NONE));
    }

    private static long allowedIn(ExecutionResult r) {
        NetworkReport n = r.network().orElseThrow();
        return n.counts().entrySet().stream().filter(e -> e.getKey().startsWith(ConnectionRecord.ALLOWED + "/"))
                .mapToLong(Map.Entry::getValue).sum();
    }

    /** One request as the session's code makes it: the status, and for a refusal the proxy's reason. */
    private static final String FETCH = """
            import urllib.request, urllib.error
            def fetch():
                try:
                    with urllib.request.urlopen('%s', timeout=20) as r:
                        return str(r.status)
                except urllib.error.HTTPError as e:
                    return str(e.code) + ' ' + e.read().decode(errors='replace').strip()
                except Exception as e:
                    return type(e).__name__ + ' ' + str(e)
            """;

    @Test
    void aThreadLeftRunningBetweenCallsIsRefusedTheNetworkUntilTheNextCallAndNothingGoesUnrecorded() throws Exception {
        try (LogCapture audit = LogCapture.named("audit")) {
            int base = SERVED.get(); // the fixture is the class's: another test's requests came before
            ExecutionResult first = call("threads", FETCH.formatted(url) + """
                    import threading, time
                    seen = []
                    stop = threading.Event()
                    answered = threading.Event()
                    def keep_fetching():
                        while not stop.is_set():
                            seen.append(fetch())
                            answered.set()
                            time.sleep(0.02)
                    fetcher = threading.Thread(target=keep_fetching, daemon=True)
                    fetcher.start()
                    answered.wait(30)
                    seen[0]
                    """, allowed);
            assertThat(first.exitCode()).as(first.stderr()).isZero();
            assertThat(first.session().orElseThrow().result()).contains("'200'");
            long firstAllowed = allowedIn(first);
            assertThat(firstAllowed).isPositive();

            // Between the calls the thread goes on asking. Either the proxy refuses it (its audit line), or a request
            // gets through, which the fixture counts beyond what the first call's record allowed.
            Poll.until("the thread's request between the calls was refused, or reached the fixture",
                    () -> audit.contains("reason=between_calls") || SERVED.get() - base > firstAllowed);
            assertThat(SERVED.get() - base).as("requests that reached the fixture, against the allowed connections of the "
                    + "first call's record: more would be requests between the calls that no record has")
                    .isLessThanOrEqualTo((int) firstAllowed);

            ExecutionResult second = call("threads", """
                    stop.set()
                    fetcher.join(30)
                    print(not fetcher.is_alive())
                    print(next(s for s in seen if s.startswith('403')))
                    """, allowed);
            assertThat(second.exitCode()).as(second.stderr()).isZero();
            assertThat(second.stdout()).startsWith("True\n403 ").contains("between_calls")
                    .contains("network only while a call runs");
            // the thread has stopped: every request the fixture ever answered is in one of the two records
            assertThat(SERVED.get() - base).isLessThanOrEqualTo((int) (firstAllowed + allowedIn(second)));
        }
        executor.sessions().close("threads", "nb");
    }

    @Test
    void eachCallGetsItsCallersAllowListAsItIsNowSoARevokedTenantsSessionHasNoNetworkAtItsNextCall() throws Exception {
        ExecutionResult first = call("revoked", FETCH.formatted(url) + "fetch()", allowed);
        assertThat(first.session().orElseThrow().result()).contains("'200'");
        assertThat(first.network().orElseThrow().policy()).containsExactly(allowed.toString());

        // The key file now says egress=off for the tenant: the surface computes the caller's list as off.
        int before = SERVED.get();
        ExecutionResult revoked = call("revoked", "fetch()", EgressPolicy.OFF);
        assertThat(revoked.exitCode()).as(revoked.stderr()).isZero();
        assertThat(revoked.session().orElseThrow().created()).as("the same session, its state kept").isFalse();
        assertThat(revoked.session().orElseThrow().result()).hasValueSatisfying(v -> assertThat(v)
                .startsWith("'403").contains("egress_off"));
        assertThat(revoked.network().orElseThrow().policy()).isEmpty();
        assertThat(revoked.network().orElseThrow().counts()).containsEntry("refused/egress_off", 1);
        assertThat(SERVED.get()).as("nothing reached the fixture in the revoked call").isEqualTo(before);

        // The list given back: the session has its network again, never more than it was created with.
        ExecutionResult restored = call("revoked", "fetch()", EgressPolicy.parse(allowed + ",other.test"));
        assertThat(restored.session().orElseThrow().result()).contains("'200'");
        assertThat(restored.network().orElseThrow().policy()).containsExactly(allowed.toString());
        executor.sessions().close("revoked", "nb");
    }
}
