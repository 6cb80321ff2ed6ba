package dev.codeexec.http1;

import org.junit.jupiter.api.Test;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/** Where a chunked body ends, whatever pieces it arrives in; framing an upstream could read otherwise is refused. */
class ChunkedBodyTest {

    static ByteBuffer bytes(String s) {
        return ByteBuffer.wrap(s.getBytes(StandardCharsets.ISO_8859_1));
    }

    /** The end found when the text arrives whole. */
    static int end(String s) throws Malformed {
        return new ChunkedBody().scan(bytes(s), 0, s.length());
    }

    @Test
    void findsTheEndAfterTheLastChunkAndTheTrailers() throws Exception {
        String body = "5\r\nhello\r\nA;name=\"v\"\r\n0123456789\r\n0\r\n\r\n";
        assertThat(end(body + "GET / HTTP/1.1\r\n")).isEqualTo(body.length());
        String trailers = "3\r\nabc\r\n0\r\nX-A: 1\r\nX-B: 2\r\n\r\n";
        assertThat(end(trailers + "more")).isEqualTo(trailers.length());
        assertThat(end("0\r\n\r\n")).isEqualTo(5);
        assertThat(end("5\r\nhel")).isEqualTo(-1);
    }

    @Test
    void theEndIsTheSameWhateverPiecesTheBytesArriveIn() throws Exception {
        String body = "1a\r\n" + "x".repeat(26) + "\r\n2 ; ext\r\n\r\n\r\n0\r\nT: v\r\n\r\n";
        String all = body + "next";
        for (int piece = 1; piece <= 7; piece++) {
            ChunkedBody c = new ChunkedBody();
            ByteBuffer b = bytes(all);
            int found = -1;
            for (int at = 0; at < all.length() && found < 0; at += piece) found = c.scan(b, at, Math.min(all.length(), at + piece));
            assertThat(found).as("pieces of " + piece).isEqualTo(body.length());
        }
    }

    @Test
    void framingALenientParserCouldReadOtherwiseIsRefused() {
        String[][] bad = {
                {"x\r\n", "not a hex number"},
                {"\r\n", "not a hex number"},
                {"-1\r\n", "not a hex number"},
                {"+5\r\n", "not a hex number"},
                {"5\nhello\r\n", "not a hex number"},
                {"5\r\rhello", "does not end in CRLF"},
                {"5\r\nhelloX\r\n0\r\n\r\n", "not followed by CRLF"},
                {"5\r\nhello\rX", "not followed by CRLF"},
                {"1000000000000000\r\n", "too long"},
                {"5;a\nb\r\n", "bare LF"},
                {"0\r\nX: a\nY: b\r\n\r\n", "bare LF"},
                {"0\r\nX: a\rY\r\n\r\n", "does not end in CRLF"},
                {"5;" + "e".repeat(5000) + "\r\n", "too long"},
        };
        for (String[] k : bad)
            assertThatThrownBy(() -> end(k[0])).as(k[0]).isInstanceOf(Malformed.class).hasMessageContaining(k[1]);
    }

    @Test
    void theDataOfEveryChunkReachesTheSinkWithoutTheFramingWhateverPiecesItArrivesIn() throws Exception {
        String body = "5\r\nhello\r\n6;ext=1\r\n world\r\n1\r\n!\r\n0\r\nX-T: 1\r\n\r\n";
        String wire = body + "GET /next HTTP/1.1\r\n";
        for (int piece = 1; piece <= wire.length(); piece++) {
            ChunkedBody c = new ChunkedBody();
            StringBuilder data = new StringBuilder();
            ChunkedBody.Data sink = (b, from, length) -> {
                for (int k = from; k < from + length; k++) data.append((char) b.get(k));
            };
            ByteBuffer b = bytes(wire);
            int end = -1, at = 0;
            while (end < 0 && at < wire.length()) {
                int to = Math.min(wire.length(), at + piece);
                end = c.scan(b, at, to, sink);
                at = to;
            }
            assertThat(end).as("pieces of %d", piece).isEqualTo(body.length());
            assertThat(data.toString()).as("pieces of %d", piece).isEqualTo("hello world!");
        }
    }
}
