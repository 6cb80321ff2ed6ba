package dev.codeexec.egress;

import org.junit.jupiter.api.Test;

import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.Optional;
import java.util.Random;

import static org.assertj.core.api.Assertions.assertThat;

/** Reading the server name out of a TLS ClientHello: real ones from the JDK, and malformed ones by hand. */
class ClientHelloTest {

    static ClientHello.Result parse(byte[] b) {
        return ClientHello.parse(b, b.length);
    }

    static ClientHello.Result parse(byte[] b, int len) {
        return ClientHello.parse(Arrays.copyOf(b, len), len);
    }

    @Test
    void readsTheServerNameOfAJdkClientHello() throws Exception {
        byte[] hello = TlsHellos.jdk("fixture.test");
        assertThat(hello[0]).isEqualTo((byte) 22);
        assertThat(parse(hello)).isEqualTo(new ClientHello.Result.Hello(Optional.of("fixture.test")));
        // The buffer may be larger than what was read so far: only len counts.
        byte[] roomy = Arrays.copyOf(hello, hello.length + 1000);
        assertThat(ClientHello.parse(roomy, hello.length)).isEqualTo(new ClientHello.Result.Hello(Optional.of("fixture.test")));
    }

    @Test
    void readsTls12OnlyHellosToo() throws Exception {
        byte[] hello = TlsHellos.jdk("fixture.test", "TLSv1.2");
        assertThat(parse(hello)).isEqualTo(new ClientHello.Result.Hello(Optional.of("fixture.test")));
    }

    @Test
    void aHelloWithoutSniIsAHelloWithoutAName() throws Exception {
        assertThat(parse(TlsHellos.jdk(null))).isEqualTo(new ClientHello.Result.Hello(Optional.empty()));
        assertThat(parse(TlsHellos.handBuilt(null))).isEqualTo(new ClientHello.Result.Hello(Optional.empty()));
        assertThat(parse(TlsHellos.handBuilt(new byte[0]))).isEqualTo(new ClientHello.Result.Hello(Optional.empty()));
    }

    @Test
    void aPartialHelloNeedsMore() throws Exception {
        byte[] hello = TlsHellos.jdk("fixture.test");
        assertThat(parse(hello, 0)).isInstanceOf(ClientHello.Result.NeedMore.class);
        assertThat(parse(hello, 1)).isInstanceOf(ClientHello.Result.NeedMore.class);
        assertThat(parse(hello, 3)).isInstanceOf(ClientHello.Result.NeedMore.class);
        assertThat(parse(hello, 5)).isInstanceOf(ClientHello.Result.NeedMore.class);
        assertThat(parse(hello, 9)).isInstanceOf(ClientHello.Result.NeedMore.class);
        assertThat(parse(hello, hello.length / 2)).isInstanceOf(ClientHello.Result.NeedMore.class);
        assertThat(parse(hello, hello.length - 1)).isInstanceOf(ClientHello.Result.NeedMore.class);
    }

    @Test
    void aHelloSpreadOverTwoRecordsIsReadWhole() throws Exception {
        byte[] hello = TlsHellos.jdk("fixture.test");
        for (int at : new int[] {1, 3, 4, 40, 100}) {
            byte[] two = TlsHellos.splitIntoTwoRecords(hello, at);
            assertThat(two).hasSize(hello.length + 5);
            assertThat(parse(two)).as("split at " + at).isEqualTo(new ClientHello.Result.Hello(Optional.of("fixture.test")));
            // The first record alone is not the whole message.
            assertThat(parse(two, 5 + at)).as("first record of " + at).isInstanceOf(ClientHello.Result.NeedMore.class);
        }
    }

    @Test
    void plainTextAndGarbageAreNotTls() {
        assertThat(parse("GET / HTTP/1.1\r\n".getBytes(StandardCharsets.US_ASCII))).isInstanceOf(ClientHello.Result.NotTls.class);
        assertThat(parse("GET".getBytes(StandardCharsets.US_ASCII))).isInstanceOf(ClientHello.Result.NotTls.class);
        assertThat(parse("SSH-2.0-OpenSSH_9.6\r\n".getBytes(StandardCharsets.US_ASCII))).isInstanceOf(ClientHello.Result.NotTls.class);
        Random random = new Random(42);
        for (int i = 0; i < 200; i++) {
            byte[] junk = new byte[1 + random.nextInt(600)];
            random.nextBytes(junk);
            if (junk[0] == 22) junk[0] = 23;
            assertThat(parse(junk)).as("junk " + i).isInstanceOf(ClientHello.Result.NotTls.class);
        }
    }

    @Test
    void otherRecordsAndMessagesAreNotTlsHellos() throws Exception {
        byte[] hello = TlsHellos.jdk("fixture.test");
        byte[] appData = hello.clone();
        appData[0] = 23;
        assertThat(parse(appData)).isInstanceOf(ClientHello.Result.NotTls.class);
        byte[] badVersion = hello.clone();
        badVersion[1] = 2;
        assertThat(parse(badVersion)).isInstanceOf(ClientHello.Result.NotTls.class);
        byte[] serverHello = hello.clone();
        serverHello[5] = 2;
        assertThat(parse(serverHello)).isInstanceOf(ClientHello.Result.NotTls.class);
        assertThat(parse(serverHello, 20)).as("a partial ServerHello is already not a ClientHello")
                .isInstanceOf(ClientHello.Result.NotTls.class);
        assertThat(parse(new byte[] {22, 3, 1, 0, 0})).as("an empty record").isInstanceOf(ClientHello.Result.NotTls.class);
        assertThat(parse(new byte[] {22, 3, 1, (byte) 0xff, (byte) 0xff})).as("a record too long")
                .isInstanceOf(ClientHello.Result.NotTls.class);
        // A handshake message longer than the proxy reads.
        assertThat(parse(new byte[] {22, 3, 1, 0, 4, 1, 1, 0, 0})).isInstanceOf(ClientHello.Result.NotTls.class);
        // A second record that is not a handshake record.
        byte[] two = TlsHellos.splitIntoTwoRecords(hello, 40);
        two[5 + 40] = 20;
        assertThat(parse(two)).isInstanceOf(ClientHello.Result.NotTls.class);
    }

