package dev.codeexec.egress;

import javax.net.ssl.SSLContext;
import javax.net.ssl.TrustManagerFactory;
import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.GeneralSecurityException;
import java.security.KeyStore;
import java.security.cert.Certificate;
import java.security.cert.CertificateFactory;
import java.security.cert.X509Certificate;
import java.util.Optional;

/**
 * What the proxy needs to open a tunnel to a secret's host itself: the CA whose certificate it shows the program
 * ({@link InterceptCa}) and the trust it asks of the real host (the system's roots, the JDK's, and
 * EGRESS_UPSTREAM_CA_FILE's certificates; the host name is checked as HTTPS clients check it).
 *
 * @param ca       the server's own CA
 * @param upstream the TLS client context toward the real hosts
 */
public record Interception(InterceptCa ca, SSLContext upstream) {

    /**
     * Text response bodies up to this size have the real value replaced by the placeholder; past it the rest of a
     * body passes as it came (docs/network.md says so).
     */
    public static final int BODY_SCAN_MAX = 1 << 20;
    private static final Path SYSTEM_CA_BUNDLE = Path.of("/etc/ssl/certs/ca-certificates.crt");

    /**
     * @param upstreamCaFile EGRESS_UPSTREAM_CA_FILE, if set
     * @throws IOException a certificate file cannot be read
     */
    public static Interception of(InterceptCa ca, Optional<Path> upstreamCaFile) throws IOException {
        try {
            KeyStore trust = KeyStore.getInstance("PKCS12");
            trust.load(null, null);
            int n = 0;
            TrustManagerFactory jdk = TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
            jdk.init((KeyStore) null);
            for (var tm : jdk.getTrustManagers())
                if (tm instanceof javax.net.ssl.X509TrustManager x)
                    for (X509Certificate c : x.getAcceptedIssuers()) trust.setCertificateEntry("jdk-" + n++, c);
            if (Files.isReadable(SYSTEM_CA_BUNDLE)) n = add(trust, SYSTEM_CA_BUNDLE, "system-", n);
            if (upstreamCaFile.isPresent()) {
                int before = n;
                n = add(trust, upstreamCaFile.get(), "upstream-", n);
                if (n == before) throw new IOException("EGRESS_UPSTREAM_CA_FILE " + upstreamCaFile.get() + " holds no certificate");
            }
            TrustManagerFactory tmf = TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
            tmf.init(trust);
            SSLContext ctx = SSLContext.getInstance("TLS");
            ctx.init(null, tmf.getTrustManagers(), null);
            return new Interception(ca, ctx);
        } catch (GeneralSecurityException e) {
            throw new IOException("the proxy's trust for secrets' hosts cannot be prepared: " + e.getMessage(), e);
        }
    }

    private static int add(KeyStore trust, Path pem, String prefix, int n) throws IOException, GeneralSecurityException {
        try (InputStream in = Files.newInputStream(pem)) {
            for (Certificate c : CertificateFactory.getInstance("X.509").generateCertificates(in))
                trust.setCertificateEntry(prefix + n++, c);
        }
        return n;
    }
}
