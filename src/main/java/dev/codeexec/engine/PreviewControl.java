package dev.codeexec.engine;

import java.nio.file.Path;
import java.time.Instant;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;

/**
 * The port previews of a server: which token reaches which port of which session's or background job's sandbox, for
 * whom. Kept where the sandboxes are: by this server ({@code surface.Previews}) or, behind a gateway, by the workers
 * ({@code gateway.RemotePreviews} asks them). The preview listener finds a preview by its token ({@link #find}) and
 * connects to its {@link Preview#socket()}, a unix socket that speaks the sandbox init's preview protocol.
 */
public interface PreviewControl {

    enum Kind { SESSION, JOB }

    /** A session (by name) or a background job (by id) whose sandbox runs the server. */
    record Sandbox(Kind kind, String name) {
        public String label() {
            return kind.name().toLowerCase(java.util.Locale.ROOT) + " " + name;
        }
    }

    /**
     * One preview. {@code key}: requests must carry the tenant's API key as well as the token. {@code socket}: where
     * the listener connects for it (the sandbox's own preview socket, or a gateway's bridge to its worker).
     */
    record Preview(String token, String tenant, Sandbox sandbox, int port, boolean key, Instant createdAt,
            Instant expiresAt, Path socket) {
    }

    /**
     * Makes (or returns the existing) preview of {@code port} in the tenant's session or job.
     *
     * @throws ExecutionException.InvalidRequest no such live session or running job, a bad port, too many previews
     * @throws ExecutionException.Unavailable    previews are off or cannot be served here
     */
    Preview expose(String tenant, Sandbox sandbox, int port, boolean key);

    /**
     * Ends the tenant's previews that match: the one of {@code token}, or every one of {@code port} in
     * {@code sandbox} (empty: in any of the tenant's sandboxes).
     *
     * @return how many ended
     */
    int unexpose(String tenant, Optional<Sandbox> sandbox, Optional<String> token, Optional<Integer> port);

    /** The tenant's live previews of {@code sandbox}, oldest first. */
    List<Preview> list(String tenant, Sandbox sandbox);

    /** The live preview of a token; empty for a wrong token and an ended preview alike. */
    Optional<Preview> find(String token);

    /** Where previews are reached: told by the listener once it listens (or why it cannot). */
    PreviewAddress address();

    /** A preview as the tools show it. */
    default Map<String, Object> map(Preview p) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("url", address().url(p.token()));
        m.put("port", p.port());
        m.put("auth", p.key() ? "key" : "token");
        m.put("createdAt", p.createdAt().toString());
        m.put("expiresAt", p.expiresAt().toString());
        return m;
    }
}
