package dev.codeexec.linux;

import dev.codeexec.testing.Requires;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.Locale;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/** {@link Sys}: its numbers are the kernel's, and a call's result and errno come back through the one handle. */
class SysTest {

    /** The kernel's own x86_64 table, as installed with the C toolchain (linux-libc-dev, a dependency of gcc). */
    static final Path X86_64_HEADER = Path.of("/usr/include/x86_64-linux-gnu/asm/unistd_64.h");

    @Test
    void everyX8664NumberIsTheKernels() throws Exception {
        Requires.that(Files.isRegularFile(X86_64_HEADER), "the kernel's x86_64 header " + X86_64_HEADER + " (linux-libc-dev)");
        Map<String, Integer> kernel = new HashMap<>();
        Matcher m = Pattern.compile("#define __NR_(\\w+) (\\d+)").matcher(Files.readString(X86_64_HEADER));
        while (m.find()) kernel.put(m.group(1), Integer.parseInt(m.group(2)));
        for (Sys sys : Sys.values())
            assertThat(kernel.get(sys.name().toLowerCase(Locale.ROOT))).as(sys.name()).isEqualTo(sys.x8664);
    }

    @Test
    void numbersAreDistinctAndLateCallsShareOne() {
        // Calls added after the tables were unified have one number everywhere; the rest differ from x86_64's.
        assertThat(Sys.PIDFD_OPEN.aarch64).isEqualTo(Sys.PIDFD_OPEN.x8664).isEqualTo(434);
        assertThat(Sys.QUOTACTL_FD.aarch64).isEqualTo(Sys.QUOTACTL_FD.x8664).isEqualTo(443);
        assertThat(Sys.values()).extracting(s -> s.aarch64).doesNotHaveDuplicates();
        assertThat(Sys.values()).extracting(s -> s.x8664).doesNotHaveDuplicates();
    }

    @Test
    void resultsAndErrnoComeBack(@TempDir Path dir) throws Exception {
        // mkfifo is mknodat(AT_FDCWD, S_IFIFO | mode): a FIFO with that mode, and EEXIST the second time
        Path fifo = dir.resolve("fifo");
        Posix.mkfifo(fifo.toString(), 0620);
        int dirFd = Posix.openat(Posix.AT_FDCWD, dir.toString(), Posix.O_PATH | Posix.O_DIRECTORY);
        try {
            Posix.Stat st = Posix.statx(dirFd, "fifo".getBytes(StandardCharsets.UTF_8), 0);
            assertThat(st.type()).isEqualTo(Posix.S_IFIFO);
            assertThat(st.mode() & 0777).isEqualTo(0620 & ~umaskBits());
        } finally {
            Posix.close(dirFd);
        }
        assertThatThrownBy(() -> Posix.mkfifo(fifo.toString(), 0600)).isInstanceOfSatisfying(Posix.Errno.class,
                e -> assertThat(e.errno).isEqualTo(Posix.EEXIST));
        // kill: signal 0 to ourselves succeeds; to a pid that cannot exist, ESRCH (3)
        Posix.kill(ProcessHandle.current().pid(), 0);
        assertThatThrownBy(() -> Posix.kill(Integer.MAX_VALUE, 0)).isInstanceOfSatisfying(Posix.Errno.class,
                e -> assertThat(e.errno).isEqualTo(3));
    }

    /** The process's umask, which mknodat applies (read from /proc/self/status). */
    private static int umaskBits() throws Exception {
        for (String line : Files.readAllLines(Path.of("/proc/self/status")))
            if (line.startsWith("Umask:")) return Integer.parseInt(line.substring(6).trim(), 8);
        return 022;
    }
}
