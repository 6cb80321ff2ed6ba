package dev.codeexec.egress;

import java.util.List;

/**
 * One connection a run asked the proxy for, and what became of it.
 *
 * @param host     the host asked for (normalised; as sent, shortened, when it was not a valid name)
 * @param port     the port asked for (0 when the request could not be read)
 * @param decision {@code allowed} (connected and relayed), {@code refused} (by policy or a bound: nothing was
 *                 sent anywhere) or {@code failed} (allowed, but the host could not be resolved or reached)
 * @param reason   a short code: for {@code allowed} how the connection ended ({@code closed}, {@code byte_limit},
 *                 {@code idle_timeout}, {@code run_ended}); for {@code refused} why ({@code egress_off},
 *                 {@code not_allowed}, {@code ip_literal}, {@code loopback}, {@code private}, {@code link_local},
 *                 {@code cgnat}, {@code ula}, {@code multicast}, {@code metadata}, {@code unspecified},
 *                 {@code reserved}, {@code sni_mismatch}, {@code no_sni}, {@code not_tls},
 *                 {@code connection_limit}, {@code byte_limit}, {@code bad_request}, {@code secret_not_allowed}: a placeholder
 *                 sent where its secret may not go, {@code host_mismatch}: a Host other than the tunnel's to a
 *                 secret's host, {@code tls_failed}: the program's TLS with the proxy failed, {@code between_calls}: a
 *                 session's channel between two calls, {@code second_request}: a plain-HTTP request after the
 *                 first on one connection, never sent); for {@code failed}
 *                 {@code resolve_failed}, {@code connect_failed}, {@code connect_timeout}, {@code upstream_tls}: a secret's host
 *                 failed the proxy's certificate check, {@code bad_response}, {@code encoded_response}: a secret's host
 *                 compressed a text body it was asked to send uncompressed (not passed on: it could not be scanned)
 * @param message  the same in a sentence, as the refusal's HTTP body tells the program
 * @param bytesOut bytes the run sent through the connection (for plain HTTP, with the request head as sent on)
 * @param bytesIn  bytes the run received through it
 * @param ms       how long the connection lasted
 * @param secrets  the placeholder secrets the proxy put in on this connection (their names; empty for most)
 */
public record ConnectionRecord(String host, int port, String decision, String reason, String message, long bytesOut,
        long bytesIn, long ms, List<String> secrets) {

    public ConnectionRecord {
        secrets = List.copyOf(secrets);
    }

    /** A connection without secrets. */
    public ConnectionRecord(String host, int port, String decision, String reason, String message, long bytesOut,
            long bytesIn, long ms) {
        this(host, port, decision, reason, message, bytesOut, bytesIn, ms, List.of());
    }

    public static final String ALLOWED = "allowed";
    public static final String REFUSED = "refused";
    public static final String FAILED = "failed";
}
