package dev.codeexec.session;

import dev.codeexec.session.SessionMemory.Holding;
import dev.codeexec.session.SessionMemory.Plan;
import org.junit.jupiter.api.Test;

import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;

import static org.assertj.core.api.Assertions.assertThat;

/** The sessions' memory budget shared by tenants: whose sessions end, and when a start is refused. */
class SessionMemoryTest {

    private static final long MB = 1L << 20;
    private static final long BUDGET = 1200 * MB;

    private final List<Holding<String>> holdings = new ArrayList<>();
    private int clock;

    /** An idle session, used after every one added before it. */
    private void idle(String tenant, String name, long mb) {
        holdings.add(new Holding<>(tenant + "/" + name, tenant, mb * MB, true, Instant.EPOCH.plusSeconds(++clock)));
    }

    /** A session in a call now. */
    private void busy(String tenant, String name, long mb) {
        holdings.add(new Holding<>(tenant + "/" + name, tenant, mb * MB, false, Instant.EPOCH.plusSeconds(++clock)));
    }

    private static List<String> ended(Plan<String> plan) {
        return plan.toEnd().stream().map(e -> e.holding().key()).toList();
    }

    @Test
    void withinTheBudgetNothingEndsAndATenantAloneMayUseItAll() {
        idle("a", "one", 400);
        idle("a", "two", 400);
        idle("a", "three", 400);
        Plan<String> plan = SessionMemory.plan(holdings, BUDGET, Optional.empty());
        assertThat(plan.toEnd()).isEmpty();
        assertThat(plan.refusal()).isEmpty();
    }

    @Test
    void theTenantOverItsShareLosesItsOwnLongestIdleSessionNotTheSmallOneOfATenantWithinItsShare() {
        // the attack: B's small session first (so the longest idle), then A's three of 400 MB
        idle("b", "small", 10);
        idle("a", "one", 400);
        idle("a", "two", 400);
        idle("a", "three", 400);
        Plan<String> plan = SessionMemory.plan(holdings, BUDGET, Optional.empty());
        assertThat(ended(plan)).containsExactly("a/one");
        assertThat(plan.toEnd().getFirst()).satisfies(e -> {
            assertThat(e.tenantBytes()).isEqualTo(1200 * MB);
            assertThat(e.share()).isEqualTo(600 * MB);
            assertThat(e.tenants()).isEqualTo(2);
        });
        assertThat(plan.refusal()).isEmpty();
    }

    @Test
    void sharesAreRecomputedAfterEachEndAndTheLongestIdleOverItsShareGoesFirst() {
        // three tenants, share 400: a and c are over, b is within; a's session is the longest idle of theirs
        idle("b", "x", 300);
        idle("a", "one", 450);
        idle("c", "one", 250);
        idle("c", "two", 250);
        Plan<String> plan = SessionMemory.plan(holdings, BUDGET, Optional.empty());
        // a's only session goes (1250 -> 800): the rest fits, c keeps both though over its share of 400
        assertThat(ended(plan)).containsExactly("a/one");
        assertThat(plan.toEnd().getFirst().tenants()).isEqualTo(3);

        holdings.clear();
        idle("b", "x", 300);
        idle("c", "one", 500);
        idle("c", "two", 500);
        idle("a", "one", 100);
        // 1400: c (1000 > 400) loses its longest idle; then 900 fits
        assertThat(ended(SessionMemory.plan(holdings, BUDGET, Optional.empty()))).containsExactly("c/one");
    }

    @Test
    void sessionsInACallAreNeverEndedAndWithinShareTenantsAreNotEndedInTheirPlace() {
        idle("b", "small", 100);
        busy("a", "one", 700);
        busy("a", "two", 500);
        // 1300 > 1200, but what a holds over its share is in calls: b, within its share, is left alone
        Plan<String> plan = SessionMemory.plan(holdings, BUDGET, Optional.empty());
        assertThat(plan.toEnd()).isEmpty();
        assertThat(plan.refusal()).isEmpty();
    }

    @Test
    void aTenantAtOrOverItsShareIsRefusedANewInterpreterWhenOnlyOthersWithinTheirShareCouldMakeRoom() {
        idle("b", "small", 100);
        busy("a", "one", 700);
        busy("a", "two", 500);
        Plan<String> a = SessionMemory.plan(holdings, BUDGET, Optional.of("a"));
        assertThat(a.toEnd()).isEmpty();
        assertThat(a.refusal()).hasValueSatisfying(m -> assertThat(m).contains("no room for another session")
                .contains("1200 MB (SESSIONS_MEMORY_MB)").contains("this tenant's 1200 MB")
                .contains("share of 600 MB").contains("2 tenants").contains("session_close"));
        // b is within its share: it may start (the room comes back when a's calls end)
        assertThat(SessionMemory.plan(holdings, BUDGET, Optional.of("b")).refusal()).isEmpty();
        // a newcomer counts among the tenants and is within its share of 400
        assertThat(SessionMemory.plan(holdings, BUDGET, Optional.of("c")).refusal()).isEmpty();
    }

    @Test
    void aStartEndsIdleSessionsOverTheirShareTheStartingTenantsOwnIncludedToMakeRoom() {
        idle("a", "old", 300);
        busy("a", "one", 600);
        idle("b", "x", 300);
        // exactly at the budget: a start needs room. a (900 > 600) loses its idle session, then a may start.
        Plan<String> plan = SessionMemory.plan(holdings, BUDGET, Optional.of("a"));
        assertThat(ended(plan)).containsExactly("a/old");
        assertThat(plan.refusal()).isEmpty();
        // the same for a newcomer: three tenants, share 400, a over
        assertThat(ended(SessionMemory.plan(holdings, BUDGET, Optional.of("c")))).containsExactly("a/old");
        // after a call only what is over the budget counts: at the budget nothing ends
        assertThat(SessionMemory.plan(holdings, BUDGET, Optional.empty()).toEnd()).isEmpty();
    }

    @Test
    void sessionsWithoutAnInterpreterCountTheirTenantButAreNotEndedForMemory() {
        idle("b", "restarting", 0);
        idle("a", "one", 700);
        idle("a", "two", 600);
        Plan<String> plan = SessionMemory.plan(holdings, BUDGET, Optional.empty());
        assertThat(ended(plan)).containsExactly("a/one");
        assertThat(plan.toEnd().getFirst().share()).isEqualTo(600 * MB);
    }
}
