package dev.codeexec.agent;

import dev.codeexec.codemode.CodeToolsRun;
import dev.codeexec.codemode.DirectTools;
import tools.jackson.databind.json.JsonMapper;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.BiConsumer;

/**
 * Direct mode's tools: each upstream tool the tenant may call, offered as {@code SERVER__TOOL} and called by the
 * server ({@link DirectTools}); no code runs. One answer's calls are one {@link CodeToolsRun}: code mode's caps
 * (CODE_TOOLS_MAX_CALLS, CODE_TOOLS_MAX_MB), timeout, record and audit line apply to them as to one run's.
 */
final class DirectModeTools implements AgentTools {

    private static final JsonMapper JSON = JsonMapper.shared();

    private final DirectTools direct;
    private final String tenant;
    private final CodeToolsRun run;

    DirectModeTools(DirectTools direct, String tenant, String runId) {
        this.direct = direct;
        this.tenant = tenant;
        this.run = direct.open(tenant, runId);
    }

    @Override
    public List<Map<String, Object>> describe() {
        List<Map<String, Object>> out = new ArrayList<>();
        for (DirectTools.Entry e : direct.visible(tenant)) {
            Map<String, Object> m = new LinkedHashMap<>();
            m.put("name", e.name());
            m.put("description", e.description());
            m.put("inputSchema", e.inputSchema());
            out.add(m);
        }
        return out;
    }

    @Override
    public String instructions() {
        return "Answer with the tools: each is a tool of an MCP server, named SERVER__TOOL. Call them as you need, "
                + "read their results, and answer with what the user asked for. When a call fails, read the error "
                + "and correct the call.";
    }

    @Override
    public Outcome call(String tool, Map<String, Object> arguments, String callId, BiConsumer<String, String> output) {
        var entry = direct.find(tenant, tool);
        if (entry.isEmpty())
            return Outcome.error("Error [unknown_tool]: no tool '" + tool + "' here (the tools: "
                    + String.join(", ", direct.visible(tenant).stream().map(DirectTools.Entry::name).toList()) + ")");
        CodeToolsRun.Outcome o = run.call(entry.get().server(), entry.get().tool(), arguments);
        if (o.result().isEmpty()) return Outcome.error("Error [" + o.reason() + "]: " + o.message());
        return new Outcome(AgentTools.capped(resultText(o)), false, List.of());
    }

    /** What the model reads of an ok call: the structured result as JSON, else the text. */
    private static String resultText(CodeToolsRun.Outcome o) {
        var answer = JSON.readTree(o.answer());
        var result = answer.get("result");
        return result == null ? "" : result.isString() ? result.asString() : JSON.writeValueAsString(result);
    }

    @Override
    public void cancel() {
        run.close();
    }

    @Override
    public void close() {
        run.close();
    }
}
