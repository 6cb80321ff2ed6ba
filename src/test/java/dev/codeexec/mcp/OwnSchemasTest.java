package dev.codeexec.mcp;

import io.modelcontextprotocol.json.McpJsonDefaults;
import io.modelcontextprotocol.json.schema.JsonSchemaValidator;
import io.modelcontextprotocol.server.McpServerFeatures.SyncToolSpecification;
import io.modelcontextprotocol.spec.McpSchema.CallToolResult;
import io.modelcontextprotocol.spec.McpSchema.Tool;
import org.junit.jupiter.api.Test;

import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicInteger;

import static org.assertj.core.api.Assertions.assertThat;

/** {@link OwnSchemas}: our tools' schemas skip the SDK's checks, by identity; every other schema is checked. */
class OwnSchemasTest {

    static final Map<String, Object> OUTPUT = Map.of("type", "object", "properties",
            Map.of("n", Map.of("type", "integer")), "required", List.of("n"));

    /** The SDK's own validator, counting what reaches it. */
    static final class Counting implements JsonSchemaValidator {
        final JsonSchemaValidator real = McpJsonDefaults.getSchemaValidator();
        final AtomicInteger validations = new AtomicInteger();
        final AtomicInteger schemaChecks = new AtomicInteger();

        @Override
        public ValidationResponse validate(Map<String, Object> schema, Object content) {
            validations.incrementAndGet();
            return real.validate(schema, content);
        }

        @Override
        public ValidationResponse validateSchema(Map<String, Object> schema) {
            schemaChecks.incrementAndGet();
            return real.validateSchema(schema);
        }
    }

    static SyncToolSpecification tool(Map<String, Object> output) {
        return new SyncToolSpecification(Tool.builder().name("t").inputSchema(Map.of("type", "object"))
                .outputSchema(output).build(), (ex, call) -> CallToolResult.builder().addTextContent("x").build());
    }

    @Test
    void ourToolsSchemasAreNotChecked() {
        Counting counting = new Counting();
        OwnSchemas schemas = new OwnSchemas(counting);
        SyncToolSpecification ours = schemas.own(tool(OUTPUT));
        assertThat(schemas.validate(ours.tool().outputSchema(), Map.of("n", 1)).valid()).isTrue();
        assertThat(schemas.validateSchema(ours.tool().inputSchema()).valid()).isTrue();
        assertThat(schemas.validateSchema(ours.tool().outputSchema()).valid()).isTrue();
        assertThat(counting.validations).hasValue(0);
        assertThat(counting.schemaChecks).hasValue(0);
    }

    @Test
    void anyOtherSchemaIsCheckedEvenWhenEqualToOurs() {
        Counting counting = new Counting();
        OwnSchemas schemas = new OwnSchemas(counting);
        schemas.own(tool(OUTPUT));
        Map<String, Object> equalCopy = new HashMap<>(OUTPUT);
        assertThat(schemas.validate(equalCopy, Map.of("n", "one")).valid()).isFalse();
        assertThat(schemas.validate(equalCopy, Map.of("n", 1)).valid()).isTrue();
        assertThat(schemas.validateSchema(equalCopy).valid()).isTrue();
        assertThat(counting.validations).hasValue(2);
        assertThat(counting.schemaChecks).hasValue(1);
    }
}
