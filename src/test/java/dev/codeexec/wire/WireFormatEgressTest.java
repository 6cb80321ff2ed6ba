package dev.codeexec.wire;

import dev.codeexec.codemode.ToolCall;
import dev.codeexec.egress.ConnectionRecord;
import dev.codeexec.egress.EgressPolicy;
import dev.codeexec.egress.NetworkReport;
import dev.codeexec.engine.ExecutionRequest;
import dev.codeexec.engine.ExecutionResult;
import dev.codeexec.engine.Outcome;
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

/**
 * The gateway passes the caller's network policy to a worker, and the worker's network report and tool calls come back
 * whole.
 */
class WireFormatEgressTest {

    private static final Limits LIMITS = new Limits(Duration.ofSeconds(5), 5, 256L << 20, 64, 1 << 16, 1 << 20);

    @Test
    void thePolicyAndWhetherTheCallNamedItTravelToTheWorker() {
        ExecutionRequest r = ExecutionRequest.builder("python", "print(1)", LIMITS).build()
                .withEgress(EgressPolicy.parse("pypi.org,*.pythonhosted.org,mirror.example:8443"), true);
        ExecuteRequest p = WireFormat.toProto(r, Optional.empty());
        assertThat(p.getEgressAllowList()).containsExactly("pypi.org", "*.pythonhosted.org", "mirror.example:8443");
        ExecutionRequest back = WireFormat.fromProto(p, (t, n) -> { throw new AssertionError("no workspace"); });
        assertThat(back.egress()).isEqualTo(r.egress());
        assertThat(back.egressAsked()).isTrue();

        ExecutionRequest none = WireFormat.fromProto(WireFormat.toProto(
                ExecutionRequest.builder("python", "1", LIMITS).build(), Optional.empty()), (t, n) -> null);
        assertThat(none.egress().isOff()).isTrue();
        assertThat(none.egressAsked()).isFalse();
    }

    @Test
    void aPatternAWorkerCannotReadIsRefusedNotWidened() {
        ExecuteRequest p = WireFormat.toProto(ExecutionRequest.builder("python", "1", LIMITS).build(),
                Optional.empty()).toBuilder().addEgressAllow("10.0.0.1").build();
        assertThatThrownBy(() -> WireFormat.fromProto(p, (t, n) -> null)).isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("not IP addresses");
    }

    @Test
    void theNetworkReportComesBackWhole() {
        NetworkReport n = new NetworkReport(List.of("fixture.test:8080"), List.of(
                new ConnectionRecord("fixture.test", 8080, "allowed", "closed", "closed", 120, 4567, 12),
                new ConnectionRecord("api.github.test", 443, "allowed", "closed", "closed", 80, 900, 7, List.of("GITHUB_TOKEN")),
                new ConnectionRecord("evil.test", 443, "refused", "not_allowed", "evil.test:443 is not on ...", 0, 0, 1)),
                3, Map.of("allowed/closed", 1, "refused/not_allowed", 4), 120, 4567);
        ExecutionResult r = ExecutionResult.builder("python", Outcome.EXITED).exitCode(0).durationMs(5)
                .sandbox("bwrap").build().withNetwork(n);
        ExecutionResult back = WireFormat.fromProto(WireFormat.toProto(r, "w1"));
        assertThat(back.network()).contains(n);
        assertThat(back.worker()).contains("w1");
        ExecutionResult without = WireFormat.fromProto(WireFormat.toProto(
                ExecutionResult.builder("python", Outcome.EXITED).exitCode(0).durationMs(5).sandbox("bwrap").build(), "w1"));
        assertThat(without.network()).isEmpty();
    }

    @Test
    void codeModesToolCallsComeBackWhole() {
        ToolCall.Report t = new ToolCall.Report(List.of(
                new ToolCall("github", "search_issues", 31, true, 2048, 120, Optional.empty()),
                new ToolCall("github", "delete_repo", 0, false, 0, 40, Optional.of("not_allowed"))), 7);
        ExecutionResult r = ExecutionResult.builder("python", Outcome.EXITED).exitCode(0).durationMs(5)
                .sandbox("bwrap").build().withToolCalls(t);
        assertThat(WireFormat.fromProto(WireFormat.toProto(r, "w1")).toolCalls()).contains(t);
        ExecutionResult none = ExecutionResult.builder("python", Outcome.EXITED).exitCode(0).durationMs(5)
                .sandbox("bwrap").build();
        assertThat(WireFormat.fromProto(WireFormat.toProto(none, "w1")).toolCalls()).isEmpty();
    }

    @Test
    void apiRouteCallsComeBackWholeWithTheToolCalls() {
        ToolCall.Report t = new ToolCall.Report(List.of(), 0, List.of(
                new dev.codeexec.codemode.ApiCall("github", "GET", "/user", 200, 42, 1234, 0),
                new dev.codeexec.codemode.ApiCall("github", "DELETE", "/repos/o/r", 403, 0, 0, 0)), 5);
        ExecutionResult r = ExecutionResult.builder("python", Outcome.EXITED).exitCode(0).durationMs(5)
                .sandbox("bwrap").build().withToolCalls(t);
        assertThat(WireFormat.fromProto(WireFormat.toProto(r, "w1")).toolCalls()).contains(t);
    }
}
