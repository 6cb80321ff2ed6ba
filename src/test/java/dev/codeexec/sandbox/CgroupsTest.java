package dev.codeexec.sandbox;

import dev.codeexec.config.DataDir;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Detection and layout of the run cgroups against a fake cgroup filesystem (plain directories) described by a
 * fake /proc/self/cgroup and mountinfo. This is how the v2 path is exercised on machines that only have v1
 * controllers; the real v1 path runs in {@link BwrapSandboxTest}.
 */
class CgroupsTest {

    Path root;
    final Limits limits = new Limits(Duration.ofSeconds(5), 3, 64L << 20, 32, 1024, 1 << 20);

    @BeforeEach
    void setUp() throws Exception {
        root = Files.createTempDirectory("fake-cgroup-");
    }

    @AfterEach
    void tearDown() {
        DataDir.deleteTree(root);
    }

    Path procFiles(String selfCgroup, String mountinfo) throws Exception {
        Files.writeString(root.resolve("self-cgroup"), selfCgroup);
        Files.writeString(root.resolve("mountinfo"), mountinfo);
        return root;
    }

    @Test
    void v2RunCgroupsNestUnderTheServersOwnCgroupWithLimitsSet() throws Exception {
        Path fs = Files.createDirectories(root.resolve("fs"));
        Path own = Files.createDirectories(fs.resolve("system.slice/code-exec.service"));
        Files.writeString(own.resolve("cgroup.controllers"), "cpuset cpu io memory pids\n");
        Files.writeString(own.resolve("cgroup.subtree_control"), "memory pids cpu\n");
        procFiles("0::/system.slice/code-exec.service\n",
                "35 24 0:30 / " + fs + " rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 rw,nsdelegate\n");

        Cgroups cg = Cgroups.detect(root.resolve("self-cgroup"), root.resolve("mountinfo"), "jvm-1");
        assertThat(cg.mode()).isEqualTo(Cgroups.Mode.V2);
        assertThat(cg.label()).isEqualTo("v2");
        assertThat(cg.limitsPids()).isTrue();

        Cgroups.RunCgroup run = cg.create("run-1", limits);
        Path dir = own.resolve("code-exec/jvm-1/run-1");
        assertThat(run.procsFiles()).containsExactly(dir.resolve("cgroup.procs"));
        assertThat(Files.readString(dir.resolve("memory.max"))).isEqualTo(Long.toString(64L << 20));
        assertThat(Files.readString(dir.resolve("pids.max"))).isEqualTo("32");
        // a plain file keeps only the last write; the kernel's subtree_control accumulates them
        assertThat(Files.readString(own.resolve("code-exec/cgroup.subtree_control"))).isEqualTo("+cpu");
        assertThat(Files.readString(own.resolve("code-exec/jvm-1/cgroup.subtree_control"))).isEqualTo("+cpu");

        Files.writeString(dir.resolve("memory.events"), "low 0\nhigh 0\nmax 12\noom 1\noom_kill 1\n");
        Files.writeString(dir.resolve("memory.peak"), "67100000\n");
        Files.writeString(dir.resolve("cpu.stat"), "usage_usec 1500000\nuser_usec 1400000\nsystem_usec 100000\n");
        assertThat(run.oomKilled()).isTrue();
        assertThat(run.peakMemoryBytes()).hasValue(67_100_000L);
        assertThat(run.cpuTimeMs()).hasValue(1500.0);
        assertThat(cg.leftovers()).containsExactly(dir);
    }

    @Test
    void v1UsesTheMemoryPidsAndCpuacctHierarchies() throws Exception {
        Path mem = Files.createDirectories(root.resolve("memory/process_api/abc"));
        Path pids = Files.createDirectories(root.resolve("pids"));
        Path cpu = Files.createDirectories(root.resolve("cpu,cpuacct"));
        Files.createFile(mem.resolveSibling("abc").resolve("memory.memsw.limit_in_bytes"));
        procFiles("9:name=systemd:/\n8:pids:/\n4:memory:/process_api/abc\n2:cpu,cpuacct:/\n0::/\n",
                "40 30 0:40 / " + root.resolve("memory") + " rw,relatime - cgroup cgroup rw,memory\n"
                        + "41 30 0:41 / " + pids + " rw,relatime - cgroup cgroup rw,pids\n"
                        + "42 30 0:42 / " + cpu + " rw,relatime - cgroup cgroup rw,cpu,cpuacct\n"
                        + "43 30 0:43 / " + root.resolve("unified") + " rw,relatime - cgroup2 cgroup2 rw\n");

        Cgroups cg = Cgroups.detect(root.resolve("self-cgroup"), root.resolve("mountinfo"), "jvm-7");
        assertThat(cg.mode()).isEqualTo(Cgroups.Mode.V1);
        Cgroups.RunCgroup run = cg.create("r", limits);
        Path memRun = mem.resolve("code-exec/jvm-7/r");
        assertThat(run.procsFiles()).containsExactlyInAnyOrder(memRun.resolve("cgroup.procs"),
                pids.resolve("code-exec/jvm-7/r/cgroup.procs"), cpu.resolve("code-exec/jvm-7/r/cgroup.procs"));
        assertThat(Files.readString(memRun.resolve("memory.limit_in_bytes"))).isEqualTo(Long.toString(64L << 20));
        assertThat(Files.readString(pids.resolve("code-exec/jvm-7/r/pids.max"))).isEqualTo("32");

        Files.writeString(memRun.resolve("memory.oom_control"), "oom_kill_disable 0\nunder_oom 0\noom_kill 0\n");
        Files.writeString(cpu.resolve("code-exec/jvm-7/r/cpuacct.usage"), "2500000000\n");
        assertThat(run.oomKilled()).isFalse();
        assertThat(run.cpuTimeMs()).hasValue(2500.0);
    }

    @Test
    void noUsableCgroupMeansRlimits() throws Exception {
        procFiles("0::/\n", "43 30 0:43 / " + root.resolve("nowhere") + " rw - cgroup2 cgroup2 rw\n");
        Cgroups cg = Cgroups.detect(root.resolve("self-cgroup"), root.resolve("mountinfo"), "jvm-1");
        assertThat(cg.mode()).isEqualTo(Cgroups.Mode.NONE);
        assertThat(cg.label()).isEqualTo("none(rlimits)");
        assertThat(cg.limitsMemory()).isFalse();
        assertThat(cg.limitsPids()).isFalse();
        // the sum of the run's memory is then the watchdog's (MemoryWatchdogTest); without it, nothing at all
        assertThat(cg.watchesMemory()).isTrue();
        assertThat(cg.create("x", limits)).isInstanceOf(MemoryWatchdog.Watched.class);
        assertThat(cg.withoutWatchdog().create("x", limits)).isSameAs(Cgroups.RunCgroup.NONE);
    }

    @Test
    void staleInstancesOfDeadServersAreRemoved() throws Exception {
        Path base = Files.createDirectories(root.resolve("code-exec"));
        long deadPid = 4_194_305; // above the kernel's PID_MAX_LIMIT: no process can have it
        Path stale = Files.createDirectories(base.resolve("jvm-" + deadPid + "/old-run"));
        Path live = Files.createDirectories(base.resolve("jvm-" + ProcessHandle.current().pid() + "/running"));
        Cgroups.reapStale(base);
        assertThat(stale.getParent()).doesNotExist();
        assertThat(live).exists();
    }
}
