package dev.codeexec.engine;

import java.time.Instant;
import java.util.List;
import java.util.Optional;
import java.util.OptionalLong;

/** What surfaces may do with a tenant's stateful sessions besides running code in them. */
public interface SessionControl {

    /** For executors without sessions: nothing to list, nothing to reset or close. */
    SessionControl NONE = listing(tenant -> List.of());

    /** Sessions that can be listed but neither reset nor closed here (a view of them, or of none). */
    static SessionControl listing(java.util.function.Function<String, List<SessionInfo>> list) {
        return listing(list, () -> 0);
    }

    /** {@link #listing} with a count of open sessions. */
    static SessionControl listing(java.util.function.Function<String, List<SessionInfo>> list,
            java.util.function.IntSupplier count) {
        return new SessionControl() {
            @Override
            public int count() {
                return count.getAsInt();
            }

            @Override
            public List<SessionInfo> list(String tenant) {
                return list.apply(tenant);
            }

            @Override
            public boolean reset(String tenant, String name) {
                return false;
            }

            @Override
            public boolean close(String tenant, String name) {
                return false;
            }
        };
    }

    /** Sessions open now, of every tenant (for metrics and the admin view). */
    default int count() {
        return 0;
    }

    /** The tenant's sessions, sorted by name. */
    List<SessionInfo> list(String tenant);

    /**
     * Kills the session's interpreter (a call in progress ends) and starts a fresh one with the same name,
     * language and workspace: its state is gone. False when the tenant has no session of that name.
     */
    boolean reset(String tenant, String name);

    /**
     * A reset whose fresh interpreter gets {@code packages} (empty: none) instead of the session's set, installed
     * before the old interpreter is killed.
     *
     * @throws ExecutionException.InvalidRequest the set cannot be installed (the session is left as it was), or
     *                                           packages cannot be used here
     */
    default boolean reset(String tenant, String name, Optional<dev.codeexec.packages.PackageSet> packages) {
        if (packages.isPresent())
            throw new ExecutionException.InvalidRequest("'packages' cannot be used with session_reset on this server");
        return reset(tenant, name);
    }

    /** Kills the session's interpreter and forgets the session. False when the tenant has no session of that name. */
    boolean close(String tenant, String name);

    /**
     * One session as listed.
     *
     * @param memoryBytes memory of the session's sandbox now, where it can be measured
     * @param calls       calls run in the session's current interpreter
     * @param busy        a call is running in it now
     */
    record SessionInfo(String name, String language, Optional<String> workspace, Instant created, Instant lastUsed,
            OptionalLong memoryBytes, long calls, boolean busy) {
    }
}
