package dev.codeexec.local;

import dev.codeexec.engine.ExecutionException;
import dev.codeexec.engine.ExecutionRequest;
import dev.codeexec.engine.ExecutionResult;
import dev.codeexec.engine.Outcome;
import dev.codeexec.engine.SessionRef;
import com.sun.net.httpserver.HttpServer;
import dev.codeexec.packages.PackageSet;
import dev.codeexec.testing.Poll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.lang.reflect.Field;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.util.ArrayList;
import java.util.Base64;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Future;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.zip.ZipEntry;
import java.util.zip.ZipOutputStream;

import static dev.codeexec.local.TestSupport.await;
import static dev.codeexec.local.TestSupport.request;
import static org.assertj.core.api.Assertions.assertThat;

/**
 * Declared packages on the real sandbox, against a PEP 503 index on loopback serving wheels this test builds: the
 * install runs in a sandbox that reaches only the index (through the egress proxy, EGRESS=off for runs), the entry
 * is sealed and shared, a run with the same set reports {@code installMs} 0, user code cannot write into the
 * entry, concurrent first requests share one install, a failed install stores nothing.
 */
@Tag("sandbox")
class PackageInstallsTest {

    @RegisterExtension
    final RealExecutors executors = new RealExecutors();

    private HttpServer index;
    private final List<String> fetched = new CopyOnWriteArrayList<>();
    private final Map<String, Map<String, byte[]>> wheels = new LinkedHashMap<>(); // project → file name → bytes
    /** When set, the index answers no file download until it is counted down. */
    private volatile CountDownLatch holdDownloads;

