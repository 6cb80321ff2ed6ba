package dev.codeexec.local;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import com.sun.net.httpserver.HttpsConfigurator;
import com.sun.net.httpserver.HttpsParameters;
import com.sun.net.httpserver.HttpsServer;
import tools.jackson.databind.json.JsonMapper;

import javax.net.ssl.KeyManagerFactory;
import javax.net.ssl.SSLContext;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.KeyStore;
import java.security.MessageDigest;
import java.util.ArrayList;
import java.util.Base64;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.zip.GZIPOutputStream;

/**
 * An npm registry of the test's own on 127.0.0.1 (plain HTTP, or HTTPS with a throwaway self-signed certificate
 * for {@code npm.test}): packuments and tarballs of the packages the test adds, each a tar of {@code package/...}
 * built here. Tarball URLs name the host the request came to, so the registry works as 127.0.0.1 and as a name the
 * egress proxy pins to it ({@code EGRESS_RESOLVE npm.test=127.0.0.1}). Nothing here leaves the machine.
 */
final class NpmRegistry implements AutoCloseable {

    private static final JsonMapper JSON = JsonMapper.shared();

    private record Version(String version, Map<String, String> files, Map<String, String> dependencies, String postinstall) {
    }

    private final Map<String, List<Version>> packages = new ConcurrentHashMap<>();
    private final HttpServer server;
    /** Every request path, in order. */
    final List<String> requests = new CopyOnWriteArrayList<>();
    /** TLS connections the HTTPS registry was asked for (each one a handshake the client attempted). */
    final AtomicInteger tlsConnections = new AtomicInteger();
    private final String scheme;

    private NpmRegistry(HttpServer server, String scheme) {
        this.server = server;
        this.scheme = scheme;
        server.createContext("/", this::serve);
        server.setExecutor(Executors.newVirtualThreadPerTaskExecutor());
        server.start();
    }

