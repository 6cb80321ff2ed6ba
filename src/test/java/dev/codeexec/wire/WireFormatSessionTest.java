package dev.codeexec.wire;

import dev.codeexec.engine.ExecutionResult;
import dev.codeexec.engine.Outcome;
import org.junit.jupiter.api.Test;

import java.util.List;
import java.util.Optional;
import java.util.OptionalDouble;
import java.util.OptionalInt;
import java.util.OptionalLong;

import static org.assertj.core.api.Assertions.assertThat;

/** A session call's cell number and structured error come back from a worker as the local engine gives them. */
class WireFormatSessionTest {

    @Test
    void theCellNumberAndTheErrorTravel() {
        ExecutionResult.CellError err = new ExecutionResult.CellError("NameError", "name 'xyz' is not defined",
                "Traceback (most recent call last):\n  File \"<cell 3>\", line 1, in <module>\nNameError: name 'xyz' is not defined\n");
        ExecutionResult r = ExecutionResult.builder("python", Outcome.EXITED).exitCode(1).stderr(err.traceback())
                .durationMs(5).sandbox("bwrap").build().withSession(new ExecutionResult.SessionOutput("s", false, Optional.empty(),
                List.of(), OptionalInt.of(3), Optional.of(err)));
        ExecutionResult.SessionOutput back = WireFormat.fromProto(WireFormat.toProto(r, "w1")).session().orElseThrow();
        assertThat(back.executionCount()).hasValue(3);
        assertThat(back.error()).contains(err);
        ExecutionResult.RichOutput html = new ExecutionResult.RichOutput("result",
                java.util.Map.of("text/plain", "R()", "text/html", "<b>R</b>", "image/png", "iVBORw0KGgo="));
        ExecutionResult rich = r.withSession(new ExecutionResult.SessionOutput("s", false, Optional.empty(), List.of(),
                OptionalInt.of(4), Optional.empty(), List.of(new ExecutionResult.RichOutput("display", java.util.Map.of("text/plain", "1")), html)));
        assertThat(WireFormat.fromProto(WireFormat.toProto(rich, "w1")).session().orElseThrow().outputs())
                .as("rich outputs travel in order with every MIME type").containsExactly(
                        new ExecutionResult.RichOutput("display", java.util.Map.of("text/plain", "1")), html);
        ExecutionResult ok = r.withSession(new ExecutionResult.SessionOutput("s", true, Optional.of("42"), List.of()));
        ExecutionResult.SessionOutput plain = WireFormat.fromProto(WireFormat.toProto(ok, "w1")).session().orElseThrow();
        assertThat(plain.executionCount()).isEmpty();
        assertThat(plain.error()).isEmpty();
        assertThat(plain.result()).contains("42");
    }
}
