package dev.codeexec;

import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The layers of docs/architecture.md, from the source: which package of {@code dev.codeexec} may use which (imports
 * and fully qualified names alike). A use that is not listed fails here, so a new dependency is a decision made in
 * this table and that document, not an accident; and the graph has no cycles.
 */
class ArchitectureTest {

    /** Each package and the packages it may use. The root package (Main) may use any. */
    static final Map<String, Set<String>> ALLOWED = Map.ofEntries(
            Map.entry("linux", Set.of()),
            Map.entry("config", Set.of("linux")),
            Map.entry("boot", Set.of("config")),
            Map.entry("sandbox", Set.of("config", "linux")),
            Map.entry("workspace", Set.of("config", "linux")),
            Map.entry("egress", Set.of("config")),
            Map.entry("codemode", Set.of("config", "egress")),
            Map.entry("packages", Set.of("config", "linux", "workspace")),
            Map.entry("engine", Set.of("config", "boot", "linux", "sandbox", "workspace", "egress", "codemode", "packages")),
            Map.entry("wire", Set.of("config", "sandbox", "workspace", "engine", "egress", "codemode", "packages")),
            Map.entry("surface", Set.of("config", "sandbox", "workspace", "engine", "egress", "codemode", "packages")),
            Map.entry("auth", Set.of("config", "workspace", "egress")),
            Map.entry("ops", Set.of("config", "sandbox", "workspace", "engine", "egress", "codemode", "packages")),
            Map.entry("mcp", Set.of("config", "sandbox", "workspace", "engine", "surface", "auth", "egress", "codemode", "packages")),
            Map.entry("gateway", Set.of("config", "sandbox", "workspace", "engine", "wire", "egress", "codemode", "packages")),
            Map.entry("worker", Set.of("config", "sandbox", "workspace", "engine", "wire", "boot", "egress", "codemode", "packages")),
            Map.entry("http", Set.of("config", "sandbox", "workspace", "engine", "surface", "auth", "ops", "mcp", "egress", "codemode", "packages")));

    private static final Path MAIN = Path.of("src/main/java/dev/codeexec");
    private static final Pattern USE = Pattern.compile("\\bdev\\.codeexec\\.([a-z]+)\\.");

    /** Package → the packages its main sources use. */
    static Map<String, Set<String>> uses() throws IOException {
        Map<String, Set<String>> uses = new TreeMap<>();
        try (Stream<Path> files = Files.walk(MAIN)) {
            for (Path f : files.filter(p -> p.toString().endsWith(".java")).toList()) {
                Path rel = MAIN.relativize(f);
                if (rel.getNameCount() < 2) continue; // the root package
                String pkg = rel.getName(0).toString();
                Set<String> used = uses.computeIfAbsent(pkg, k -> new TreeSet<>());
                Matcher m = USE.matcher(Files.readString(f));
                while (m.find()) if (!m.group(1).equals(pkg)) used.add(m.group(1));
            }
        }
        return uses;
    }

    @Test
    void everyPackageUsesOnlyTheLayersBelowIt() throws IOException {
        Map<String, Set<String>> uses = uses();
        assertThat(ALLOWED.keySet()).as("every package has a row in the table").containsAll(uses.keySet());
        List<String> violations = new ArrayList<>();
        uses.forEach((pkg, used) -> used.stream().filter(u -> !ALLOWED.get(pkg).contains(u))
                .forEach(u -> violations.add(pkg + " -> " + u)));
        assertThat(violations).isEmpty();
    }

    @Test
    void theAllowedUsesHaveNoCycle() {
        Set<String> done = new TreeSet<>();
        for (String p : ALLOWED.keySet()) assertThat(cycleFrom(p, new ArrayList<>(), done)).as("cycle").isEmpty();
    }

    private static List<String> cycleFrom(String p, List<String> path, Set<String> done) {
        if (path.contains(p)) {
            List<String> cycle = new ArrayList<>(path.subList(path.indexOf(p), path.size()));
            cycle.add(p);
            return cycle;
        }
        if (done.contains(p)) return List.of();
        path.add(p);
        for (String q : ALLOWED.getOrDefault(p, Set.of())) {
            List<String> c = cycleFrom(q, path, done);
            if (!c.isEmpty()) return c;
        }
        path.removeLast();
        done.add(p);
        return List.of();
    }

    @Test
    void theEngineKnowsNothingOfMcpOrHttp() throws IOException {
        try (Stream<Path> files = Files.walk(MAIN.resolve("engine"))) {
            for (Path f : files.filter(p -> p.toString().endsWith(".java")).toList()) {
                String src = Files.readString(f);
                assertThat(src).as(f.toString()).doesNotContain("io.modelcontextprotocol").doesNotContain("jakarta.servlet")
                        .doesNotContain("org.eclipse.jetty").doesNotContain("io.grpc");
            }
        }
    }
}
