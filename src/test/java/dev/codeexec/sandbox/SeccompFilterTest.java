package dev.codeexec.sandbox;

import dev.codeexec.config.DataDir;
import org.junit.jupiter.api.Test;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.List;

import static dev.codeexec.sandbox.SeccompFilter.*;
import static org.assertj.core.api.Assertions.assertThat;

/**
 * The generated program, evaluated by a small classic-BPF interpreter over synthetic {@code seccomp_data}: the
 * decisions are checked, not just the shape. The real kernel's verdicts are checked in {@link BwrapSandboxTest}.
 */
class SeccompFilterTest {

    static final int X86 = AUDIT_ARCH_X86_64;
    static final int ARM = AUDIT_ARCH_AARCH64;
    static final int AUDIT_ARCH_I386 = 0x40000003;

    /** Runs the program the way the kernel does: accumulator, absolute loads, forward jumps, a return. */
    static int eval(List<Insn> prog, int arch, int nr, long arg0) {
        ByteBuffer data = ByteBuffer.allocate(64).order(ByteOrder.LITTLE_ENDIAN);
        data.putInt(0, nr).putInt(4, arch).putLong(16, arg0);
        int a = 0;
        int pc = 0;
        for (int steps = 0; steps < 10_000; steps++) {
            Insn i = prog.get(pc);
            switch (i.code()) {
                case LD_W_ABS -> {
                    a = data.getInt(i.k());
                    pc++;
                }
                case JEQ_K -> pc += 1 + (a == i.k() ? i.jt() : i.jf());
                case JGE_K -> pc += 1 + (Integer.compareUnsigned(a, i.k()) >= 0 ? i.jt() : i.jf());
                case JSET_K -> pc += 1 + ((a & i.k()) != 0 ? i.jt() : i.jf());
                case RET_K -> {
                    return i.k();
                }
                default -> throw new AssertionError("unexpected opcode " + i.code());
            }
        }
        throw new AssertionError("program does not terminate");
    }

    @Test
    void allowsOrdinarySyscallsOnBothArchitectures() {
        List<Insn> p = program();
        for (int nr : new int[]{0, 1, 2, 3, 9, 39, 57, 59, 60, 231}) assertThat(eval(p, X86, nr, 0)).isEqualTo(RET_ALLOW);
        for (int nr : new int[]{56, 57, 63, 64, 93, 221, 222}) assertThat(eval(p, ARM, nr, 0)).isEqualTo(RET_ALLOW);
    }

    @Test
    void refusesEveryDeniedSyscallWithEperm() {
        List<Insn> p = program();
        for (var e : DENIED.entrySet()) {
            assertThat(eval(p, X86, e.getValue()[0], 0)).as(e.getKey() + " on x86_64").isEqualTo(RET_ERRNO | EPERM);
            if (e.getValue()[1] >= 0)
                assertThat(eval(p, ARM, e.getValue()[1], 0)).as(e.getKey() + " on aarch64").isEqualTo(RET_ERRNO | EPERM);
        }
        assertThat(DENIED).containsKeys("ptrace", "mount", "unshare", "setns", "bpf", "keyctl", "io_uring_setup",
                "io_uring_enter", "io_uring_register", "perf_event_open", "userfaultfd", "kexec_load",
                "init_module", "finit_module", "process_vm_readv", "open_by_handle_at", "pivot_root", "umount2");
        assertThat(DENIED.get("ptrace")).containsExactly(101, 117);
        assertThat(DENIED.get("unshare")).containsExactly(272, 97);
    }

    @Test
    void clone3GetsEnosysSoThatLibcFallsBackToClone() {
        assertThat(eval(program(), X86, 435, 0)).isEqualTo(RET_ERRNO | ENOSYS);
        assertThat(eval(program(), ARM, 435, 0)).isEqualTo(RET_ERRNO | ENOSYS);
    }

