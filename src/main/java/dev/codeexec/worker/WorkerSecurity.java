package dev.codeexec.worker;

import dev.codeexec.config.Config;
import dev.codeexec.config.ConfigException;
import dev.codeexec.config.ConfigKey;
import io.grpc.InsecureServerCredentials;
import io.grpc.ServerCredentials;
import io.grpc.TlsServerCredentials;

import java.io.File;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * The worker's transport security, checked before anything starts: a worker reachable from other machines must
 * require the token, and must use TLS unless plaintext was allowed on purpose (WORKER_PLAINTEXT, e.g. inside a
 * cluster network fenced by a NetworkPolicy). Every refusal names the variable to fix.
 */
final class WorkerSecurity {

    private WorkerSecurity() {
    }

    static boolean tls(Config c) {
        return !c.get(Config.WORKER_TLS_CERT).isEmpty();
    }

    static boolean mutualTls(Config c) {
        return tls(c) && !c.get(Config.WORKER_TLS_CA).isEmpty();
    }

    /** @throws ConfigException naming the variable, for every combination a worker must not start with */
    static void check(Config c) {
        String host = c.get(Config.WORKER_HOST);
        boolean cert = !c.get(Config.WORKER_TLS_CERT).isEmpty();
        boolean key = !c.get(Config.WORKER_TLS_KEY).isEmpty();
        if (cert != key)
            throw new ConfigException("WORKER_TLS_CERT and WORKER_TLS_KEY must be set together (TLS needs both)");
        if (!c.get(Config.WORKER_TLS_CA).isEmpty() && !cert)
            throw new ConfigException("WORKER_TLS_CA (require client certificates) needs WORKER_TLS_CERT and "
                    + "WORKER_TLS_KEY: mutual TLS is TLS first");
        for (ConfigKey<String> k : new ConfigKey[] {Config.WORKER_TLS_CERT, Config.WORKER_TLS_KEY, Config.WORKER_TLS_CA}) {
            String f = c.get(k);
            if (!f.isEmpty() && !Files.isReadable(Path.of(f)))
                throw new ConfigException(k.name() + " " + f + " cannot be read");
        }
        if (!Config.isLoopback(host) && c.get(Config.WORKER_TOKEN).isEmpty())
            throw new ConfigException("WORKER_HOST " + host + " is not a loopback address: set WORKER_TOKEN (the "
                    + "gateways send the same value), or bind WORKER_HOST=127.0.0.1");
        if (!Config.isLoopback(host) && !cert && !c.get(Config.WORKER_PLAINTEXT))
            throw new ConfigException("WORKER_HOST " + host + " is not a loopback address: set WORKER_TLS_CERT and "
                    + "WORKER_TLS_KEY, or WORKER_PLAINTEXT=true to allow plaintext gRPC on a network you trust");
    }

    /** TLS (and mTLS) credentials from the configured files, or plaintext. */
    static ServerCredentials credentials(Config c) {
        if (!tls(c)) return InsecureServerCredentials.create();
        TlsServerCredentials.Builder b = TlsServerCredentials.newBuilder();
        try {
            b.keyManager(new File(c.get(Config.WORKER_TLS_CERT)), new File(c.get(Config.WORKER_TLS_KEY)));
        } catch (IOException | RuntimeException e) {
            throw new ConfigException("WORKER_TLS_CERT / WORKER_TLS_KEY cannot be loaded: " + e.getMessage());
        }
        if (mutualTls(c)) {
            try {
                b.trustManager(new File(c.get(Config.WORKER_TLS_CA)));
            } catch (IOException | RuntimeException e) {
                throw new ConfigException("WORKER_TLS_CA cannot be loaded: " + e.getMessage());
            }
            b.clientAuth(TlsServerCredentials.ClientAuth.REQUIRE);
        }
        return b.build();
    }
}
