package dev.codeexec.egress;

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
 *                 {@code connection_limit}, {@code byte_limit}, {@code bad_request}, {@code between_calls}: a
 *                 session's channel between two calls, {@code second_request}: a plain-HTTP request after the
 *                 first on one connection, never sent); for {@code failed}
 *                 {@code resolve_failed}, {@code connect_failed}, {@code connect_timeout}
 * @param message  the same in a sentence, as the refusal's HTTP body tells the program
 * @param bytesOut bytes the run sent through the connection (for plain HTTP, with the request head as sent on)
 * @param bytesIn  bytes the run received through it
 * @param ms       how long the connection lasted
 */
public record ConnectionRecord(String host, int port, String decision, String reason, String message, long bytesOut,
        long bytesIn, long ms) {

    public static final String ALLOWED = "allowed";
    public static final String REFUSED = "refused";
    public static final String FAILED = "failed";
}