    @Test
    void socketsOnlyOfTheFamiliesTheRuntimesNeed() {
        List<Insn> p = program();
        int afUnix = 1, afInet = 2, afInet6 = 10, afNetlink = 16, afPacket = 17, afAlg = 38, afVsock = 40, afBluetooth = 31;
        for (int[] arch : new int[][]{{X86, 41, 53}, {ARM, 198, 199}}) {
            for (int nr : new int[]{arch[1], arch[2]}) {
                for (int ok : new int[]{afUnix, afInet, afInet6, afNetlink})
                    assertThat(eval(p, arch[0], nr, ok)).as("family " + ok).isEqualTo(RET_ALLOW);
                for (int refused : new int[]{afVsock, afAlg, afPacket, afBluetooth, 0, 45, 255})
                    assertThat(eval(p, arch[0], nr, refused)).as("family " + refused).isEqualTo(RET_ERRNO | EAFNOSUPPORT);
            }
        }
        // the syscalls right after socket's block still get their own decisions
        assertThat(eval(p, X86, 42, afVsock)).as("connect").isEqualTo(RET_ALLOW);
        assertThat(eval(p, X86, 56, CLONE_NEWUSER)).as("clone").isEqualTo(RET_ERRNO | EPERM);
    }

    @Test
    void cloneIsAllowedExceptWithANewUserNamespace() {
        List<Insn> p = program();
        long threadFlags = 0x3d0f00; // what glibc passes for pthread_create
        long forkFlags = 0x01200011; // CLONE_CHILD_SETTID | CLONE_CHILD_CLEARTID | SIGCHLD
        for (int[] arch : new int[][]{{X86, 56}, {ARM, 220}}) {
            assertThat(eval(p, arch[0], arch[1], threadFlags)).isEqualTo(RET_ALLOW);
            assertThat(eval(p, arch[0], arch[1], forkFlags)).isEqualTo(RET_ALLOW);
            assertThat(eval(p, arch[0], arch[1], CLONE_NEWUSER | 17)).isEqualTo(RET_ERRNO | EPERM);
            assertThat(eval(p, arch[0], arch[1], forkFlags | CLONE_NEWUSER | (1L << 40))).isEqualTo(RET_ERRNO | EPERM);
        }
    }

    @Test
    void foreignArchitecturesAreKilledAndX32IsRefused() {
        List<Insn> p = program();
        assertThat(eval(p, AUDIT_ARCH_I386, 1, 0)).isEqualTo(RET_KILL_PROCESS);
        assertThat(eval(p, 0x12345678, 0, 0)).isEqualTo(RET_KILL_PROCESS);
        assertThat(eval(p, X86, X32_SYSCALL_BIT | 101, 0)).isEqualTo(RET_ERRNO | EPERM);
        assertThat(eval(p, X86, X32_SYSCALL_BIT, 0)).isEqualTo(RET_ERRNO | EPERM);
    }

    @Test
    void serializesAsNativeSockFilterArray() {
        byte[] b = bytes();
        List<Insn> p = program();
        assertThat(b).hasSize(p.size() * 8);
        ByteBuffer buf = ByteBuffer.wrap(b).order(ByteOrder.LITTLE_ENDIAN);
        for (Insn i : p) {
            assertThat(buf.getShort() & 0xffff).isEqualTo(i.code());
            assertThat(buf.get() & 0xff).isEqualTo(i.jt());
            assertThat(buf.get() & 0xff).isEqualTo(i.jf());
            assertThat(buf.getInt()).isEqualTo(i.k());
        }
        assertThat(p.getFirst()).isEqualTo(new Insn(LD_W_ABS, 0, 0, OFF_ARCH));
    }

    @Test
    void isWrittenRootOnly() throws Exception {
        Path dir = Files.createTempDirectory("seccomp-");
        try {
            Path f = writeTo(DataDir.at(dir).seccompFilter());
            assertThat(Files.readAllBytes(f)).isEqualTo(bytes());
            assertThat(PosixFilePermissions.toString(Files.getPosixFilePermissions(f))).isEqualTo("rw-------");
            try (var s = Files.list(dir)) {
                assertThat(s.toList()).containsExactly(f);
            }
        } finally {
            DataDir.deleteTree(dir);
        }
    }
}
