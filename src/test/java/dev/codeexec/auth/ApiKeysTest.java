package dev.codeexec.auth;

import dev.codeexec.config.Config;
import dev.codeexec.config.ConfigException;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/** The key file: parsing, errors with file:line, reloading, and the {@code keys add} command. */
class ApiKeysTest {

    Path dir;

    ApiKeysTest() throws Exception {
        dir = Files.createTempDirectory("keys");
    }

    @AfterEach
    void clean() throws Exception {
        try (var s = Files.list(dir)) {
            for (Path p : s.toList()) Files.delete(p);
        }
        Files.delete(dir);
    }

    @Test
    void readsTenantsHashesAdminFlagsAndComments() throws Exception {
        Path f = dir.resolve("keys");
        Files.writeString(f, """
                # operators
                ops   %s admin   # the admin key

                team-a %s
                """.formatted(ApiKeys.hashHex("k-ops"), ApiKeys.hashHex("k-a").toUpperCase()));
        ApiKeys keys = ApiKeys.load(Config.of("API_KEYS_FILE", f.toString()));
        assertThat(keys.required()).isTrue();
        assertThat(keys.authenticate("k-ops")).contains(new Principal("ops", true));
        assertThat(keys.authenticate("k-a")).contains(new Principal("team-a", false));
        assertThat(keys.authenticate("k-b")).isEmpty();
        assertThat(keys.authenticate("")).isEmpty();
        // The hash itself is not a key.
        assertThat(keys.authenticate(ApiKeys.hashHex("k-a"))).isEmpty();
    }

    @Test
    void singleApiKeyIsTheAdminOfTheDefaultTenantAndNoKeysMeansNoneRequired() {
        ApiKeys keys = ApiKeys.load(Config.of("API_KEY", "single"));
        assertThat(keys.required()).isTrue();
        assertThat(keys.authenticate("single")).contains(new Principal("default", true));
        assertThat(keys.authenticate("singl")).isEmpty();
        assertThat(ApiKeys.load(Config.of()).required()).isFalse();
        assertThat(ApiKeys.load(Config.of()).authenticate("anything")).isEmpty();
    }

    @Test
    void aTenantLineMayCarryItsOwnAllowList() throws Exception {
        Path f = dir.resolve("keys");
        Files.writeString(f, "a " + ApiKeys.hashHex("ka") + " egress=pypi.org,*.pythonhosted.org\n"
                + "b " + ApiKeys.hashHex("kb") + " egress=off admin\n"
                + "c " + ApiKeys.hashHex("kc") + "\n");
        ApiKeys keys = ApiKeys.load(Config.of("API_KEYS_FILE", f.toString()));
        Principal a = keys.authenticate("ka").orElseThrow();
        assertThat(a.egress()).isPresent();
        assertThat(a.egress().get().patterns()).containsExactly("pypi.org", "*.pythonhosted.org");
        Principal b = keys.authenticate("kb").orElseThrow();
        assertThat(b.admin()).isTrue();
        assertThat(b.egress()).contains(dev.codeexec.egress.EgressPolicy.OFF);
        assertThat(keys.authenticate("kc").orElseThrow().egress()).as("no egress=: the server's list").isEmpty();
    }

    @Test
    void badLinesStopTheStartNamingFileAndLine() throws Exception {
        Path f = dir.resolve("keys");
        String good = "a " + ApiKeys.hashHex("x") + "\n";
        Map<String, String> cases = Map.of(
                good + "b\n", ":2: expected",
                good + "b nothex\n", ":2: the key hash must be 64 hex digits",
                good + "b " + ApiKeys.hashHex("y") + " root\n", ":2: after the hash only 'admin' and 'egress=PATTERN,...' may follow",
                good + "b " + ApiKeys.hashHex("y") + " admin admin\n", ":2: after the hash only 'admin' and 'egress=PATTERN,...' may follow",
                good + "b " + ApiKeys.hashHex("y") + " egress=10.0.0.1\n", ":2: egress: '10.0.0.1': allow-lists name hosts, not IP addresses",
                good + "b " + ApiKeys.hashHex("y") + " egress=a.com:99999\n", ":2: egress: 'a.com:99999': the port must be",
                "# c\nbad.name " + ApiKeys.hashHex("y") + "\n", ":2: bad tenant name",
                good + "c " + ApiKeys.hashHex("x") + "\n", ":2: the same key hash is listed twice",
                good + "b " + ApiKeys.hashHex("y") + " admin egress=off extra\n", ":2: expected");
        for (var c : cases.entrySet()) {
            Files.writeString(f, c.getKey());
            assertThatThrownBy(() -> ApiKeys.load(Config.of("API_KEYS_FILE", f.toString())))
                    .isInstanceOf(ConfigException.class).hasMessageContaining(f + c.getValue());
        }
        assertThatThrownBy(() -> ApiKeys.load(Config.of("API_KEYS_FILE", dir.resolve("missing").toString())))
                .isInstanceOf(ConfigException.class).hasMessageContaining("API_KEYS_FILE").hasMessageContaining("missing");
    }

