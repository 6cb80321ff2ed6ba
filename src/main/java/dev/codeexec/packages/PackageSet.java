package dev.codeexec.packages;

import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * What a run declares it needs ({@code execute_code}'s {@code packages}), checked and normalised, so that the same
 * needs always name the same store entry: names and version constraints only, never a URL, a path, a VCS reference
 * or an installer option (each is refused with the reason, before anything is installed).
 *
 * <p>Python: PEP 508 requirements without markers or URLs, {@code name[extra,...]} followed by comma-separated
 * version clauses ({@code ==}, {@code !=}, {@code <=}, {@code >=}, {@code <}, {@code >}, {@code ~=}, {@code ===});
 * names are normalised as PEP 503 says (lower case, runs of {@code -_.} as one {@code -}). npm: {@code name} or
 * {@code @scope/name}, optionally {@code @} and a semver version or range ({@code 1.3.0}, {@code ^4}, {@code ~1.2},
 * {@code >=1 <2}, {@code 1.x}) or a dist-tag ({@code latest}); never {@code npm:} aliases, {@code git}/{@code http}
 * /{@code file:} specs, {@code user/repo} shorthands or paths. A name may appear once.
 *
 * @param ecosystem {@code pip} or {@code npm}
 * @param specs     the normalised requirement strings, sorted by name
 */
public record PackageSet(String ecosystem, List<String> specs) {

    /** At most this many requirements in one request. */
    public static final int MAX_SPECS = 64;
    private static final int MAX_SPEC_LENGTH = 200;

    private static final Pattern PIP = Pattern.compile(
            "([A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)\\s*(\\[\\s*[A-Za-z0-9._-]+(?:\\s*,\\s*[A-Za-z0-9._-]+)*\\s*])?\\s*(.*)");
    private static final Pattern PIP_CLAUSE = Pattern.compile("(===|~=|==|!=|<=|>=|<|>)\\s*([A-Za-z0-9.*+!_-]+)");
    private static final Pattern NPM_NAME = Pattern.compile("(?:@[a-z0-9][a-z0-9._~-]*/)?[a-z0-9][a-z0-9._~-]*");
    /**
     * A version of node-semver's range grammar, possibly partial: {@code 1}, {@code 1.x}, {@code v1.2.3-beta.1+build}.
     * No two parts can take the same text, so matching is linear.
     */
    private static final String NPM_PARTIAL = "[vV]?(?:[xX*]|\\d++)(?:\\.(?:[xX*]|\\d++)(?:\\.(?:[xX*]|\\d++)"
            + "(?:-[0-9A-Za-z-]++(?:\\.[0-9A-Za-z-]++)*+)?(?:\\+[0-9A-Za-z-]++(?:\\.[0-9A-Za-z-]++)*+)?)?)?";
    private static final Pattern NPM_VERSION = Pattern.compile(NPM_PARTIAL);
    private static final Pattern NPM_OPERATOR = Pattern.compile("<=|>=|<|>|=|~>?|\\^");
    /** One comparator: an operator joined to its version ({@code ^1.2}, {@code >=1}) or a version alone. */
    private static final Pattern NPM_COMPARATOR = Pattern.compile("(?:<=|>=|<|>|=|~>?|\\^)?" + NPM_PARTIAL);
    private static final Pattern NPM_TAG = Pattern.compile("[A-Za-z][A-Za-z0-9._-]*");
    /** A name npm reads as a local tarball (npm-package-arg's isFileType), whatever follows it. */
    private static final Pattern NPM_FILE_NAME = Pattern.compile("(?i).*\\.(?:tgz|tar\\.gz|tar)");

    public PackageSet {
        specs = List.copyOf(specs);
    }

    /** The ecosystem of a language, or null when the language takes no packages. */
    public static String ecosystemOf(String language) {
        return switch (language) {
            case "python" -> "pip";
            case "nodejs", "typescript" -> "npm";
            default -> null;
        };
    }

    /**
     * Checks and normalises {@code requested} for {@code language}.
     *
     * @throws IllegalArgumentException naming the first requirement that is refused, and why
     */
    public static PackageSet parse(String language, List<String> requested) {
        String eco = ecosystemOf(language);
        if (eco == null)
            throw new IllegalArgumentException("'packages' is for python (pip requirements) and nodejs/typescript (npm "
                    + "packages); " + language + " takes none: install nothing, or use one of those languages");
        if (requested.size() > MAX_SPECS) throw new IllegalArgumentException("at most " + MAX_SPECS + " packages in one run");
        Map<String, String> byName = new TreeMap<>();
        for (String raw : requested) {
            if (raw == null || raw.isBlank()) throw new IllegalArgumentException("a package name is empty");
            String s = raw.strip();
            if (s.length() > MAX_SPEC_LENGTH) throw new IllegalArgumentException("'" + s.substring(0, 40) + "...' is too long");
            String[] nameAndSpec = eco.equals("pip") ? pip(s) : npm(s);
            if (byName.put(nameAndSpec[0], nameAndSpec[1]) != null)
                throw new IllegalArgumentException("'" + nameAndSpec[0] + "' is named twice: give one requirement per package");
        }
        return new PackageSet(eco, List.copyOf(byName.values()));
    }

    /** The normalised name and the normalised requirement of one pip requirement. */
    static String[] pip(String s) {
        refuseCommon(s, "pip");
        if (s.contains(";")) throw refused(s, "environment markers (';') are not accepted: name the package and its versions");
        if (s.contains("@")) throw refused(s, "a direct reference ('name @ url') is not accepted: name a version from the index");
        Matcher m = PIP.matcher(s);
        if (!m.matches()) throw refused(s, "not a pip requirement: a name, optional [extras], optional version clauses");
        String name = m.group(1).toLowerCase(Locale.ROOT).replaceAll("[-_.]+", "-");
        StringBuilder out = new StringBuilder(name);
        if (m.group(2) != null) {
            List<String> extras = new ArrayList<>();
            for (String e : m.group(2).replaceAll("[\\[\\]\\s]", "").split(","))
                extras.add(e.toLowerCase(Locale.ROOT).replaceAll("[-_.]+", "-"));
            out.append('[').append(String.join(",", extras.stream().sorted().distinct().toList())).append(']');
        }
        String rest = m.group(3).strip();
        if (!rest.isEmpty()) {
            List<String> clauses = new ArrayList<>();
            for (String c : rest.split(",")) {
                Matcher cm = PIP_CLAUSE.matcher(c.strip());
                if (!cm.matches()) throw refused(s, "'" + c.strip() + "' is not a version clause (==1.2, >=2, ~=1.4, !=1.3, <3)");
                clauses.add(cm.group(1) + cm.group(2));
            }
            out.append(String.join(",", clauses.stream().sorted().distinct().toList()));
        }
        return new String[] {name, out.toString()};
    }

    /** The name and the normalised spec of one npm package. */
    static String[] npm(String s) {
        refuseCommon(s, "npm");
        if (s.startsWith("npm:") || s.contains("@npm:")) throw refused(s, "npm aliases ('npm:') are not accepted");
        int at = s.indexOf('@', s.startsWith("@") ? 1 : 0);
        String name = at < 0 ? s : s.substring(0, at);
        String version = at < 0 ? "" : s.substring(at + 1).strip();
        if (!name.equals(name.toLowerCase(Locale.ROOT)) || !NPM_NAME.matcher(name).matches() || name.length() > 214)
            throw refused(s, name.contains("/") && !name.startsWith("@")
                    ? "'user/repo' shorthands (GitHub) are not accepted: name a package from the registry"
                    : "not an npm package name (lower case, optional @scope/)");
        if (NPM_FILE_NAME.matcher(name).matches())
            throw refused(s, "npm reads a name ending in .tgz, .tar.gz or .tar as a local tarball: name a package");
        if (at >= 0 && (version.isEmpty() || !(isRange(version) || NPM_TAG.matcher(version).matches())))
            throw refused(s, "'" + version + "' is not a version, range or tag");
        return new String[] {name, at < 0 ? name : name + "@" + version.replaceAll("\\s+", " ")};
    }

    /**
     * Whether {@code v} is a range in node-semver's grammar: sets joined by {@code ||} (an empty one is any
     * version), each a hyphen range ({@code 1.2 - 2}) or comparators separated by spaces, an operator possibly
     * followed by spaces before its version ({@code >= 1.2}). A scan, not one regular expression: the grammar's
     * ambiguities (a space in a set or after an operator) would let a backtracking matcher take exponential time.
     */
    static boolean isRange(String v) {
        for (String set : v.split("\\|\\|", -1)) {
            List<String> words = new ArrayList<>();
            for (String w : set.strip().split("\\s+")) {
                if (w.isEmpty()) continue;
                // an operator alone ('>= 1.2') belongs to the version after it
                if (!words.isEmpty() && NPM_OPERATOR.matcher(words.getLast()).matches()) words.set(words.size() - 1, words.getLast() + w);
                else words.add(w);
            }
            boolean hyphen = words.size() == 3 && words.get(1).equals("-");
            for (int i = 0; i < words.size(); i++) {
                if (hyphen && i == 1) continue;
                if (!(hyphen ? NPM_VERSION : NPM_COMPARATOR).matcher(words.get(i)).matches()) return false;
            }
        }
        return true;
    }

    private static void refuseCommon(String s, String eco) {
        if (s.startsWith("-")) throw refused(s, "installer options are not accepted (the server chooses the index)");
        String lower = s.toLowerCase(Locale.ROOT);
        for (String scheme : new String[] {"://", "git+", "git:", "file:", "github:", "gitlab:", "bitbucket:", "gist:", "link:",
                "workspace:", "portal:"})
            if (lower.contains(scheme)) throw refused(s, "URLs, VCS references and paths are not accepted: name a package");
        if (s.startsWith(".") || s.startsWith("/") || s.startsWith("~") || s.contains("\\") || lower.endsWith(".whl")
                || lower.endsWith(".tar.gz") || lower.endsWith(".tgz") || lower.endsWith(".tar") || lower.endsWith(".zip"))
            throw refused(s, "paths and archives are not accepted: name a package");
        if (s.chars().anyMatch(c -> c < 0x20 || c == 0x7f)) throw refused(s, "control characters are not accepted");
    }

    private static IllegalArgumentException refused(String spec, String why) {
        return new IllegalArgumentException("package '" + spec + "' refused: " + why);
    }

    /**
     * The store key of this set for one interpreter: equal sets (whatever their order and spelling) on the same
     * interpreter version share it; anything else does not.
     */
    public String key(String interpreterVersion) {
        try {
            MessageDigest d = MessageDigest.getInstance("SHA-256");
            d.update((ecosystem + "\n" + interpreterVersion + "\n" + String.join("\n", specs)).getBytes(StandardCharsets.UTF_8));
            return ecosystem + "-" + HexFormat.of().formatHex(d.digest()).substring(0, 32);
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
    }
}
