package dev.codeexec.config;

import org.junit.jupiter.api.Test;

import java.lang.reflect.Field;
import java.lang.reflect.Modifier;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.fail;

/**
 * docs/configuration.md is exactly what {@link Config#SECTIONS} renders ({@link ConfigReference}), so the reference
 * users read cannot drift from the keys the server reads. With {@code -Dconfig.reference.write=true} the test first
 * writes the file: {@value ConfigReference#REGENERATE}.
 */
class ConfigReferenceTest {

    private static final Path FILE = Path.of("docs/configuration.md");

    @Test
    void theConfigurationReferenceIsWhatTheKeysRender() throws Exception {
        String rendered = ConfigReference.render(Config.SECTIONS);
        if (Boolean.getBoolean("config.reference.write")) Files.writeString(FILE, rendered);
        String onDisk = Files.exists(FILE) ? Files.readString(FILE) : "";
        if (onDisk.equals(rendered)) return;
        List<String> file = onDisk.lines().toList(), keys = rendered.lines().toList();
        int line = 0;
        while (line < file.size() && line < keys.size() && file.get(line).equals(keys.get(line))) line++;
        fail("docs/configuration.md is not what Config's keys render; first difference at line %d:%n  file: %s%n"
                        + "  keys: %s%nAfter changing a key, regenerate the file with:%n  %s", line + 1,
                line < file.size() ? file.get(line) : "(end of file)", line < keys.size() ? keys.get(line) : "(end)",
                ConfigReference.REGENERATE);
    }

    @Test
    void everyKeyConfigDeclaresIsInExactlyOneSection() throws Exception {
        List<ConfigKey<?>> declared = new ArrayList<>();
        for (Field f : Config.class.getDeclaredFields())
            if (Modifier.isStatic(f.getModifiers()) && f.getType() == ConfigKey.class) declared.add((ConfigKey<?>) f.get(null));
        assertThat(declared).hasSizeGreaterThan(50);
        assertThat(Config.KEYS).as("a key in no section is never read").containsExactlyInAnyOrderElementsOf(declared);
        assertThat(new HashSet<>(Config.KEYS)).as("a key in two sections").hasSameSizeAs(Config.KEYS);
        assertThat(Config.KEYS.stream().map(ConfigKey::name).distinct()).hasSameSizeAs(Config.KEYS);
    }

    @Test
    void everyKeyAndSectionSaysWhatItIsFor() {
        for (ConfigSection s : Config.SECTIONS) {
            assertThat(s.title()).isNotBlank();
            assertThat(s.about()).as(s.title()).endsWith(".");
            assertThat(s.keys()).as(s.title()).isNotEmpty();
        }
        for (ConfigKey<?> k : Config.KEYS)
            assertThat(k.description()).as(k.name()).isNotBlank().matches("(?s)[A-Z`].*[.)]")
                    .doesNotContain("\n");
    }

    @Test
    void aRowShowsTheDefaultOrUnsetAndKeepsATableCellWhole() {
        assertThat(ConfigReference.row(ConfigKey.string("SOME_KEY", "", "Either a | b.")))
                .isEqualTo("| `SOME_KEY` | (unset) | Either a \\| b. |");
        assertThat(ConfigReference.row(ConfigKey.integer("OTHER_KEY", 30, 1, 60, "Seconds.")))
                .isEqualTo("| `OTHER_KEY` | `30` | Seconds. |");
    }

    @Test
    void sectionAnchorsAreTheOnesGithubGivesTheirHeadings() {
        assertThat(ConfigReference.anchor("Runs: slots, queue and limits")).isEqualTo("runs-slots-queue-and-limits");
        assertThat(ConfigReference.anchor("Keys and the HTTP edge")).isEqualTo("keys-and-the-http-edge");
    }
}
