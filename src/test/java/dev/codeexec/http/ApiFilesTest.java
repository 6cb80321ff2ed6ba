package dev.codeexec.http;

import dev.codeexec.testing.Trees;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import tools.jackson.databind.JsonNode;

import java.io.ByteArrayInputStream;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.zip.ZipEntry;
import java.util.zip.ZipInputStream;

import static org.assertj.core.api.Assertions.assertThat;

/** The REST file API against the real Jetty stack: upload, download, preview, ranges, tree, rename, delete, zip. */
@Tag("slow")
class ApiFilesTest {

    ApiClient api;

    @AfterEach
    void stop() throws Exception {
        if (api != null) api.close();
    }

    static JsonNode json(HttpResponse<String> r) {
        return JsonErrors.JSON.readTree(r.body());
    }

    /** The REST error shape, with no stack trace or exception text. */
    static void assertError(HttpResponse<String> r, int status, String code) {
        assertThat(r.statusCode()).as(r.uri() + " " + r.body()).isEqualTo(status);
        assertThat(r.headers().firstValue("Content-Type")).hasValueSatisfying(ct -> assertThat(ct).startsWith("application/json"));
        JsonNode n = json(r);
        assertThat(n.path("error").asString()).as(r.body()).isEqualTo(code);
        assertThat(n.path("message").asString()).isNotBlank();
        assertThat(r.body()).doesNotContain("Exception").doesNotContain("\tat ").doesNotContain("jsonrpc")
                .doesNotContain(System.getProperty("java.io.tmpdir"));
    }

    static byte[] random(int n, long seed) {
        byte[] b = new byte[n];
        new Random(seed).nextBytes(b);
        return b;
    }

    static String sha256(byte[] b) throws Exception {
        return HexFormat.of().formatHex(MessageDigest.getInstance("SHA-256").digest(b));
    }

    @Test
    void rawUploadThenDownloadGivesTheSameBytes() throws Exception {
        api = new ApiClient();
        byte[] data = random(300_000, 1);
        HttpResponse<String> up = api.upload("w1", "dir/sub/data.bin", data);
        assertThat(up.statusCode()).as(up.body()).isEqualTo(201);
        assertThat(json(up).path("path").asString()).isEqualTo("dir/sub/data.bin");
        assertThat(json(up).path("size").asLong()).isEqualTo(300_000);
        assertThat(json(up).path("sha256").asString()).isEqualTo(sha256(data));
        assertThat(Files.readAllBytes(api.dir("default", "w1").resolve("dir/sub/data.bin"))).isEqualTo(data);

        HttpResponse<byte[]> down = api.bytes(api.req("/api/workspaces/w1/files/dir/sub/data.bin").GET());
        assertThat(down.statusCode()).isEqualTo(200);
        assertThat(down.body()).isEqualTo(data);
        assertThat(down.headers().firstValue("Content-Length")).hasValue("300000");
        assertThat(down.headers().firstValue("ETag")).hasValueSatisfying(e -> assertThat(e).matches("\"[0-9a-f]{32}\""));
        assertThat(down.headers().firstValue("Last-Modified")).isPresent();
        assertThat(down.headers().firstValue("X-Content-Type-Options")).hasValue("nosniff");
        assertThat(down.headers().firstValue("Content-Disposition")).hasValueSatisfying(d ->
                assertThat(d).startsWith("attachment;").contains("filename=\"data.bin\""));

        // Replacing a file changes its ETag; no temporary files are left behind.
        String etag = down.headers().firstValue("ETag").orElseThrow();
        assertThat(api.upload("w1", "dir/sub/data.bin", "new").statusCode()).isEqualTo(201);
        HttpResponse<String> again = api.get("/api/workspaces/w1/files/dir/sub/data.bin");
        assertThat(again.body()).isEqualTo("new");
        assertThat(again.headers().firstValue("ETag")).isPresent().isNotEqualTo(java.util.Optional.of(etag));
        try (var s = Files.list(api.dir("default", "w1").resolve("dir/sub"))) {
            assertThat(s.map(p -> p.getFileName().toString())).containsExactly("data.bin");
        }
    }

