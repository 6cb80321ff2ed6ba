package dev.codeexec.egress;

import org.junit.jupiter.api.Test;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;

import static org.assertj.core.api.Assertions.assertThat;

/** The response heads a plain-HTTP client gets: the final one says Connection: close; the body passes untouched. */
class ResponseHeadsTest {

    static String feed(ResponseHeads h, String s) {
        return new String(h.feed(ByteBuffer.wrap(s.getBytes(StandardCharsets.ISO_8859_1))), StandardCharsets.ISO_8859_1);
    }

    @Test
    void theFinalHeadSaysConnectionCloseInPlaceOfWhatTheUpstreamSaid() {
        ResponseHeads h = new ResponseHeads();
        String out = feed(h, "HTTP/1.1 200 OK\r\nConnection: keep-alive, X-Hop\r\nX-Hop: 1\r\nKeep-Alive: timeout=5\r\n"
                + "Content-Length: 4\r\n\r\nbody");
        assertThat(out).isEqualTo("HTTP/1.1 200 OK\r\nContent-Length: 4\r\nConnection: close\r\n\r\nbody");
        assertThat(h.done()).isTrue();
    }

    @Test
    void interimHeadsPassAndTheHeadMayComeInPieces() {
        ResponseHeads h = new ResponseHeads();
        assertThat(feed(h, "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 2")).isEqualTo("HTTP/1.1 100 Continue\r\n\r\n");
        assertThat(h.done()).isFalse();
        assertThat(feed(h, "04 No Content\r\nX: y\r")).isEmpty();
        assertThat(feed(h, "\n\r\n")).isEqualTo("HTTP/1.1 204 No Content\r\nX: y\r\nConnection: close\r\n\r\n");
        assertThat(h.done()).isTrue();
    }

    @Test
    void somethingThatIsNotAnHttpResponsePassesAsItCame() {
        ResponseHeads h = new ResponseHeads();
        assertThat(feed(h, "SSH-2.0-x\r\n")).isEqualTo("SSH-2.0-x\r\n");
        assertThat(h.done()).isTrue();
        ResponseHeads cut = new ResponseHeads();
        assertThat(feed(cut, "HTTP/1.1 200 OK\r\nX: ")).isEmpty();
        assertThat(new String(cut.rest(), StandardCharsets.ISO_8859_1)).isEqualTo("HTTP/1.1 200 OK\r\nX: ");
        ResponseHeads huge = new ResponseHeads();
        String big = "HTTP/1.1 200 OK\r\nX: " + "a".repeat(ResponseHeads.MAX);
        assertThat(feed(huge, big)).isEqualTo(big);
        assertThat(huge.done()).isTrue();
    }
}
