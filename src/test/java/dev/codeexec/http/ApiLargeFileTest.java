package dev.codeexec.http;

import dev.codeexec.testing.Poll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

import java.io.InputStream;
import java.lang.management.ManagementFactory;
import java.lang.management.MemoryPoolMXBean;
import java.lang.management.MemoryType;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.util.HexFormat;
import java.util.List;
import java.util.Random;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * A 100 MB upload and download through the real server in this JVM, generated and checked while streaming (no
 * 100 MB array on either side), with the heap watched: the long-lived part of the heap (old generation, where
 * G1 puts any array over half a region, so a whole-body buffer would land there) must not grow by 50 MB.
 */
@Tag("slow")
class ApiLargeFileTest {

    static final long SIZE = 100L * 1024 * 1024;
    ApiClient api;

    @AfterEach
    void stop() throws Exception {
        if (api != null) api.close();
    }

    /** Deterministic pseudo-random bytes, made on the fly, hashed as they are handed out. */
    static final class Generated extends InputStream {
        final MessageDigest sha = sha();
        final Random random = new Random(42);
        final byte[] block = new byte[64 * 1024];
        long left;
        int pos = block.length;

        Generated(long size) {
            left = size;
        }

        @Override
        public int read() {
            byte[] one = new byte[1];
            return read(one, 0, 1) < 0 ? -1 : one[0] & 0xff;
        }

        @Override
        public int read(byte[] b, int off, int len) {
            if (left == 0) return -1;
            if (pos == block.length) {
                random.nextBytes(block);
                pos = 0;
            }
            int n = (int) Math.min(Math.min(len, block.length - pos), left);
            System.arraycopy(block, pos, b, off, n);
            sha.update(block, pos, n);
            pos += n;
            left -= n;
            return n;
        }
    }

    static MessageDigest sha() {
        try {
            return MessageDigest.getInstance("SHA-256");
        } catch (Exception e) {
            throw new IllegalStateException(e);
        }
    }

    static List<MemoryPoolMXBean> oldPools() {
        return ManagementFactory.getMemoryPoolMXBeans().stream().filter(p -> p.getType() == MemoryType.HEAP)
                .filter(p -> p.getName().contains("Old") || p.getName().contains("Tenured")).toList();
    }

    static long oldPeak() {
        return oldPools().stream().mapToLong(p -> p.getPeakUsage().getUsed()).sum();
    }

    static long vmHwmKb() throws Exception {
        return Files.readAllLines(Path.of("/proc/self/status")).stream().filter(l -> l.startsWith("VmHWM:"))
                .map(l -> l.replaceAll("\\D", "")).mapToLong(Long::parseLong).findFirst().orElse(-1);
    }

