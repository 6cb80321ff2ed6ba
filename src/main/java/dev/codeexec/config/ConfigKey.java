package dev.codeexec.config;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.function.Function;

/**
 * One configuration variable: its name, default, description and parser. The parser throws
 * {@link IllegalArgumentException} with a short reason; {@link Config} prefixes it with the key's name.
 *
 * @param name         environment variable name
 * @param defaultValue default as the user would write it ("" = unset)
 * @param description  what it does, in markdown (links relative to docs/): its row in docs/configuration.md
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

    /** {@code auto}, {@code off}, or {@code FIRST-LAST}: host uids from 1 to 4294967294, FIRST at most LAST. */
    static ConfigKey<String> uidRange(String name, String def, String description) {
        return new ConfigKey<>(name, def, description, s -> {
            String v = s.trim().toLowerCase();
            if (v.equals("auto") || v.equals("off")) return v;
            String[] p = v.split("-", -1);
            try {
                if (p.length == 2) {
                    long first = Long.parseLong(p[0].trim()), last = Long.parseLong(p[1].trim());
                    if (first >= 1 && last >= first && last <= Integer.MAX_VALUE - 1) return first + "-" + last;
                }
            } catch (NumberFormatException e) {
                // the message below
            }
            throw new IllegalArgumentException("must be auto, off or FIRST-LAST (host uids 1 to 2147483646), got '" + s + "'");
        });
    }

    static ConfigKey<String> oneOf(String name, String def, String description, String... allowed) {
        return new ConfigKey<>(name, def, description, s -> {
            String v = s.trim().toLowerCase();
            for (String a : allowed) if (a.equals(v)) return v;
            throw new IllegalArgumentException("must be one of " + String.join(", ", allowed) + ", got '" + s + "'");
        });
    }

    /**
     * {@code name=count,name=count}: names from {@code allowed}, counts 0..max; {@code off} = no entries.
     *
     * @param allowed the names allowed, or null for any lower-case name (checked later by whoever knows them)
     */
    static ConfigKey<Map<String, Integer>> counts(String name, String def, Set<String> allowed, int max, String description) {
        return new ConfigKey<>(name, def, description, s -> {
            Map<String, Integer> out = new LinkedHashMap<>();
            if (s.trim().equalsIgnoreCase("off")) return Map.of();
            for (String part : s.split(",")) {
                if (part.isBlank()) continue;
                String[] kv = part.trim().split("=", -1);
                if (kv.length != 2 || (allowed == null ? !kv[0].trim().matches("[a-z][a-z0-9_]{0,31}")
                        : !allowed.contains(kv[0].trim())))
                    throw new IllegalArgumentException(allowed == null ? "must look like name=1,name2=1, got '" + part.trim() + "'"
                            : "must look like " + String.join("=1,", allowed.stream().sorted().toList())
                            + "=1 (names: " + String.join(", ", allowed.stream().sorted().toList()) + "), got '" + part.trim() + "'");
                int n;
                try {
                    n = Integer.parseInt(kv[1].trim());
                } catch (NumberFormatException e) {
                    throw new IllegalArgumentException("count for " + kv[0].trim() + " must be a whole number, got '" + kv[1] + "'");
                }
                if (n < 0 || n > max) throw new IllegalArgumentException("count for " + kv[0].trim() + " must be between 0 and " + max);
                out.put(kv[0].trim(), n);
            }
            return Map.copyOf(out);
        });
    }

    /** Comma-separated names matching {@code pattern}; empty text = empty list. */
    static ConfigKey<List<String>> names(String name, String def, String pattern, String description) {
        return new ConfigKey<>(name, def, description, s -> {
            List<String> out = new ArrayList<>();
            for (String part : s.split(",")) {
                String v = part.trim();
                if (v.isEmpty()) continue;
                if (!v.matches(pattern)) throw new IllegalArgumentException("'" + v + "' is not a valid name");
                out.add(v);
            }
            return List.copyOf(out);
        });
    }
}
