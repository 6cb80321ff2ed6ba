package dev.codeexec.egress;

import java.nio.ByteBuffer;

/**
 * Checks the TLS record framing of one direction of a CONNECT tunnel while its handshake runs (RFC 8446 section 5.1,
 * RFC 5246 section 6.2): every record header names a TLS content type (20 change_cipher_spec, 21 alert, 22
 * handshake, 23 application_data) and version 3.x, and a length TLS allows (at most 2^14 + 2048; only application
 * data may be empty). The server's first record must be a handshake or an alert: the answer of a TLS server to a
 * ClientHello. The direction's first application_data record ends the check: from there on its bytes are
 * encrypted and relayed unread, so an established tunnel costs nothing per byte. Only the headers are read; the
 * record bodies are skipped by count.
 */
final class TlsRecords {

    /** What {@link #scan} found. */
    enum Verdict {
        /** Well-framed so far; the check goes on. */
        TLS,
        /** Well-framed up to this direction's first application data: stop checking. */
        DONE,
        /** Not TLS: the tunnel must close before these bytes go anywhere. */
        NOT_TLS
    }

    private static final int MAX_LENGTH = (1 << 14) + 2048;

    private final boolean fromServer;
    private final byte[] header = new byte[5];
    private int have;
    /** Body bytes of the current record still to skip. */
    private int left;
    private boolean first = true;

    private TlsRecords(boolean fromServer) {
        this.fromServer = fromServer;
    }

    /** The check of what the upstream sends back after the ClientHello. */
    static TlsRecords fromServer() {
        return new TlsRecords(true);
    }

    /** The check of what the program sends after its ClientHello. */
    static TlsRecords fromClient() {
        return new TlsRecords(false);
    }

    /** Whether a first record header has passed: the peer has answered with TLS. */
    boolean answered() {
        return !first;
    }

    /** Checks {@code b[from, to)}, the direction's next bytes. */
    Verdict scan(ByteBuffer b, int from, int to) {
        int i = from;
        while (i < to) {
            if (left > 0) {
                int skip = Math.min(left, to - i);
                left -= skip;
                i += skip;
                continue;
            }
            header[have++] = b.get(i++);
            if (have < 5) continue;
            have = 0;
            int type = header[0] & 0xff, major = header[1] & 0xff, minor = header[2] & 0xff;
            int length = ((header[3] & 0xff) << 8) | (header[4] & 0xff);
            if (type < 20 || type > 23 || major != 3 || minor > 4 || length > MAX_LENGTH || (length == 0 && type != 23))
                return Verdict.NOT_TLS;
            if (first && fromServer && type != 21 && type != 22) return Verdict.NOT_TLS;
            first = false;
            if (type == 23) return Verdict.DONE;
            left = length;
        }
        return Verdict.TLS;
    }
}
