package dev.codeexec.local;

import dev.codeexec.engine.ExecutionRequest;
import dev.codeexec.engine.ExecutionResult;
import dev.codeexec.engine.Outcome;
import dev.codeexec.engine.RunHandle;
import dev.codeexec.engine.SessionRef;
import dev.codeexec.packages.PackageSet;
import dev.codeexec.testing.Poll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.junit.jupiter.api.io.TempDir;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.stream.Stream;

import static dev.codeexec.local.TestSupport.await;
import static dev.codeexec.local.TestSupport.request;
import static org.assertj.core.api.Assertions.assertThat;

/**
 * Hostile npm install scripts against the real sandbox and a registry of the test's own on loopback: a package that
 * anyone could publish, whose {@code postinstall} attacks what the server does with the install's files after npm
 * ends. None may make the server (root) write, read or block on anything the script placed: the server follows no
 * link, opens no special file, reads every manifest with a bound, and an install that leaves anything outside its
 * packages fails with nothing stored.
 */
@Tag("sandbox")
class PackageInstallScriptsTest {

    @RegisterExtension
    final RealExecutors executors = new RealExecutors();

    @TempDir
    Path host;

    private NpmRegistry registry;

    @BeforeEach
    void start() throws Exception {
        // a store of its own for each test (the test DATA_DIR outlives the executors)
        dev.codeexec.config.DataDir.deleteTree(Path.of(TestSupport.DATA_DIR, "packages"));
        registry = NpmRegistry.http();
    }

    @AfterEach
    void stop() {
        registry.close();
    }

    private LocalExecutor executor(String... more) {
        List<String> pairs = new ArrayList<>(List.of("EGRESS_RESOLVE", "npm.test=127.0.0.1", "EGRESS_ALLOW_CIDRS", "127.0.0.1/32",
                "PACKAGE_REGISTRY_NPM", registry.url("npm.test"), "WARM_POOL", "off", "MAX_CONCURRENT", "4"));
        pairs.addAll(List.of(more));
        return executors.start(pairs.toArray(String[]::new));
    }

    private static ExecutionRequest withPackages(LocalExecutor e, String code, String... specs) {
        return request(e.config, "nodejs", code).withPackages(Optional.of(PackageSet.parse("nodejs", List.of(specs))));
    }

    /** A host file only root may read or write, as the server's victim. */
    private Path rootOnly(String name, String text) throws Exception {
        Path f = Files.writeString(host.resolve(name), text);
        Files.setPosixFilePermissions(f, PosixFilePermissions.fromString("rw-------"));
        return f;
    }

    private static String js(Object o) {
        return tools.jackson.databind.json.JsonMapper.shared().writeValueAsString(o);
    }

    private void assertNothingStored(LocalExecutor e) throws Exception {
        assertThat(e.status().packageStore().orElseThrow().list()).isEmpty();
        Poll.until("no half-built entry left", () -> {
            try (Stream<Path> s = Files.list(Path.of(TestSupport.DATA_DIR, "packages"))) {
                return s.findAny().isEmpty();
            }
        });
    }

    @Test
    void linksWhereTheServerWritesItsFilesRedirectNothing() throws Exception {
        // finding 1: `ln -s /host/file /work/.entry.json` made the root server overwrite (or create) a host file
        Path victim = rootOnly("victim", "root's own\n");
        Path created = host.resolve("created-by-the-server");
        Path hostDir = Files.createDirectories(host.resolve("dir"));
        Files.writeString(hostDir.resolve("keep"), "keep\n");
        registry.add("plant-links", "1.0.0", Map.of("index.js", "module.exports = 1;\n"), """
                const fs = require('fs');
                for (const at of ['/work/.entry.json', '/work/entry.json', '/work/node_modules/plant-links/.entry.json'])
                  fs.symlinkSync(%s, at);
                fs.symlinkSync(%s, '/work/node_modules/.package-lock.json.tmp');
                fs.rmSync('/work/.tmp', { recursive: true, force: true });
                fs.symlinkSync(%s, '/work/.tmp');
                """.formatted(js(victim.toString()), js(created.toString()), js(hostDir.toString())));
        LocalExecutor e = executor();
        ExecutionResult r = await(e.submit(withPackages(e, "console.log(1)", "plant-links@1.0.0"), null));
        assertThat(r.outcome()).as(r.stderr()).isEqualTo(Outcome.FAILED_TO_START);
        assertThat(r.stderr()).contains("could not be installed").contains("'.entry.json'");
        assertThat(Files.readString(victim)).isEqualTo("root's own\n");
        assertThat(PosixFilePermissions.toString(Files.getPosixFilePermissions(victim))).isEqualTo("rw-------");
        assertThat(created).doesNotExist();
        assertThat(hostDir.resolve("keep")).hasContent("keep");
        assertNothingStored(e);
    }

