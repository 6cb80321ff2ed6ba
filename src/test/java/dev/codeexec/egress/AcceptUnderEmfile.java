package dev.codeexec.egress;

import dev.codeexec.config.Config;
import dev.codeexec.testing.LogCapture;
import dev.codeexec.testing.Poll;

import java.io.IOException;
import java.net.UnixDomainSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;

/**
 * A child JVM for {@link EgressAcceptUnderEmfileTest}: it runs out of descriptors (EMFILE) while a connection waits
 * to be accepted, frees some, and prints the answer the connection then gets. Its own limit is set by the parent.
 */
final class AcceptUnderEmfile {

    private AcceptUnderEmfile() {
    }

    public static void main(String[] args) throws Exception {
        EgressSettings s = EgressSettings.of(Config.of("EGRESS", "on", "EGRESS_ALLOW", "fixture.test:443"));
        try (LogCapture log = LogCapture.of(EgressChannel.class);
             EgressChannel ch = EgressChannel.open(s, EgressDecision.resolver(s), Path.of(args[0]), s.policyFor(Optional.empty()),
                     "tenant", "run")) {
            // one answer first, so every class the answer needs is loaded while loading is still possible
            System.out.println("before: " + ask(connect(ch)));
            // that connection wholly done (its audit line written), so no class is left to load once descriptors run out
            Poll.until("the first connection done", Duration.ofSeconds(20), () -> Descriptors.PROCESS.used() == 0);
            List<FileChannel> hogs = new ArrayList<>();
            try {
                while (true) hogs.add(FileChannel.open(Path.of("/dev/null")));
            } catch (IOException e) {
                System.out.println("out of descriptors after " + hogs.size() + ": " + e.getMessage());
            }
            hogs.removeLast().close(); // one descriptor: the program's end of its connection, none for the proxy's
            SocketChannel waiting = connect(ch);
            Poll.until("a failed accept", Duration.ofSeconds(20), () -> log.contains("accept failed"));
            for (int i = 0; i < 16; i++) hogs.removeLast().close();
            System.out.println("after: " + ask(waiting));
            Poll.until("accepting again", Duration.ofSeconds(20), () -> log.contains("accepting again"));
            System.out.println("accepting again");
            for (FileChannel h : hogs) h.close();
        }
    }

    private static SocketChannel connect(EgressChannel ch) throws IOException {
        return SocketChannel.open(UnixDomainSocketAddress.of(ch.socket()));
    }

    /** The status line of the answer to a CONNECT the policy refuses. */
    private static String ask(SocketChannel c) throws IOException {
        try (c) {
            c.write(ByteBuffer.wrap("CONNECT other.test:443 HTTP/1.1\r\n\r\n".getBytes(StandardCharsets.US_ASCII)));
            ByteBuffer b = ByteBuffer.allocate(4096);
            while (c.read(b) >= 0 && b.position() < 12) {
                // until the status line is in
            }
            String text = new String(b.array(), 0, b.position(), StandardCharsets.ISO_8859_1);
            int eol = text.indexOf("\r\n");
            return eol < 0 ? text : text.substring(0, eol);
        }
    }
}
