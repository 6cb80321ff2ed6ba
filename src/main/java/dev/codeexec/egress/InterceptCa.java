package dev.codeexec.egress;

import dev.codeexec.config.DataDir;
import dev.codeexec.config.Ids;
import org.bouncycastle.asn1.x500.X500Name;
import org.bouncycastle.asn1.x500.X500NameBuilder;
import org.bouncycastle.asn1.x500.style.BCStyle;
import org.bouncycastle.asn1.x509.BasicConstraints;
import org.bouncycastle.asn1.x509.ExtendedKeyUsage;
import org.bouncycastle.asn1.x509.Extension;
import org.bouncycastle.asn1.x509.GeneralName;
import org.bouncycastle.asn1.x509.GeneralNames;
import org.bouncycastle.asn1.x509.KeyPurposeId;
import org.bouncycastle.asn1.x509.KeyUsage;
import org.bouncycastle.cert.CertIOException;
import org.bouncycastle.cert.X509v3CertificateBuilder;
import org.bouncycastle.cert.jcajce.JcaX509CertificateConverter;
import org.bouncycastle.cert.jcajce.JcaX509ExtensionUtils;
import org.bouncycastle.cert.jcajce.JcaX509v3CertificateBuilder;
import org.bouncycastle.operator.OperatorCreationException;
import org.bouncycastle.operator.jcajce.JcaContentSignerBuilder;

import javax.net.ssl.KeyManagerFactory;
import javax.net.ssl.SSLContext;
import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.math.BigInteger;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.GeneralSecurityException;
import java.security.KeyFactory;
import java.security.KeyPair;
import java.security.KeyPairGenerator;
import java.security.KeyStore;
import java.security.PrivateKey;
import java.security.PublicKey;
import java.security.cert.CertificateFactory;
import java.security.cert.X509Certificate;
import java.security.spec.ECGenParameterSpec;
import java.security.spec.PKCS8EncodedKeySpec;
import java.time.Duration;
import java.time.Instant;
import java.util.Base64;
import java.util.Date;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/**
 * The server's own certificate authority for placeholder secrets: the proxy ends the TLS of a tunnel to a host that
 * has a secret for the run with a certificate of this CA for that host, so it can put the real value in place of
 * the placeholder. Runs with egress trust its certificate (the same variables EGRESS_CA_FILE uses, see
 * {@link EgressChannels}); nothing else does.
 *
 * <p>Made at the first start with a secrets file, in its own directory of DATA_DIR (0700): {@code ca.key} (PKCS#8,
 * 0600, never leaves the server: only the certificate goes into sandboxes) and {@code ca.pem}; later starts read
 * them. EC P-256 keys, signed with the JDK's own provider (BouncyCastle only builds the certificates). The CA may
 * sign only end-entity certificates (path length 0). A leaf per host, valid {@link #LEAF_VALIDITY} and made again
 * after half of that, is kept in memory; all leaves share one key pair per server start.
 */
public final class InterceptCa {

    static final String KEY_FILE = "ca.key";
    static final String CERT_FILE = "ca.pem";
    private static final Duration CA_VALIDITY = Duration.ofDays(3650);
    static final Duration LEAF_VALIDITY = Duration.ofDays(7);
    /** Clocks differ a little between the server and whatever checks a certificate. */
    private static final Duration BACKDATE = Duration.ofHours(1);
    private static final String SIGNATURE = "SHA256withECDSA";

    private final PrivateKey caKey;
    private final X509Certificate caCert;
    private final KeyPair leafKeys;
    private final Map<String, Leaf> leaves = new ConcurrentHashMap<>();

    private record Leaf(SSLContext context, X509Certificate certificate, Instant renewAt) {
    }

    private InterceptCa(PrivateKey caKey, X509Certificate caCert) throws GeneralSecurityException {
        this.caKey = caKey;
        this.caCert = caCert;
        this.leafKeys = newKeyPair();
    }

    /**
     * The CA in {@code dir} (a directory of the server's alone, 0700), made there when it has none yet. Two servers
     * sharing DATA_DIR call this under one lock ({@link DataDir#locked}).
     *
     * @throws IOException the files cannot be read or written, or do not hold a CA
     */
    public static InterceptCa loadOrCreate(Path dir) throws IOException {
        Path key = dir.resolve(KEY_FILE), cert = dir.resolve(CERT_FILE);
        try {
            if (Files.exists(key) && Files.exists(cert)) return new InterceptCa(readKey(key), readCertificate(cert));
            KeyPair pair = newKeyPair();
            X500Name name = new X500NameBuilder(BCStyle.INSTANCE).addRDN(BCStyle.O, "code-exec-mcp")
                    .addRDN(BCStyle.CN, "code-exec-mcp egress secrets CA " + Ids.hex(4)).build();
            Instant now = Instant.now();
            X509v3CertificateBuilder b = new JcaX509v3CertificateBuilder(name, serial(), Date.from(now.minus(BACKDATE)),
                    Date.from(now.plus(CA_VALIDITY)), name, pair.getPublic());
            JcaX509ExtensionUtils ext = new JcaX509ExtensionUtils();
            b.addExtension(Extension.basicConstraints, true, new BasicConstraints(0));
            b.addExtension(Extension.keyUsage, true, new KeyUsage(KeyUsage.keyCertSign | KeyUsage.cRLSign));
            b.addExtension(Extension.subjectKeyIdentifier, false, ext.createSubjectKeyIdentifier(pair.getPublic()));
            X509Certificate ca = sign(b, pair.getPrivate());
            // the key first: a certificate without its key would be read back as a CA that cannot sign
            DataDir.write(key, pem("PRIVATE KEY", pair.getPrivate().getEncoded()), "rw-------");
            DataDir.write(cert, pem("CERTIFICATE", ca.getEncoded()), "rw-r--r--");
            return new InterceptCa(pair.getPrivate(), ca);
        } catch (GeneralSecurityException | OperatorCreationException | CertIOException | RuntimeException e) {
            throw new IOException("the egress secrets CA in " + dir + " cannot be " + (Files.exists(key) ? "read" : "made")
                    + ": " + e.getMessage(), e);
        }
    }

