package dev.codeexec.codemode;

import dev.codeexec.testing.Poll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Map;
import java.util.Optional;

import static dev.codeexec.codemode.UpstreamsTest.closedPort;
import static dev.codeexec.codemode.UpstreamsTest.config;
import static org.assertj.core.api.Assertions.assertThat;

/** {@link CodeTools}: what a run's library and listings say, with fake upstreams on 127.0.0.1. */
class CodeToolsTest {

    @Test
    void aRunsLibraryIsWrittenAtOnceWithTheUpstreamsThatAreDownListedAsUnavailable(@TempDir Path dir) throws Exception {
        Path libraries = Files.createDirectory(dir.resolve("libraries"));
        try (FakeUpstream hung = FakeUpstream.start(0, FakeUpstream.Initialize.HOLD); UpstreamLog log = new UpstreamLog()) {
            UpstreamConfig cfg = config(Map.of("hung", Map.of("url", hung.url()),
                    "gone", Map.of("url", "http://127.0.0.1:" + closedPort() + "/mcp"),
                    "missing", Map.of("command", dir.resolve("no-such-command").toString())), Map.of());
            try (CodeTools tools = new CodeTools(new Upstreams(cfg, Duration.ZERO).start(), libraries, 100, 16 << 20,
                    Duration.ofSeconds(30)); CodeTools.LibraryFiles lib = tools.files()) {
                assertThat(hung.awaitInitializeHeld()).as("the first attempt to connect to hung is under way").isTrue();

                lib.write("team");
                assertThat(hung.held()).as("the library was written while hung still held its initialize").isEqualTo(1);
                // a write starts attempts to the upstreams that are due (retry 0 here), on threads of their own
                Poll.until("gone and missing have each failed twice", () -> {
                    lib.write("team");
                    return log.lines("gone: cannot connect").size() >= 2 && log.lines("missing: cannot connect").size() >= 2;
                });
                assertThat(log.lines("cannot connect")).allSatisfy(l -> assertThat(l.thread()).startsWith("upstream-"));
                assertThat(hung.held()).isEqualTo(1);

                lib.write("team");
                String py = Files.readString(lib.dir().resolve(CodeTools.PYTHON_FILE));
                // each listed as unavailable, and why: still connecting, or the last attempt's error
                assertThat(py).contains("hung = _Server(\"hung\", ", ", \"hung\", \"connecting\")", "gone = _Server(",
                        "missing = _Server(", "Unavailable when this library was written", "ConnectException", "no-such-command");
                assertThat(Files.readString(lib.dir().resolve(CodeTools.NODE_FILE))).contains("const hung = byName(\"hung\", ");
                assertThat(tools.listing("team", Optional.empty(), Optional.empty()).get("servers").toString())
                        .contains("name=hung", "unavailable=connecting", "unavailable=Client failed to initialize");
            }
        }
    }
}
