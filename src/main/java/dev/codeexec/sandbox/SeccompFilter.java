package dev.codeexec.sandbox;

import dev.codeexec.config.DataDir;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * The seccomp program bubblewrap installs (via {@code --seccomp FD}) just before it executes the sandboxed
 * command: classic BPF over {@code struct seccomp_data}, generated here so the server needs no libseccomp.
 *
 * <p>It closes the kernel interfaces a sandboxed program has no business with and that have a history of
 * privilege escalations (ptrace, mounts, namespaces, bpf, keyrings, io_uring, modules, ...). It refuses with
 * EPERM rather than killing, so well-behaved runtimes see an ordinary error. {@code clone3} gets ENOSYS, because
 * glibc then falls back to {@code clone} (whose flags a classic filter can inspect); with EPERM node aborts.
 * {@code clone} with {@code CLONE_NEWUSER} is refused. {@code socket} and {@code socketpair} create only the
 * families the runtimes need ({@link #SOCKET_FAMILIES}: unix, IPv4, IPv6, netlink; EAFNOSUPPORT otherwise): the
 * network namespace covers IP, but not AF_VSOCK (on a VM host it reaches the hypervisor's services), AF_ALG (the
 * kernel's crypto API) and the rest. Syscalls of a foreign architecture (i386 via int 0x80) kill the process, x32
 * syscall numbers are refused.
 */
public final class SeccompFilter {

    /** One BPF instruction (struct sock_filter). */
    public record Insn(int code, int jt, int jf, int k) {
    }

    static final int AUDIT_ARCH_X86_64 = 0xC000003E;
    static final int AUDIT_ARCH_AARCH64 = 0xC00000B7;

    static final int RET_KILL_PROCESS = 0x80000000;
    static final int RET_ERRNO = 0x00050000;
    static final int RET_ALLOW = 0x7fff0000;
    static final int EPERM = 1;
    static final int ENOSYS = 38;

    static final int LD_W_ABS = 0x20;
    static final int JEQ_K = 0x15;
    static final int JGE_K = 0x35;
    static final int JSET_K = 0x45;
    static final int RET_K = 0x06;

    static final int OFF_NR = 0;
    static final int OFF_ARCH = 4;
    /** Low 32 bits of args[0] on little-endian machines (both supported arches are). */
    static final int OFF_ARG0_LO = 16;

    static final int CLONE_NEWUSER = 0x10000000;
    static final int X32_SYSCALL_BIT = 0x40000000;

    /** Syscalls refused with EPERM, by name, with their numbers on x86_64 and aarch64 (-1: not on that arch). */
    static final Map<String, int[]> DENIED = denied();

    private static Map<String, int[]> denied() {
        Object[][] t = {
                {"ptrace", 101, 117}, {"process_vm_readv", 310, 270}, {"process_vm_writev", 311, 271},
                {"mount", 165, 40}, {"umount2", 166, 39}, {"pivot_root", 155, 41}, {"chroot", 161, 51},
                {"open_tree", 428, 428}, {"move_mount", 429, 429}, {"fsopen", 430, 430}, {"fsconfig", 431, 431},
                {"fsmount", 432, 432}, {"fspick", 433, 433}, {"mount_setattr", 442, 442},
                {"unshare", 272, 97}, {"setns", 308, 268},
                {"bpf", 321, 280}, {"perf_event_open", 298, 241}, {"userfaultfd", 323, 282},
                {"keyctl", 250, 219}, {"add_key", 248, 217}, {"request_key", 249, 218},
                {"io_uring_setup", 425, 425}, {"io_uring_enter", 426, 426}, {"io_uring_register", 427, 427},
                {"kexec_load", 246, 104}, {"kexec_file_load", 320, 294}, {"init_module", 175, 105},
                {"finit_module", 313, 273}, {"delete_module", 176, 106},
                {"open_by_handle_at", 304, 265}, {"name_to_handle_at", 303, 264},
                {"swapon", 167, 224}, {"swapoff", 168, 225}, {"reboot", 169, 142}, {"acct", 163, 89},
                {"quotactl", 179, 60}, {"quotactl_fd", 443, 443}, {"syslog", 103, 116}, {"vhangup", 153, 58},
                {"settimeofday", 164, 170}, {"clock_settime", 227, 112}, {"adjtimex", 159, 171},
                {"clock_adjtime", 305, 266}, {"lookup_dcookie", 212, 18},
                {"iopl", 172, -1}, {"ioperm", 173, -1}, {"uselib", 134, -1},
        };
        Map<String, int[]> m = new java.util.LinkedHashMap<>();
        for (Object[] row : t) m.put((String) row[0], new int[]{(Integer) row[1], (Integer) row[2]});
        return java.util.Collections.unmodifiableMap(m);
    }

    static final int[] CLONE = {56, 220};
    static final int[] SOCKET = {41, 198};
    static final int[] SOCKETPAIR = {53, 199};
    static final int EAFNOSUPPORT = 97;
    /** The address families a sandboxed program may create sockets of: AF_UNIX, AF_INET, AF_INET6, AF_NETLINK. */
    static final int[] SOCKET_FAMILIES = {1, 2, 10, 16};
    static final int[] CLONE3 = {435, 435};

    private SeccompFilter() {
    }

    /** The whole program: arch dispatch, then one block per supported arch. */
    public static List<Insn> program() {
        List<Insn> x86 = archBlock(0, true);
        List<Insn> arm = archBlock(1, false);
        List<Insn> p = new ArrayList<>();
        p.add(new Insn(LD_W_ABS, 0, 0, OFF_ARCH));
        // x86_64 → next insn after the two dispatch jumps and the kill; aarch64 → after the x86 block.
        p.add(new Insn(JEQ_K, 2, 0, AUDIT_ARCH_X86_64));
        p.add(new Insn(JEQ_K, 1 + x86.size(), 0, AUDIT_ARCH_AARCH64));
        p.add(new Insn(RET_K, 0, 0, RET_KILL_PROCESS));
        p.addAll(x86);
        p.addAll(arm);
        if (p.size() > 4096) throw new IllegalStateException("seccomp program too long");
        for (Insn i : p) if (i.jt() > 255 || i.jf() > 255) throw new IllegalStateException("jump too far");
        return List.copyOf(p);
    }

    private static List<Insn> archBlock(int arch, boolean x32Check) {
        List<Insn> b = new ArrayList<>();
        b.add(new Insn(LD_W_ABS, 0, 0, OFF_NR));
        if (x32Check) {
            b.add(new Insn(JGE_K, 0, 1, X32_SYSCALL_BIT));
            b.add(new Insn(RET_K, 0, 0, RET_ERRNO | EPERM));
        }
        for (int[] nrs : DENIED.values()) {
            if (nrs[arch] < 0) continue;
            b.add(new Insn(JEQ_K, 0, 1, nrs[arch]));
            b.add(new Insn(RET_K, 0, 0, RET_ERRNO | EPERM));
        }
        b.add(new Insn(JEQ_K, 0, 1, CLONE3[arch]));
        b.add(new Insn(RET_K, 0, 0, RET_ERRNO | ENOSYS));
        // socket and socketpair: the family (args[0]) must be one of SOCKET_FAMILIES. The accumulator is clobbered,
        // so this path ends in returns too.
        int families = SOCKET_FAMILIES.length;
        b.add(new Insn(JEQ_K, 1, 0, SOCKET[arch]));
        b.add(new Insn(JEQ_K, 0, families + 3, SOCKETPAIR[arch]));
        b.add(new Insn(LD_W_ABS, 0, 0, OFF_ARG0_LO));
        for (int i = 0; i < families; i++) b.add(new Insn(JEQ_K, families - i, 0, SOCKET_FAMILIES[i]));
        b.add(new Insn(RET_K, 0, 0, RET_ERRNO | EAFNOSUPPORT));
        b.add(new Insn(RET_K, 0, 0, RET_ALLOW));
        // clone: refuse only when the flags ask for a new user namespace; the accumulator is clobbered, so this
        // block ends in returns on every path.
        b.add(new Insn(JEQ_K, 0, 3, CLONE[arch]));
        b.add(new Insn(LD_W_ABS, 0, 0, OFF_ARG0_LO));
        b.add(new Insn(JSET_K, 0, 1, CLONE_NEWUSER));
        b.add(new Insn(RET_K, 0, 0, RET_ERRNO | EPERM));
        b.add(new Insn(RET_K, 0, 0, RET_ALLOW));
        return b;
    }

    /** The program as the kernel reads it: an array of 8-byte struct sock_filter in native (little) byte order. */
    public static byte[] bytes() {
        List<Insn> p = program();
        ByteBuffer buf = ByteBuffer.allocate(p.size() * 8).order(ByteOrder.LITTLE_ENDIAN);
        for (Insn i : p) {
            buf.putShort((short) i.code()).put((byte) i.jt()).put((byte) i.jf()).putInt(i.k());
        }
        return buf.array();
    }

    /**
     * Writes the program to {@code target} (atomically, root-only: {@link DataDir#seccompFilter()}). The launcher
     * opens it as root and hands it to bwrap as fd 3, so the file never needs to be readable by the sandbox uid.
     */
    public static Path writeTo(Path target) throws IOException {
        DataDir.write(target, bytes(), "rw-------");
        return target;
    }
}