    /** The CA's certificate. */
    public X509Certificate certificate() {
        return caCert;
    }

    /** The CA's certificate in PEM, as runs get it. */
    public String certificatePem() {
        try {
            return new String(pem("CERTIFICATE", caCert.getEncoded()), StandardCharsets.US_ASCII);
        } catch (GeneralSecurityException e) {
            throw new IllegalStateException(e);
        }
    }

    /**
     * A TLS server context whose certificate names {@code host} (normalised) and is signed by this CA, made at the
     * first ask and again once it is half-way to its end.
     */
    public SSLContext serverContext(String host) throws GeneralSecurityException {
        Leaf leaf = leaves.get(host);
        if (leaf == null || Instant.now().isAfter(leaf.renewAt())) {
            leaf = newLeaf(host);
            leaves.put(host, leaf);
        }
        return leaf.context();
    }

    /** The certificate {@link #serverContext} serves for {@code host} now (tests). */
    X509Certificate leafFor(String host) throws GeneralSecurityException {
        serverContext(host);
        return leaves.get(host).certificate();
    }

    private Leaf newLeaf(String host) throws GeneralSecurityException {
        Instant now = Instant.now();
        X500Name subject = new X500NameBuilder(BCStyle.INSTANCE).addRDN(BCStyle.CN, host).build();
        X500Name issuer = X500Name.getInstance(caCert.getSubjectX500Principal().getEncoded());
        try {
            X509v3CertificateBuilder b = new JcaX509v3CertificateBuilder(issuer, serial(), Date.from(now.minus(BACKDATE)),
                    Date.from(now.plus(LEAF_VALIDITY)), subject, leafKeys.getPublic());
            JcaX509ExtensionUtils ext = new JcaX509ExtensionUtils();
            b.addExtension(Extension.basicConstraints, true, new BasicConstraints(false));
            b.addExtension(Extension.keyUsage, true, new KeyUsage(KeyUsage.digitalSignature));
            b.addExtension(Extension.extendedKeyUsage, false, new ExtendedKeyUsage(KeyPurposeId.id_kp_serverAuth));
            b.addExtension(Extension.subjectAlternativeName, false, new GeneralNames(new GeneralName(GeneralName.dNSName, host)));
            b.addExtension(Extension.subjectKeyIdentifier, false, ext.createSubjectKeyIdentifier(leafKeys.getPublic()));
            b.addExtension(Extension.authorityKeyIdentifier, false, ext.createAuthorityKeyIdentifier(caCert));
            X509Certificate cert = sign(b, caKey);
            KeyStore ks = KeyStore.getInstance("PKCS12");
            ks.load(null, null);
            char[] pass = new char[0];
            ks.setKeyEntry("leaf", leafKeys.getPrivate(), pass, new X509Certificate[] {cert, caCert});
            KeyManagerFactory kmf = KeyManagerFactory.getInstance(KeyManagerFactory.getDefaultAlgorithm());
            kmf.init(ks, pass);
            SSLContext ctx = SSLContext.getInstance("TLS");
            ctx.init(kmf.getKeyManagers(), null, null);
            return new Leaf(ctx, cert, now.plus(LEAF_VALIDITY.dividedBy(2)));
        } catch (OperatorCreationException | IOException e) {
            throw new GeneralSecurityException("cannot make a certificate for " + host + ": " + e.getMessage(), e);
        }
    }

    private static X509Certificate sign(X509v3CertificateBuilder b, PrivateKey key)
            throws OperatorCreationException, GeneralSecurityException {
        // no provider named: the JDK's own signs
        return new JcaX509CertificateConverter().getCertificate(b.build(new JcaContentSignerBuilder(SIGNATURE).build(key)));
    }

    private static KeyPair newKeyPair() throws GeneralSecurityException {
        KeyPairGenerator g = KeyPairGenerator.getInstance("EC");
        g.initialize(new ECGenParameterSpec("secp256r1"));
        return g.generateKeyPair();
    }

    private static BigInteger serial() {
        return new BigInteger(1, Ids.bytes(16));
    }

    private static byte[] pem(String type, byte[] der) {
        String body = Base64.getMimeEncoder(64, new byte[] {'\n'}).encodeToString(der);
        return ("-----BEGIN " + type + "-----\n" + body + "\n-----END " + type + "-----\n").getBytes(StandardCharsets.US_ASCII);
    }

    private static byte[] unpem(Path file) throws IOException {
        String text = Files.readString(file, StandardCharsets.US_ASCII);
        int from = text.indexOf("-----\n"), to = text.indexOf("-----END");
        if (text.indexOf("-----BEGIN") != 0 || from < 0 || to < from) throw new IOException(file.getFileName() + " is not PEM");
        return Base64.getMimeDecoder().decode(text.substring(from + 6, to));
    }

    private static PrivateKey readKey(Path file) throws IOException, GeneralSecurityException {
        return KeyFactory.getInstance("EC").generatePrivate(new PKCS8EncodedKeySpec(unpem(file)));
    }

    private static X509Certificate readCertificate(Path file) throws IOException, GeneralSecurityException {
        return (X509Certificate) CertificateFactory.getInstance("X.509").generateCertificate(new ByteArrayInputStream(unpem(file)));
    }

    /** The public key of the CA (tests check a leaf's signature with it). */
    PublicKey publicKey() {
        return caCert.getPublicKey();
    }
}
