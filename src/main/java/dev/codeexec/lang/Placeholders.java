package dev.codeexec.lang;

import dev.codeexec.config.DataDir;

import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Fills {@code {name}} placeholders of the languages table. An unknown placeholder is an error at load time,
 * not a literal brace reaching a program: {@link #check} is run on every table entry.
 */
public final class Placeholders {

    /** The working directory of every run inside its sandbox ({@code {dir}}): a fresh tmpfs, or its workspace. */
    public static final String WORK_DIR = "/work";
    static final List<String> KNOWN = List.of("file", "dir", "name", "javaHome", "goCache", "runtimeDir", "heapMb", "output",
            "tsNode");
    /**
     * The Node that TypeScript runs on ({tsNode}) when it is there: Node 22 from npm, which strips TypeScript's types
     * itself (scripts/install-deps.sh puts it here, under /usr so that every sandbox sees it); otherwise Debian's.
     */
    public static final Path TYPESCRIPT_NODE = Path.of("/usr/local/lib/code-exec/node/bin/node");
    static final Path SYSTEM_NODE = Path.of("/usr/bin/node");
    private static final Pattern PLACEHOLDER = Pattern.compile("\\{([A-Za-z]+)}");

    private Placeholders() {
    }

    /**
     * The JVM heap cap of a run ({heapMb}): the JVM would size its heap from host memory when it cannot see the
     * cgroup limit.
     */
    public static String heapMb(long memoryMb) {
        return Long.toString(Math.max(32, memoryMb / 2));
    }

    /** The placeholders that are the same for every run of this server: where its runtimes and caches are. */
    public static Map<String, String> ofServer(DataDir data) {
        return Map.of("javaHome", Path.of(System.getProperty("java.home")).toAbsolutePath().toString(),
                "goCache", data.goCache().toString(), "runtimeDir", data.runtime().toString(),
                "tsNode", typescriptNode(TYPESCRIPT_NODE).toString());
    }

    /**
     * {tsNode}: {@code preferred} when it is an executable file, else Debian's node. The runners check what the Node
     * they run on can do (engine/ts-loader.js): an older one runs TypeScript through the typescript package.
     */
    static Path typescriptNode(Path preferred) {
        return java.nio.file.Files.isRegularFile(preferred) && java.nio.file.Files.isExecutable(preferred) ? preferred : SYSTEM_NODE;
    }

    public static String fill(String template, Map<String, String> values) {
        Matcher m = PLACEHOLDER.matcher(template);
        StringBuilder out = new StringBuilder();
        while (m.find()) {
            String v = values.get(m.group(1));
            // Shell snippets in the table may use ${Var}; only our own names are replaced.
            m.appendReplacement(out, Matcher.quoteReplacement(v != null ? v : m.group()));
        }
        m.appendTail(out);
        return out.toString();
    }

    public static List<String> fill(List<String> templates, Map<String, String> values) {
        return templates.stream().map(t -> fill(t, values)).toList();
    }

    public static void check(String where, String template) {
        Matcher m = PLACEHOLDER.matcher(template);
        while (m.find()) {
            boolean shellVar = m.start() > 0 && template.charAt(m.start() - 1) == '$';
            if (!shellVar && !KNOWN.contains(m.group(1)))
                throw new IllegalStateException(where + ": unknown placeholder {" + m.group(1) + "}; known: " + KNOWN);
        }
    }
}