    @Test
    void downloadOfAMissingFileOrWorkspaceIs404AndADirectoryIs400() throws Exception {
        api = new ApiClient();
        assertError(api.get("/api/workspaces/nope/files/a.txt"), 404, "not_found");
        api.upload("w", "d/a.txt", "x");
        assertError(api.get("/api/workspaces/w/files/missing.txt"), 404, "not_found");
        assertError(api.get("/api/workspaces/w/files/d"), 400, "bad_path");
        assertError(api.get("/api/workspaces/w/files/"), 400, "bad_request");
        assertError(api.get("/api/nothing-here"), 404, "not_found");
        assertError(api.send(api.req("/api/workspaces/w/files/a.txt").PUT(HttpRequest.BodyPublishers.ofString("x"))),
                405, "method_not_allowed");
        // Downloads never create a workspace.
        assertThat(api.dir("default", "nope")).doesNotExist();
    }

    @Test
    void multipartStoresEveryFileInTheDirectory() throws Exception {
        api = new ApiClient();
        Map<String, byte[]> files = new LinkedHashMap<>();
        files.put("a.txt", "alpha".getBytes(StandardCharsets.UTF_8));
        files.put("b.bin", random(200_000, 2));
        files.put("c.csv", "x,y\n1,2\n".getBytes(StandardCharsets.UTF_8));
        HttpResponse<String> r = api.multipart("mp", "inbox/", files);
        assertThat(r.statusCode()).as(r.body()).isEqualTo(201);
        JsonNode stored = json(r).path("files");
        assertThat(stored.size()).isEqualTo(3);
        List<String> paths = new ArrayList<>();
        stored.forEach(n -> paths.add(n.path("path").asString()));
        assertThat(paths).containsExactly("inbox/a.txt", "inbox/b.bin", "inbox/c.csv");
        assertThat(stored.get(1).path("sha256").asString()).isEqualTo(sha256(files.get("b.bin")));
        for (var f : files.entrySet()) {
            assertThat(Files.readAllBytes(api.dir("default", "mp").resolve("inbox").resolve(f.getKey())))
                    .isEqualTo(f.getValue());
        }
        // Part file names go through the same path checks as URLs.
        assertError(api.multipart("mp", "inbox/", Map.of("../evil.txt", new byte[]{1})), 400, "bad_path");
        assertThat(api.dir("default", "evil.txt")).doesNotExist();
        assertThat(api.root.resolve("default").resolve("mp").resolve("evil.txt")).doesNotExist();
        // The spool directory is left empty.
        try (var s = Files.list(api.dataDir.resolve("upload-tmp"))) {
            assertThat(s.toList()).isEmpty();
        }
    }

    @Test
    void rawUploadToADirectoryPathIsRefused() throws Exception {
        api = new ApiClient();
        assertError(api.upload("w", "dir/", "x"), 400, "bad_request");
        assertThat(api.dir("default", "w")).doesNotExist();
    }

    @Test
    void previewIsInlineOnlyForSafeTypesAndAlwaysLockedDown() throws Exception {
        api = new ApiClient();
        byte[] png = {(byte) 0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 0};
        api.upload("p", "notes.txt", "hello");
        api.upload("p", "chart.png", png);
        api.upload("p", "evil.svg", "<svg xmlns='http://www.w3.org/2000/svg'><script>alert(1)</script></svg>");
        api.upload("p", "page.html", "<script>alert(1)</script>");
        api.upload("p", "page.htm", "<script>alert(1)</script>");
        for (String f : List.of("notes.txt", "chart.png")) {
            HttpResponse<String> r = api.get("/api/workspaces/p/files/" + f + "?preview=1");
            assertThat(r.statusCode()).isEqualTo(200);
            assertThat(r.headers().firstValue("Content-Disposition")).hasValueSatisfying(d -> assertThat(d).startsWith("inline;"));
            assertThat(r.headers().firstValue("X-Content-Type-Options")).hasValue("nosniff");
            assertThat(r.headers().firstValue("Content-Security-Policy")).hasValue(Downloads.CSP);
        }
        assertThat(api.get("/api/workspaces/p/files/chart.png?preview=1").headers().firstValue("Content-Type"))
                .hasValue("image/png");
        for (String f : List.of("evil.svg", "page.html", "page.htm")) {
            HttpResponse<String> r = api.get("/api/workspaces/p/files/" + f + "?preview=1");
            assertThat(r.statusCode()).isEqualTo(200);
            assertThat(r.headers().firstValue("Content-Disposition")).as(f).hasValueSatisfying(d -> assertThat(d).startsWith("attachment;"));
            assertThat(r.headers().firstValue("X-Content-Type-Options")).hasValue("nosniff");
            assertThat(r.headers().firstValue("Content-Security-Policy")).hasValue(Downloads.CSP);
        }
        // Without preview=1 even text is an attachment.
        assertThat(api.get("/api/workspaces/p/files/notes.txt").headers().firstValue("Content-Disposition"))
                .hasValueSatisfying(d -> assertThat(d).startsWith("attachment;"));
    }

