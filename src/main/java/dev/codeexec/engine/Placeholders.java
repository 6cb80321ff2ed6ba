package dev.codeexec.engine;

import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Fills {@code {name}} placeholders of the languages table. An unknown placeholder is an error at load time,
 * not a literal brace reaching a program: {@link #check} is run on every table entry.
 */
final class Placeholders {

    static final List<String> KNOWN = List.of("file", "dir", "name", "javaHome", "goCache", "runtimeDir", "heapMb", "output");
    private static final Pattern PLACEHOLDER = Pattern.compile("\\{([A-Za-z]+)}");

    private Placeholders() {
    }

    static String fill(String template, Map<String, String> values) {
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

    static List<String> fill(List<String> templates, Map<String, String> values) {
        return templates.stream().map(t -> fill(t, values)).toList();
    }

    static void check(String where, String template) {
        Matcher m = PLACEHOLDER.matcher(template);
        while (m.find()) {
            boolean shellVar = m.start() > 0 && template.charAt(m.start() - 1) == '$';
            if (!shellVar && !KNOWN.contains(m.group(1)))
                throw new IllegalStateException(where + ": unknown placeholder {" + m.group(1) + "}; known: " + KNOWN);
        }
    }
}
