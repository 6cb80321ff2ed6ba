package dev.codeexec.session;

import dev.codeexec.engine.RunEnd;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;

/**
 * Which sessions end when all tenants' sessions hold more than SESSIONS_MEMORY_MB, and whether a tenant may start
 * another interpreter: the budget is shared by the tenants that have sessions. Pure: {@link Sessions} measures, asks
 * and ends.
 *
 * <p>The rule. Each tenant with sessions has a fair share of the budget: the budget divided by their number (a
 * tenant starting its first session counts). Nobody is held to its share while the total fits: a tenant alone may
 * use the whole budget. Past the budget, only idle sessions of tenants over their share are ended, the longest idle
 * first (the tenant's own included when it is the one over), shares recomputed after each, until the rest fits. A
 * session of a tenant within its share is never ended for memory, whoever needs the room. What cannot be freed that
 * way is held by calls running now (over-share tenants' busy sessions); those sessions are ended when their calls
 * end, if still needed. A tenant at or over its share that wants to start an interpreter while nothing is left is
 * refused instead: only another tenant's sessions within their share could make the room.
 */
final class SessionMemory {

    private SessionMemory() {
    }

    /**
     * What one session holds now.
     *
     * @param key      the session, for the caller
     * @param bytes    what it counts against the budget (0 without an interpreter)
     * @param idle     no call runs in it: it may be ended
     * @param lastUsed when its last call ended (or began)
     */
    record Holding<K>(K key, String tenant, long bytes, boolean idle, Instant lastUsed) {
    }

    /**
     * A session to end, and why in numbers: its tenant held {@code tenantBytes}, over its {@code share} of the budget
     * (shared by {@code tenants} tenants with sessions).
     */
    record Ending<K>(Holding<K> holding, long tenantBytes, long share, int tenants) {
    }

    /** The sessions to end, in order, and for a start that cannot be given room, why it is refused. */
    record Plan<K>(List<Ending<K>> toEnd, Optional<String> refusal) {
    }

    /**
     * Decides for {@code holdings} under {@code budget}.
     *
     * @param starting the tenant about to start an interpreter (it then needs room below the budget), or empty
     *                 when only the budget is to be kept (after a call, at a sweep)
     */
    static <K> Plan<K> plan(List<Holding<K>> holdings, long budget, Optional<String> starting) {
        List<Holding<K>> left = new ArrayList<>(holdings);
        List<Ending<K>> toEnd = new ArrayList<>();
        long total = 0;
        for (Holding<K> h : left) total += h.bytes();
        while (starting.isPresent() ? total >= budget : total > budget) {
            Map<String, Long> usage = usage(left, starting);
            long share = budget / usage.size();
            Optional<Holding<K>> victim = left.stream()
                    .filter(h -> h.idle() && h.bytes() > 0 && usage.get(h.tenant()) > share)
                    .min(Comparator.comparing(Holding::lastUsed));
            if (victim.isEmpty()) break;
            Holding<K> v = victim.get();
            toEnd.add(new Ending<>(v, usage.get(v.tenant()), share, usage.size()));
            left.remove(v);
            total -= v.bytes();
        }
        Optional<String> refusal = Optional.empty();
        if (starting.isPresent() && total >= budget) {
            Map<String, Long> usage = usage(left, starting);
            long share = budget / usage.size();
            long mine = usage.get(starting.get());
            if (mine >= share)
                refusal = Optional.of("no room for another session: all sessions together may hold " + RunEnd.mb(budget)
                        + " (SESSIONS_MEMORY_MB) and hold " + mb(total) + " now, this tenant's "
                        + mb(mine) + ", at or over its share of " + mb(share) + " (the budget shared by the "
                        + usage.size() + " tenants with sessions), in calls running now. Another tenant's sessions "
                        + "within their share are not ended for it: wait for a call to end, or end one of this "
                        + "tenant's sessions with session_close");
        }
        return new Plan<>(toEnd, refusal);
    }

    /** Bytes in whole MB, rounded (measured memory is rarely a round number). */
    static String mb(long bytes) {
        return ((bytes + (1L << 19)) >> 20) + " MB";
    }

    /** Bytes per tenant with sessions, the starting tenant included (with nothing yet, if it has no session). */
    private static <K> Map<String, Long> usage(List<Holding<K>> holdings, Optional<String> starting) {
        Map<String, Long> usage = new LinkedHashMap<>();
        starting.ifPresent(t -> usage.put(t, 0L));
        for (Holding<K> h : holdings) usage.merge(h.tenant(), h.bytes(), Long::sum);
        return usage;
    }
}
