package dev.codeexec.sandbox;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Files;
import java.nio.file.Path;

import static org.assertj.core.api.Assertions.assertThat;

class UserNamespacesTest {

    @TempDir
    Path sys;

    private void set(String name, String value) throws Exception {
        Path p = sys.resolve(name);
        Files.createDirectories(p.getParent());
        Files.writeString(p, value + "\n");
    }

    @Test
    void theKernelsSwitchesAreReadWithAReasonToFixThem() throws Exception {
        assertThat(UserNamespaces.unavailableReason(sys)).as("no switches: allowed, the self-test decides").isNull();
        set("user/max_user_namespaces", "15000");
        set("kernel/unprivileged_userns_clone", "1");
        assertThat(UserNamespaces.unavailableReason(sys)).isNull();
        set("kernel/unprivileged_userns_clone", "0");
        assertThat(UserNamespaces.unavailableReason(sys)).contains("kernel.unprivileged_userns_clone = 0")
                .contains("sysctl");
        set("user/max_user_namespaces", "0");
        assertThat(UserNamespaces.unavailableReason(sys)).contains("user.max_user_namespaces = 0");
    }

    @Test
    void anAppArmorRestrictionIsNamedWhenTheSelfTestFails() throws Exception {
        assertThat(UserNamespaces.hint(sys)).isEmpty();
        set("kernel/apparmor_restrict_unprivileged_userns", "1");
        assertThat(UserNamespaces.hint(sys)).contains("AppArmor must allow /usr/bin/bwrap");
    }
}
