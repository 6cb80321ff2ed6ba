package dev.codeexec.egress;

import javax.net.ssl.SSLContext;
import javax.net.ssl.SSLEngine;
import java.io.ByteArrayOutputStream;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;

/** Real ClientHello bytes from the JDK's TLS engine, and hand-built ones for the malformed cases. */
final class TlsHellos {

    private TlsHellos() {
    }

    /** The first flight of a JDK client: a ClientHello naming {@code host} (none when null). */
    static byte[] jdk(String host, String... protocols) throws Exception {
        SSLContext ctx = SSLContext.getDefault();
        SSLEngine e = host == null ? ctx.createSSLEngine() : ctx.createSSLEngine(host, 443);
        e.setUseClientMode(true);
        if (protocols.length > 0) e.setEnabledProtocols(protocols);
        e.beginHandshake();
        ByteBuffer out = ByteBuffer.allocate(e.getSession().getPacketBufferSize());
        e.wrap(ByteBuffer.allocate(0), out);
        out.flip();
        byte[] b = new byte[out.remaining()];
        out.get(b);
        return b;
    }

    /** The same handshake message in two records, split {@code at} bytes into the first record's fragment. */
    static byte[] splitIntoTwoRecords(byte[] oneRecord, int at) {
        int len = ((oneRecord[3] & 0xff) << 8) | (oneRecord[4] & 0xff);
        ByteArrayOutputStream o = new ByteArrayOutputStream();
        o.write(oneRecord, 0, 3);
        o.write(at >> 8);
        o.write(at & 0xff);
        o.write(oneRecord, 5, at);
        o.write(oneRecord, 0, 3);
        o.write((len - at) >> 8);
        o.write((len - at) & 0xff);
        o.write(oneRecord, 5 + at, len - at);
        return o.toByteArray();
    }

    /** A minimal ClientHello record with these extension bytes (null: no extensions block at all). */
    static byte[] handBuilt(byte[] extensions) {
        ByteArrayOutputStream body = new ByteArrayOutputStream();
        body.write(3);
        body.write(3);
        body.writeBytes(new byte[32]); // random
        body.write(0); // session id
        body.writeBytes(new byte[] {0, 2, 0x13, 0x01}); // one cipher suite
        body.writeBytes(new byte[] {1, 0}); // compression: null
        if (extensions != null) {
            body.write(extensions.length >> 8);
            body.write(extensions.length & 0xff);
            body.writeBytes(extensions);
        }
        return record(1, body.toByteArray());
    }

    /** A handshake record carrying one message of this type. */
    static byte[] record(int handshakeType, byte[] body) {
        ByteArrayOutputStream hs = new ByteArrayOutputStream();
        hs.write(handshakeType);
        hs.write(body.length >> 16);
        hs.write(body.length >> 8);
        hs.write(body.length & 0xff);
        hs.writeBytes(body);
        byte[] h = hs.toByteArray();
        ByteArrayOutputStream rec = new ByteArrayOutputStream();
        rec.writeBytes(new byte[] {22, 3, 1, (byte) (h.length >> 8), (byte) h.length});
        rec.writeBytes(h);
        return rec.toByteArray();
    }

    /** A server_name extension with one host_name entry; {@code listLength} as claimed (-1: the true one). */
    static byte[] sniExtension(String name, int listLength) {
        byte[] n = name.getBytes(StandardCharsets.US_ASCII);
        int list = n.length + 3;
        int claimed = listLength < 0 ? list : listLength;
        ByteArrayOutputStream e = new ByteArrayOutputStream();
        e.writeBytes(new byte[] {0, 0, (byte) ((list + 2) >> 8), (byte) (list + 2)});
        e.writeBytes(new byte[] {(byte) (claimed >> 8), (byte) claimed, 0, (byte) (n.length >> 8), (byte) n.length});
        e.writeBytes(n);
        return e.toByteArray();
    }

    /** A TLS 1.2-framed record of this content type carrying the text (the proxy reads only the framing). */
    static byte[] tlsRecord(int contentType, String text) {
        byte[] t = text.getBytes(StandardCharsets.US_ASCII);
        return concat(new byte[] {(byte) contentType, 3, 3, (byte) (t.length >> 8), (byte) t.length}, t);
    }

    static byte[] concat(byte[]... parts) {
        ByteArrayOutputStream o = new ByteArrayOutputStream();
        for (byte[] p : parts) o.writeBytes(p);
        return o.toByteArray();
    }
}
