package dev.codeexec.wire;

import dev.codeexec.egress.ConnectionRecord;
import dev.codeexec.egress.EgressPolicy;
import dev.codeexec.wire.v1.Connection;
import dev.codeexec.wire.v1.NetworkReport;
import dev.codeexec.wire.v1.ToolCall;
import dev.codeexec.wire.v1.ToolCalls;
import dev.codeexec.engine.ExecutionRequest;
import dev.codeexec.engine.ExecutionRequest.AuditInfo;
import dev.codeexec.engine.ExecutionResult;
import dev.codeexec.sandbox.Limits;
import dev.codeexec.engine.Outcome;
import dev.codeexec.engine.SessionControl.SessionInfo;
import dev.codeexec.engine.SessionRef;
import dev.codeexec.wire.v1.Audit;
import dev.codeexec.wire.v1.ExecuteRequest;
import dev.codeexec.wire.v1.FileArtifact;
import dev.codeexec.wire.v1.Figure;
import dev.codeexec.wire.v1.Result;
import dev.codeexec.wire.v1.SessionOutput;
import dev.codeexec.workspace.Workspace;
import com.google.protobuf.ByteString;

import java.time.Duration;
import java.time.Instant;
import java.util.Arrays;
import java.util.Optional;
import java.util.OptionalDouble;
import java.util.OptionalLong;
import java.util.function.BiFunction;

/**
 * The one translation between the engine's values and the worker API's messages ({@code worker.proto}), used by
 * both sides: the gateway writes requests and reads results, the worker reads requests and writes results.
 */
public final class WireFormat {

    private WireFormat() {
    }

    /** A request as the gateway sends it; the workspace travels by name (both sides share WORKSPACE_ROOT). */
    public static ExecuteRequest toProto(ExecutionRequest r, Optional<String> sessionWorker) {
        Limits l = r.limits();
        ExecuteRequest.Builder b = ExecuteRequest.newBuilder()
                .setLanguage(r.language())
                .setCode(r.code())
                .setStdin(r.stdin())
                .addAllArgs(r.args())
                .putAllEnv(r.env())
                .setLimits(dev.codeexec.wire.v1.Limits.newBuilder()
                        .setTimeoutMs(l.timeout().toMillis())
                        .setCpuSeconds(l.cpuSeconds())
                        .setMemoryBytes(l.memoryBytes())
                        .setMaxProcesses(l.maxProcesses())
                        .setOutputBytes(l.outputBytes())
                        .setDiskBytes(l.diskBytes())
                        .setDrainBytes(l.drainBytes()))
                .setAudit(Audit.newBuilder()
                        .setTenant(r.audit().tenant().orElse(""))
                        .setMcpSession(r.audit().session().orElse(""))
                        .setRequestId(r.audit().requestId().orElse(""))
                        .setHttpRequestId(r.audit().httpRequestId().orElse("")));
        String tenant = r.session().map(SessionRef::tenant)
                .or(() -> r.workspace().map(Workspace::tenant))
                .or(() -> r.audit().tenant()).orElse("");
        b.setTenant(tenant);
        r.workspace().ifPresent(ws -> b.setWorkspace(ws.name()));
        r.session().ifPresent(s -> b.setSession(s.name()));
        sessionWorker.ifPresent(b::setSessionWorker);
        b.addAllEgressAllow(r.egress().patterns()).setEgressAsked(r.egressAsked());
        r.packages().ifPresent(set -> b.addAllPackages(set.specs()));
        b.setBackground(r.background());
        return b.build();
    }

