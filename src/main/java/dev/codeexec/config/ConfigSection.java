package dev.codeexec.config;

import java.util.List;

/**
 * A group of configuration keys as the configuration reference (docs/configuration.md, generated from
 * {@link Config#SECTIONS}) lists them.
 *
 * @param title the section's heading
 * @param about one line on what the keys are for, in markdown (links relative to docs/)
 * @param keys  the keys, in the order they are listed
 */
public record ConfigSection(String title, String about, List<ConfigKey<?>> keys) {

    public ConfigSection {
        keys = List.copyOf(keys);
    }
}
