package dev.codeexec.run;

import dev.codeexec.codemode.CodeTools;
import dev.codeexec.codemode.CodeToolsRun;
import dev.codeexec.egress.EgressChannel;
import dev.codeexec.egress.EgressChannels;
import dev.codeexec.egress.EgressPolicy;
import dev.codeexec.egress.RunSecrets;
import dev.codeexec.sandbox.Sandbox;
import dev.codeexec.sandbox.SandboxException;
import dev.codeexec.sandbox.SandboxProcess;
import dev.codeexec.sandbox.SandboxSpec;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Starting a sandbox with a channel, the same for a cold run, a pooled sandbox and a session's interpreter: the
 * channel is opened first (the egress proxy, and code mode's endpoint when the server has code tools), the spec
 * gets the socket, the variables and the files they name (the proxy's preload and CA files, the generated tool
 * library), and all of it is closed again when the sandbox does not start.
 */
public final class EgressStart {

    private static final Logger LOG = LoggerFactory.getLogger(EgressStart.class);

    private EgressStart() {
    }

    /**
     * A started sandbox, its channel (null without one) and its tool library (null without code tools). Closing
     * it closes both; the process is the caller's.
     */
    public record Started(SandboxProcess process, EgressChannel channel, CodeTools.LibraryFiles library) {
        public void closeLink() {
            if (channel != null) channel.close();
            if (library != null) library.close();
        }
    }

    /**
     * Starts {@code spec}; with {@code channels} not null, on a channel of its own serving {@code policy} (a pooled
     * sandbox: {@link EgressPolicy#OFF} until a job arms it). With {@code codeTools} not null the sandbox also gets
     * a library; when {@code tenant} is not null it is written for that tenant before the start and the channel is
     * armed with {@code codeRun} (a warm sandbox gets both when its job arrives).
     */
    public static Started start(Sandbox sandbox, SandboxSpec spec, EgressChannels channels, EgressPolicy policy, String tenant,
            CodeTools codeTools, CodeToolsRun codeRun) throws SandboxException {
        return start(sandbox, spec, channels, policy, tenant, codeTools, codeRun, RunSecrets.NONE);
    }

    /**
     * As above, with the run's placeholder secrets: their variables go into the spec's environment and the
     * channel takes them before the sandbox starts, so the proxy knows every placeholder the program can send.
     */
    public static Started start(Sandbox sandbox, SandboxSpec spec, EgressChannels channels, EgressPolicy policy, String tenant,
            CodeTools codeTools, CodeToolsRun codeRun, RunSecrets secrets) throws SandboxException {
        if (channels == null) return new Started(sandbox.start(spec), null, null);
        EgressChannel channel = null;
        CodeTools.LibraryFiles library = null;
        try {
            channel = channels.open(policy, tenant == null ? "-" : tenant, spec.runId());
            Map<String, String> env = new LinkedHashMap<>(channels.environment());
            if (!secrets.isEmpty()) {
                channel.useSecrets(secrets);
                env.putAll(secrets.environment());
            }
            List<Path> dirs = new ArrayList<>();
            if (codeTools != null) {
                library = codeTools.files();
                if (tenant != null) library.write(tenant);
                if (codeRun != null) channel.arm(policy, tenant, spec.runId(), codeRun);
                env.putAll(codeTools.environment());
                env.putAll(library.environment());
                dirs.add(library.dir());
            }
            return new Started(sandbox.start(spec.withEgress(channel.socket(), env, channels.readOnlyFiles(), dirs)),
                    channel, library);
        } catch (IOException e) {
            new Started(null, channel, library).closeLink();
            LOG.warn("{}: cannot prepare the sandbox's channel: {}", spec.runId(), e.toString());
            throw new SandboxException("the server could not prepare the run's network access and tools");
        } catch (SandboxException | RuntimeException e) {
            new Started(null, channel, library).closeLink();
            throw e;
        }
    }
}
