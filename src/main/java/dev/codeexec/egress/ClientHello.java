package dev.codeexec.egress;

import java.nio.charset.StandardCharsets;
import java.util.Optional;

/**
 * Reads the server name (SNI) out of the first bytes of a TLS connection: one ClientHello, possibly spread over
 * several handshake records. Only parses; never answers.
 */
final class ClientHello {

    /** The largest ClientHello this proxy reads (a post-quantum key share makes one about 2 KiB). */
    static final int MAX_BYTES = 64 * 1024;

    private ClientHello() {
    }

    /** What {@link #parse} found. */
    sealed interface Result {
        /** Not enough bytes yet. */
        record NeedMore() implements Result {
        }

        /** Not a TLS ClientHello. */
        record NotTls() implements Result {
        }

        /** A complete ClientHello; empty when it names no server. */
        record Hello(Optional<String> serverName) implements Result {
        }
    }

    static Result parse(byte[] b, int len) {
        // TLS records: type(1)=22 handshake, version(2), length(2), fragment; the handshake message may span records
        byte[] hs = new byte[Math.max(0, len)];
        int hsLen = 0, pos = 0;
        while (true) {
            if (len - pos < 5) return hsLen == 0 && len > 0 && (b[0] & 0xff) != 22 ? new Result.NotTls() : new Result.NeedMore();
            if ((b[pos] & 0xff) != 22 || (b[pos + 1] & 0xff) != 3) return new Result.NotTls();
            int recLen = u16(b, pos + 3);
            if (recLen == 0 || recLen > 16384 + 2048) return new Result.NotTls();
            if (len - pos - 5 < recLen) {
                System.arraycopy(b, pos + 5, hs, hsLen, len - pos - 5);
                hsLen += len - pos - 5;
                return hsLen >= 4 && (hs[0] & 0xff) != 1 ? new Result.NotTls() : new Result.NeedMore();
            }
            System.arraycopy(b, pos + 5, hs, hsLen, recLen);
            hsLen += recLen;
            pos += 5 + recLen;
            if (hsLen >= 4) {
                if ((hs[0] & 0xff) != 1) return new Result.NotTls();
                int msgLen = ((hs[1] & 0xff) << 16) | u16(hs, 2);
                if (msgLen + 4 > MAX_BYTES) return new Result.NotTls();
                if (hsLen >= msgLen + 4) return hello(hs, 4, 4 + msgLen);
            }
        }
    }

    private static Result hello(byte[] h, int p, int end) {
        try {
            p += 2 + 32; // client_version, random
            p += 1 + (h[p] & 0xff); // session id
            p += 2 + u16(h, p); // cipher suites
            p += 1 + (h[p] & 0xff); // compression methods
            if (p == end) return new Result.Hello(Optional.empty());
            int extEnd = p + 2 + u16(h, p);
            p += 2;
            if (extEnd > end) return new Result.NotTls();
            while (p + 4 <= extEnd) {
                int type = u16(h, p), len = u16(h, p + 2);
                p += 4;
                if (p + len > extEnd) return new Result.NotTls();
                if (type == 0) { // server_name: list length(2), then entries: type(1) length(2) name
                    int q = p + 2, listEnd = p + 2 + u16(h, p);
                    if (len < 2 || listEnd > p + len) return new Result.NotTls(); // the list stays inside its extension
                    while (q + 3 <= listEnd) {
                        int nameType = h[q] & 0xff, nameLen = u16(h, q + 1);
                        if (q + 3 + nameLen > listEnd) return new Result.NotTls();
                        if (nameType == 0)
                            return new Result.Hello(Optional.of(new String(h, q + 3, nameLen, StandardCharsets.US_ASCII)));
                        q += 3 + nameLen;
                    }
                }
                p += len;
            }
            return new Result.Hello(Optional.empty());
        } catch (IndexOutOfBoundsException e) { // also new String's StringIndexOutOfBoundsException
            return new Result.NotTls();
        }
    }

    private static int u16(byte[] b, int p) {
        return ((b[p] & 0xff) << 8) | (b[p + 1] & 0xff);
    }
}
