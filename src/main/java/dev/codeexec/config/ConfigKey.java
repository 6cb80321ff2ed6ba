package dev.codeexec.config;

import java.util.function.Function;

/**
 * One configuration variable: its name, default, description and parser. The parser throws
 * {@link IllegalArgumentException} with a short reason; {@link Config} prefixes it with the key's name.
 *
 * @param name         environment variable name
 * @param defaultValue default as the user would write it ("" = unset)
 * @param description  one line for the README table
 * @param parser       turns the text into a typed value and checks it
 */
public record ConfigKey<T>(String name, String defaultValue, String description, Function<String, T> parser) {

    static ConfigKey<Integer> integer(String name, int def, int min, int max, String description) {
        return new ConfigKey<>(name, Integer.toString(def), description, s -> {
            int v;
            try {
                v = Integer.parseInt(s.trim());
            } catch (NumberFormatException e) {
                throw new IllegalArgumentException("must be a whole number, got '" + s + "'");
            }
            if (v < min || v > max) throw new IllegalArgumentException("must be between " + min + " and " + max + ", got " + v);
            return v;
        });
    }

    static ConfigKey<Boolean> bool(String name, boolean def, String description) {
        return new ConfigKey<>(name, Boolean.toString(def), description, s -> switch (s.trim().toLowerCase()) {
            case "true", "1", "yes" -> true;
            case "false", "0", "no" -> false;
            default -> throw new IllegalArgumentException("must be true or false, got '" + s + "'");
        });
    }

    static ConfigKey<String> string(String name, String def, String description) {
        return new ConfigKey<>(name, def, description, String::trim);
    }

    static ConfigKey<String> oneOf(String name, String def, String description, String... allowed) {
        return new ConfigKey<>(name, def, description, s -> {
            String v = s.trim().toLowerCase();
            for (String a : allowed) if (a.equals(v)) return v;
            throw new IllegalArgumentException("must be one of " + String.join(", ", allowed) + ", got '" + s + "'");
        });
    }
}