    @BeforeEach
    void serveIndex() throws IOException {
        // a store of its own for each test (the test DATA_DIR outlives the executors)
        dev.codeexec.config.DataDir.deleteTree(Path.of(TestSupport.DATA_DIR, "packages"));
        wheel("tinylib", "1.0", "VERSION = '1.0'\n", List.of());
        wheel("tinylib", "2.0", "VERSION = '2.0'\nfrom tinydep import DEP\n", List.of("tinydep"));
        wheel("tinydep", "1.0", "DEP = 'dep'\n", List.of());
        index = HttpServer.create(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0), 0);
        index.createContext("/", ex -> {
            String path = ex.getRequestURI().getPath();
            fetched.add(path);
            byte[] body = null;
            String type = "text/html";
            if (path.startsWith("/simple/")) {
                String project = path.substring("/simple/".length()).replace("/", "");
                Map<String, byte[]> files = wheels.get(project);
                if (files != null) {
                    StringBuilder html = new StringBuilder("<!DOCTYPE html><html><body>\n");
                    files.forEach((name, bytes) -> html.append("<a href=\"/files/").append(name).append("#sha256=")
                            .append(sha256(bytes)).append("\">").append(name).append("</a>\n"));
                    body = html.append("</body></html>\n").toString().getBytes(StandardCharsets.UTF_8);
                }
            } else if (path.startsWith("/files/")) {
                CountDownLatch hold = holdDownloads;
                try {
                    if (hold != null && !hold.await(60, TimeUnit.SECONDS)) throw new IOException("never released");
                } catch (InterruptedException stopped) {
                    Thread.currentThread().interrupt();
                }
                String name = path.substring("/files/".length());
                for (Map<String, byte[]> files : wheels.values()) if (files.containsKey(name)) body = files.get(name);
                type = "application/octet-stream";
            }
            if (body == null) {
                ex.sendResponseHeaders(404, -1);
            } else {
                ex.getResponseHeaders().set("Content-Type", type);
                ex.sendResponseHeaders(200, body.length);
                ex.getResponseBody().write(body);
            }
            ex.close();
        });
        index.setExecutor(Executors.newVirtualThreadPerTaskExecutor());
        index.start();
    }

    @AfterEach
    void stopIndex() {
        index.stop(0);
    }

    private LocalExecutor executor(String... more) {
        List<String> pairs = new ArrayList<>(List.of("EGRESS_RESOLVE", "pypi.test=127.0.0.1", "EGRESS_ALLOW_CIDRS", "127.0.0.1/32",
                "PACKAGE_INDEX_PYTHON", "http://pypi.test:" + index.getAddress().getPort() + "/simple/",
                "MAX_CONCURRENT", "8", "WARM_POOL", "python=1"));
        pairs.addAll(List.of(more));
        return executors.start(pairs.toArray(String[]::new));
    }

    private static ExecutionRequest withPackages(LocalExecutor e, String code, String... specs) {
        return request(e.config, "python", code).withPackages(Optional.of(PackageSet.parse("python", List.of(specs))));
    }

    @Test
    void installedOnceThenFromTheStoreWithDependenciesAndTwoVersionsSideBySide() throws Exception {
        LocalExecutor e = executor();
        assertThat(((Map<?, ?>) e.runtimeInfo().get("packages")).get("available")).isEqualTo(true);
        ExecutionResult first = await(e.submit(withPackages(e, "import tinylib; print(tinylib.VERSION)", "tinylib==1.0"), null));
        assertThat(first.stdout()).as(first.stderr()).isEqualTo("1.0\n");
        assertThat(first.packages()).isPresent();
        assertThat(first.packages().get().resolved()).isEqualTo(Map.of("tinylib", "1.0"));
        assertThat(first.packages().get().installMs()).isPositive();

        int before = fetched.size();
        ExecutionResult again = await(e.submit(withPackages(e, "import tinylib; print(tinylib.VERSION)", "TinyLib == 1.0"), null));
        assertThat(again.stdout()).isEqualTo("1.0\n");
        assertThat(again.packages().get().installMs()).isZero();
        assertThat(fetched).hasSize(before); // the index was not asked again

        ExecutionResult two = await(e.submit(withPackages(e, "import tinylib; print(tinylib.VERSION, tinylib.DEP)", "tinylib==2.0"), null));
        assertThat(two.stdout()).as(two.stderr()).isEqualTo("2.0 dep\n");
        assertThat(two.packages().get().resolved()).isEqualTo(Map.of("tinylib", "2.0", "tinydep", "1.0"));
        assertThat(e.status().packageStore().orElseThrow().list()).hasSize(2);

        // without packages, nothing of either is importable
        ExecutionResult none = await(e.submit(request(e.config, "python", "import tinylib"), null));
        assertThat(none.stderr()).contains("ModuleNotFoundError");
        assertThat(none.packages()).isEmpty();
    }

    @SuppressWarnings("unchecked")
    private static Map<String, Object> pythonPool(LocalExecutor e) {
        return (Map<String, Object>) ((Map<String, Object>) e.warmPoolInfo().get("languages")).get("python");
    }

    @Test
    void aWarmSandboxServesARunWithPackagesTheSetMountedAtHandOut() throws Exception {
        LocalExecutor e = executor();
        await(e.submit(withPackages(e, "print(1)", "tinylib==1.0"), null)); // the install
        assertThat(e.awaitWarmPool(java.time.Duration.ofSeconds(30))).isTrue();
        assertThat(pythonPool(e).get("servesPackages")).isEqualTo(true);
        long served = ((Number) pythonPool(e).get("served")).longValue();
        ExecutionResult r = await(e.submit(withPackages(e, "import os, sys, tinylib\nprint(tinylib.VERSION, sys.path[1], "
                + "'HTTP_PROXY' in os.environ, os.path.exists('/run/codeexec/egress.sock'), sorted({l.split()[5].split(',')[0] "
                + "for l in open('/proc/self/mountinfo') if l.split()[4] == '/opt/codeexec-packages'}))", "tinylib==1.0"), null));
        // the install had its channel; the run (EGRESS=off) has none: no proxy variables, no socket; the set's entry,
        // mounted at hand-out, is read-only in the sandbox's mount table (finding 17 of the hardening issue)
        assertThat(r.stdout()).as(r.stderr()).isEqualTo("1.0 /opt/codeexec-packages/site False False ['ro']\n");
        assertThat(r.network()).isEmpty();
        assertThat(((Number) pythonPool(e).get("served")).longValue())
                .as("served by the pool").isEqualTo(served + 1);
        // the next warm sandbox has nothing mounted: a run without packages does not see the set
        assertThat(e.awaitWarmPool(java.time.Duration.ofSeconds(30))).isTrue();
        ExecutionResult plain = await(e.submit(request(e.config, "python", "import tinylib"), null));
        assertThat(plain.stderr()).contains("ModuleNotFoundError");
    }

    @Test
    void userCodeCannotChangeTheEntryAndTheSitePrecedesThePreinstalledLibraries() throws Exception {
        LocalExecutor e = executor();
        String code = """
                import os, sys, tinylib
                d = os.path.dirname(tinylib.__file__)
                for attempt in (lambda: open(os.path.join(d, "evil.py"), "w"),
                                lambda: open(tinylib.__file__, "a"),
                                lambda: os.chmod(d, 0o777),
                                lambda: os.rename(tinylib.__file__, tinylib.__file__ + ".x")):
                    try:
                        attempt()
                        print("WROTE")
                    except OSError as x:
                        print("refused", x.errno)
                site = [p for p in sys.path if p.endswith("/site")][0]
                print(sys.path.index(site) < min(i for i, p in enumerate(sys.path) if "dist-packages" in p))
                """;
        ExecutionResult r = await(e.submit(withPackages(e, code, "tinylib==1.0"), null));
        assertThat(r.stdout()).as(r.stderr()).doesNotContain("WROTE").contains("refused").endsWith("True\n");
        ExecutionResult again = await(e.submit(withPackages(e, "import tinylib, os; print(tinylib.VERSION, [f for f in os.listdir(os.path.dirname(tinylib.__file__)) if f != '__pycache__'])", "tinylib==1.0"), null));
        assertThat(again.stdout()).isEqualTo("1.0 ['__init__.py']\n");
        // on the host: root's, without any write bit
        Path entry = e.status().packageStore().orElseThrow().list().getFirst().key().transform(k ->
                Path.of(e.config.get(dev.codeexec.config.Config.DATA_DIR), "packages", k));
        assertThat(Files.getAttribute(entry.resolve("tree/site/tinylib/__init__.py"), "unix:uid")).isEqualTo(0);
        assertThat(Files.getPosixFilePermissions(entry.resolve("tree/site/tinylib")).toString()).doesNotContain("WRITE");
    }

    @Test
    void eightIdenticalFirstRequestsShareOneInstall() throws Exception {
        LocalExecutor e = executor();
        List<Future<ExecutionResult>> all = new ArrayList<>();
        CountDownLatch release = new CountDownLatch(1);
        holdDownloads = release; // the install cannot end before all eight requests wait for it
        try (var pool = Executors.newVirtualThreadPerTaskExecutor()) {
            for (int i = 0; i < 8; i++)
                all.add(pool.submit(() -> await(e.submit(withPackages(e, "import tinydep; print(tinydep.DEP)", "tinydep==1.0"), null))));
            Poll.until("the eight requests wait for one install", () -> waitingForInstalls(e) == 8);
            release.countDown();
        }
        int installed = 0;
        for (Future<ExecutionResult> f : all) {
            ExecutionResult r = f.get();
            assertThat(r.stdout()).as(r.stderr()).isEqualTo("dep\n");
            if (r.packages().get().installMs() > 0) installed++;
        }
        assertThat(installed).isEqualTo(1);
        assertThat(fetched.stream().filter(p -> p.startsWith("/files/tinydep")).count()).isEqualTo(1);
        assertThat(e.status().packageStore().orElseThrow().counts().get("installs")).isEqualTo(1L);
    }

    /**
     * Requests waiting now for installs under way in the executor's package store (test-only reflection: the store
     * tells only its own package).
     */
    private static int waitingForInstalls(LocalExecutor e) throws Exception {
        Object store = e.status().packageStore().orElseThrow();
        Field f = store.getClass().getDeclaredField("building");
        f.setAccessible(true);
        Map<?, ?> building = (Map<?, ?>) f.get(store);
        int n = 0;
        synchronized (building) { // the store's own lock of the table and its counts
            for (Object b : building.values()) {
                Field waiters = b.getClass().getDeclaredField("waiters");
                waiters.setAccessible(true);
                n += waiters.getInt(b);
            }
        }
        return n;
    }

    @Test
    void aFailedInstallIsTheRunsResultAndStoresNothing() throws Exception {
        LocalExecutor e = executor();
        ExecutionResult missing = await(e.submit(withPackages(e, "print(1)", "nosuchthing==1.0"), null));
        assertThat(missing.outcome()).isEqualTo(Outcome.FAILED_TO_START);
        assertThat(missing.stderr()).contains("could not be installed").contains("nosuchthing");
        ExecutionResult unsatisfiable = await(e.submit(withPackages(e, "print(1)", "tinylib>=9"), null));
        assertThat(unsatisfiable.outcome()).isEqualTo(Outcome.FAILED_TO_START);
        assertThat(unsatisfiable.stderr()).contains("tinylib");
        assertThat(e.status().packageStore().orElseThrow().list()).isEmpty();
        assertThat(e.status().packageStore().orElseThrow().counts().get("failures")).isEqualTo(2L);
    }

    @Test
    void anInstallOverTheDiskCapIsStopped() throws Exception {
        byte[] big = new byte[6 << 20];
        new java.util.Random(1).nextBytes(big);
        wheel("bigwheel", "1.0", "X = 1\n", List.of(), Map.of("bigwheel/blob.bin", big));
        LocalExecutor e = executor("INSTALL_DISK_MB", "4");
        ExecutionResult r = await(e.submit(withPackages(e, "print(1)", "bigwheel==1.0"), null));
        assertThat(r.outcome()).isEqualTo(Outcome.FAILED_TO_START);
        assertThat(r.stderr()).contains("INSTALL_DISK_MB");
        assertThat(e.status().packageStore().orElseThrow().list()).isEmpty();
    }

    @Test
    void aSessionKeepsItsSetRefusesAnotherAndTakesANewOneOnReset() throws Exception {
        LocalExecutor e = executor();
        SessionRef ref = new SessionRef("t1", "nb");
        ExecutionResult first = await(e.submit(withPackages(e, "import tinylib\nv = tinylib.VERSION\nprint(v)", "tinylib==1.0")
                .inSession(ref), null));
        assertThat(first.stdout()).as(first.stderr()).isEqualTo("1.0\n");
        assertThat(first.packages().get().installMs()).isPositive();
        // a later call without packages uses the session's; the state is there
        ExecutionResult second = await(e.submit(request(e.config, "python", "print(v, tinylib.VERSION)").inSession(ref), null));
        assertThat(second.stdout()).isEqualTo("1.0 1.0\n");
        assertThat(second.packages().get().installMs()).isZero();
        // the entry is held while the session lives: it cannot be removed
        String key = e.status().packageStore().orElseThrow().list().getFirst().key();
        assertThat(e.status().packageStore().orElseThrow().remove(key)).isFalse();
        // another set: refused, pointing at session_reset
        org.assertj.core.api.Assertions.assertThatThrownBy(() -> e.submit(withPackages(e, "print(1)", "tinylib==2.0").inSession(ref), null))
                .isInstanceOf(ExecutionException.InvalidRequest.class).hasMessageContaining("session_reset");
        // a reset with the new set
        assertThat(e.sessions().reset("t1", "nb", Optional.of(PackageSet.parse("python", List.of("tinylib==2.0"))))).isTrue();
        ExecutionResult after = await(e.submit(request(e.config, "python", "import tinylib; print(tinylib.VERSION, 'v' in dir())").inSession(ref), null));
        assertThat(after.stdout()).as(after.stderr()).isEqualTo("2.0 False\n");
        // the 1.0 entry is no longer held
        assertThat(e.status().packageStore().orElseThrow().remove(key)).isTrue();
        // a reset with a set that cannot be installed leaves the session as it was
        org.assertj.core.api.Assertions.assertThatThrownBy(() -> e.sessions().reset("t1", "nb",
                        Optional.of(PackageSet.parse("python", List.of("nosuchthing")))))
                .isInstanceOf(ExecutionException.InvalidRequest.class).hasMessageContaining("nosuchthing");
        ExecutionResult still = await(e.submit(request(e.config, "python", "print(tinylib.VERSION)").inSession(ref), null));
        assertThat(still.stdout()).isEqualTo("2.0\n");
    }

    @Test
    void evictionSkipsTheEntryASessionHolds() throws Exception {
        LocalExecutor e = executor("PACKAGE_STORE_MB", "1");
        SessionRef ref = new SessionRef("t1", "held");
        byte[] big = new byte[700 << 10];
        new java.util.Random(2).nextBytes(big);
        wheel("bigone", "1.0", "X = 1\n", List.of(), Map.of("bigone/blob.bin", big));
        wheel("bigtwo", "1.0", "X = 2\n", List.of(), Map.of("bigtwo/blob.bin", big));
        ExecutionResult held = await(e.submit(withPackages(e, "import bigone; print(bigone.X)", "bigone==1.0").inSession(ref), null));
        assertThat(held.stdout()).as(held.stderr()).isEqualTo("1\n");
        ExecutionResult other = await(e.submit(withPackages(e, "import bigtwo; print(bigtwo.X)", "bigtwo==1.0"), null));
        assertThat(other.stdout()).isEqualTo("2\n");
        ExecutionResult third = await(e.submit(withPackages(e, "import tinydep; print(tinydep.DEP)", "tinydep==1.0"), null));
        assertThat(third.stdout()).isEqualTo("dep\n");
        // over 1 MiB: bigtwo (not held, least recently used) went; bigone stays while the session holds it
        assertThat(e.status().packageStore().orElseThrow().list()).extracting(PackageStoreEntrySpecs::of)
                .contains("bigone==1.0").doesNotContain("bigtwo==1.0");
        assertThat(e.status().packageStore().orElseThrow().counts().get("evictions")).isPositive();
        ExecutionResult stillThere = await(e.submit(request(e.config, "python", "import bigone, os; print(os.path.getsize(os.path.join(os.path.dirname(bigone.__file__), 'blob.bin')))").inSession(ref), null));
        assertThat(stillThere.stdout()).isEqualTo((700 << 10) + "\n");
    }

    /** An entry's specs as one string. */
    private static final class PackageStoreEntrySpecs {
        static String of(dev.codeexec.packages.PackageStore.Entry e) {
            return String.join(",", e.specs());
        }
    }

    @Test
    void otherLanguagesAndUnavailableServersRefuseClearly() {
        LocalExecutor e = executor("PACKAGES", "off");
        assertThat(e.runtimeInfo().get("packages")).isEqualTo(Map.of("available", false, "reason", "PACKAGES=off on this server"));
        ExecutionRequest r = withPackages(e, "print(1)", "tinylib==1.0");
        org.assertj.core.api.Assertions.assertThatThrownBy(() -> e.submit(r, null))
                .isInstanceOf(ExecutionException.InvalidRequest.class).hasMessageContaining("PACKAGES=off");
        org.assertj.core.api.Assertions.assertThatThrownBy(() -> PackageSet.parse("bash", List.of("x")))
                .hasMessageContaining("bash takes none");
    }

    private void wheel(String name, String version, String init, List<String> requires) throws IOException {
        wheel(name, version, init, requires, Map.of());
    }

    /** A wheel written by hand: the module, METADATA (with Requires-Dist), WHEEL, RECORD. */
    private void wheel(String name, String version, String init, List<String> requires, Map<String, byte[]> extra)
            throws IOException {
        String dist = name + "-" + version + ".dist-info";
        Map<String, byte[]> files = new LinkedHashMap<>();
        files.put(name + "/__init__.py", init.getBytes(StandardCharsets.UTF_8));
        files.putAll(extra);
        StringBuilder meta = new StringBuilder("Metadata-Version: 2.1\nName: " + name + "\nVersion: " + version + "\n");
        for (String r : requires) meta.append("Requires-Dist: ").append(r).append('\n');
        files.put(dist + "/METADATA", meta.toString().getBytes(StandardCharsets.UTF_8));
        files.put(dist + "/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
                .getBytes(StandardCharsets.UTF_8));
        StringBuilder record = new StringBuilder();
        files.forEach((p, b) -> record.append(p).append(",sha256=").append(Base64.getUrlEncoder().withoutPadding()
                .encodeToString(digest(b))).append(',').append(b.length).append('\n'));
        record.append(dist).append("/RECORD,,\n");
        files.put(dist + "/RECORD", record.toString().getBytes(StandardCharsets.UTF_8));
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        try (ZipOutputStream zip = new ZipOutputStream(out)) {
            for (Map.Entry<String, byte[]> f : files.entrySet()) {
                zip.putNextEntry(new ZipEntry(f.getKey()));
                zip.write(f.getValue());
                zip.closeEntry();
            }
        }
        wheels.computeIfAbsent(name, k -> new LinkedHashMap<>()).put(name + "-" + version + "-py3-none-any.whl", out.toByteArray());
    }

    private static byte[] digest(byte[] b) {
        try {
            return MessageDigest.getInstance("SHA-256").digest(b);
        } catch (java.security.NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
    }

    private static String sha256(byte[] b) {
        return HexFormat.of().formatHex(digest(b));
    }
}
