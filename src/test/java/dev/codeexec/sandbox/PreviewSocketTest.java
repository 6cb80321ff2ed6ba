package dev.codeexec.sandbox;

import dev.codeexec.config.DataDir;
import dev.codeexec.testing.Poll;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.net.UnixDomainSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.List;
import java.util.Optional;

import static dev.codeexec.sandbox.SandboxTesting.*;
import static org.assertj.core.api.Assertions.assertThat;

/**
 * A sandbox's preview socket (SandboxSpec.previewDir): the server reaches a program's server on the sandbox's own
 * loopback through the socket its init listens on, the sandbox keeping its empty network namespace; the directory is
 * the sandbox uid's alone and goes with the sandbox.
 */
@Tag("sandbox")
class PreviewSocketTest {

    static BwrapSandbox sandbox;
    static Path dataDir;

    @BeforeAll
    static void setUp() throws Exception {
        dataDir = Files.createTempDirectory("code-exec-data-");
        sandbox = new BwrapSandbox(UID, UID, dataDir);
        assertThat(sandbox.usesHelper()).isTrue();
    }

    @AfterAll
    static void removeDataDir() {
        DataDir.deleteTree(dataDir);
    }

    /** One preview connection: the port, init's answer byte, then (when 0) a request and all of its answer. */
    static String ask(Path socket, int port, String request) throws IOException {
        try (SocketChannel ch = SocketChannel.open(UnixDomainSocketAddress.of(socket))) {
            ch.write(ByteBuffer.wrap(new byte[] {(byte) (port >> 8), (byte) port}));
            ByteBuffer answer = ByteBuffer.allocate(1);
            if (ch.read(answer) != 1) return "closed";
            if (answer.get(0) != 0) return "refused:" + answer.get(0);
            ch.write(ByteBuffer.wrap(request.getBytes(StandardCharsets.US_ASCII)));
            ByteBuffer all = ByteBuffer.allocate(1 << 16);
            while (ch.read(all) > 0) {
                // until the server closes
            }
            return new String(all.array(), 0, all.position(), StandardCharsets.UTF_8);
        }
    }

    @Test
    void theServerReachesAProgramsServerThroughThePreviewSocketAndTheDirectoryGoesWithTheSandbox() throws Exception {
        Path dir = dataDir.resolve("previews").resolve("run-preview-test");
        String server = "import http.server, socketserver\n"
                + "class H(http.server.BaseHTTPRequestHandler):\n"
                + "    def do_GET(self):\n"
                + "        body = ('hello from ' + self.path).encode()\n"
                + "        self.send_response(200); self.send_header('Content-Length', str(len(body))); self.end_headers()\n"
                + "        self.wfile.write(body)\n"
                + "http.server.HTTPServer(('127.0.0.1', 8123), H).serve_forever()\n";
        SandboxSpec spec = SandboxSpec.builder(runId(), List.of(PY, "-c", server), "/work", limits()).env(ENV)
                .previewDir(Optional.of(dir)).build();
        try (SandboxProcess p = sandbox.start(spec)) {
            Path socket = dir.resolve(SandboxSpec.PREVIEW_SOCKET);
            Poll.until("the preview socket is there", () -> Files.exists(socket));
            assertThat(Files.getPosixFilePermissions(dir)).isEqualTo(PosixFilePermissions.fromString("rwx------"));
            assertThat((int) Files.getAttribute(dir, "unix:uid")).as("the sandbox uid's, not the server's").isNotZero();
            assertThat(ask(socket, 8124, "")).as("a port nothing listens on").isEqualTo("refused:1");
            String answer = Poll.until("the program's server answers", () -> ask(socket, 8123,
                    "GET /x HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n"), a -> a.startsWith("HTTP/1.0 200"));
            assertThat(answer).endsWith("hello from /x");
        }
        Poll.until("the preview directory goes with the sandbox", () -> !Files.exists(dir));
    }
}
