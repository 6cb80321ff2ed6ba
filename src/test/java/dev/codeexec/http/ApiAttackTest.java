package dev.codeexec.http;

import dev.codeexec.auth.ApiKeys;
import dev.codeexec.testing.LogCapture;
import dev.codeexec.testing.Poll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;

import static dev.codeexec.http.ApiFilesTest.assertError;
import static dev.codeexec.http.ApiFilesTest.json;
import static org.assertj.core.api.Assertions.assertThat;

/** Traversal, symbolic links and other tenants' workspaces, on every REST route. */
@Tag("slow")
class ApiAttackTest {

    ApiClient api;

    @AfterEach
    void stop() throws Exception {
        if (api != null) api.close();
    }

    /** Raw (still encoded) paths a client might send; each must be refused with 400, never resolved. */
    static final List<String> BAD_PATHS = List.of("..", "../x", "a/../../x", "%2e%2e/x", "a/%2E%2E/%2e%2e/etc/passwd",
            "%2Fetc%2Fpasswd", "a%5Cb", "%5C..%5Cx", "a/%2e%2e%2f%2e%2e%2fx", "%C0%AE%C0%AE/x");

    @Test
    void badPathsAre400OnEveryRoute() throws Exception {
        api = new ApiClient();
        api.upload("w", "a.txt", "A");
        for (String p : BAD_PATHS) {
            String file = "/api/workspaces/w/files/" + p;
            assertBad(api.get(file), p);
            assertBad(api.delete(file), p);
            assertBad(api.send(api.req(file).expectContinue(true).POST(HttpRequest.BodyPublishers.ofString("x"))), p);
            assertBad(api.multipart("w", p + "/", Map.of("f.txt", new byte[]{1})), p);
            assertBad(api.get("/api/workspaces/w/tree?path=" + p), p);
            assertBad(api.get("/api/workspaces/w/archive?path=" + p), p);
        }
        // NUL in the URL path: Jetty's parser refuses the request line itself, before any path is known; the
        // server's error handler still answers bad_path (JsonErrorHandler). In a query or a JSON body it reaches RelPath.
        for (String route : List.of("/api/workspaces/w/files/a%00b", "/api/workspaces/w%00/tree")) {
            HttpResponse<String> r = api.get(route);
            assertBad(r, route);
            assertThat(json(r).path("error").asString()).isEqualTo("bad_path");
            assertThat(r.headers().firstValue("Connection")).hasValue("close");
            assertBad(api.delete(route), route);
        }
        assertBad(api.get("/api/workspaces/w/tree?path=a%00b"), "NUL in query");
        assertBad(api.get("/api/workspaces/w/archive?path=%00"), "NUL in query");
        for (String p : List.of("../x", "/etc/passwd", "a\\b", "a\u0000b", "a/../../b")) {
            String q = JsonErrors.JSON.writeValueAsString(p);
            assertBad(api.rename("w", "{\"from\":" + q + ",\"to\":\"b.txt\"}"), p);
            assertBad(api.rename("w", "{\"from\":\"a.txt\",\"to\":" + q + "}"), p);
        }
        for (String ws : List.of("..", "a.b", "%2e%2e", "a%2Fb", "-".repeat(65))) {
            assertBad(api.get("/api/workspaces/" + ws + "/tree"), ws);
            assertBad(api.upload(ws, "f.txt", "x"), ws);
        }
        assertThat(api.get("/api/workspaces/w/files/a.txt").body()).isEqualTo("A");
        try (var s = Files.list(api.root.resolve("default"))) {
            assertThat(s.map(x -> x.getFileName().toString())).containsExactly("w");
        }
        try (var s = Files.list(api.dir("default", "w"))) {
            assertThat(s.map(x -> x.getFileName().toString())).containsExactly("a.txt");
        }
    }

    private static void assertBad(HttpResponse<String> r, String what) {
        assertThat(r.statusCode()).as(what + " → " + r.uri() + " " + r.body()).isEqualTo(400);
        assertThat(r.body()).as(what).doesNotContain("root:").doesNotContain("Exception").doesNotContain("jsonrpc");
        assertThat(json(r).path("error").asString()).as(what + " " + r.headers().map() + " " + r.body()).isIn("bad_path", "bad_name", "bad_request");
    }