    @Test
    void aManifestLinkedToAHostFileIsNeverRead() throws Exception {
        // finding 2: the script's own package.json as a link to a root-only host file: its name and version came back
        // in the result's packages, a text file's first word in stderr
        Path json = rootOnly("secret.json", "{\"name\": \"stolen-name\", \"version\": \"6.6.6\"}\n");
        Path text = rootOnly("secret.txt", "TOPSECRETWORD and more\n");
        for (Path secret : List.of(json, text)) {
            String name = "steal-" + secret.getFileName().toString().replaceAll("[^a-z]", "");
            registry.add(name, "1.0.0", Map.of("index.js", "module.exports = 1;\n"), """
                    const fs = require('fs');
                    fs.unlinkSync(__dirname + '/package.json');
                    fs.symlinkSync(%s, __dirname + '/package.json');
                    """.formatted(js(secret.toString())));
        }
        LocalExecutor e = executor();
        for (String name : List.of("steal-secretjson", "steal-secrettxt")) {
            ExecutionResult r = await(e.submit(withPackages(e, "console.log(1)", name + "@1.0.0"), null));
            assertThat(r.outcome()).as(r.stderr()).isEqualTo(Outcome.FAILED_TO_START);
            assertThat(r.stderr()).contains("symbolic link").doesNotContain("stolen-name").doesNotContain("6.6.6")
                    .doesNotContain("TOPSECRETWORD");
            assertThat(r.packages()).isEmpty();
        }
        assertNothingStored(e);
    }

    @Test
    void aFifoOrDevZeroForAManifestFailsTheInstallAtOnceForEveryRequestOfTheSet() throws Exception {
        // findings 5 and 6: a FIFO blocked the server's read forever (and the requests waiting with it); a link to
        // /dev/zero filled the heap, and the Error left the other request waiting
        registry.add("fifo-pkg", "1.0.0", Map.of("index.js", "module.exports = 1;\n"), """
                const fs = require('fs');
                fs.unlinkSync(__dirname + '/package.json');
                require('child_process').execFileSync('mkfifo', [__dirname + '/package.json']);
                """);
        registry.add("zero-pkg", "1.0.0", Map.of("index.js", "module.exports = 1;\n"), """
                const fs = require('fs');
                fs.unlinkSync(__dirname + '/package.json');
                fs.symlinkSync('/dev/zero', __dirname + '/package.json');
                """);
        LocalExecutor e = executor("MAX_CONCURRENT", "2");
        for (String spec : List.of("fifo-pkg@1.0.0", "zero-pkg@1.0.0")) {
            RunHandle a = e.submit(withPackages(e, "console.log(1)", spec), null);
            RunHandle b = e.submit(withPackages(e, "console.log(2)", spec), null);
            for (RunHandle h : List.of(a, b)) {
                ExecutionResult r = await(h);
                assertThat(r.outcome()).as(spec + ": " + r.stderr()).isEqualTo(Outcome.FAILED_TO_START);
                assertThat(r.stderr()).containsAnyOf("not a regular file", "symbolic link", "a FIFO at");
            }
            // both slots are free again: a plain run goes at once
            assertThat(await(e.submit(request(e.config, "nodejs", "console.log('free')"), null)).stdout()).isEqualTo("free\n");
        }
        assertNothingStored(e);
    }