    /**
     * A request as the worker reads it. The limits are taken as sent: the caller clamps them to its own maxima.
     *
     * @param openWorkspace (tenant, name) → the existing workspace; throws when it is missing or the names are bad
     * @throws IllegalArgumentException limits that are not positive
     */
    public static ExecutionRequest fromProto(ExecuteRequest p, BiFunction<String, String, Workspace> openWorkspace) {
        dev.codeexec.wire.v1.Limits pl = p.getLimits();
        Limits limits = new Limits(Duration.ofMillis(pl.getTimeoutMs()), pl.getCpuSeconds(), pl.getMemoryBytes(),
                pl.getMaxProcesses(), pl.getOutputBytes(), pl.getDiskBytes(),
                pl.getDrainBytes() > 0 ? pl.getDrainBytes() : Long.MAX_VALUE);
        Audit a = p.getAudit();
        AuditInfo audit = new AuditInfo(nonEmpty(a.getTenant()), nonEmpty(a.getMcpSession()),
                nonEmpty(a.getRequestId()), nonEmpty(a.getHttpRequestId()));
        Optional<Workspace> ws = p.getWorkspace().isEmpty() ? Optional.empty()
                : Optional.of(openWorkspace.apply(p.getTenant(), p.getWorkspace()));
        Optional<SessionRef> session = p.getSession().isEmpty() ? Optional.empty()
                : Optional.of(new SessionRef(p.getTenant(), p.getSession()));
        // bad patterns, refused packages: IllegalArgumentException
        return ExecutionRequest.builder(p.getLanguage(), p.getCode(), limits).stdin(p.getStdin())
                .args(p.getArgsList()).env(p.getEnvMap()).audit(audit).workspace(ws).session(session)
                .egress(EgressPolicy.of(p.getEgressAllowList()), p.getEgressAsked())
                .packages(p.getPackagesCount() == 0 ? Optional.empty()
                        : Optional.of(dev.codeexec.packages.PackageSet.parse(p.getLanguage(), p.getPackagesList())))
                .background(p.getBackground() && p.getSession().isEmpty())
                .build();
    }

    /** A result as the worker sends it, naming the worker. */
    public static Result toProto(ExecutionResult r, String worker) {
        Result.Builder b = Result.newBuilder()
                .setLanguage(r.language())
                .setExitCode(r.exitCode())
                .setStdout(r.stdout())
                .setStderr(r.stderr())
                .setDurationMs(r.durationMs())
                .setOutcome(r.outcome().wireName())
                .setTruncated(r.truncated())
                .setSandbox(r.sandbox())
                .setFilesTruncated(r.filesTruncated())
                .setWorker(worker);
        r.peakMemoryBytes().ifPresent(b::setPeakMemoryBytes);
        r.cpuTimeMs().ifPresent(b::setCpuTimeMs);
        for (ExecutionResult.FileArtifact f : r.files()) {
            b.addFiles(FileArtifact.newBuilder().setPath(f.path()).setSize(f.size()).setMimeType(f.mimeType())
                    .setStatus(f.status()));
        }
        r.session().ifPresent(so -> {
            SessionOutput.Builder sb = SessionOutput.newBuilder().setName(so.name()).setCreated(so.created());
            so.result().ifPresent(sb::setResult);
            so.executionCount().ifPresent(sb::setExecutionCount);
            so.error().ifPresent(e -> sb.setError(dev.codeexec.wire.v1.CellError.newBuilder().setName(e.name())
                    .setValue(e.value()).setTraceback(e.traceback())));
            for (ExecutionResult.Figure f : so.figures()) {
                sb.addFigures(Figure.newBuilder().setMimeType(f.mimeType()).setData(ByteString.copyFrom(f.data())));
            }
            for (ExecutionResult.RichOutput o : so.outputs()) {
                sb.addOutputs(dev.codeexec.wire.v1.RichOutput.newBuilder().setKind(o.kind()).putAllData(o.data()));
            }
            b.setSession(sb);
        });
        r.network().ifPresent(n -> {
            NetworkReport.Builder nb = NetworkReport.newBuilder().addAllPolicy(n.policy()).setLeftOut(n.leftOut())
                    .putAllCounts(n.counts()).setBytesOut(n.bytesOut()).setBytesIn(n.bytesIn());
            for (ConnectionRecord c : n.connections())
                nb.addConnections(Connection.newBuilder().setHost(c.host()).setPort(c.port()).setDecision(c.decision())
                        .setReason(c.reason()).setMessage(c.message()).setBytesOut(c.bytesOut()).setBytesIn(c.bytesIn())
                        .setMs(c.ms()).addAllSecrets(c.secrets()));
            b.setNetwork(nb);
        });
        r.toolCalls().ifPresent(t -> {
            ToolCalls.Builder tb = ToolCalls.newBuilder().setLeftOut(t.leftOut());
            for (dev.codeexec.codemode.ToolCall c : t.calls())
                tb.addCalls(ToolCall.newBuilder().setServer(c.server()).setTool(c.tool()).setMs(c.ms()).setOk(c.ok())
                        .setBytesIn(c.bytesIn()).setBytesOut(c.bytesOut()).setReason(c.reason().orElse("")));
            tb.setApiLeftOut(t.apiLeftOut());
            for (dev.codeexec.codemode.ApiCall c : t.apiCalls())
                tb.addApiCalls(dev.codeexec.wire.v1.ApiCall.newBuilder().setApi(c.api()).setMethod(c.method()).setPath(c.path())
                        .setStatus(c.status()).setMs(c.ms()).setBytesIn(c.bytesIn()).setBytesOut(c.bytesOut()));
            b.setToolCalls(tb);
        });
        r.packages().ifPresent(pk -> b.setPackages(dev.codeexec.wire.v1.Packages.newBuilder()
                .putAllResolved(pk.resolved()).setInstallMs(pk.installMs())));
        return b.build();
    }

