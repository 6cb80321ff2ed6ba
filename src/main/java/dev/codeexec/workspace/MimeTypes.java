package dev.codeexec.workspace;

import java.util.Locale;
import java.util.Map;
import java.util.Set;

/**
 * MIME types by file extension, one table for every surface (REST downloads, resources, artifacts), plus which
 * types a browser may preview inline and which are images returned to MCP clients as image content.
 */
public final class MimeTypes {

    private static final Map<String, String> BY_EXTENSION = Map.ofEntries(
            Map.entry("txt", "text/plain"), Map.entry("log", "text/plain"), Map.entry("md", "text/markdown"),
            Map.entry("csv", "text/csv"), Map.entry("tsv", "text/tab-separated-values"),
            Map.entry("json", "application/json"), Map.entry("jsonl", "application/jsonl"),
            Map.entry("xml", "application/xml"), Map.entry("yaml", "application/yaml"), Map.entry("yml", "application/yaml"),
            Map.entry("toml", "application/toml"), Map.entry("ini", "text/plain"), Map.entry("cfg", "text/plain"),
            Map.entry("html", "text/html"), Map.entry("htm", "text/html"), Map.entry("css", "text/css"),
            Map.entry("js", "text/javascript"), Map.entry("mjs", "text/javascript"), Map.entry("ts", "text/x-typescript"),
            Map.entry("py", "text/x-python"), Map.entry("go", "text/x-go"), Map.entry("java", "text/x-java"),
            Map.entry("c", "text/x-c"), Map.entry("h", "text/x-c"), Map.entry("cpp", "text/x-c++"),
            Map.entry("sh", "text/x-shellscript"), Map.entry("bash", "text/x-shellscript"), Map.entry("sql", "text/x-sql"),
            Map.entry("rs", "text/x-rust"), Map.entry("rb", "text/x-ruby"), Map.entry("ipynb", "application/x-ipynb+json"),
            Map.entry("png", "image/png"), Map.entry("jpg", "image/jpeg"), Map.entry("jpeg", "image/jpeg"),
            Map.entry("gif", "image/gif"), Map.entry("svg", "image/svg+xml"), Map.entry("webp", "image/webp"),
            Map.entry("bmp", "image/bmp"), Map.entry("ico", "image/x-icon"), Map.entry("pdf", "application/pdf"),
            Map.entry("zip", "application/zip"), Map.entry("gz", "application/gzip"), Map.entry("tar", "application/x-tar"),
            Map.entry("parquet", "application/vnd.apache.parquet"), Map.entry("sqlite", "application/vnd.sqlite3"),
            Map.entry("db", "application/vnd.sqlite3"), Map.entry("wasm", "application/wasm"),
            Map.entry("mp3", "audio/mpeg"), Map.entry("wav", "audio/wav"), Map.entry("mp4", "video/mp4"));

    /** Images returned inline to MCP clients (issue contract: png, jpeg, gif, svg). */
    private static final Set<String> INLINE_IMAGES = Set.of("image/png", "image/jpeg", "image/gif", "image/svg+xml");

    /** Safe to show inline in a browser (with nosniff and a restrictive CSP): no HTML, no SVG (scripts). */
    private static final Set<String> PREVIEWABLE = Set.of("text/plain", "text/markdown", "text/csv",
            "text/tab-separated-values", "application/json", "application/jsonl", "application/yaml",
            "application/toml", "text/x-python", "text/x-go", "text/x-java", "text/x-c", "text/x-c++",
            "text/x-shellscript", "text/x-sql", "text/x-rust", "text/x-ruby", "text/x-typescript", "text/javascript",
            "text/css", "application/xml", "image/png", "image/jpeg", "image/gif", "image/webp", "image/bmp");

    private MimeTypes() {
    }

    /** The MIME type of a file name; {@code application/octet-stream} when unknown. */
    public static String of(String fileName) {
        int dot = fileName.lastIndexOf('.');
        if (dot < 0 || dot == fileName.length() - 1) return "application/octet-stream";
        return BY_EXTENSION.getOrDefault(fileName.substring(dot + 1).toLowerCase(Locale.ROOT), "application/octet-stream");
    }

    public static boolean isInlineImage(String mime) {
        return INLINE_IMAGES.contains(mime);
    }

    public static boolean isPreviewable(String mime) {
        return PREVIEWABLE.contains(mime);
    }

    /** Text types: a resource read returns these as text, everything else as a base64 blob. */
    public static boolean isText(String mime) {
        return mime.startsWith("text/") || mime.equals("application/json") || mime.equals("application/jsonl")
                || mime.equals("application/xml") || mime.equals("application/yaml") || mime.equals("application/toml")
                || mime.equals("image/svg+xml") || mime.equals("application/x-ipynb+json");
    }
}