    @Test
    void rangesAndConditionalRequests() throws Exception {
        api = new ApiClient();
        api.upload("r", "digits.txt", "0123456789");
        String url = "/api/workspaces/r/files/digits.txt";
        HttpResponse<String> part = api.send(api.req(url).header("Range", "bytes=2-5").GET());
        assertThat(part.statusCode()).isEqualTo(206);
        assertThat(part.body()).isEqualTo("2345");
        assertThat(part.headers().firstValue("Content-Range")).hasValue("bytes 2-5/10");
        assertThat(part.headers().firstValue("Content-Length")).hasValue("4");
        assertThat(api.send(api.req(url).header("Range", "bytes=7-").GET()).body()).isEqualTo("789");
        assertThat(api.send(api.req(url).header("Range", "bytes=-3").GET()).body()).isEqualTo("789");
        assertThat(api.send(api.req(url).header("Range", "bytes=8-100").GET()).body()).isEqualTo("89");

        HttpResponse<String> bad = api.send(api.req(url).header("Range", "bytes=10-").GET());
        assertError(bad, 416, "range_not_satisfiable");
        assertThat(bad.headers().firstValue("Content-Range")).hasValue("bytes */10");
        // Several ranges: the whole file, which HTTP allows.
        assertThat(api.send(api.req(url).header("Range", "bytes=0-1,4-5").GET()).statusCode()).isEqualTo(200);

        String etag = api.get(url).headers().firstValue("ETag").orElseThrow();
        HttpResponse<String> same = api.send(api.req(url).header("If-None-Match", etag).GET());
        assertThat(same.statusCode()).isEqualTo(304);
        assertThat(same.body()).isEmpty();
        assertThat(api.send(api.req(url).header("If-None-Match", "\"other\"").GET()).statusCode()).isEqualTo(200);
        // If-Range with a stale tag: the whole (new) file instead of a range of it.
        api.upload("r", "digits.txt", "abcdefghij");
        HttpResponse<String> stale = api.send(api.req(url).header("Range", "bytes=0-1").header("If-Range", etag).GET());
        assertThat(stale.statusCode()).isEqualTo(200);
        assertThat(stale.body()).isEqualTo("abcdefghij");
    }

    @Test
    void treeListsOneLevel() throws Exception {
        api = new ApiClient();
        api.upload("t", "a.txt", "aaa");
        api.upload("t", "src/main.py", "print(1)");
        api.upload("t", "src/deep/x.py", "x");
        HttpResponse<String> r = api.get("/api/workspaces/t/tree?path=");
        assertThat(r.statusCode()).isEqualTo(200);
        JsonNode top = json(r);
        assertThat(top.size()).isEqualTo(2);
        assertThat(top.get(0).path("name").asString()).isEqualTo("a.txt");
        assertThat(top.get(0).path("type").asString()).isEqualTo("file");
        assertThat(top.get(0).path("size").asLong()).isEqualTo(3);
        assertThat(top.get(0).path("modified").asString()).matches("\\d{4}-\\d\\d-\\d\\dT.*Z");
        assertThat(top.get(1).path("name").asString()).isEqualTo("src");
        assertThat(top.get(1).path("type").asString()).isEqualTo("directory");
        JsonNode src = json(api.get("/api/workspaces/t/tree?path=src"));
        assertThat(src.size()).isEqualTo(2);
        assertThat(src.get(0).path("name").asString()).isEqualTo("deep");
        assertThat(src.get(1).path("name").asString()).isEqualTo("main.py");
        assertThat(json(api.get("/api/workspaces/t/tree")).size()).isEqualTo(2);
        assertError(api.get("/api/workspaces/t/tree?path=nope"), 404, "not_found");
        assertError(api.get("/api/workspaces/t/tree?path=a.txt"), 400, "bad_path");
        assertError(api.get("/api/workspaces/none/tree"), 404, "not_found");
    }

