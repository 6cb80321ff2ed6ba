package dev.codeexec.sandbox;

import org.junit.jupiter.api.Test;

import java.util.HashSet;
import java.util.List;
import java.util.Set;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

class UidPoolTest {

    @Test
    void everySandboxGetsAUidOfItsOwnUntilTheRangeIsUsedUp() throws Exception {
        UidPool pool = new UidPool(3_000_000, 3);
        Set<Integer> got = new HashSet<>();
        List<UidPool.Lease> leases = List.of(pool.take(), pool.take(), pool.take());
        leases.forEach(l -> got.add(l.uid()));
        assertThat(got).containsExactlyInAnyOrder(3_000_000, 3_000_001, 3_000_002);
        assertThat(pool.inUse()).isEqualTo(3);
        assertThatThrownBy(pool::take).isInstanceOf(SandboxException.class)
                .hasMessageContaining("no sandbox uid is free").hasMessageContaining("SANDBOX_UID_RANGE");
        leases.get(1).giveBack(true);
        assertThat(pool.take().uid()).isEqualTo(3_000_001);
    }

    @Test
    void aReturnedUidRestsWhileOthersAreFree() throws Exception {
        UidPool pool = new UidPool(3_000_000, 4);
        UidPool.Lease a = pool.take();
        UidPool.Lease b = pool.take();
        a.giveBack(true);
        b.giveBack(true);
        // never-used uids first, then the least recently returned
        assertThat(pool.take().uid()).isEqualTo(3_000_002);
        assertThat(pool.take().uid()).isEqualTo(3_000_003);
        assertThat(pool.take().uid()).isEqualTo(a.uid());
        assertThat(pool.take().uid()).isEqualTo(b.uid());
    }

    @Test
    void givingBackTwiceReturnsTheUidOnce() throws Exception {
        UidPool pool = new UidPool(3_000_000, 2);
        UidPool.Lease a = pool.take();
        a.giveBack(true);
        a.giveBack(true);
        assertThat(pool.inUse()).isZero();
        pool.take();
        pool.take();
        assertThatThrownBy(pool::take).isInstanceOf(SandboxException.class);
    }

    /** A uid whose sandbox could not be proven empty is not handed out while a process still runs as it. */
    @Test
    void aUidWithAProcessLeftIsNotReusedUntilItIsGone() throws Exception {
        UidPool pool = new UidPool(3_100_000, 1);
        UidPool.Lease lease = pool.take();
        Process left = new ProcessBuilder("/usr/bin/setpriv", "--reuid=" + lease.uid(), "--regid=65534",
                "--clear-groups", "--", "/bin/cat").start();
        try {
            dev.codeexec.testing.Poll.until("the process runs as the uid", () -> UidPool.hasProcesses(lease.uid()));
            lease.giveBack(false);
            assertThatThrownBy(pool::take).isInstanceOf(SandboxException.class).hasMessageContaining("no sandbox uid is free");
        } finally {
            left.destroyForcibly().waitFor();
        }
        assertThat(pool.take().uid()).isEqualTo(3_100_000);
    }

    @Test
    void autoTakesTheHighRangeWhereEveryUidExistsAndAlwaysAUsableOneInASmallerMap() {
        UidPool full = Sandboxes.uidPool("auto", List.of("         0          0 4294967295"));
        assertThat(full.first()).isEqualTo(2_000_000_000);
        assertThat(full.last()).isEqualTo(2_000_065_535);
        // a container or user-namespaced pod that maps 65536 uids
        UidPool small = Sandboxes.uidPool("auto", List.of("0 100000 65536"));
        assertThat(small.first()).isEqualTo(65534 - 4096);
        assertThat(small.last()).isEqualTo(65533);
        assertThat(Sandboxes.uidPool("auto", List.of("0 100000 1000"))).as("too few uids: off").isNull();
        assertThat(Sandboxes.uidPool("off", List.of("0 0 4294967295"))).isNull();
        UidPool own = Sandboxes.uidPool("500000-500009", List.of());
        assertThat(own.first()).isEqualTo(500000);
        assertThat(own.last()).isEqualTo(500009);
    }
}