    /** A result as the gateway reads it; {@code worker} in the result names the worker that ran it. */
    public static ExecutionResult fromProto(Result p) {
        ExecutionResult r = ExecutionResult.builder(p.getLanguage(), outcome(p.getOutcome()))
                .exitCode(p.getExitCode()).stdout(p.getStdout()).stderr(p.getStderr()).durationMs(p.getDurationMs())
                .truncated(p.getTruncated())
                .peakMemoryBytes(p.hasPeakMemoryBytes() ? OptionalLong.of(p.getPeakMemoryBytes())
                        : OptionalLong.empty())
                .cpuTimeMs(p.hasCpuTimeMs() ? OptionalDouble.of(p.getCpuTimeMs()) : OptionalDouble.empty())
                .sandbox(p.getSandbox())
                .files(p.getFilesList().stream()
                .map(f -> new ExecutionResult.FileArtifact(f.getPath(), f.getSize(), f.getMimeType(), f.getStatus()))
                .toList(), p.getFilesTruncated())
                .build();
        if (p.hasSession()) {
            SessionOutput s = p.getSession();
            r = r.withSession(new ExecutionResult.SessionOutput(s.getName(), s.getCreated(),
                    s.hasResult() ? Optional.of(s.getResult()) : Optional.empty(),
                    s.getFiguresList().stream().map(f -> new ExecutionResult.Figure(f.getMimeType(),
                            f.getData().toByteArray())).toList(),
                    s.hasExecutionCount() ? java.util.OptionalInt.of(s.getExecutionCount()) : java.util.OptionalInt.empty(),
                    s.hasError() ? Optional.of(new ExecutionResult.CellError(s.getError().getName(), s.getError()
                            .getValue(),
                            s.getError().getTraceback())) : Optional.empty(),
                    s.getOutputsList().stream().map(o -> new ExecutionResult.RichOutput(o.getKind(), o.getDataMap()))
                            .toList()));
        }
        if (p.hasNetwork()) {
            NetworkReport n = p.getNetwork();
            r = r.withNetwork(new dev.codeexec.egress.NetworkReport(n.getPolicyList(), n.getConnectionsList().stream()
                    .map(c -> new ConnectionRecord(c.getHost(), c.getPort(), c.getDecision(), c.getReason(), c.getMessage(),
                            c.getBytesOut(), c.getBytesIn(), c.getMs(), c.getSecretsList())).toList(), n.getLeftOut(), n.getCountsMap(),
                    n.getBytesOut(), n.getBytesIn()));
        }
        if (p.hasToolCalls()) {
            ToolCalls t = p.getToolCalls();
            r = r.withToolCalls(new dev.codeexec.codemode.ToolCall.Report(t.getCallsList().stream()
                    .map(c -> new dev.codeexec.codemode.ToolCall(c.getServer(), c.getTool(), c.getMs(), c.getOk(), c.getBytesIn(),
                            c.getBytesOut(), c.getReason()
                                    .isEmpty() ? Optional.empty() : Optional.of(c.getReason()))).toList(),
                    t.getLeftOut(), t.getApiCallsList().stream().map(c -> new dev.codeexec.codemode.ApiCall(c.getApi(), c.getMethod(),
                            c.getPath(), c.getStatus(), c.getMs(), c.getBytesIn(), c.getBytesOut())).toList(), t.getApiLeftOut()));
        }
        if (p.hasPackages())
            r = r.withPackages(new ExecutionResult.PackagesUsed(p.getPackages().getResolvedMap(), p.getPackages()
                    .getInstallMs()));
        return p.getWorker().isEmpty() ? r : r.withWorker(p.getWorker());
    }

