package dev.codeexec.mcp;

import io.modelcontextprotocol.server.McpServerFeatures.SyncCompletionSpecification;
import io.modelcontextprotocol.server.McpServerFeatures.SyncPromptSpecification;
import io.modelcontextprotocol.server.McpServerFeatures.SyncResourceSpecification;
import io.modelcontextprotocol.server.McpServerFeatures.SyncResourceTemplateSpecification;
import io.modelcontextprotocol.server.McpServerFeatures.SyncToolSpecification;

import java.util.ArrayList;
import java.util.List;

/**
 * What an MCP server of ours offers, once for both revisions: the tools, resources, resource templates, prompts
 * and completions, as the SDK's 2025-11-25 specifications (the handlers every surface calls). The 2025-11-25
 * server registers them as they are ({@link McpServers}); the 2026-07-28 server adapts each ({@link ModernMcp}).
 */
public record McpCatalog(List<SyncToolSpecification> tools, List<SyncResourceSpecification> resources,
        List<SyncResourceTemplateSpecification> templates, List<SyncPromptSpecification> prompts,
        List<SyncCompletionSpecification> completions) {

    public static final McpCatalog EMPTY = new McpCatalog(List.of(), List.of(), List.of(), List.of(), List.of());

    public McpCatalog {
        tools = List.copyOf(tools);
        resources = List.copyOf(resources);
        templates = List.copyOf(templates);
        prompts = List.copyOf(prompts);
        completions = List.copyOf(completions);
    }

    /** This catalog followed by {@code more}'s entries. */
    public McpCatalog plus(McpCatalog more) {
        return new McpCatalog(concat(tools, more.tools), concat(resources, more.resources), concat(templates, more.templates),
                concat(prompts, more.prompts), concat(completions, more.completions));
    }

    private static <T> List<T> concat(List<T> a, List<T> b) {
        List<T> out = new ArrayList<>(a);
        out.addAll(b);
        return out;
    }
}
