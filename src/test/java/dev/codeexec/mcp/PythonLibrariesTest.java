package dev.codeexec.mcp;

import dev.codeexec.testing.Requires;
import org.junit.jupiter.api.Test;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;

/** The cheap directory probe agrees with what the sandbox's interpreter can really import. */
class PythonLibrariesTest {

    @Test
    void probeAgreesWithTheInterpreter() throws Exception {
        Path python = Path.of("/usr/bin/python3");
        Requires.that(Files.isExecutable(python), "/usr/bin/python3");
        var found = PythonLibraries.available();
        assertThat(found.keySet()).containsExactly("numpy", "pandas", "matplotlib", "scipy", "requests", "pyyaml", "pillow");
        for (var e : PythonLibraries.EXPECTED.entrySet()) {
            Process p = new ProcessBuilder(python.toString(), "-c", "import " + e.getValue())
                    .redirectErrorStream(true).redirectOutput(ProcessBuilder.Redirect.DISCARD).start();
            assertThat(p.waitFor(60, TimeUnit.SECONDS)).isTrue();
            assertThat(found.get(e.getKey())).as(e.getKey()).isEqualTo(p.exitValue() == 0);
        }
    }

    @Test
    void aMissingLibraryIsReportedMissing(@org.junit.jupiter.api.io.TempDir Path dir) throws Exception {
        Files.createDirectories(dir.resolve("numpy"));
        Files.writeString(dir.resolve("numpy/__init__.py"), "");
        Files.writeString(dir.resolve("yaml.py"), "");
        var found = PythonLibraries.probe(List.of(dir));
        assertThat(found).containsEntry("numpy", true).containsEntry("pyyaml", true).containsEntry("pandas", false);
    }
}
