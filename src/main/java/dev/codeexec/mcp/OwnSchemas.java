package dev.codeexec.mcp;

import io.modelcontextprotocol.json.schema.JsonSchemaValidator;
import io.modelcontextprotocol.server.McpServerFeatures.SyncToolSpecification;
import io.modelcontextprotocol.spec.McpSchema.Tool;

import java.util.Collections;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * The MCP SDK's JSON-schema validator, minus its checks of this server's own tools. The SDK checks every tool's
 * schemas when the server is built, and every structured result against its tool's output schema, with a JSON-schema
 * library: for execute_code that is ~70 ms at the first call (compiling the schema), then a copy of the whole result
 * as a JSON tree and as a string on every call (~0.3 ms for a hello before the JIT has compiled it, ~2 ms with 64 KB
 * of output), for results this server builds itself and that its tests check against the same schemas (a real
 * client validates them in the end-to-end tests). The tools an extension adds are checked as before.
 *
 * <p>A schema counts as ours by identity: the maps our tool specifications hold, registered with {@link #own}
 * before the SDK sees them. Our tools always send text content, so the SDK never needs the JSON text a skipped
 * validation would have returned (it uses it only for a structured result without content).
 */
final class OwnSchemas implements JsonSchemaValidator {

    private final JsonSchemaValidator delegate;
    private final Set<Map<String, Object>> own = Collections.synchronizedSet(Collections.newSetFromMap(new IdentityHashMap<>()));

    OwnSchemas(JsonSchemaValidator delegate) {
        this.delegate = delegate;
    }

    /** Registers the tool's input and output schemas as ours; returns the specification. */
    SyncToolSpecification own(SyncToolSpecification spec) {
        Tool tool = spec.tool();
        if (tool.inputSchema() != null) own.add(tool.inputSchema());
        if (tool.outputSchema() != null) own.add(tool.outputSchema());
        return spec;
    }

    List<SyncToolSpecification> own(List<SyncToolSpecification> specs) {
        specs.forEach(this::own);
        return specs;
    }

    private boolean isOwn(Map<String, Object> schema) {
        return own.contains(schema);
    }

    @Override
    public ValidationResponse validate(Map<String, Object> schema, Object structuredContent) {
        return isOwn(schema) ? ValidationResponse.asValid(null) : delegate.validate(schema, structuredContent);
    }

    @Override
    public ValidationResponse validateSchema(Map<String, Object> schema) {
        return isOwn(schema) ? ValidationResponse.asValid(null) : delegate.validateSchema(schema);
    }
}