    @Test
    void aCancelledWaitForAHangingInstallFreesItsSlotAndTheLastOneStopsTheInstall() throws Exception {
        // finding 5: cancelling a call that waited for another's install did not free its slot
        registry.add("hang-pkg", "1.0.0", Map.of("index.js", "module.exports = 1;\n"), "setInterval(() => {}, 1000);\n");
        LocalExecutor e = executor("MAX_CONCURRENT", "2", "INSTALL_TIMEOUT_MS", "300000");
        RunHandle a = e.submit(withPackages(e, "console.log(1)", "hang-pkg@1.0.0"), null);
        Poll.until("the install's script runs", () -> !scriptProcesses("hang-pkg").isEmpty());
        RunHandle b = e.submit(withPackages(e, "console.log(2)", "hang-pkg@1.0.0"), null);
        RunHandle queued = e.submit(request(e.config, "nodejs", "console.log('third')"), null);
        Poll.until("the third run waits for a slot", () -> e.status().queued() == 1);
        b.cancel();
        assertThat(await(b).outcome()).isEqualTo(Outcome.CANCELLED);
        assertThat(await(queued).stdout()).as("the cancelled wait freed its slot").isEqualTo("third\n");
        assertThat(scriptProcesses("hang-pkg")).as("the install goes on for the first request").isNotEmpty();
        a.cancel();
        assertThat(await(a).outcome()).isEqualTo(Outcome.CANCELLED);
        Poll.until("no request waits: the install is stopped, its script gone", () -> scriptProcesses("hang-pkg").isEmpty());
        assertNothingStored(e);
    }

    @Test
    void aSessionCallCancelledWhileItsPackagesInstallEndsAtOnceAndStopsTheInstall() throws Exception {
        registry.add("hang-pkg", "1.0.0", Map.of("index.js", "module.exports = 1;\n"), "setInterval(() => {}, 1000);\n");
        LocalExecutor e = executor("INSTALL_TIMEOUT_MS", "300000");
        RunHandle call = e.submit(withPackages(e, "console.log(1)", "hang-pkg@1.0.0").inSession(new SessionRef("t1", "nb")), null);
        Poll.until("the install's script runs", () -> !scriptProcesses("hang-pkg").isEmpty());
        call.cancel();
        assertThat(await(call).outcome()).isEqualTo(Outcome.CANCELLED);
        Poll.until("the install is stopped, its script gone", () -> scriptProcesses("hang-pkg").isEmpty());
        // the slot's thread carries no interrupt into the next run
        assertThat(await(e.submit(request(e.config, "nodejs", "console.log('next')"), null)).stdout()).isEqualTo("next\n");
        assertNothingStored(e);
    }

    /** Host processes running a package's postinstall (the fixture puts the package's name on its command line). */
    private static List<Long> scriptProcesses(String name) {
        return ProcessHandle.allProcesses().filter(p -> {
            try {
                byte[] cmd = Files.readAllBytes(Path.of("/proc/" + p.pid() + "/cmdline"));
                return new String(cmd, StandardCharsets.UTF_8).contains("postinstall.js\0" + name);
            } catch (Exception gone) {
                return false;
            }
        }).map(ProcessHandle::pid).toList();
    }

    @Test
    void aScriptThatWritesOutsideItsPackageFailsTheInstall() throws Exception {
        // finding 15: files an install script wrote beside the packages stayed in the sealed entry
        registry.add("spill-top", "1.0.0", Map.of("index.js", "module.exports = 1;\n"),
                "require('fs').writeFileSync('/work/outside-1.txt', 'x');\n");
        registry.add("spill-sibling", "1.0.0", Map.of("index.js", "module.exports = 1;\n"),
                "require('fs').writeFileSync('/work/node_modules/.sibling', 'x');\n");
        LocalExecutor e = executor();
        for (String[] c : List.of(new String[] {"spill-top", "'outside-1.txt'"}, new String[] {"spill-sibling", "'node_modules/.sibling'"})) {
            ExecutionResult r = await(e.submit(withPackages(e, "console.log(1)", c[0] + "@1.0.0"), null));
            assertThat(r.outcome()).as(r.stderr()).isEqualTo(Outcome.FAILED_TO_START);
            assertThat(r.stderr()).contains(c[1]).contains("not part of an installed package");
        }
        assertNothingStored(e);
        // a well-behaved script (it writes inside its own package) installs, and what it wrote is there
        registry.add("tidy", "1.0.0", Map.of("index.js", "module.exports = require('fs').readFileSync(__dirname + '/built.txt', 'utf8');\n"),
                "require('fs').writeFileSync(__dirname + '/built.txt', 'built at install');\n");
        ExecutionResult ok = await(e.submit(withPackages(e, "console.log(require('tidy'))", "tidy@1.0.0"), null));
        assertThat(ok.stdout()).as(ok.stderr()).isEqualTo("built at install\n");
    }

