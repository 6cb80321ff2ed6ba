package dev.codeexec.auth;

import dev.codeexec.egress.EgressPolicy;

import java.util.Optional;

/**
 * Who is calling, as established by authentication at the edge: the tenant that owns workspaces and sessions,
 * and whether the key is an admin key. Surfaces never take a tenant from request content.
 *
 * @param tenant tenant name, {@code [A-Za-z0-9_-]{1,64}}
 * @param admin  an admin key sees every tenant in admin views
 * @param egress the tenant's own allow-list ({@code egress=} on its API_KEYS_FILE line), which replaces the
 *               server's EGRESS_ALLOW for it; empty: the server's
 */
public record Principal(String tenant, boolean admin, Optional<EgressPolicy> egress) {

    public Principal {
        egress = egress == null ? Optional.empty() : egress;
    }

    /** A caller with the server's allow-list. */
    public Principal(String tenant, boolean admin) {
        this(tenant, admin, Optional.empty());
    }

    /** The tenant of a server without keys, or with the single API_KEY. */
    public static final Principal DEFAULT = new Principal("default", false);

    /** Key under which the HTTP edge stores the principal: request attribute and MCP transport context key. */
    public static final String ATTRIBUTE = "dev.codeexec.principal";
}