    @Test
    void workspacesListShowsSizeQuotaAndCounts() throws Exception {
        api = new ApiClient("WORKSPACE_QUOTA_MB", "5");
        api.upload("one", "a.txt", "12345");
        api.upload("one", "d/b.txt", "123");
        api.upload("two", "c.txt", "1");
        JsonNode list = json(api.get("/api/workspaces"));
        assertThat(list.size()).isEqualTo(2);
        JsonNode one = list.get(0);
        assertThat(one.path("name").asString()).isEqualTo("one");
        assertThat(one.path("size").asLong()).isEqualTo(8);
        assertThat(one.path("quota").asLong()).isEqualTo(5L * 1024 * 1024);
        assertThat(one.path("files").asInt()).isEqualTo(2);
        assertThat(one.path("directories").asInt()).isEqualTo(1);
        assertThat(one.path("lastUsed").asString()).isNotBlank();
        assertThat(list.get(1).path("name").asString()).isEqualTo("two");
        JsonNode single = json(api.get("/api/workspaces/one"));
        assertThat(single.path("size").asLong()).isEqualTo(8);
        assertThat(single.path("files").asInt()).isEqualTo(2);
        assertError(api.get("/api/workspaces/three"), 404, "not_found");
    }

    @Test
    void renameMovesAndCreatesParentsButNeverOverwrites() throws Exception {
        api = new ApiClient();
        api.upload("m", "a.txt", "A");
        api.upload("m", "taken.txt", "T");
        HttpResponse<String> r = api.rename("m", "{\"from\":\"a.txt\",\"to\":\"b/c.txt\"}");
        assertThat(r.statusCode()).as(r.body()).isEqualTo(200);
        assertThat(api.get("/api/workspaces/m/files/b/c.txt").body()).isEqualTo("A");
        assertError(api.get("/api/workspaces/m/files/a.txt"), 404, "not_found");

        assertError(api.rename("m", "{\"from\":\"b/c.txt\",\"to\":\"taken.txt\"}"), 409, "conflict");
        assertThat(api.get("/api/workspaces/m/files/taken.txt").body()).isEqualTo("T");
        assertThat(api.get("/api/workspaces/m/files/b/c.txt").body()).isEqualTo("A");

        assertError(api.rename("m", "{\"from\":\"missing\",\"to\":\"x\"}"), 404, "not_found");
        assertError(api.rename("m", "{\"from\":\"b\"}"), 400, "bad_request");
        assertError(api.rename("m", "not json"), 400, "bad_request");
        assertError(api.rename("m", "{\"from\":\"b\",\"to\":\"b/inner\"}"), 400, "bad_path");
        assertError(api.rename("none", "{\"from\":\"a\",\"to\":\"b\"}"), 404, "not_found");
    }

