package dev.codeexec.http;

import dev.codeexec.workspace.RelPath;
import dev.codeexec.workspace.Workspaces;

import java.io.ByteArrayOutputStream;
import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.Map;

/**
 * One parsed /api request target. It is parsed from the raw, still-encoded URI, so what the client sent (an
 * encoded {@code ..}, a NUL as {@code %00}, a backslash) reaches {@link RelPath#parse} as written and is refused
 * there, instead of being normalised away by the container first.
 *
 * @param resource  {@code auth/verify}, {@code workspaces}, {@code workspace}, {@code files}, {@code tree},
 *                  {@code archive} or {@code rename}
 * @param workspace the workspace name (checked), or null
 * @param path      the file path below {@code files/}, or the root
 * @param directory whether that path ended with a slash (names a directory for multipart uploads)
 * @param query     decoded query parameters (first value of each)
 */
record ApiRoute(String resource, String workspace, RelPath path, boolean directory, Map<String, String> query) {

    static ApiRoute parse(String rawPath, String rawQuery) {
        Map<String, String> query = query(rawQuery);
        String prefix = JsonErrors.API_PATH + "/";
        if (!rawPath.startsWith(prefix)) throw notFound();
        String rest = rawPath.substring(prefix.length());
        if (rest.equals("auth/verify")) return new ApiRoute("auth/verify", null, RelPath.ROOT, false, query);
        if (rest.equals("workspaces") || rest.equals("workspaces/"))
            return new ApiRoute("workspaces", null, RelPath.ROOT, false, query);
        if (!rest.startsWith("workspaces/")) throw notFound();
        rest = rest.substring("workspaces/".length());
        int slash = rest.indexOf('/');
        String ws = Workspaces.checkName("workspace", decode(slash < 0 ? rest : rest.substring(0, slash)));
        if (slash < 0 || slash == rest.length() - 1) return new ApiRoute("workspace", ws, RelPath.ROOT, false, query);
        String tail = rest.substring(slash + 1);
        switch (tail) {
            case "tree", "archive" -> {
                return new ApiRoute(tail, ws, RelPath.parse(query.getOrDefault("path", "")), false, query);
            }
            case "rename" -> {
                return new ApiRoute(tail, ws, RelPath.ROOT, false, query);
            }
            case "files" -> {
                return new ApiRoute("files", ws, RelPath.ROOT, true, query);
            }
            default -> {
                if (!tail.startsWith("files/")) throw notFound();
                String file = decode(tail.substring("files/".length()));
                return new ApiRoute("files", ws, RelPath.parse(file), file.isEmpty() || file.endsWith("/"), query);
            }
        }
    }

    private static ApiException notFound() {
        return new ApiException(404, "not_found", "no such API route");
    }

    /** Strict percent-decoding: malformed escapes and invalid UTF-8 (overlong forms included) are refused. */
    static String decode(String raw) {
        if (raw.indexOf('%') < 0) return raw;
        ByteArrayOutputStream bytes = new ByteArrayOutputStream(raw.length());
        for (int i = 0; i < raw.length(); i++) {
            char c = raw.charAt(i);
            if (c == '%') {
                if (i + 2 >= raw.length()) throw ApiException.badRequest("bad percent-encoding in the URL");
                int hi = Character.digit(raw.charAt(i + 1), 16);
                int lo = Character.digit(raw.charAt(i + 2), 16);
                if (hi < 0 || lo < 0) throw ApiException.badRequest("bad percent-encoding in the URL");
                bytes.write(hi << 4 | lo);
                i += 2;
            } else {
                byte[] b = String.valueOf(c).getBytes(StandardCharsets.UTF_8);
                bytes.write(b, 0, b.length);
            }
        }
        try {
            return StandardCharsets.UTF_8.newDecoder().onMalformedInput(CodingErrorAction.REPORT)
                    .onUnmappableCharacter(CodingErrorAction.REPORT).decode(ByteBuffer.wrap(bytes.toByteArray())).toString();
        } catch (CharacterCodingException e) {
            throw ApiException.badRequest("the URL is not valid UTF-8 once decoded");
        }
    }

    /** The query string parsed here, never through the servlet API, which may read a form body to find parameters. */
    static Map<String, String> query(String raw) {
        Map<String, String> out = new HashMap<>();
        if (raw == null || raw.isEmpty()) return out;
        for (String pair : raw.split("&")) {
            if (pair.isEmpty()) continue;
            int eq = pair.indexOf('=');
            String k = decode((eq < 0 ? pair : pair.substring(0, eq)).replace('+', ' '));
            String v = eq < 0 ? "" : decode(pair.substring(eq + 1).replace('+', ' '));
            out.putIfAbsent(k, v);
        }
        return out;
    }

    boolean flag(String name) {
        String v = query.get(name);
        return v != null && (v.equals("1") || v.equalsIgnoreCase("true") || v.isEmpty());
    }
}
