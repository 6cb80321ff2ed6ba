package dev.codeexec.surface;

import dev.codeexec.config.Config;
import dev.codeexec.engine.ExecutionException;
import dev.codeexec.engine.PreviewControl;
import dev.codeexec.engine.SessionRef;
import dev.codeexec.mcp.FakeExecutor;
import dev.codeexec.sandbox.SandboxSpec;
import dev.codeexec.testing.MutableClock;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.Map;
import java.util.Optional;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/** The registry of port previews: who may make one, what its token reaches, and when it ends. */
class PreviewsTest {

    @TempDir
    Path data;

    final FakeExecutor executor = new FakeExecutor();
    final MutableClock clock = new MutableClock(Instant.parse("2026-12-05T10:00:00Z"));
    static final PreviewControl.Sandbox S0 = new PreviewControl.Sandbox(PreviewControl.Kind.SESSION, "s0");

    @AfterEach
    void close() {
        executor.close();
    }

    Previews previews(String... pairs) {
        java.util.List<String> all = new java.util.ArrayList<>(java.util.List.of("DATA_DIR", data.toString(),
                "PREVIEW_MAX_PER_SANDBOX", "2"));
        all.addAll(java.util.List.of(pairs));
        Previews p = new Previews(Config.of(all.toArray(String[]::new)), executor, Optional::empty, clock);
        p.address().listening("http://127.0.0.1:8081/");
        return p;
    }

    @Test
    void aPreviewOfALiveSessionReachesItsSocketByAnUnguessableTokenAndTheSamePortGivesTheSameUrl() {
        executor.sessionsByTenant = Map.of("alice", 1);
        Previews p = previews();
        PreviewControl.Preview a = p.expose("alice", S0, 8000, false);
        assertThat(a.token()).matches("[0-9a-f]{48}");
        assertThat(p.address().url(a.token())).isEqualTo("http://127.0.0.1:8081/p/" + a.token() + "/");
        assertThat(a.socket()).isEqualTo(data.resolve("previews").resolve(new SessionRef("alice", "s0").previewKey())
                .resolve(SandboxSpec.PREVIEW_SOCKET));
        assertThat(p.find(a.token())).contains(a);
        assertThat(p.expose("alice", S0, 8000, false)).as("the same port again").isEqualTo(a);
        PreviewControl.Preview key = p.expose("alice", S0, 8000, true);
        assertThat(key.token()).as("a key preview is another").isNotEqualTo(a.token());
        assertThat(p.map(a)).containsEntry("auth", "token").containsEntry("port", 8000)
                .containsEntry("expiresAt", "2026-12-06T10:00:00Z");
        assertThat(p.find(a.token().replace(a.token().charAt(0), a.token().charAt(0) == 'a' ? 'b' : 'a'))).isEmpty();
    }

    @Test
    void anotherTenantsSessionAnEndedOneAndABadPortAreRefusedAndTheCapHolds() {
        executor.sessionsByTenant = Map.of("alice", 1);
        Previews p = previews();
        assertThatThrownBy(() -> p.expose("bob", S0, 8000, false)).isInstanceOf(ExecutionException.InvalidRequest.class)
                .hasMessageContaining("no session 's0'");
        assertThatThrownBy(() -> p.expose("alice", S0, 0, false)).isInstanceOf(ExecutionException.InvalidRequest.class);
        assertThatThrownBy(() -> p.expose("alice", new PreviewControl.Sandbox(PreviewControl.Kind.JOB, "job-x"), 80, false))
                .hasMessageContaining("no running job");
        p.expose("alice", S0, 1, false);
        p.expose("alice", S0, 2, false);
        assertThatThrownBy(() -> p.expose("alice", S0, 3, false)).hasMessageContaining("PREVIEW_MAX_PER_SANDBOX");
    }

    @Test
    void aPreviewEndsWithItsSessionAtItsExpiryAndByUnexposeByUrlOrPort() {
        executor.sessionsByTenant = Map.of("alice", 1);
        Previews p = previews();
        PreviewControl.Preview a = p.expose("alice", S0, 8000, false);
        PreviewControl.Preview b = p.expose("alice", S0, 9000, false);
        assertThat(p.unexpose("bob", Optional.empty(), Optional.of(a.token()), Optional.empty())).as("not bob's").isZero();
        assertThat(p.unexpose("alice", Optional.empty(), Optional.of(a.token()), Optional.empty())).isOne();
        assertThat(p.find(a.token())).isEmpty();
        assertThat(p.unexpose("alice", Optional.of(S0), Optional.empty(), Optional.of(9000))).isOne();
        assertThat(p.find(b.token())).isEmpty();

        PreviewControl.Preview c = p.expose("alice", S0, 8000, false);
        clock.advance(Duration.ofHours(24));
        assertThat(p.find(c.token())).as("expired").isEmpty();

        PreviewControl.Preview d = p.expose("alice", S0, 8000, false);
        executor.sessionsByTenant = Map.of();
        clock.advance(Previews.CHECK_EVERY);
        assertThat(p.find(d.token())).as("its session ended").isEmpty();
        assertThat(p.list("alice", S0)).isEmpty();
    }

    @Test
    void withoutAListenerOrWithPreviewsOffExposeSaysWhy() {
        executor.sessionsByTenant = Map.of("alice", 1);
        Previews off = new Previews(Config.of("DATA_DIR", data.toString(), "PREVIEWS", "off"), executor, Optional::empty, clock);
        assertThatThrownBy(() -> off.expose("alice", S0, 8000, false)).isInstanceOf(ExecutionException.Unavailable.class)
                .hasMessageContaining("PREVIEWS=off");
        Previews busy = new Previews(Config.of("DATA_DIR", data.toString()), executor, Optional::empty, clock);
        busy.address().unavailable("the preview listener cannot listen on 127.0.0.1:8081 (in use)");
        assertThatThrownBy(() -> busy.expose("alice", S0, 8000, false)).hasMessageContaining("in use");
    }

    @Test
    void theHostFormGivesEachPreviewAnOriginOfItsOwn() {
        executor.sessionsByTenant = Map.of("alice", 1);
        Previews p = previews("PREVIEW_DOMAIN", "Preview.Example.com");
        PreviewControl.Preview a = p.expose("alice", S0, 8000, false);
        assertThat(p.address().url(a.token())).isEqualTo("https://" + a.token() + ".preview.example.com/");
    }
}