    /** The outcome of a wire name; an unknown one (a newer worker) reads as killed_by_signal rather than failing. */
    public static Outcome outcome(String wireName) {
        return Arrays.stream(Outcome.values()).filter(o -> o.wireName().equals(wireName)).findFirst()
                .orElse(Outcome.KILLED_BY_SIGNAL);
    }

    public static dev.codeexec.wire.v1.SessionInfo toProto(SessionInfo s) {
        dev.codeexec.wire.v1.SessionInfo.Builder b = dev.codeexec.wire.v1.SessionInfo.newBuilder()
                .setName(s.name()).setLanguage(s.language()).setWorkspace(s.workspace().orElse(""))
                .setCreatedEpochMs(s.created().toEpochMilli()).setLastUsedEpochMs(s.lastUsed().toEpochMilli())
                .setCalls(s.calls()).setBusy(s.busy());
        s.memoryBytes().ifPresent(b::setMemoryBytes);
        return b.build();
    }

    public static SessionInfo fromProto(dev.codeexec.wire.v1.SessionInfo p) {
        return new SessionInfo(p.getName(), p.getLanguage(), nonEmpty(p.getWorkspace()),
                Instant.ofEpochMilli(p.getCreatedEpochMs()), Instant.ofEpochMilli(p.getLastUsedEpochMs()),
                p.hasMemoryBytes() ? OptionalLong.of(p.getMemoryBytes()) : OptionalLong.empty(), p.getCalls(),
                p.getBusy());
    }

    private static Optional<String> nonEmpty(String s) {
        return s == null || s.isEmpty() ? Optional.empty() : Optional.of(s);
    }

    /** A preview's sandbox on the wire. */
    public static dev.codeexec.wire.v1.PreviewSandbox toProto(dev.codeexec.engine.PreviewControl.Sandbox s) {
        var b = dev.codeexec.wire.v1.PreviewSandbox.newBuilder();
        return (s.kind() == dev.codeexec.engine.PreviewControl.Kind.SESSION ? b.setSession(s.name()) : b.setJob(s.name())).build();
    }

    /** @throws IllegalArgumentException neither a session nor a job */
    public static dev.codeexec.engine.PreviewControl.Sandbox fromProto(dev.codeexec.wire.v1.PreviewSandbox p) {
        if (!p.getSession().isEmpty())
            return new dev.codeexec.engine.PreviewControl.Sandbox(dev.codeexec.engine.PreviewControl.Kind.SESSION, p.getSession());
        if (!p.getJob().isEmpty())
            return new dev.codeexec.engine.PreviewControl.Sandbox(dev.codeexec.engine.PreviewControl.Kind.JOB, p.getJob());
        throw new IllegalArgumentException("a preview's sandbox is a session or a job");
    }

    /** A preview on the wire (without its socket: a path of the worker's). */
    public static dev.codeexec.wire.v1.PreviewInfo toProto(dev.codeexec.engine.PreviewControl.Preview p) {
        return dev.codeexec.wire.v1.PreviewInfo.newBuilder().setToken(p.token()).setTenant(p.tenant())
                .setSandbox(toProto(p.sandbox())).setPort(p.port()).setKey(p.key())
                .setCreatedEpochMs(p.createdAt().toEpochMilli()).setExpiresEpochMs(p.expiresAt().toEpochMilli()).build();
    }

    /** A preview from the wire, reached at {@code socket} (the gateway's bridge to the worker). */
    public static dev.codeexec.engine.PreviewControl.Preview fromProto(dev.codeexec.wire.v1.PreviewInfo p, java.nio.file.Path socket) {
        return new dev.codeexec.engine.PreviewControl.Preview(p.getToken(), p.getTenant(), fromProto(p.getSandbox()),
                p.getPort(), p.getKey(), java.time.Instant.ofEpochMilli(p.getCreatedEpochMs()),
                java.time.Instant.ofEpochMilli(p.getExpiresEpochMs()), socket);
    }
}
