package dev.codeexec.engine;

import java.util.Objects;

/**
 * A stateful session: a name chosen by the client, scoped to the tenant it belongs to, so another tenant's
 * session of the same name is a different one. The tenant comes from the caller's credentials, never the request.
 */
public record SessionRef(String tenant, String name) {
    public SessionRef {
        Objects.requireNonNull(tenant, "tenant");
        Objects.requireNonNull(name, "name");
    }
}