    @Test
    void deleteFilesDirectoriesAndWorkspaces() throws Exception {
        api = new ApiClient();
        api.upload("d", "f.txt", "x");
        api.upload("d", "dir/a.txt", "a");
        api.upload("d", "dir/sub/b.txt", "b");
        assertThat(api.delete("/api/workspaces/d/files/f.txt").statusCode()).isEqualTo(204);
        assertThat(api.dir("default", "d").resolve("f.txt")).doesNotExist();
        assertError(api.delete("/api/workspaces/d/files/f.txt"), 404, "not_found");
        assertError(api.delete("/api/workspaces/d/files/dir"), 409, "conflict");
        assertThat(api.dir("default", "d").resolve("dir/sub/b.txt")).exists();
        assertThat(api.delete("/api/workspaces/d/files/dir?recursive=1").statusCode()).isEqualTo(204);
        assertThat(api.dir("default", "d").resolve("dir")).doesNotExist();
        assertError(api.delete("/api/workspaces/d/files/"), 400, "bad_path");

        api.upload("d", "keep.txt", "k");
        assertThat(api.delete("/api/workspaces/d").statusCode()).isEqualTo(204);
        assertThat(api.dir("default", "d")).doesNotExist();
        assertError(api.delete("/api/workspaces/d"), 404, "not_found");
        assertError(api.get("/api/workspaces/d/tree"), 404, "not_found");
    }

    @Test
    void archiveZipsTheTreeWithoutLinks() throws Exception {
        api = new ApiClient();
        api.upload("z", "a.txt", "AAA");
        api.upload("z", "src/main.py", "print('hi')");
        api.upload("z", "src/empty/.keep", "");
        Path ws = api.dir("default", "z");
        Files.createSymbolicLink(ws.resolve("etc"), Path.of("/etc"));
        Files.createSymbolicLink(ws.resolve("src/passwd"), Path.of("/etc/passwd"));

        HttpResponse<byte[]> r = api.bytes(api.req("/api/workspaces/z/archive").GET());
        assertThat(r.statusCode()).as(new String(r.body(), StandardCharsets.UTF_8)).isEqualTo(200);
        assertThat(r.headers().firstValue("Content-Type")).hasValue("application/zip");
        assertThat(r.headers().firstValue("Content-Disposition")).hasValueSatisfying(d -> assertThat(d).contains("z.zip"));
        Map<String, String> entries = unzip(r.body());
        assertThat(entries).containsOnlyKeys("a.txt", "src/", "src/main.py", "src/empty/", "src/empty/.keep");
        assertThat(entries.get("src/main.py")).isEqualTo("print('hi')");
        assertThat(entries.values()).noneMatch(v -> v.contains("root:"));

        Map<String, String> sub = unzip(api.bytes(api.req("/api/workspaces/z/archive?path=src").GET()).body());
        assertThat(sub).containsOnlyKeys("main.py", "empty/", "empty/.keep");
        assertError(api.get("/api/workspaces/z/archive?path=a.txt"), 400, "bad_path");
        assertError(api.get("/api/workspaces/z/archive?path=etc"), 400, "bad_path");
    }

    /**
     * Names that are not UTF-8 used to list as one name ("a\uFFFD") and to break the archive (a duplicate zip entry,
     * after the 200 was sent). Now each is listed and archived under its own escaped name, with its own content.
     */
    @Test
    void namesThatAreNotUtf8AreListedAndArchivedFaithfully() throws Exception {
        api = new ApiClient();
        api.upload("n", "plain.txt", "plain");
        Path ws = api.dir("default", "n");
        Trees.file(ws, new byte[]{'a', (byte) 0xff}, "first".getBytes());
        Trees.file(ws, new byte[]{'a', (byte) 0xfe}, "second".getBytes());
        JsonNode tree = json(api.get("/api/workspaces/n/tree"));
        assertThat(tree.size()).isEqualTo(3);
        assertThat(List.of(tree.get(0).path("name").asString(), tree.get(1).path("name").asString()))
                .containsExactly("a\\xfe", "a\\xff");
        HttpResponse<byte[]> r = api.bytes(api.req("/api/workspaces/n/archive").GET());
        assertThat(r.statusCode()).isEqualTo(200);
        assertThat(unzip(r.body())).containsExactly(Map.entry("a\\xfe", "second"), Map.entry("a\\xff", "first"),
                Map.entry("plain.txt", "plain"));
        assertThat(zipComment(r.body())).isNull();
    }

