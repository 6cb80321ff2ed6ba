package dev.codeexec.local;

import dev.codeexec.config.Config;
import dev.codeexec.config.DataDir;
import dev.codeexec.egress.EgressPolicy;
import dev.codeexec.engine.ExecutionRequest;
import dev.codeexec.engine.ExecutionResult;
import dev.codeexec.engine.OutputListener;
import dev.codeexec.lang.Languages;
import dev.codeexec.sandbox.Sandbox;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Optional;

import static dev.codeexec.local.TestSupport.await;
import static org.assertj.core.api.Assertions.assertThat;

/**
 * Placeholder secrets (EGRESS_SECRETS_FILE) against the real bwrap sandbox: a run whose allow-list reaches a
 * secret's host has the variable set to a placeholder of its own, never the value, also with a warm pool (such a
 * run starts cold); a run that cannot reach the host, or whose tenant may not use the secret, has no variable.
 */
@Tag("sandbox")
@Timeout(value = 180, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
class PlaceholderSecretsTest {

    static final String VALUE = "ghp_the_real_value_never_in_a_sandbox";
    static LocalExecutor executor;
    static Sandbox sandbox;
    static Path dataDir;

    @BeforeAll
    static void setUp() throws Exception {
        dataDir = Files.createTempDirectory("code-exec-placeholder-secrets-test-");
        Files.setPosixFilePermissions(dataDir, java.nio.file.attribute.PosixFilePermissions.fromString("rwx--x--x"));
        Path secrets = dataDir.resolve("secrets.json");
        Files.writeString(secrets, """
                {"GITHUB_TOKEN": {"value": "%s", "hosts": ["api.github.test"]},
                 "TEAM_TOKEN": {"value": "team-only-value", "hosts": ["api.github.test"], "tenants": ["team-a"]}}
                """.formatted(VALUE));
        Config config = TestSupport.config("DATA_DIR", dataDir.toString(), "WARM_POOL", "python=1",
                "EGRESS", "on", "EGRESS_ALLOW", "api.github.test,other.test", "EGRESS_SECRETS_FILE", secrets.toString());
        sandbox = TestSandboxes.required(config, Sandbox::supportsControl, "a sandbox with a control channel (bwrap)");
        executor = new LocalExecutor(config, sandbox, Languages.load());
    }

    @AfterAll
    static void tearDown() throws Exception {
        if (executor != null) {
            executor.close();
            sandbox.close();
        }
        if (dataDir != null) DataDir.deleteTree(dataDir);
    }

    private static final String SHOW = """
            import os
            print(os.environ.get('GITHUB_TOKEN', '-'), os.environ.get('TEAM_TOKEN', '-'))
            print(open('/proc/self/environ', 'rb').read().count(b'%s'))
            """.formatted(VALUE);

    private static String[] run(String tenant, EgressPolicy policy) throws Exception {
        ExecutionRequest r = TestSupport.request(executor.config, "python", SHOW).toBuilder()
                .audit(new ExecutionRequest.AuditInfo(Optional.of(tenant), Optional.empty(), Optional.empty()))
                .egress(policy, false).build();
        ExecutionResult result = await(executor.submit(r, OutputListener.NONE));
        assertThat(result.exitCode()).as(result.stderr()).isZero();
        assertThat(result.stdout()).doesNotContain(VALUE).doesNotContain("team-only-value");
        return result.stdout().strip().split("\\s+");
    }

    @Test
    void aRunThatReachesTheSecretsHostHoldsAPlaceholderOfItsOwnAndNeverTheValue() throws Exception {
        EgressPolicy reaches = EgressPolicy.parse("api.github.test,other.test");
        String[] first = run("team-b", reaches);
        String[] second = run("team-b", reaches);
        assertThat(first[0]).matches("cxs_[0-9a-f]{40}");
        assertThat(second[0]).matches("cxs_[0-9a-f]{40}").isNotEqualTo(first[0]);
        assertThat(first[2]).isEqualTo("0");
    }

    @Test
    void aSecretWithTenantsIsSetForThoseTenantsOnly() throws Exception {
        EgressPolicy reaches = EgressPolicy.parse("api.github.test");
        assertThat(run("team-a", reaches)[1]).matches("cxs_[0-9a-f]{40}");
        assertThat(run("team-b", reaches)[1]).isEqualTo("-");
    }

    @Test
    void aRunWhoseAllowListDoesNotReachTheHostHasNoVariable() throws Exception {
        String[] narrow = run("team-a", EgressPolicy.parse("other.test"));
        assertThat(narrow[0]).isEqualTo("-");
        assertThat(narrow[1]).isEqualTo("-");
        String[] off = run("team-a", EgressPolicy.OFF);
        assertThat(off[0]).isEqualTo("-");
    }
}
