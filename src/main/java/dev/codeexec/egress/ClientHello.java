package dev.codeexec.egress;

import java.nio.charset.StandardCharsets;
import java.util.Optional;

/**
 * Reads the server name (SNI) out of the first bytes of a TLS connection: one ClientHello, possibly spread over
 * several handshake records and any number of reads ({@link Reader}). Only parses; never answers.
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

        /** More than {@link #MAX_BYTES}, or spread over more than {@link #MAX_RECORDS} records. */
        record TooLarge() implements Result {
        }
    }

    /** The most records one ClientHello may be spread over (clients send one; a 16 KiB record holds any hello). */
    static final int MAX_RECORDS = 64;

    /**
     * A ClientHello as its bytes arrive, in whatever pieces: each record header is checked as soon as it is in
     * (a handshake record of TLS 3.x, at most 2^14 bytes), and the message is parsed once per record completed,
     * so a hello sent a byte at a time costs no more than one sent whole.
     */
    static final class Reader {
        private byte[] buf = new byte[4096];
        private int len;
        /** Where the first record not yet complete starts. */
        private int complete;
        private int records;

        /** Takes the bytes {@code b} has left and says what the records so far hold. */
        Result add(java.nio.ByteBuffer b) {
            int n = b.remaining();
            if (len + n > MAX_BYTES + 5L * MAX_RECORDS) return new Result.TooLarge();
            if (len + n > buf.length) buf = java.util.Arrays.copyOf(buf, Math.max(len + n, Math.min(2 * buf.length, MAX_BYTES + 5 * MAX_RECORDS)));
            b.get(buf, len, n);
            len += n;
            while (true) {
                if (len > complete && (buf[complete] & 0xff) != 22) return new Result.NotTls();
                if (len > complete + 1 && (buf[complete + 1] & 0xff) != 3) return new Result.NotTls();
                if (len < complete + 5) return new Result.NeedMore();
                int recLen = u16(buf, complete + 3);
                if (recLen == 0 || recLen > 16384 || (buf[complete + 2] & 0xff) > 4) return new Result.NotTls();
                if (len < complete + 5 + recLen) return new Result.NeedMore();
                complete += 5 + recLen;
                if (++records > MAX_RECORDS) return new Result.TooLarge();
                // the hello may end with this record: what follows it is the program's next bytes, not the hello's
                Result r = parse(buf, complete);
                if (!(r instanceof Result.NeedMore)) return r;
                if (complete >= MAX_BYTES) return new Result.TooLarge();
            }
        }

        /** The records that carried the hello (all of them once {@link #add} said {@link Result.Hello}). */
        byte[] hello() {
            return java.util.Arrays.copyOf(buf, complete);
        }

        /** What came after those records: the program's next bytes, not yet checked. */
        byte[] rest() {
            return java.util.Arrays.copyOfRange(buf, complete, len);
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