    @Test
    void installsReadTheMachinesNpmConfigurationAsRunsDo() throws Exception {
        // finding 18: a run's npm read the machine's global npmrc (its cafile for a TLS-inspecting proxy), an
        // install's did not
        registry.add("report-config", "1.0.0", Map.of("index.js", "module.exports = require('fs').readFileSync(__dirname + '/seen.txt', 'utf8');\n"),
                "require('fs').writeFileSync(__dirname + '/seen.txt', String(process.env.npm_config_globalconfig) + ' '"
                        + " + String(process.env.npm_config_cafile));\n");
        LocalExecutor e = executor();
        String run = """
                const fs = require('fs'), cp = require('child_process');
                fs.mkdirSync('/tmp/p');
                fs.writeFileSync('/tmp/p/package.json', JSON.stringify({ name: 'p', version: '1.0.0', scripts: { t:
                  "node -e \\"process.stdout.write(String(process.env.npm_config_globalconfig) + ' ' + String(process.env.npm_config_cafile))\\"" } }));
                const seenByRun = cp.execFileSync('npm', ['run', '-s', 't'], { cwd: '/tmp/p', encoding: 'utf8',
                  env: { ...process.env, HOME: '/tmp', NPM_CONFIG_UPDATE_NOTIFIER: 'false' } });
                console.log(JSON.stringify({ install: require('report-config'), run: seenByRun }));
                """;
        ExecutionResult r = await(e.submit(withPackages(e, run, "report-config@1.0.0"), null));
        assertThat(r.outcome()).as(r.stderr()).isEqualTo(Outcome.EXITED);
        var seen = tools.jackson.databind.json.JsonMapper.shared().readTree(r.stdout());
        assertThat(seen.get("install").asString()).isEqualTo(seen.get("run").asString());
        assertThat(seen.get("install").asString()).doesNotContain("nonexistent");
    }

    @Test
    void anUntrustedRegistryCertificateFailsTheInstallAtOnceNamingEgressCaFile(@TempDir Path certs) throws Exception {
        // finding 18: an install behind a TLS-inspecting proxy whose CA it did not trust failed after npm's ~70 s of
        // retries, with npm's bare error
        registry.close();
        registry = NpmRegistry.https(certs);
        registry.add("left-pad", "1.3.0", Map.of("index.js", "module.exports = 1;\n"), null);
        LocalExecutor e = executor("PACKAGE_REGISTRY_NPM", registry.url("npm.test"));
        ExecutionResult r = await(e.submit(withPackages(e, "console.log(1)", "left-pad@1.3.0"), null));
        assertThat(r.outcome()).isEqualTo(Outcome.FAILED_TO_START);
        assertThat(r.stderr()).contains("EGRESS_CA_FILE").contains("not trusted");
        // npm's first attempt was its last: it retries twice more otherwise, 10 and 60 seconds later
        assertThat(registry.tlsConnections.get()).isBetween(1, 2);
        assertNothingStored(e);
    }

    @Test
    void aWarmSandboxGetsTheSetMountedReadOnly() throws Exception {
        // finding 17: the set's entry, mounted at hand-out, was read-write in the warm sandbox's mount table
        registry.add("left-pad", "1.3.0", Map.of("index.js", "module.exports = (s, n) => String(s).padStart(n);\n"), null);
        LocalExecutor e = executor("WARM_POOL", "nodejs=1");
        await(e.submit(withPackages(e, "console.log(1)", "left-pad@1.3.0"), null)); // the install
        assertThat(e.awaitWarmPool(java.time.Duration.ofSeconds(30))).isTrue();
        TestSupport.Starts starts = TestSupport.startsOf(e);
        String code = """
                const lines = require('fs').readFileSync('/proc/self/mountinfo', 'utf8').split('\\n').map(l => l.split(' '));
                const at = lines.filter(f => f[4] === '/node_modules').map(f => f[5].split(',')[0]);
                console.log(require('left-pad')('x', 3), JSON.stringify(at));
                """;
        ExecutionResult r = await(e.submit(withPackages(e, code, "left-pad@1.3.0"), null));
        assertThat(starts.take()).as("served by a warm sandbox").containsExactly(true);
        assertThat(r.stdout()).as(r.stderr()).startsWith("  x [");
        assertThat(r.stdout()).doesNotContain("\"rw\"").contains("\"ro\"");
    }
}
