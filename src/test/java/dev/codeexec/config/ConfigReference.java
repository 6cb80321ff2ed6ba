package dev.codeexec.config;

import java.util.List;
import java.util.Locale;

/**
 * Renders the configuration reference, docs/configuration.md, from {@link Config#SECTIONS}: per section a heading, its
 * line, and a table of its keys with their defaults and descriptions. {@code ConfigReferenceTest} compares the file
 * with this text and writes it when asked ({@link #REGENERATE}).
 */
final class ConfigReference {

    /** The command that rewrites docs/configuration.md from the keys. */
    static final String REGENERATE =
            "./mvnw test -Dconsole.skip=true -Dtest=ConfigReferenceTest -Dconfig.reference.write=true";

    private ConfigReference() {
    }

    static String render(List<ConfigSection> sections) {
        StringBuilder md = new StringBuilder();
        md.append("# Configuration\n\n");
        md.append("<!-- Generated from the keys of src/main/java/dev/codeexec/config/Config.java (Config.SECTIONS); "
                + "do not edit by hand.\n     After changing a key: ").append(REGENERATE).append(" -->\n\n");
        md.append("""
                Every setting is an environment variable, read once at start and validated: a bad value, or a combination the
                server refuses (a non-loopback `HOST` without a key or `ALLOW_UNAUTHENTICATED=true`, `DEFAULT_TIMEOUT_MS` above
                `MAX_TIMEOUT_MS`, `BODY_MEMORY_MB` under twice `MAX_BODY_MB`, `CORS_ORIGINS=*` without a key), stops the start
                with a message naming the variable. An empty value is the default. The container image, compose and the
                Kubernetes manifests take the same variables ([container.md](container.md), [cluster.md](cluster.md)).

                """);
        md.append("Sections:");
        for (int i = 0; i < sections.size(); i++)
            md.append(i == 0 ? " " : " · ").append('[').append(sections.get(i).title()).append("](#")
                    .append(anchor(sections.get(i).title())).append(')');
        md.append("\n");
        for (ConfigSection section : sections) {
            md.append("\n## ").append(section.title()).append('\n');
            md.append(section.about()).append("\n\n");
            md.append("| variable | default | meaning |\n|---|---|---|\n");
            for (ConfigKey<?> key : section.keys()) md.append(row(key)).append('\n');
        }
        return md.toString();
    }

    /** One key's table row: its name, its default ("(unset)" when empty) and its description. */
    static String row(ConfigKey<?> key) {
        String def = key.defaultValue().isEmpty() ? "(unset)" : "`" + key.defaultValue() + "`";
        return "| `" + key.name() + "` | " + def + " | " + key.description().replace("|", "\\|") + " |";
    }

    /** The anchor GitHub gives a heading: lower case, punctuation dropped, spaces as hyphens. */
    static String anchor(String heading) {
        return heading.toLowerCase(Locale.ROOT).replaceAll("[^a-z0-9 _-]", "").replace(' ', '-');
    }
}
