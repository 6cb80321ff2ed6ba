package dev.codeexec.engine;

import dev.codeexec.egress.EgressChannel;
import dev.codeexec.egress.EgressChannels;
import dev.codeexec.egress.EgressPolicy;
import dev.codeexec.sandbox.Sandbox;
import dev.codeexec.sandbox.SandboxException;
import dev.codeexec.sandbox.SandboxProcess;
import dev.codeexec.sandbox.SandboxSpec;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.io.IOException;

/**
 * Starting a sandbox with a way out, the same for a cold run, a pooled sandbox and a session's interpreter: its
 * egress channel is opened first, the spec gets the socket, the proxy variables and the files they name, and the
 * channel is closed again when the sandbox does not start.
 */
final class EgressStart {

    private static final Logger LOG = LoggerFactory.getLogger(EgressStart.class);

    private EgressStart() {
    }

    /** A started sandbox and its channel (null without a way out). */
    record Started(SandboxProcess process, EgressChannel channel) {
    }

    /**
     * Starts {@code spec}; with {@code channels} not null, on a channel of its own serving {@code policy} (a pooled
     * sandbox: {@link EgressPolicy#OFF} until a job arms it).
     */
    static Started start(Sandbox sandbox, SandboxSpec spec, EgressChannels channels, EgressPolicy policy, String tenant)
            throws SandboxException {
        if (channels == null) return new Started(sandbox.start(spec), null);
        EgressChannel channel;
        try {
            channel = channels.open(policy, tenant, spec.runId());
        } catch (IOException e) {
            LOG.warn("{}: cannot open the egress proxy's socket: {}", spec.runId(), e.toString());
            throw new SandboxException("the server could not prepare the run's network access");
        }
        try {
            return new Started(sandbox.start(spec.withEgress(channel.socket(), channels.environment(),
                    channels.readOnlyFiles())), channel);
        } catch (SandboxException | RuntimeException e) {
            channel.close();
            throw e;
        }
    }
}
