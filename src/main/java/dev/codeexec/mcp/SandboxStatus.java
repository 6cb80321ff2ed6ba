package dev.codeexec.mcp;

import java.util.Optional;

/**
 * The sandbox in use and, when it cannot run code, why: what /healthz and the start-up log report.
 *
 * @param name              bwrap, gvisor or none
 * @param unavailableReason empty when the sandbox works
 */
public record SandboxStatus(String name, Optional<String> unavailableReason) {

    public boolean available() {
        return unavailableReason.isEmpty();
    }
}
