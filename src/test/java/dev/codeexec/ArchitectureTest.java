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
 * and fully qualified names alike). The table is read from that document ("Layers": one row per package, its last
 * column the packages it may use), so the document and this test cannot disagree: a use that is not listed fails
 * here, a new dependency is a decision written in the document, and the graph has no cycles.
 */
class ArchitectureTest {

    private static final Path DOC = Path.of("docs/architecture.md");
    /** A row of the layers table: {@code | `pkg` | what it is | may use |}. */
    private static final Pattern ROW = Pattern.compile("^\\| `([a-z][a-z0-9]*)` \\|.*\\| ([^|]+) \\|$");

    /** Each package and the packages it may use, from the document. The root package (Main) may use any. */
    static final Map<String, Set<String>> ALLOWED = readTable();

    static Map<String, Set<String>> readTable() {
        Map<String, Set<String>> table = new TreeMap<>();
        try {
            for (String line : Files.readAllLines(DOC)) {
                Matcher m = ROW.matcher(line.strip());
                if (!m.matches()) continue;
                Set<String> uses = new TreeSet<>();
                String cell = m.group(2).strip();
                if (!cell.equals("–")) {
                    // names, each perhaps followed by a note in parentheses: "config, linux (`OwnIds`: ...)"
                    for (String part : cell.replaceAll("\\([^)]*\\)", "").split(","))
                        if (!part.isBlank()) uses.add(part.strip().replace("`", ""));
                }
                assertThat(table.put(m.group(1), uses)).as("one row for " + m.group(1)).isNull();
            }
        } catch (IOException e) {
            throw new java.io.UncheckedIOException(e);
        }
        assertThat(table).as("the layers table of " + DOC).isNotEmpty();
        return table;
    }

    private static final Path MAIN = Path.of("src/main/java/dev/codeexec");
    private static final Pattern USE = Pattern.compile("\\bdev\\.codeexec\\.([a-z][a-z0-9]*)\\.");

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
    void theTableNamesOnlyPackagesThatExist() throws IOException {
        Set<String> existing = new TreeSet<>();
        try (Stream<Path> dirs = Files.list(MAIN)) {
            dirs.filter(Files::isDirectory).forEach(d -> existing.add(d.getFileName().toString()));
        }
        assertThat(existing).as("every row of the table names a package").containsAll(ALLOWED.keySet());
        ALLOWED.values().forEach(uses -> assertThat(existing).containsAll(uses));
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
        for (String pkg : List.of("engine", "lang", "run", "session", "warm", "local")) {
            try (Stream<Path> files = Files.walk(MAIN.resolve(pkg))) {
                for (Path f : files.filter(p -> p.toString().endsWith(".java")).toList()) {
                    String src = Files.readString(f);
                    assertThat(src).as(f.toString()).doesNotContain("io.modelcontextprotocol").doesNotContain("jakarta.servlet")
                            .doesNotContain("org.eclipse.jetty").doesNotContain("io.grpc");
                }
            }
        }
    }
}
