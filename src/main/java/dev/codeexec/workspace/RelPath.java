package dev.codeexec.workspace;

import java.nio.charset.StandardCharsets;
import java.text.Normalizer;
import java.util.ArrayList;
import java.util.List;

/**
 * A path inside a workspace that passed the lexical checks: relative, NFC-normalised, no {@code ..}, no empty
 * components, no NUL or control characters, no backslashes, no unpaired surrogates, bounded length. The empty path
 * is the workspace root. Passing these checks is necessary, not sufficient: {@link WorkspaceFs} still refuses
 * symbolic links on the way. Paths that {@link WorkspaceFs} lists may hold names no client could send (not UTF-8,
 * see {@link Names}); {@link #toString} shows them escaped.
 */
public record RelPath(List<String> parts) {

    static final int MAX_PATH_BYTES = 1024;
    static final int MAX_NAME_BYTES = 255;
    static final int MAX_DEPTH = 32;

    public static final RelPath ROOT = new RelPath(List.of());

    public RelPath {
        parts = List.copyOf(parts);
    }

    /** Parses a client path; a leading or trailing "/" is tolerated only as "the root" or "a directory". */
    public static RelPath parse(String raw) {
        if (raw == null) return ROOT;
        String s = Normalizer.normalize(raw, Normalizer.Form.NFC);
        if (s.getBytes(StandardCharsets.UTF_8).length > MAX_PATH_BYTES)
            throw bad(raw, "longer than " + MAX_PATH_BYTES + " bytes");
        if (s.startsWith("/") && !s.equals("/")) throw bad(raw, "absolute paths are not allowed");
        if (s.indexOf('\\') >= 0) throw bad(raw, "backslashes are not allowed");
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            if (c < 0x20 || c == 0x7f) throw bad(raw, "control characters are not allowed");
            if (Character.isSurrogate(c) && !(Character.isHighSurrogate(c) && i + 1 < s.length()
                    && Character.isLowSurrogate(s.charAt(++i)))) throw bad(raw, "not valid Unicode");
        }
        List<String> parts = new ArrayList<>();
        String[] split = s.split("/", -1);
        for (int i = 0; i < split.length; i++) {
            String p = split[i];
            boolean edge = i == 0 || i == split.length - 1;
            if (p.isEmpty()) {
                if (edge) continue;
                throw bad(raw, "empty path component");
            }
            if (p.equals(".")) continue;
            if (p.equals("..")) throw bad(raw, "'..' is not allowed");
            if (p.getBytes(StandardCharsets.UTF_8).length > MAX_NAME_BYTES)
                throw bad(raw, "a name is longer than " + MAX_NAME_BYTES + " bytes");
            parts.add(p);
        }
        if (parts.size() > MAX_DEPTH) throw bad(raw, "deeper than " + MAX_DEPTH + " levels");
        return new RelPath(parts);
    }

    private static WorkspaceException bad(String raw, String why) {
        String shown = raw.length() > 120 ? raw.substring(0, 120) + "..." : raw;
        return new WorkspaceException(WorkspaceException.Kind.BAD_PATH,
                "bad path '" + shown.replaceAll("[\\p{Cntrl}\\p{Cs}]", "?") + "': " + why);
    }

    public boolean isRoot() {
        return parts.isEmpty();
    }

    /** The last component; the root has none. */
    public String name() {
        if (isRoot()) throw new WorkspaceException(WorkspaceException.Kind.BAD_PATH, "the workspace root has no name");
        return parts.getLast();
    }

    public RelPath parent() {
        return isRoot() ? ROOT : new RelPath(parts.subList(0, parts.size() - 1));
    }

    public RelPath child(String name) {
        List<String> p = new ArrayList<>(parts);
        p.add(name);
        return new RelPath(p);
    }

    /** The path as clients see it: names that are not plain UTF-8 escaped ({@link Names#display}). */
    @Override
    public String toString() {
        StringBuilder sb = new StringBuilder();
        for (String p : parts) sb.append(sb.isEmpty() ? "" : "/").append(Names.display(p));
        return sb.toString();
    }
}