    /**
     * A chain of 25,000 directories overflowed the recursive walks: the archive streamed a corrupt zip, the
     * workspace list answered 500. Now the archive is a valid zip down to the deepest level a path can name, and
     * its comment says the rest was left out.
     */
    @Test
    void aDeepChainIsArchivedAsAValidZipThatSaysWhatItLeftOutAndListedWithTheOthers() throws Exception {
        api = new ApiClient();
        api.upload("deep", "top.txt", "top");
        api.upload("other", "o.txt", "o");
        Trees.chain(api.dir("default", "deep"), "d", 25_000);
        try {
            HttpResponse<byte[]> r = api.bytes(api.req("/api/workspaces/deep/archive").GET());
            assertThat(r.statusCode()).isEqualTo(200);
            Map<String, String> entries = unzip(r.body());
            assertThat(entries).hasSize(1 + dev.codeexec.workspace.WorkspaceFs.MAX_WALK_DEPTH).containsKey("top.txt");
            assertThat(zipComment(r.body())).contains("incomplete").contains("levels deep");

            JsonNode list = json(api.get("/api/workspaces"));
            assertThat(list.size()).isEqualTo(2);
            assertThat(list.get(0).path("directories").asInt()).isEqualTo(25_000);
            assertThat(list.get(1).path("name").asString()).isEqualTo("other");
            assertThat(api.delete("/api/workspaces/deep").statusCode()).isEqualTo(204);
        } finally {
            Trees.clear(api.root);
        }
    }

    /** The zip's comment (from its end-of-central-directory record), or null when it has none. */
    static String zipComment(byte[] zip) throws Exception {
        Path f = Files.createTempFile("archive", ".zip");
        try {
            Files.write(f, zip);
            try (java.util.zip.ZipFile z = new java.util.zip.ZipFile(f.toFile())) {
                return z.getComment();
            }
        } finally {
            Files.delete(f);
        }
    }

    /** WORKSPACE_MAX_ENTRIES bounds API writes like the byte quota: 507, and nothing written. */
    @Test
    void uploadsPastTheEntryLimitAre507AndWriteNothing() throws Exception {
        api = new ApiClient("WORKSPACE_MAX_ENTRIES", "3");
        assertThat(api.upload("e", "one.txt", "1").statusCode()).isEqualTo(201);
        Map<String, byte[]> parts = new LinkedHashMap<>();
        parts.put("p1.txt", "p1".getBytes());
        parts.put("p2.txt", "p2".getBytes());
        assertError(api.multipart("e", "in/", parts), 507, "quota_exceeded"); // in/, p1, p2: one too many
        assertThat(api.dir("default", "e").resolve("in")).doesNotExist();
        assertThat(api.upload("e", "two.txt", "2").statusCode()).isEqualTo(201);
        assertThat(api.upload("e", "three.txt", "3").statusCode()).isEqualTo(201);
        HttpResponse<String> refused = api.upload("e", "four.txt", "4");
        assertError(refused, 507, "quota_exceeded");
        assertThat(json(refused).path("message").asString()).contains("WORKSPACE_MAX_ENTRIES");
        assertThat(api.upload("e", "three.txt", "replaced").statusCode()).isEqualTo(201);
        JsonNode info = json(api.get("/api/workspaces/e"));
        assertThat(info.path("entries").asInt()).isEqualTo(3);
        assertThat(info.path("maxEntries").asInt()).isEqualTo(3);
        assertThat(info.path("complete").asBoolean()).isTrue();
        assertThat(info.path("enforcement").asString()).isIn("measured", "xfs-project-quota");
    }

    static Map<String, String> unzip(byte[] zip) throws Exception {
        Map<String, String> out = new LinkedHashMap<>();
        try (ZipInputStream in = new ZipInputStream(new ByteArrayInputStream(zip))) {
            ZipEntry e;
            while ((e = in.getNextEntry()) != null) out.put(e.getName(), new String(in.readAllBytes(), StandardCharsets.UTF_8));
        }
        return out;
    }

