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

    /**
     * The name of this session's preview directory (under DATA_DIR/previews): the same for every interpreter the
     * session has (a reset keeps its previews), a file name whatever the tenant and session names hold.
     */
    public String previewKey() {
        try {
            byte[] h = java.security.MessageDigest.getInstance("SHA-256")
                    .digest((tenant + "\u0000" + name).getBytes(java.nio.charset.StandardCharsets.UTF_8));
            return "s-" + java.util.HexFormat.of().formatHex(h, 0, 16);
        } catch (java.security.NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
    }
}