    /** A plain-HTTP registry. */
    static NpmRegistry http() throws IOException {
        return new NpmRegistry(HttpServer.create(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0), 0), "http");
    }

    /**
     * An HTTPS registry whose certificate (for npm.test) is self-signed by a key made now with the openssl CLI in
     * {@code dir}: no client trusts it unless told to.
     */
    static NpmRegistry https(Path dir) throws Exception {
        openssl(dir, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout",
                "key.pem", "-out", "cert.pem", "-days", "2", "-subj", "/CN=npm.test", "-addext", "subjectAltName=DNS:npm.test");
        openssl(dir, "pkcs12", "-export", "-inkey", "key.pem", "-in", "cert.pem", "-out", "store.p12", "-passout", "pass:test");
        KeyStore ks = KeyStore.getInstance("PKCS12");
        try (InputStream in = Files.newInputStream(dir.resolve("store.p12"))) {
            ks.load(in, "test".toCharArray());
        }
        KeyManagerFactory kmf = KeyManagerFactory.getInstance(KeyManagerFactory.getDefaultAlgorithm());
        kmf.init(ks, "test".toCharArray());
        SSLContext ctx = SSLContext.getInstance("TLS");
        ctx.init(kmf.getKeyManagers(), null, null);
        HttpsServer s = HttpsServer.create(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0), 0);
        NpmRegistry[] self = new NpmRegistry[1];
        s.setHttpsConfigurator(new HttpsConfigurator(ctx) {
            @Override
            public void configure(HttpsParameters params) {
                self[0].tlsConnections.incrementAndGet(); // once per connection, before its handshake
                params.setSSLParameters(getSSLContext().getDefaultSSLParameters());
            }
        });
        self[0] = new NpmRegistry(s, "https");
        return self[0];
    }

    private static void openssl(Path dir, String... args) throws Exception {
        List<String> cmd = new ArrayList<>(List.of("/usr/bin/openssl"));
        cmd.addAll(List.of(args));
        Process p = new ProcessBuilder(cmd).directory(dir.toFile()).redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        if (!p.waitFor(60, TimeUnit.SECONDS) || p.exitValue() != 0) throw new IOException("openssl " + args[0] + ": " + out);
    }

    int port() {
        return server.getAddress().getPort();
    }

    /** The registry's URL under {@code host} (a name pinned to 127.0.0.1 for the proxy). */
    String url(String host) {
        return scheme + "://" + host + ":" + port() + "/";
    }

    /**
     * Adds {@code name@version} with {@code files} (paths below the package's root; package.json is made here) and,
     * when {@code postinstall} is not null, that script (node code) as its postinstall.
     */
    NpmRegistry add(String name, String version, Map<String, String> files, String postinstall) {
        packages.computeIfAbsent(name, n -> new CopyOnWriteArrayList<>()).add(new Version(version, Map.copyOf(files),
                Map.of(), postinstall));
        return this;
    }

    private Map<String, Object> manifest(String name, Version v) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("name", name);
        m.put("version", v.version());
        m.put("main", "index.js");
        if (!v.dependencies().isEmpty()) m.put("dependencies", v.dependencies());
        // the package's name on the command line: a test finds the script's process on the host by it
        if (v.postinstall() != null) m.put("scripts", Map.of("postinstall", "node postinstall.js " + name));
        return m;
    }

    private byte[] tarball(String name, Version v) throws IOException {
        Map<String, byte[]> files = new LinkedHashMap<>();
        files.put("package/package.json", JSON.writeValueAsBytes(manifest(name, v)));
        if (v.postinstall() != null) files.put("package/postinstall.js", v.postinstall().getBytes(StandardCharsets.UTF_8));
        v.files().forEach((p, text) -> files.put("package/" + p, text.getBytes(StandardCharsets.UTF_8)));
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        try (GZIPOutputStream gz = new GZIPOutputStream(out)) {
            for (Map.Entry<String, byte[]> f : files.entrySet()) {
                gz.write(tarHeader(f.getKey(), f.getValue().length));
                gz.write(f.getValue());
                gz.write(new byte[(512 - f.getValue().length % 512) % 512]);
            }
            gz.write(new byte[1024]);
        }
        return out.toByteArray();
    }

    /** A ustar header for a regular file of mode 0644. */
    private static byte[] tarHeader(String path, long size) {
        byte[] h = new byte[512];
        put(h, 0, path, 100);
        put(h, 100, "0000644", 8);
        put(h, 108, "0000000", 8);
        put(h, 116, "0000000", 8);
        put(h, 124, String.format("%011o", size), 12);
        put(h, 136, String.format("%011o", 1_700_000_000L), 12);
        java.util.Arrays.fill(h, 148, 156, (byte) ' ');
        h[156] = '0';
        put(h, 257, "ustar", 6);
        put(h, 263, "00", 2);
        int sum = 0;
        for (byte b : h) sum += b & 0xff;
        put(h, 148, String.format("%06o", sum), 7);
        h[155] = ' ';
        return h;
    }

    private static void put(byte[] h, int at, String s, int max) {
        byte[] b = s.getBytes(StandardCharsets.US_ASCII);
        System.arraycopy(b, 0, h, at, Math.min(b.length, max));
    }

    private void serve(HttpExchange ex) throws IOException {
        String path = ex.getRequestURI().getPath();
        requests.add(path);
        String host = ex.getRequestHeaders().getFirst("Host");
        byte[] body = null;
        String type = "application/json";
        try {
            String[] parts = path.substring(1).split("/-/");
            String name = java.net.URLDecoder.decode(parts[0], StandardCharsets.UTF_8);
            List<Version> versions = packages.get(name);
            if (versions != null && parts.length == 1) {
                Map<String, Object> all = new LinkedHashMap<>();
                for (Version v : versions) {
                    byte[] tgz = tarball(name, v);
                    Map<String, Object> m = manifest(name, v);
                    if (v.postinstall() != null) m.put("hasInstallScript", true);
                    m.put("dist", Map.of("tarball", scheme + "://" + host + "/" + name + "/-/" + name + "-" + v.version() + ".tgz",
                            "shasum", HexFormat.of().formatHex(MessageDigest.getInstance("SHA-1").digest(tgz)),
                            "integrity", "sha512-" + Base64.getEncoder().encodeToString(MessageDigest.getInstance("SHA-512").digest(tgz))));
                    all.put(v.version(), m);
                }
                body = JSON.writeValueAsBytes(Map.of("name", name, "dist-tags", Map.of("latest", versions.getLast().version()),
                        "versions", all));
            } else if (versions != null) {
                for (Version v : versions)
                    if (parts[1].equals(name + "-" + v.version() + ".tgz")) body = tarball(name, v);
                type = "application/octet-stream";
            }
        } catch (java.security.NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
        if (body == null) {
            ex.sendResponseHeaders(404, -1);
        } else {
            ex.getResponseHeaders().set("Content-Type", type);
            ex.sendResponseHeaders(200, body.length);
            ex.getResponseBody().write(body);
        }
        ex.close();
    }

    @Override
    public void close() {
        server.stop(0);
    }
}