    @Test
    void quotaExhaustionIs507AndKeepsTheOldFile() throws Exception {
        api = new ApiClient("WORKSPACE_QUOTA_MB", "1");
        assertThat(api.upload("q", "keep.bin", random(600_000, 3)).statusCode()).isEqualTo(201);
        assertThat(api.upload("q", "small.txt", "old content").statusCode()).isEqualTo(201);
        assertError(api.upload("q", "small.txt", random(600_000, 4)), 507, "quota_exceeded");
        assertThat(api.get("/api/workspaces/q/files/small.txt").body()).isEqualTo("old content");
        assertError(api.upload("q", "other.bin", random(600_000, 5)), 507, "quota_exceeded");
        assertThat(api.dir("default", "q").resolve("other.bin")).doesNotExist();
        // Multipart is checked as a whole before anything is written.
        Map<String, byte[]> parts = new LinkedHashMap<>();
        parts.put("p1.bin", random(300_000, 6));
        parts.put("p2.bin", random(300_000, 7));
        assertError(api.multipart("q", "in/", parts), 507, "quota_exceeded");
        assertThat(api.dir("default", "q").resolve("in")).doesNotExist();
        // Replacing a file may reuse its own space.
        assertThat(api.upload("q", "keep.bin", random(700_000, 8)).statusCode()).isEqualTo(201);
        try (var s = Files.list(api.dir("default", "q"))) {
            assertThat(s.map(p -> p.getFileName().toString())).containsExactlyInAnyOrder("keep.bin", "small.txt");
        }
    }

    @Test
    void uploadsOverMaxUploadMbAre413() throws Exception {
        api = new ApiClient("MAX_UPLOAD_MB", "1", "MAX_BODY_MB", "1");
        // Content-Length known up front: refused before the body is read (beyond the multipart envelope's room).
        assertError(api.upload("u", "big.bin", random(1024 * 1024 + 64 * 1024 + 1, 9)), 413, "too_large");
        // Within that room: counted as it streams, refused all the same.
        assertError(api.upload("u", "big.bin", random(1024 * 1024 + 1, 9)), 413, "too_large");
        // Chunked (no Content-Length): counted while streaming.
        HttpResponse<String> chunked = api.send(api.req("/api/workspaces/u/files/big.bin")
                .POST(HttpRequest.BodyPublishers.ofInputStream(() -> new ByteArrayInputStream(random(1024 * 1024 + 1, 10)))));
        assertError(chunked, 413, "too_large");
        assertThat(api.dir("default", "u")).doesNotExist();
        Map<String, byte[]> parts = new LinkedHashMap<>();
        parts.put("a.bin", random(700_000, 11));
        parts.put("b.bin", random(700_000, 12));
        assertError(api.multipart("u", "in/", parts), 413, "too_large");
        // Exactly the limit is fine, raw or as a multipart part; and MAX_BODY_MB does not apply to /api.
        assertThat(api.upload("u", "ok.bin", random(1024 * 1024, 13)).statusCode()).isEqualTo(201);
        assertThat(api.multipart("u", "in/", Map.of("ok.bin", random(1024 * 1024, 14))).statusCode()).isEqualTo(201);
        assertError(api.multipart("u", "in/", Map.of("big.bin", random(1024 * 1024 + 1, 15))), 413, "too_large");
    }

    @Test
    void authVerifyWithoutKeysIsTheDefaultTenantAsAdmin() throws Exception {
        api = new ApiClient();
        HttpResponse<String> r = api.get("/api/auth/verify");
        assertThat(r.statusCode()).isEqualTo(200);
        assertThat(json(r).path("tenant").asString()).isEqualTo("default");
        assertThat(json(r).path("admin").asBoolean()).isTrue();
    }

    @Test
    void apiKeyProtectsTheApi() throws Exception {
        api = new ApiClient("API_KEY", "k-123");
        assertError(api.get("/api/auth/verify"), 401, "unauthorized");
        assertError(api.upload("w", "a.txt", "x"), 401, "unauthorized");
        HttpResponse<String> ok = api.as("k-123").get("/api/auth/verify");
        assertThat(ok.statusCode()).isEqualTo(200);
        assertThat(json(ok).path("tenant").asString()).isEqualTo("default");
        assertThat(json(ok).path("admin").asBoolean()).isTrue();
        assertError(api.as("k-1234").get("/api/auth/verify"), 401, "unauthorized");
    }
}