    /**
     * Links planted by user code — to a host file, to a host directory, to another tenant's workspace, as the last
     * component and as a middle one — are never followed by any route.
     */
    @Test
    void plantedSymlinksAreRefusedOnEveryRoute() throws Exception {
        api = new ApiClient();
        api.upload("victim", "secret.txt", "victim's secret");
        api.upload("w", "real/ok.txt", "fine");
        Path ws = api.dir("default", "w");
        Path victim = api.dir("default", "victim");
        Files.createSymbolicLink(ws.resolve("passwd"), Path.of("/etc/passwd"));
        Files.createSymbolicLink(ws.resolve("etc"), Path.of("/etc"));
        Files.createSymbolicLink(ws.resolve("other"), victim);
        Files.createSymbolicLink(ws.resolve("real/up"), Path.of(".."));
        String passwd = Files.readString(Path.of("/etc/passwd"));

        for (String p : List.of("passwd", "etc/passwd", "other/secret.txt", "real/up/real/ok.txt")) {
            HttpResponse<String> r = api.get("/api/workspaces/w/files/" + p);
            assertThat(r.statusCode()).as(p + " " + r.body()).isIn(400, 404);
            assertThat(r.body()).doesNotContain("root:").doesNotContain("victim's");
            assertThat(api.get("/api/workspaces/w/files/" + p + "?preview=1").body()).doesNotContain("root:");
            assertThat(api.send(api.req("/api/workspaces/w/files/" + p).header("Range", "bytes=0-3").GET())
                    .statusCode()).isIn(400, 404);
        }
        for (String p : List.of("etc", "other", "real/up")) {
            assertThat(api.get("/api/workspaces/w/tree?path=" + p).statusCode()).as(p).isEqualTo(400);
            assertThat(api.get("/api/workspaces/w/archive?path=" + p).statusCode()).as(p).isEqualTo(400);
        }
        // Upload through a link: refused, nothing written at the link's target.
        for (String p : List.of("etc/evil.txt", "other/planted.txt", "real/up/x.txt")) {
            assertThat(api.upload("w", p, "pwned").statusCode()).as(p).isEqualTo(400);
            assertThat(api.multipart("w", p.substring(0, p.lastIndexOf('/') + 1), Map.of("m.txt", new byte[]{1}))
                    .statusCode()).as(p).isEqualTo(400);
        }
        assertThat(victim.resolve("planted.txt")).doesNotExist();
        assertThat(victim.resolve("m.txt")).doesNotExist();
        assertThat(Path.of("/etc/evil.txt")).doesNotExist();
        assertThat(ws.resolve("x.txt")).doesNotExist();
        // Rename through or onto a link.
        assertThat(api.rename("w", "{\"from\":\"other/secret.txt\",\"to\":\"stolen.txt\"}").statusCode()).isEqualTo(400);
        assertThat(api.rename("w", "{\"from\":\"real/ok.txt\",\"to\":\"other/moved.txt\"}").statusCode()).isEqualTo(400);
        assertThat(victim.resolve("moved.txt")).doesNotExist();
        assertThat(ws.resolve("real/ok.txt")).exists();
        // Delete through a link; deleting the link itself removes only the link.
        assertThat(api.delete("/api/workspaces/w/files/other/secret.txt").statusCode()).isEqualTo(400);
        assertThat(api.delete("/api/workspaces/w/files/etc/passwd?recursive=1").statusCode()).isEqualTo(400);
        assertThat(api.delete("/api/workspaces/w/files/other?recursive=1").statusCode()).isEqualTo(204);
        assertThat(ws.resolve("other")).doesNotExist();
        // The whole-workspace archive leaves the links out.
        HttpResponse<byte[]> zip = api.bytes(api.req("/api/workspaces/w/archive").GET());
        assertThat(ApiFilesTest.unzip(zip.body())).containsOnlyKeys("real/", "real/ok.txt");
        // Deleting the workspace removes links, not what they point to.
        assertThat(api.delete("/api/workspaces/w").statusCode()).isEqualTo(204);
        assertThat(Files.readString(Path.of("/etc/passwd"))).isEqualTo(passwd);
        assertThat(Files.readString(victim.resolve("secret.txt"))).isEqualTo("victim's secret");
    }

