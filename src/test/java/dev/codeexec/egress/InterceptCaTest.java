package dev.codeexec.egress;

import dev.codeexec.config.DataDir;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import javax.net.ssl.SNIHostName;
import javax.net.ssl.SSLContext;
import javax.net.ssl.SSLHandshakeException;
import javax.net.ssl.SSLParameters;
import javax.net.ssl.SSLServerSocket;
import javax.net.ssl.SSLSocket;
import javax.net.ssl.TrustManagerFactory;
import java.net.InetAddress;
import java.net.Socket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.security.KeyStore;
import java.security.cert.X509Certificate;
import java.util.List;
import java.util.concurrent.CompletableFuture;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

class InterceptCaTest {

    @TempDir
    Path data;

    /** A TLS client that trusts {@code ca} alone and checks the host name as HTTPS does. */
    static SSLContext trusting(X509Certificate ca) throws Exception {
        KeyStore ts = KeyStore.getInstance("PKCS12");
        ts.load(null, null);
        ts.setCertificateEntry("ca", ca);
        TrustManagerFactory tmf = TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
        tmf.init(ts);
        SSLContext c = SSLContext.getInstance("TLS");
        c.init(null, tmf.getTrustManagers(), null);
        return c;
    }

    /** A handshake with a loopback server using the CA's leaf for {@code served}, the client asking for {@code asked}. */
    static void handshake(InterceptCa ca, String served, String asked) throws Exception {
        handshake(ca.serverContext(served), ca.certificate(), asked);
    }

    /** A handshake with a loopback server of {@code serverContext}, the client trusting {@code trusted} alone. */
    static void handshake(SSLContext serverContext, X509Certificate trusted, String asked) throws Exception {
        try (SSLServerSocket server = (SSLServerSocket) serverContext.getServerSocketFactory()
                .createServerSocket(0, 1, InetAddress.ofLiteral("127.0.0.1"))) {
            CompletableFuture<Void> accepted = CompletableFuture.runAsync(() -> {
                try (SSLSocket s = (SSLSocket) server.accept()) {
                    s.startHandshake();
                    s.getOutputStream().write('x');
                    s.getInputStream().read();
                } catch (Exception e) {
                    // the client's refusal ends it
                }
            });
            try (Socket plain = new Socket(InetAddress.ofLiteral("127.0.0.1"), server.getLocalPort());
                 SSLSocket tls = (SSLSocket) trusting(trusted).getSocketFactory().createSocket(plain, asked,
                         server.getLocalPort(), true)) {
                SSLParameters p = tls.getSSLParameters();
                p.setEndpointIdentificationAlgorithm("HTTPS");
                p.setServerNames(List.of(new SNIHostName(asked)));
                tls.setSSLParameters(p);
                tls.setSoTimeout(20_000);
                tls.startHandshake();
                assertThat(tls.getInputStream().read()).isEqualTo('x');
                tls.getOutputStream().write('y');
            }
            accepted.join();
        }
    }

    @Test
    void theCaIsMadeOnceWithItsKeyReadableByTheServerAloneAndReadBackAtTheNextStart() throws Exception {
        DataDir dd = DataDir.at(data);
        Path dir = dd.prepareSecretsCa();
        InterceptCa first = InterceptCa.loadOrCreate(dir);
        InterceptCa second = InterceptCa.loadOrCreate(dir);
        assertThat(second.certificate()).isEqualTo(first.certificate());
        assertThat(PosixFilePermissions.toString(Files.getPosixFilePermissions(dir))).isEqualTo("rwx------");
        assertThat(PosixFilePermissions.toString(Files.getPosixFilePermissions(dir.resolve(InterceptCa.KEY_FILE))))
                .isEqualTo("rw-------");
        assertThat(first.certificatePem()).startsWith("-----BEGIN CERTIFICATE-----\n")
                .doesNotContain("PRIVATE");
        assertThat(first.certificate().getBasicConstraints()).as("a CA for end-entity certificates only").isZero();
        // a leaf of the CA read back verifies against the CA made first
        second.leafFor("api.github.test").verify(first.publicKey());
    }

    @Test
    void aLeafForAHostPassesAnHttpsClientsChecksForThatHostAndNoOther() throws Exception {
        InterceptCa ca = InterceptCa.loadOrCreate(DataDir.at(data).prepareSecretsCa());
        handshake(ca, "api.github.test", "api.github.test");
        assertThatThrownBy(() -> handshake(ca, "api.github.test", "other.test")).isInstanceOf(SSLHandshakeException.class);
        X509Certificate leaf = ca.leafFor("api.github.test");
        assertThat(leaf.getBasicConstraints()).isEqualTo(-1);
        assertThat(leaf.getNotAfter().getTime() - System.currentTimeMillis())
                .isLessThanOrEqualTo(InterceptCa.LEAF_VALIDITY.toMillis());
        assertThat(ca.leafFor("api.github.test")).as("cached").isSameAs(leaf);
    }

    @Test
    void aClientThatDoesNotTrustTheCaRefusesItsLeaf() throws Exception {
        InterceptCa ca = InterceptCa.loadOrCreate(DataDir.at(data).prepareSecretsCa());
        InterceptCa other = InterceptCa.loadOrCreate(Files.createDirectory(data.resolve("other")));
        assertThatThrownBy(() -> handshake(ca.serverContext("a.test"), other.certificate(), "a.test"))
                .isInstanceOf(SSLHandshakeException.class);
    }
}
