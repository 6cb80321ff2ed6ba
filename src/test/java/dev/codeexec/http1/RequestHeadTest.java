package dev.codeexec.http1;

import org.junit.jupiter.api.Test;

import java.nio.charset.StandardCharsets;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/** The proxy's reading of a request head: every spelling an upstream could read differently is refused. */
class RequestHeadTest {

    static RequestHead parse(String head) throws Malformed {
        byte[] b = head.getBytes(StandardCharsets.ISO_8859_1);
        return RequestHead.parse(b, b.length);
    }

    static void refused(String head, String why) {
        assertThatThrownBy(() -> parse(head)).as(head).isInstanceOf(Malformed.class).hasMessageContaining(why);
    }

    @Test
    void aWellFormedHeadIsReadFieldByField() throws Exception {
        RequestHead h = parse("GET http://fixture.test/x?q=1 HTTP/1.1\r\nHost: fixture.test\r\nX-Many:  a, b \t\r\n"
                + "Accept:\r\nX-Text: caf\u00e9 \"quoted\"\tand tab");
        assertThat(h.method()).isEqualTo("GET");
        assertThat(h.target()).isEqualTo("http://fixture.test/x?q=1");
        assertThat(h.version()).isEqualTo("HTTP/1.1");
        assertThat(h.fields()).containsExactly(new RequestHead.Field("Host", "fixture.test"),
                new RequestHead.Field("X-Many", "a, b"), new RequestHead.Field("Accept", ""),
                new RequestHead.Field("X-Text", "caf\u00e9 \"quoted\"\tand tab"));
        assertThat(h.values("x-many")).containsExactly("a, b");
        assertThat(parse("CONNECT fixture.test:443 HTTP/1.0").fields()).isEmpty();
    }

    @Test
    void whitespaceBetweenANameAndItsColonIsRefused() {
        refused("GET http://fixture.test/ HTTP/1.1\r\nHost : evil.test", "whitespace between the header name 'Host'");
        refused("GET http://fixture.test/ HTTP/1.1\r\nHost\t: evil.test", "whitespace between the header name 'Host'");
        refused("GET http://fixture.test/ HTTP/1.1\r\nContent-Length : 5", "whitespace between");
    }

    @Test
    void aFoldedLineIsRefused() {
        refused("GET http://fixture.test/ HTTP/1.1\r\nX-A: b\r\n Host: evil.test", "obs-fold");
        refused("GET http://fixture.test/ HTTP/1.1\r\nHost: fixture.test\r\n\tevil.test", "obs-fold");
        refused("GET http://fixture.test/ HTTP/1.1\r\n evil.test", "obs-fold");
    }

    @Test
    void aSecondHostIsRefusedInAnyCase() {
        refused("GET http://fixture.test/ HTTP/1.1\r\nHost: fixture.test\r\nhost: evil.test", "more than one Host");
        refused("GET http://fixture.test/ HTTP/1.1\r\nHOST: a\r\nX: y\r\nHost: a", "more than one Host");
    }

    @Test
    void namesMustBeTokens() {
        refused("GET http://fixture.test/ HTTP/1.1\r\nX Y: z", "'X Y' is not a valid header name");
        refused("GET http://fixture.test/ HTTP/1.1\r\nHo(st): z", "not a valid header name");
        refused("GET http://fixture.test/ HTTP/1.1\r\n: empty", "not a valid header name");
        refused("GET http://fixture.test/ HTTP/1.1\r\nX-\u00e9: z", "not a valid header name");
        refused("GET http://fixture.test/ HTTP/1.1\r\nno colon here", "without a colon");
    }

    @Test
    void bareCrBareLfNulAndControlCharactersAreRefused() {
        refused("GET http://fixture.test/ HTTP/1.1\r\nX-A: b\rHost: evil.test", "CR without LF");
        refused("GET http://fixture.test/ HTTP/1.1\r\nX-A: b\r", "CR without LF");
        refused("GET http://fixture.test/ HTTP/1.1\r\nX-A: b\nHost: evil.test", "LF without CR");
        refused("GET http://fixture.test/ HTTP/1.1\nHost: evil.test", "LF without CR");
        refused("GET http://fixture.test/ HTTP/1.1\r\nX-A: b\0c", "NUL");
        refused("GET http://fixture.test/ HTTP/1.1\r\nX-A: b\u0001c", "control character");
        refused("GET http://fixture.test/ HTTP/1.1\r\nX-A: b\u007fc", "control character");
    }

    @Test
    void theRequestLineIsExactlyThreeParts() {
        refused("GET  http://fixture.test/ HTTP/1.1", "not an HTTP proxy request");
        refused("GET\thttp://fixture.test/ HTTP/1.1", "not an HTTP proxy request");
        refused("GET http://fixture.test/ HTTP/1.1 ", "not an HTTP proxy request");
        refused("GET http://fixture.test/ HTTP/1.2", "not an HTTP proxy request");
        refused("GET http://fixture.test/ HTTP/2", "not an HTTP proxy request");
        refused("G(T http://fixture.test/ HTTP/1.1", "not an HTTP proxy request");
        refused("GET http://fixture.test/\u00e9 HTTP/1.1", "not an HTTP proxy request");
        refused("hello there", "not an HTTP proxy request: 'hello there'");
    }

    @Test
    void aBodyIsFramedOneWayOnly() throws Exception {
        assertThat(parse("GET http://f.test/ HTTP/1.1").framing()).isEqualTo(RequestHead.Framing.NONE);
        assertThat(parse("POST http://f.test/ HTTP/1.1\r\nContent-Length: 12").framing()).isEqualTo(new RequestHead.Framing(false, 12));
        assertThat(parse("POST http://f.test/ HTTP/1.1\r\nTransfer-Encoding: Chunked").framing().chunked()).isTrue();
        String[][] bad = {
                {"Content-Length: 5\r\nTransfer-Encoding: chunked", "both Content-Length and Transfer-Encoding"},
                {"Transfer-Encoding: chunked\r\nContent-Length: 5", "both Content-Length and Transfer-Encoding"},
                {"Transfer-Encoding: gzip, chunked", "only chunked"},
                {"Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked", "only chunked"},
                {"Transfer-Encoding: xchunked", "only chunked"},
                {"Content-Length: 5\r\nContent-Length: 5", "one number"},
                {"Content-Length: 5, 5", "one number"},
                {"Content-Length: +5", "one number"},
                {"Content-Length: 0x10", "one number"},
                {"Content-Length: 99999999999999999999", "one number"},
        };
        for (String[] k : bad)
            assertThatThrownBy(() -> parse("POST http://f.test/ HTTP/1.1\r\n" + k[0]).framing()).as(k[0])
                    .isInstanceOf(Malformed.class).hasMessageContaining(k[1]);
        assertThatThrownBy(() -> parse("POST http://f.test/ HTTP/1.0\r\nTransfer-Encoding: chunked").framing())
                .hasMessageContaining("HTTP/1.0");
    }
}