    @Test
    void handBuiltSniIsRead() {
        byte[] hello = TlsHellos.handBuilt(TlsHellos.concat(new byte[] {0, 0x2b, 0, 3, 2, 3, 4}, TlsHellos.sniExtension("a.example", -1)));
        assertThat(parse(hello)).isEqualTo(new ClientHello.Result.Hello(Optional.of("a.example")));
    }

    @Test
    void anExtensionLongerThanTheExtensionsIsNotTls() {
        byte[] ext = TlsHellos.sniExtension("a.example", -1);
        ext[3] = (byte) (ext[3] + 10); // the extension claims more than there is
        assertThat(parse(TlsHellos.handBuilt(ext))).isInstanceOf(ClientHello.Result.NotTls.class);
    }

    @Test
    void aServerNameListLongerThanItsExtensionIsNotTls() {
        // The list claims more than its extension holds, and the name's length runs past the hello: malformed,
        // never an exception out of the parser.
        byte[] ext = TlsHellos.sniExtension("a.example", 0xffff);
        ext[7] = (byte) 0x7f; // name length 0x7f09
        assertThat(parse(TlsHellos.handBuilt(ext))).isInstanceOf(ClientHello.Result.NotTls.class);
    }

    @Test
    void aServerNameListLongerThanItsExtensionDoesNotReadTheNextExtension() {
        // server_name holds one entry of another name type whose length runs past the extension; the list length
        // claims the next extension too, where a host_name entry is hidden in its data. A TLS server reads no name
        // here (it refuses the hello); the proxy must not read one either.
        byte[] hidden = "hidden.example".getBytes(StandardCharsets.US_ASCII);
        byte[] sni = {0, 0, 0, 5, 0, 0x40, 1, 0, 4};
        byte[] other = new byte[4 + 3 + hidden.length];
        other[0] = 0x0a;
        other[1] = 0x0a; // a GREASE extension type
        other[3] = (byte) (3 + hidden.length);
        other[6] = (byte) hidden.length; // data: type 0 (host_name), length, name
        System.arraycopy(hidden, 0, other, 7, hidden.length);
        assertThat(parse(TlsHellos.handBuilt(TlsHellos.concat(sni, other)))).isInstanceOf(ClientHello.Result.NotTls.class);
    }

    static ClientHello.Result add(ClientHello.Reader r, byte[] b) {
        return r.add(java.nio.ByteBuffer.wrap(b));
    }

    @Test
    void aReaderTakesTheHelloInAnyPiecesAndKeepsWhatFollowsItApart() throws Exception {
        byte[] hello = TlsHellos.splitIntoTwoRecords(TlsHellos.jdk("fixture.test"), 40);
        byte[] after = "GET / HTTP/1.1\r\n".getBytes(StandardCharsets.US_ASCII);
        byte[] all = TlsHellos.concat(hello, after);
        ClientHello.Reader r = new ClientHello.Reader();
        ClientHello.Result last = null;
        for (int i = 0; i < all.length && !(last instanceof ClientHello.Result.Hello); i++)
            last = add(r, new byte[] {all[i]});
        assertThat(last).isEqualTo(new ClientHello.Result.Hello(Optional.of("fixture.test")));
        assertThat(r.hello()).isEqualTo(hello);
        // whole, with the next bytes in the same read
        ClientHello.Reader whole = new ClientHello.Reader();
        assertThat(add(whole, all)).isEqualTo(new ClientHello.Result.Hello(Optional.of("fixture.test")));
        assertThat(whole.hello()).isEqualTo(hello);
        assertThat(whole.rest()).isEqualTo(after);
    }

    @Test
    void aReaderRefusesPlainBytesAtTheFirstByteAndAHelloSpreadTooThin() throws Exception {
        assertThat(add(new ClientHello.Reader(), new byte[] {'G'})).isInstanceOf(ClientHello.Result.NotTls.class);
        assertThat(add(new ClientHello.Reader(), new byte[] {22, 2})).isInstanceOf(ClientHello.Result.NotTls.class);
        assertThat(add(new ClientHello.Reader(), new byte[] {22, 3, 1, 0x40, 1})).as("a record over 2^14")
                .isInstanceOf(ClientHello.Result.NotTls.class);
        // the hello a byte per record: more records than any client sends
        byte[] hello = TlsHellos.jdk("fixture.test");
        int length = ((hello[3] & 0xff) << 8) | (hello[4] & 0xff);
        java.io.ByteArrayOutputStream thin = new java.io.ByteArrayOutputStream();
        for (int i = 0; i < length; i++) thin.writeBytes(new byte[] {22, 3, 1, 0, 1, hello[5 + i]});
        assertThat(add(new ClientHello.Reader(), thin.toByteArray())).isInstanceOf(ClientHello.Result.TooLarge.class);
    }
}