    @Test
    void tenantsNeverSeeEachOther() throws Exception {
        Path keys = Files.createTempFile("keys", ".txt");
        String a = "key-of-tenant-a";
        String b = "key-of-tenant-b";
        Files.writeString(keys, "# two tenants\nalice " + ApiKeys.hashHex(a) + "\nbob " + ApiKeys.hashHex(b) + " admin\n");
        try {
            api = new ApiClient("API_KEYS_FILE", keys.toString());
            api.as(a);
            assertThat(api.upload("shared", "a.txt", "alice's").statusCode()).isEqualTo(201);
            assertThat(api.upload("only-a", "x/y.txt", "alice only").statusCode()).isEqualTo(201);
            assertThat(json(api.get("/api/auth/verify")).path("tenant").asString()).isEqualTo("alice");

            api.as(b);
            assertThat(json(api.get("/api/auth/verify")).path("tenant").asString()).isEqualTo("bob");
            assertThat(json(api.get("/api/auth/verify")).path("admin").asBoolean()).isTrue();
            // Bob (even as admin) does not see or reach Alice's workspaces.
            assertThat(json(api.get("/api/workspaces")).size()).isZero();
            assertError(api.get("/api/workspaces/only-a/files/x/y.txt"), 404, "not_found");
            assertError(api.get("/api/workspaces/only-a/tree"), 404, "not_found");
            assertError(api.get("/api/workspaces/only-a/archive"), 404, "not_found");
            assertError(api.rename("only-a", "{\"from\":\"x/y.txt\",\"to\":\"z.txt\"}"), 404, "not_found");
            assertError(api.delete("/api/workspaces/only-a/files/x/y.txt"), 404, "not_found");
            assertError(api.delete("/api/workspaces/only-a/files/x?recursive=1"), 404, "not_found");
            assertError(api.delete("/api/workspaces/only-a"), 404, "not_found");
            assertError(api.get("/api/workspaces/shared/files/a.txt"), 404, "not_found");
            // The same name is Bob's own, separate workspace.
            assertThat(api.upload("shared", "a.txt", "bob's").statusCode()).isEqualTo(201);
            assertThat(api.get("/api/workspaces/shared/files/a.txt").body()).isEqualTo("bob's");
            assertThat(api.delete("/api/workspaces/shared").statusCode()).isEqualTo(204);
            // Writing to "only-a" creates Bob's own "only-a", never touching Alice's.
            assertThat(api.upload("only-a", "x/y.txt", "bob").statusCode()).isEqualTo(201);
            // A tenant name in the URL is just a workspace name in the caller's tenant.
            assertError(api.get("/api/workspaces/alice/files/only-a/x/y.txt"), 404, "not_found");

            api.as(a);
            assertThat(api.get("/api/workspaces/shared/files/a.txt").body()).isEqualTo("alice's");
            assertThat(api.get("/api/workspaces/only-a/files/x/y.txt").body()).isEqualTo("alice only");
            List<String> names = json(api.get("/api/workspaces")).valueStream().map(n -> n.path("name").asString()).toList();
            assertThat(names).containsExactly("only-a", "shared");
            assertThat(Files.readString(api.dir("alice", "only-a").resolve("x/y.txt"))).isEqualTo("alice only");
            assertThat(Files.readString(api.dir("bob", "only-a").resolve("x/y.txt"))).isEqualTo("bob");

            api.as("not-a-key");
            assertError(api.get("/api/workspaces"), 401, "unauthorized");
            api.as(null);
            assertError(api.get("/api/workspaces"), 401, "unauthorized");
        } finally {
            Files.deleteIfExists(keys);
        }
    }

    @Test
    void keysFileChangesApplyWithoutRestart() throws Exception {
        Path keys = Files.createTempFile("keys", ".txt");
        String a = "first-key";
        String c = "added-later";
        Files.writeString(keys, "alice " + ApiKeys.hashHex(a) + "\n");
        try {
            api = new ApiClient("API_KEYS_FILE", keys.toString(), "API_KEY", "single-key");
            assertThat(api.as(a).get("/api/auth/verify").statusCode()).isEqualTo(200);
            assertThat(json(api.as("single-key").get("/api/auth/verify")).path("tenant").asString()).isEqualTo("default");
            assertThat(api.as(c).get("/api/auth/verify").statusCode()).isEqualTo(401);

            Files.writeString(keys, "carol " + ApiKeys.hashHex(c) + "\n", StandardCharsets.UTF_8,
                    java.nio.file.StandardOpenOption.APPEND);
            waitForStatus(c, 200);
            assertThat(json(api.as(c).get("/api/auth/verify")).path("tenant").asString()).isEqualTo("carol");
            // A broken edit is logged and ignored: the last good set stays. Requests look at the file (at most once
            // a second); the log line says when one has read the broken edit, and the key still works after it.
            try (LogCapture log = LogCapture.of(ApiKeys.class)) {
                Files.writeString(keys, "alice not-a-hash\n");
                Poll.until("the broken edit read and refused", () -> {
                    assertThat(api.as(c).get("/api/auth/verify").statusCode()).isEqualTo(200);
                    return log.contains("API_KEYS_FILE not re-read");
                });
            }
            assertThat(api.as(c).get("/api/auth/verify").statusCode()).isEqualTo(200);
            // Removing the line revokes the key.
            Files.writeString(keys, "alice " + ApiKeys.hashHex(a) + "\n");
            waitForStatus(c, 401);
            assertThat(api.as(a).get("/api/auth/verify").statusCode()).isEqualTo(200);
            assertThat(api.as("single-key").get("/api/auth/verify").statusCode()).isEqualTo(200);
        } finally {
            Files.deleteIfExists(keys);
        }
    }

