package dev.codeexec;

import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The README and docs/ as a reader meets them: every relative link leads to a file that exists and, when it names a
 * heading, to a heading of that file (as GitHub makes its anchor); and the README stays short for users, with the
 * two commands first.
 */
class DocsLinksTest {

    private static final Path README = Path.of("README.md");
    /** A markdown link's target: {@code [text](target)}. */
    private static final Pattern LINK = Pattern.compile("\\]\\(([^)\\s]+)\\)");
    private static final Pattern FENCE = Pattern.compile("(?ms)^```.*?^```");
    private static final Pattern CODE_SPAN = Pattern.compile("`[^`\n]*`");

    @Test
    void everyRelativeLinkLeadsToAFileAndHeadingThatExist() throws IOException {
        List<Path> pages = new ArrayList<>(List.of(README, Path.of("e2e/README.md")));
        try (Stream<Path> docs = Files.list(Path.of("docs"))) {
            docs.filter(p -> p.toString().endsWith(".md")).sorted().forEach(pages::add);
        }
        assertThat(pages).hasSizeGreaterThan(10);
        Map<Path, Set<String>> anchors = new HashMap<>();
        List<String> broken = new ArrayList<>();
        int checked = 0;
        for (Path page : pages) {
            Matcher m = LINK.matcher(prose(Files.readString(page)));
            while (m.find()) {
                String target = m.group(1);
                if (target.matches("[a-z]+:.*")) continue; // https:, mailto:
                checked++;
                int hash = target.indexOf('#');
                String file = hash < 0 ? target : target.substring(0, hash);
                Path to = file.isEmpty() ? page : page.toAbsolutePath().getParent().resolve(file).normalize();
                if (!Files.exists(to)) {
                    broken.add(page + ": " + target + " (no such file)");
                } else if (hash >= 0 && to.toString().endsWith(".md")
                        && !anchors.computeIfAbsent(to.toAbsolutePath().normalize(), DocsLinksTest::headings)
                        .contains(target.substring(hash + 1))) {
                    broken.add(page + ": " + target + " (no such heading)");
                }
            }
        }
        assertThat(checked).isGreaterThan(100);
        assertThat(broken).isEmpty();
    }

    @Test
    void theReadmeIsAtMost300LinesAndBeginsWithTheTwoCommands() throws IOException {
        List<String> lines = Files.readAllLines(README);
        assertThat(lines.size()).as("README.md lines").isLessThanOrEqualTo(300);
        int fence = lines.indexOf("```sh");
        assertThat(fence).as("the README's first code block").isPositive();
        assertThat(lines.subList(0, fence)).noneMatch(l -> l.startsWith("```"));
        List<String> commands = lines.subList(fence + 1, lines.subList(fence + 1, lines.size()).indexOf("```") + fence + 1)
                .stream().map(l -> l.replaceAll("\\s+#.*", "").strip()).toList();
        // no sudo in front: the scripts run from a root shell as they are and call sudo themselves otherwise
        assertThat(commands).containsExactly("./scripts/run.sh", "./scripts/test.sh");
        assertThat(Files.readString(Path.of(".ci/run"))).contains("exec ./scripts/test.sh");
    }

    @Test
    void anchorsAreTheOnesGithubGivesHeadings() {
        assertThat(anchor("Code mode: code that calls your MCP servers' tools"))
                .isEqualTo("code-mode-code-that-calls-your-mcp-servers-tools");
        assertThat(anchor("Network access (EGRESS=on)")).isEqualTo("network-access-egresson");
        assertThat(anchor("One `execute_code` call, from the edge to the sandbox and back"))
                .isEqualTo("one-execute_code-call-from-the-edge-to-the-sandbox-and-back");
        assertThat(anchor("What bounds the fresh-server goals still missed (2026-12-04)"))
                .isEqualTo("what-bounds-the-fresh-server-goals-still-missed-2026-12-04");
    }

    /** The text outside code blocks and code spans, where a link is a link. */
    private static String prose(String markdown) {
        return CODE_SPAN.matcher(FENCE.matcher(markdown).replaceAll("")).replaceAll("");
    }

    /** The anchors of a page's headings; a repeated heading gets -1, -2, ... as on GitHub. */
    private static Set<String> headings(Path page) {
        Set<String> out = new HashSet<>();
        try {
            for (String line : FENCE.matcher(Files.readString(page)).replaceAll("").split("\n")) {
                if (!line.matches("#{1,6} .*")) continue;
                String a = anchor(line.replaceFirst("#{1,6} ", ""));
                String unique = a;
                for (int n = 1; !out.add(unique); n++) unique = a + "-" + n;
            }
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        return out;
    }

    static String anchor(String heading) {
        return heading.strip().toLowerCase(Locale.ROOT).replaceAll("[^\\p{L}\\p{N} _-]", "").replace(' ', '-');
    }
}