    @Test
    void reloadsOnChangeAtMostOncePerIntervalAndKeepsTheLastGoodSet() throws Exception {
        Path f = dir.resolve("keys");
        Files.writeString(f, "a " + ApiKeys.hashHex("ka") + "\n");
        AtomicLong now = new AtomicLong(0);
        ApiKeys keys = ApiKeys.of("", f, now::get);
        assertThat(keys.authenticate("ka")).isPresent();

        Files.writeString(f, "a " + ApiKeys.hashHex("ka") + "\nb " + ApiKeys.hashHex("kb") + "\n");
        assertThat(keys.authenticate("kb")).as("not re-read before the interval").isEmpty();
        now.addAndGet(ApiKeys.CHECK_INTERVAL_NANOS);
        assertThat(keys.authenticate("kb")).contains(new Principal("b", false));

        Files.writeString(f, "a " + ApiKeys.hashHex("ka") + "\nb broken\n");
        now.addAndGet(ApiKeys.CHECK_INTERVAL_NANOS);
        assertThat(keys.authenticate("kb")).as("a broken file keeps the last good set").isPresent();

        Files.delete(f);
        now.addAndGet(ApiKeys.CHECK_INTERVAL_NANOS);
        assertThat(keys.authenticate("kb")).as("a vanished file keeps the last good set").isPresent();

        Files.writeString(f, "c " + ApiKeys.hashHex("kc") + "\n");
        now.addAndGet(ApiKeys.CHECK_INTERVAL_NANOS);
        assertThat(keys.authenticate("kc")).contains(new Principal("c", false));
        assertThat(keys.authenticate("kb")).isEmpty();
        assertThat(keys.authenticate("ka")).isEmpty();
    }

    record Run(int code, String out, String err) {
    }

    static Run keysCommand(Map<String, String> env, String... args) {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        ByteArrayOutputStream err = new ByteArrayOutputStream();
        int code = KeysCommand.run(List.of(args), env, new PrintStream(out, true, StandardCharsets.UTF_8),
                new PrintStream(err, true, StandardCharsets.UTF_8));
        return new Run(code, out.toString(StandardCharsets.UTF_8), err.toString(StandardCharsets.UTF_8));
    }

    @Test
    void keysAddWritesTheTenantsOwnAllowList() throws Exception {
        Path f = dir.resolve("egress-keys");
        Map<String, String> env = Map.of("API_KEYS_FILE", f.toString());
        Run r = keysCommand(env, "keys", "add", "data", "--egress=PyPI.org,*.pythonhosted.org", "--admin");
        assertThat(r.code()).as(r.err()).isZero();
        String key = r.out().strip();
        assertThat(Files.readString(f)).isEqualTo("data " + ApiKeys.hashHex(key) + " admin egress=pypi.org,*.pythonhosted.org\n");
        assertThat(ApiKeys.load(Config.of("API_KEYS_FILE", f.toString())).authenticate(key).orElseThrow().egress().orElseThrow()
                .allows("files.pythonhosted.org", 443)).isTrue();
        Run bad = keysCommand(env, "keys", "add", "x", "--egress=10.0.0.1");
        assertThat(bad.code()).isEqualTo(2);
        assertThat(bad.err()).contains("not IP addresses");
        assertThat(Files.readAllLines(f)).hasSize(1);
    }

    @Test
    void keysAddPrintsANewKeyOnceAndAppendsItsHashLine() throws Exception {
        Path f = dir.resolve("new-keys");
        Map<String, String> env = Map.of("API_KEYS_FILE", f.toString());
        Run first = keysCommand(env, "keys", "add", "team-a");
        assertThat(first.code()).as(first.err()).isZero();
        String key = first.out().strip();
        assertThat(first.out()).isEqualTo(key + System.lineSeparator());
        assertThat(key).matches("cem_[A-Za-z0-9_-]{43}");
        assertThat(Files.getPosixFilePermissions(f)).isEqualTo(PosixFilePermissions.fromString("rw-------"));
        assertThat(Files.readString(f)).isEqualTo("team-a " + ApiKeys.hashHex(key) + "\n").doesNotContain(key);

        Files.writeString(f, Files.readString(f) + "# no newline at the end");
        Run admin = keysCommand(env, "keys", "add", "ops", "--admin");
        assertThat(admin.code()).isZero();
        String adminKey = admin.out().strip();
        assertThat(adminKey).isNotEqualTo(key);
        assertThat(Files.readAllLines(f)).containsExactly("team-a " + ApiKeys.hashHex(key), "# no newline at the end",
                "ops " + ApiKeys.hashHex(adminKey) + " admin");

        ApiKeys keys = ApiKeys.load(Config.of("API_KEYS_FILE", f.toString()));
        assertThat(keys.authenticate(key)).contains(new Principal("team-a", false));
        assertThat(keys.authenticate(adminKey)).contains(new Principal("ops", true));
    }

    @Test
    void keysAddRefusesBadInput() {
        Map<String, String> env = Map.of("API_KEYS_FILE", dir.resolve("k").toString());
        Run badName = keysCommand(env, "keys", "add", "../etc");
        assertThat(badName.code()).isEqualTo(2);
        assertThat(badName.err()).contains("bad tenant name");
        assertThat(badName.out()).isEmpty();
        Run noFile = keysCommand(Map.of(), "keys", "add", "a");
        assertThat(noFile.code()).isEqualTo(2);
        assertThat(noFile.err()).contains("API_KEYS_FILE");
        assertThat(keysCommand(env, "keys", "add", "a", "--root").code()).isEqualTo(2);
        assertThat(keysCommand(env, "keys").err()).contains("usage");
        assertThat(keysCommand(env, "serve").code()).isEqualTo(2);
        Run unwritable = keysCommand(Map.of("API_KEYS_FILE", dir.resolve("no/such/dir/k").toString()), "keys", "add", "a");
        assertThat(unwritable.code()).isEqualTo(2);
        assertThat(unwritable.err()).contains("cannot write");
        assertThat(dir.resolve("k")).doesNotExist();
    }
}