    @Test
    void hundredMegabytesUpAndDownWithTheSameChecksumAndBoundedHeap() throws Exception {
        api = new ApiClient();
        assertThat(oldPools()).as("an old-generation heap pool to watch").isNotEmpty();
        System.gc();
        long base = oldPools().stream().mapToLong(p -> p.getUsage().getUsed()).sum();
        oldPools().forEach(MemoryPoolMXBean::resetPeakUsage);
        Runtime rt = Runtime.getRuntime();
        long heapBase = rt.totalMemory() - rt.freeMemory();
        AtomicLong heapPeak = new AtomicLong(heapBase);
        AtomicBoolean running = new AtomicBoolean(true);
        Thread sampler = Thread.ofPlatform().daemon().start(() -> {
            while (running.get()) {
                heapPeak.accumulateAndGet(rt.totalMemory() - rt.freeMemory(), Math::max);
                try {
                    Thread.sleep(5);
                } catch (InterruptedException e) {
                    return;
                }
            }
        });

        Generated gen = new Generated(SIZE);
        HttpResponse<String> up = api.send(api.req("/api/workspaces/big/files/data/blob.bin")
                .POST(HttpRequest.BodyPublishers.fromPublisher(HttpRequest.BodyPublishers.ofInputStream(() -> gen), SIZE)));
        String sent = HexFormat.of().formatHex(gen.sha.digest());
        assertThat(up.statusCode()).as(up.body()).isEqualTo(201);
        assertThat(ApiFilesTest.json(up).path("sha256").asString()).isEqualTo(sent);
        assertThat(ApiFilesTest.json(up).path("size").asLong()).isEqualTo(SIZE);
        long afterUpload = oldPeak();

        HttpResponse<InputStream> down = api.http.send(api.req("/api/workspaces/big/files/data/blob.bin").GET().build(),
                HttpResponse.BodyHandlers.ofInputStream());
        assertThat(down.statusCode()).isEqualTo(200);
        assertThat(down.headers().firstValue("Content-Length")).hasValue(Long.toString(SIZE));
        MessageDigest got = sha();
        long total = 0;
        try (InputStream in = down.body()) {
            byte[] buf = new byte[64 * 1024];
            int n;
            while ((n = in.read(buf)) > 0) {
                got.update(buf, 0, n);
                total += n;
            }
        }
        running.set(false);
        sampler.join();
        assertThat(total).isEqualTo(SIZE);
        assertThat(HexFormat.of().formatHex(got.digest())).isEqualTo(sent);

        long growth = oldPeak() - base;
        System.out.printf("100 MB upload+download: old-gen peak growth %.1f MB (after upload %.1f MB), "
                        + "sampled heap peak %.1f MB over a base of %.1f MB (young garbage included), VmHWM %d MB%n",
                growth / 1048576.0, (afterUpload - base) / 1048576.0, (heapPeak.get() - heapBase) / 1048576.0,
                heapBase / 1048576.0, vmHwmKb() / 1024);
        assertThat(growth).as("old-generation growth").isLessThan(50L * 1024 * 1024);
    }

    @Test
    void hundredMegabytesAsMultipartAreSpooledNotBuffered() throws Exception {
        api = new ApiClient();
        String boundary = "----cem-big-boundary";
        byte[] head = ("--" + boundary + "\r\nContent-Disposition: form-data; name=\"f\"; filename=\"big.bin\"\r\n"
                + "Content-Type: application/octet-stream\r\n\r\n").getBytes(java.nio.charset.StandardCharsets.UTF_8);
        byte[] tail = ("\r\n--" + boundary + "--\r\n").getBytes(java.nio.charset.StandardCharsets.UTF_8);
        Generated gen = new Generated(SIZE);
        System.gc();
        long base = oldPools().stream().mapToLong(p -> p.getUsage().getUsed()).sum();
        oldPools().forEach(MemoryPoolMXBean::resetPeakUsage);
        HttpResponse<String> up = api.send(api.req("/api/workspaces/big/files/in/")
                .header("Content-Type", "multipart/form-data; boundary=" + boundary)
                .POST(HttpRequest.BodyPublishers.fromPublisher(HttpRequest.BodyPublishers.ofInputStream(() ->
                        new java.io.SequenceInputStream(java.util.Collections.enumeration(List.of(
                                new java.io.ByteArrayInputStream(head), gen, new java.io.ByteArrayInputStream(tail))))),
                        head.length + SIZE + tail.length)));
        assertThat(up.statusCode()).as(up.body()).isEqualTo(201);
        String sent = HexFormat.of().formatHex(gen.sha.digest());
        assertThat(ApiFilesTest.json(up).path("files").get(0).path("sha256").asString()).isEqualTo(sent);
        assertThat(Files.size(api.dir("default", "big").resolve("in/big.bin"))).isEqualTo(SIZE);
        long growth = oldPeak() - base;
        System.out.printf("100 MB multipart upload: old-gen peak growth %.1f MB%n", growth / 1048576.0);
        assertThat(growth).as("old-generation growth").isLessThan(50L * 1024 * 1024);
        // Jetty removes spooled parts when it completes the request, which may be just after the client has the
        // response (the request-tracking handler around everything completes last).
        Poll.until("spooled parts removed", () -> {
            try (var s = Files.list(api.dataDir.resolve("upload-tmp"))) {
                return s.toList();
            }
        }, List::isEmpty);
    }
}
