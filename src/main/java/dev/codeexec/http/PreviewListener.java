package dev.codeexec.http;

import dev.codeexec.auth.ApiKeys;
import dev.codeexec.auth.Principal;
import dev.codeexec.config.Config;
import dev.codeexec.ops.Metrics;
import dev.codeexec.preview.PreviewProxy;
import dev.codeexec.engine.PreviewControl;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.io.IOException;
import java.time.Duration;
import java.util.Optional;

/**
 * The HTTP server's preview listener: {@link PreviewProxy} on PREVIEW_HOST:PREVIEW_PORT over the registry of
 * previews, the server's keys (for {@code key} previews), its metrics and audit log. A listener that cannot start
 * (the port in use) leaves previews off, said by expose_port; the server starts all the same.
 */
final class PreviewListener {

    private static final Logger LOG = LoggerFactory.getLogger(PreviewListener.class);
    private static final Logger AUDIT = LoggerFactory.getLogger("audit");
    /** Connections the listener holds at once, all previews together (each holds a virtual thread or two). */
    static final int MAX_CONNECTIONS = 1024;

    private PreviewListener() {
    }

    /** Starts the listener when previews can be served here; empty when they cannot (the registry says why). */
    static Optional<PreviewProxy> start(Config config, PreviewControl previews, ApiKeys keys, Metrics metrics) {
        if (!previews.address().starting()) return Optional.empty();
        String host = config.get(Config.PREVIEW_HOST);
        Optional<String> domain = Optional.of(config.get(Config.PREVIEW_DOMAIN)).filter(d -> !d.isBlank());
        PreviewProxy.Settings settings = new PreviewProxy.Settings(host, config.get(Config.PREVIEW_PORT), domain, "https",
                config.get(Config.PREVIEW_MAX_CONNECTIONS), MAX_CONNECTIONS,
                (long) config.get(Config.PREVIEW_MAX_BODY_MB) << 20, (long) config.get(Config.PREVIEW_MAX_MB) << 20,
                Duration.ofMillis(config.get(Config.PREVIEW_IDLE_TIMEOUT_MS)));
        PreviewProxy.Directory directory = token -> previews.find(token).map(p -> new PreviewProxy.Target(p.token(),
                p.tenant(), p.port(), p.key() ? PreviewProxy.Auth.KEY : PreviewProxy.Auth.TOKEN, p.socket(),
                p.sandbox().label()));
        PreviewProxy.Observer observer = new PreviewProxy.Observer() {
            @Override
            public void request(PreviewProxy.Target t, String method, int status) {
                metrics.previewRequest(status);
            }

            @Override
            public void connection(PreviewProxy.Target t, String client, long bytesIn, long bytesOut, long millis, String end) {
                metrics.previewBytes(bytesIn, bytesOut);
                AUDIT.info("preview connection tenant={} sandbox=\"{}\" port={} client={} bytes_in={} bytes_out={} ms={} end={}",
                        t.tenant(), t.label(), t.port(), client, bytesIn, bytesOut, millis, end);
            }
        };
        try {
            PreviewProxy proxy = PreviewProxy.start(settings, directory,
                    key -> keys.authenticate(key).map(Principal::tenant), observer);
            metrics.bindPreviewConnections(proxy::openConnections);
            String publicUrl = config.get(Config.PREVIEW_PUBLIC_URL).strip();
            previews.address().listening(publicUrl.isEmpty() ? "http://" + urlHost(host) + ":" + proxy.port() : publicUrl);
            LOG.info("previews at http://{}:{}/p/{{token}}/{}", urlHost(host), proxy.port(),
                    domain.map(d -> " and https://{token}." + d + "/").orElse(""));
            return Optional.of(proxy);
        } catch (IOException | RuntimeException e) {
            String why = "the preview listener cannot listen on " + host + ":" + config.get(Config.PREVIEW_PORT) + " ("
                    + e.getMessage() + "): previews are off; set PREVIEW_PORT to a free port";
            LOG.warn(why);
            previews.address().unavailable(why);
            return Optional.empty();
        }
    }

    /** The host of a URL for a bound address: a wildcard address is reached as localhost, an IPv6 literal in brackets. */
    static String urlHost(String host) {
        if (host.equals("0.0.0.0") || host.equals("::") || host.equals("[::]")) return "localhost";
        return host.contains(":") && !host.startsWith("[") ? "[" + host + "]" : host;
    }
}
