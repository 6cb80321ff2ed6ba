package dev.codeexec.sandbox;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * Whether a normal user can make the user namespace bubblewrap needs, from the kernel's switches, before a sandbox is
 * tried: a clear reason beats bwrap's own message. What the switches allow is then proven by the sandbox self-test
 * (an AppArmor policy, for one, is only seen by trying).
 */
final class UserNamespaces {

    private UserNamespaces() {
    }

    static String unavailableReason() {
        return unavailableReason(Path.of("/proc/sys"));
    }

    /** @param sys where /proc/sys is (tests give a fake one) */
    static String unavailableReason(Path sys) {
        if (read(sys.resolve("user/max_user_namespaces")).equals("0"))
            return "unprivileged user namespaces are switched off (user.max_user_namespaces = 0): as root, "
                    + "`sysctl -w user.max_user_namespaces=15000`, or run the server as root";
        if (read(sys.resolve("kernel/unprivileged_userns_clone")).equals("0"))
            return "unprivileged user namespaces are switched off (kernel.unprivileged_userns_clone = 0): as root, "
                    + "`sysctl -w kernel.unprivileged_userns_clone=1`, or run the server as root";
        return null;
    }

    /**
     * What to add to a failed self-test in normal-user mode: where AppArmor restricts unprivileged user namespaces
     * (Ubuntu 23.10+), bwrap gets one only through an AppArmor profile that allows it.
     */
    static String hint() {
        return hint(Path.of("/proc/sys"));
    }

    static String hint(Path sys) {
        return read(sys.resolve("kernel/apparmor_restrict_unprivileged_userns")).equals("1")
                ? " (kernel.apparmor_restrict_unprivileged_userns = 1: AppArmor must allow " + BwrapSandbox.BWRAP
                        + " to make user namespaces, through a profile for it)"
                : "";
    }

    private static String read(Path p) {
        try {
            return Files.readString(p).trim();
        } catch (IOException | RuntimeException e) {
            return "";
        }
    }
}
