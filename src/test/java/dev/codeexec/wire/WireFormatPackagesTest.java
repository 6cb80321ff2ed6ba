package dev.codeexec.wire;

import dev.codeexec.engine.ExecutionRequest;
import dev.codeexec.engine.ExecutionResult;
import dev.codeexec.engine.Outcome;
import dev.codeexec.packages.PackageSet;
import dev.codeexec.sandbox.Limits;
import dev.codeexec.wire.v1.ExecuteRequest;
import org.junit.jupiter.api.Test;

import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalDouble;
import java.util.OptionalLong;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/** Declared packages travel to the worker (checked again there) and what the worker resolved comes back. */
class WireFormatPackagesTest {

    private static final Limits LIMITS = new Limits(Duration.ofSeconds(5), 5, 256L << 20, 64, 1 << 16, 1 << 20);

    @Test
    void theSetTravelsAndIsCheckedAgainByTheWorker() {
        ExecutionRequest r = ExecutionRequest.builder("python", "print(1)", LIMITS).build()
                .withPackages(Optional.of(PackageSet.parse("python", List.of("Requests == 2.32.3", "tinylib[Extra]>=1"))));
        ExecuteRequest p = WireFormat.toProto(r, Optional.empty());
        assertThat(p.getPackagesList()).containsExactly("requests==2.32.3", "tinylib[extra]>=1");
        ExecutionRequest back = WireFormat.fromProto(p, (t, n) -> null);
        assertThat(back.packages()).isEqualTo(r.packages());

        ExecutionRequest none = WireFormat.fromProto(WireFormat.toProto(
                ExecutionRequest.builder("python", "1", LIMITS).build(), Optional.empty()), (t, n) -> null);
        assertThat(none.packages()).isEmpty();

        // a gateway never sends a URL, but a worker does not take one on trust either
        ExecuteRequest bad = p.toBuilder().addPackages("x @ https://example.invalid/x.whl").build();
        assertThatThrownBy(() -> WireFormat.fromProto(bad, (t, n) -> null)).isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("refused");
    }

    @Test
    void whatWasResolvedComesBack() {
        ExecutionResult r = ExecutionResult.builder("python", Outcome.EXITED).exitCode(0).stdout("1\n").durationMs(12)
                .sandbox("bwrap").build().withPackages(new ExecutionResult.PackagesUsed(
                Map.of("tinylib", "2.0", "tinydep", "1.0"), 1234));
        ExecutionResult back = WireFormat.fromProto(WireFormat.toProto(r, "w1"));
        assertThat(back.packages()).contains(new ExecutionResult.PackagesUsed(Map.of("tinylib", "2.0", "tinydep", "1.0"), 1234));
        ExecutionResult plain = WireFormat.fromProto(WireFormat.toProto(ExecutionResult.builder("python", Outcome.EXITED)
                .exitCode(0).durationMs(1).sandbox("bwrap").build(), "w1"));
        assertThat(plain.packages()).isEmpty();
    }
}