    /**
     * A directory swapped for a link to /etc and back, as fast as the filesystem allows, while downloads, listings
     * and archives run through it: never a byte of /etc comes back.
     */
    @Test
    void directorySwappedForALinkDuringRequestsNeverLeaks() throws Exception {
        api = new ApiClient();
        api.upload("race", "d/passwd", "safe content");
        Path ws = api.dir("default", "race");
        Files.createSymbolicLink(ws.resolve("link"), Path.of("/etc"));
        java.util.concurrent.atomic.AtomicBoolean run = new java.util.concurrent.atomic.AtomicBoolean(true);
        java.util.concurrent.atomic.AtomicInteger swaps = new java.util.concurrent.atomic.AtomicInteger();
        Thread swapper = Thread.ofPlatform().start(() -> {
            while (run.get()) {
                try {
                    Files.move(ws.resolve("d"), ws.resolve("real"));
                    Files.move(ws.resolve("link"), ws.resolve("d"));
                    Files.move(ws.resolve("d"), ws.resolve("link"));
                    Files.move(ws.resolve("real"), ws.resolve("d"));
                    swaps.incrementAndGet();
                } catch (java.io.IOException e) {
                    throw new java.io.UncheckedIOException(e);
                }
            }
        });
        java.util.Set<Integer> statuses = java.util.concurrent.ConcurrentHashMap.newKeySet();
        try (var pool = java.util.concurrent.Executors.newFixedThreadPool(3)) {
            List<java.util.concurrent.Future<?>> done = new java.util.ArrayList<>();
            for (int t = 0; t < 3; t++) {
                done.add(pool.submit(() -> {
                    for (int i = 0; i < 150; i++) {
                        for (String route : List.of("/api/workspaces/race/files/d/passwd", "/api/workspaces/race/tree?path=d",
                                "/api/workspaces/race/files/d/passwd?preview=1")) {
                            HttpResponse<String> r = api.get(route);
                            statuses.add(r.statusCode());
                            assertThat(r.body()).as(route).doesNotContain("root:").doesNotContain("\"shadow\"")
                                    .doesNotContain("\"hostname\"");
                        }
                        HttpResponse<byte[]> zip = api.bytes(api.req("/api/workspaces/race/archive").GET());
                        if (zip.statusCode() == 200) {
                            assertThat(ApiFilesTest.unzip(zip.body())).allSatisfy((name, content) ->
                                    assertThat(content).doesNotContain("root:"));
                        }
                    }
                    return null;
                }));
            }
            for (var f : done) f.get();
        } finally {
            run.set(false);
            swapper.join();
        }
        System.out.println("swap race: " + swaps.get() + " swaps, statuses " + statuses);
        assertThat(swaps.get()).isGreaterThan(10);
        assertThat(statuses).contains(200).isSubsetOf(200, 400, 404);
        assertThat(Files.readString(Path.of("/etc/hostname"))).isNotBlank();
    }

    @Test
    void tenantKeysWorkOnMcpToo() throws Exception {
        Path keys = Files.createTempFile("keys", ".txt");
        Files.writeString(keys, "alice " + ApiKeys.hashHex("mcp-key") + "\n");
        try {
            api = new ApiClient("API_KEYS_FILE", keys.toString());
            HttpRequest.Builder init = api.req("/mcp").header("Content-Type", "application/json")
                    .header("Accept", "application/json, text/event-stream")
                    .POST(HttpRequest.BodyPublishers.ofString(dev.codeexec.mcp.RawClient.INIT));
            assertThat(api.send(init).statusCode()).isEqualTo(401);
            api.as("mcp-key");
            HttpResponse<String> ok = api.send(api.req("/mcp").header("Content-Type", "application/json")
                    .header("Accept", "application/json, text/event-stream")
                    .POST(HttpRequest.BodyPublishers.ofString(dev.codeexec.mcp.RawClient.INIT)));
            assertThat(ok.statusCode()).as(ok.body()).isEqualTo(200);
            assertThat(api.as(null).get("/healthz").statusCode()).isEqualTo(200);
        } finally {
            Files.deleteIfExists(keys);
        }
    }

    /** Asks until the key gets the status: the server looks at the keys file at most once a second. */
    private void waitForStatus(String key, int status) throws Exception {
        Poll.until("the key answered with " + status, () -> api.as(key).get("/api/auth/verify").statusCode() == status);
    }
}
