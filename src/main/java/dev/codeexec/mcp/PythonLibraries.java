package dev.codeexec.mcp;

import java.io.IOException;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Which of the Python libraries people expect are importable by the sandbox's {@code /usr/bin/python3}. Found by
 * looking for the package directories where Debian's python3 imports them from (a few stat calls, once): no
 * interpreter is started, so {@code code-exec://info} stays cheap. The sandbox sees the host's /usr read-only,
 * so what is found here is what code finds there.
 */
final class PythonLibraries {

    /** Shown name → import name. */
    static final Map<String, String> EXPECTED = expected();

    private static volatile Map<String, Boolean> found;

    private PythonLibraries() {
    }

    private static Map<String, String> expected() {
        Map<String, String> m = new LinkedHashMap<>();
        m.put("numpy", "numpy");
        m.put("pandas", "pandas");
        m.put("matplotlib", "matplotlib");
        m.put("scipy", "scipy");
        m.put("requests", "requests");
        m.put("pyyaml", "yaml");
        m.put("pillow", "PIL");
        return m;
    }

    /** Library → importable, probed on first use. */
    static Map<String, Boolean> available() {
        Map<String, Boolean> f = found;
        if (f == null) found = f = probe(searchPath());
        return f;
    }

    static Map<String, Boolean> probe(List<Path> dirs) {
        Map<String, Boolean> out = new LinkedHashMap<>();
        EXPECTED.forEach((shown, module) -> out.put(shown, dirs.stream().anyMatch(d ->
                Files.isRegularFile(d.resolve(module).resolve("__init__.py")) || Files.isRegularFile(d.resolve(module + ".py")))));
        return java.util.Collections.unmodifiableMap(out);
    }

    /** Debian's dist-packages, plus /usr/local's for each installed python3.X. */
    static List<Path> searchPath() {
        List<Path> dirs = new ArrayList<>(List.of(Path.of("/usr/lib/python3/dist-packages")));
        for (String base : List.of("/usr/local/lib", "/usr/lib")) {
            try (DirectoryStream<Path> ds = Files.newDirectoryStream(Path.of(base), "python3.*")) {
                for (Path p : ds) {
                    dirs.add(p.resolve("dist-packages"));
                    dirs.add(p.resolve("site-packages"));
                }
            } catch (IOException e) {
                // no such directory: nothing installed there
            }
        }
        return dirs;
    }
}
