package dev.codeexec.run;

import dev.codeexec.codemode.CodeTools;
import dev.codeexec.codemode.CodeToolsRun;
import dev.codeexec.egress.EgressChannel;
import dev.codeexec.egress.NetworkReport;
import dev.codeexec.engine.ExecutionResult;
import dev.codeexec.engine.OutputListener;
import dev.codeexec.engine.RunEnd;
import dev.codeexec.packages.PackageStore;
import dev.codeexec.sandbox.SandboxProcess;
import dev.codeexec.workspace.Workspace;
import dev.codeexec.workspace.Workspaces;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.io.IOException;
import java.io.OutputStream;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.Deque;
import java.util.Optional;
import java.util.concurrent.ThreadFactory;

/**
 * Everything one run holds, whatever kind of run it is (a run of its own sandbox, a call in a session's
 * interpreter, a package install), and the one order in which it ends. A run takes what it needs step by step;
 * each step hands the resource to the scope, which from then on owns it:
 * <ol>
 * <li>its workspace, held and scanned ({@link #holdWorkspace}), and watched while the program writes
 *     ({@link #watchWorkspace});</li>
 * <li>its declared packages' store entry ({@link #holdPackages}), after a wait {@link #cancel} can end
 *     ({@link #await});</li>
 * <li>its channel: the egress proxy, the generated tool library and the code-tools endpoint ({@link #channel});</li>
 * <li>its program ({@link #program}): a sandbox of its own, or a session's interpreter it only borrows, and the
 *     readers of its output ({@link #readOutput});</li>
 * <li>its output dispatch to the caller's listener ({@link #progress}).</li>
 * </ol>
 * The end is the same for every kind: {@link #stopProgram} (kill, then the network, then the wait for the tree) when
 * the program has not ended by itself; {@link #joinOutput}; the run's own decision of how it ended ({@link RunEnd},
 * with {@link #stopReason}); then {@link #complete} attaches what the run did (network, tool calls, packages, files)
 * to the result; and {@link #close} releases everything, on every path, in the reverse of the order above: output
 * dispatch, program, channel, watches and cleanups, workspace, packages. Every step may be skipped; {@link #close}
 * releases only what was taken and may be called more than once.
 */
public final class RunScope implements AutoCloseable {

    private static final Logger LOG = LoggerFactory.getLogger(RunScope.class);
    /** How long readers may take to reach end of stream after the program ended before the rest is killed. */
    private static final Duration DRAIN_GRACE = Duration.ofSeconds(2);
    /** How long a killed program's tree may take to go before the run ends without it. */
    private static final Duration KILL_WAIT = Duration.ofSeconds(10);

    private final String id;
    private final Waiter waiter = new Waiter();
    private volatile boolean cancelled;
    private volatile boolean workspaceLimit;

    private volatile SandboxProcess process;
    private boolean ownsProcess;
    private Thread[] readers = new Thread[0];

    private EgressChannel channel;
    private boolean ownsChannel;
    private CodeTools.LibraryFiles library;
    private CodeToolsRun codeRun;
    private NetworkReport network;

    private Workspaces.Hold hold;
    private WorkspaceDiff diff;
    /** Watches and cleanups that end before the files are read, last registered first. */
    private final Deque<AutoCloseable> beforeFiles = new ArrayDeque<>();
    private PackageStore.Lease packages;
    private ListenerDispatcher progress;

    public RunScope(String id) {
        this.id = id;
    }

    public String id() {
        return id;
    }

    // ---- cancel and the reasons to stop --------------------------------------------------------------------------

    /**
     * Cancels the run from any thread: a wait ({@link #await}) is woken, a program of its own is killed; a borrowed
     * one (a session's interpreter) is left to its caller, which sees {@link #cancelled()}.
     */
    public void cancel() {
        cancelled = true;
        waiter.interrupt();
        killOwned();
    }

    public boolean cancelled() {
        return cancelled;
    }

    /**
     * Why the run is stopped before its program ended by itself, in the order every kind of run decides it:
     * cancelled, the workspace's limits, an output flood, the timeout; null: nothing stops it (yet).
     */
    public RunEnd.Stop stopReason(boolean outputFlood, boolean timedOut) {
        return cancelled ? RunEnd.Stop.CANCELLED : workspaceLimit ? RunEnd.Stop.WORKSPACE_LIMIT
                : outputFlood ? RunEnd.Stop.OUTPUT_FLOOD : timedOut ? RunEnd.Stop.TIMEOUT : null;
    }

    /** Something the run waits for before its program starts (a slot's Go cache, an install of its packages). */
    @FunctionalInterface
    public interface Wait<T, E extends Exception> {
        T get() throws E, InterruptedException;
    }

    /**
     * Waits on the run's behalf so that {@link #cancel} can wake it; no interrupt outlives the wait. A cancel that
     * comes as the wait ends finds it over: the caller looks at {@link #cancelled()} afterwards and gives back what
     * the wait gave.
     *
     * @throws InterruptedException cancelled before or during the wait
     */
    public <T, E extends Exception> T await(Wait<T, E> wait) throws E, InterruptedException {
        waiter.begin();
        try {
            if (cancelled) throw new InterruptedException("cancelled");
            return wait.get();
        } finally {
            waiter.end();
        }
    }

    // ---- what the run takes --------------------------------------------------------------------------------------

    /** Holds the workspace for the run and scans it (see {@link WorkspaceDiff#before}); released by {@link #close}. */
    public WorkspaceDiff holdWorkspace(Workspace ws) {
        Workspaces.Hold h = ws.hold();
        hold = h;
        diff = WorkspaceDiff.before(ws);
        return diff;
    }

    /**
     * Bounds the program's writes to its workspace while it runs ({@link WorkspaceDiff#watch}): past them the run is
     * marked ({@link #workspaceLimit}) and a program of its own is killed; {@code also} runs too (a session call
     * interrupts its interpreter instead).
     */
    public void watchWorkspace(Runnable also) {
        if (diff == null) return;
        beforeFiles.push(diff.watch(() -> {
            workspaceLimit = true;
            killOwned();
            also.run();
        }));
    }

    /** Something that ends before the run's files are read: a watch of its own, a file it put in the workspace. */
    public void beforeFiles(AutoCloseable c) {
        beforeFiles.push(c);
    }

    /** The store entry of the run's packages; the result names them, and it is given back by {@link #close}. */
    public void holdPackages(PackageStore.Lease lease) {
        packages = lease;
    }

    public Optional<PackageStore.Lease> packages() {
        return Optional.ofNullable(packages);
    }

    /**
     * The run's channel (null: none), its tool library (null: none) and its code-tools endpoint (null: none). A
     * channel the run does not own (a session's, kept for its next call) is finished with the run but not closed.
     */
    public void channel(EgressChannel channel, CodeTools.LibraryFiles library, CodeToolsRun codeRun, boolean owned) {
        this.channel = channel;
        this.library = library;
        this.codeRun = codeRun;
        this.ownsChannel = owned;
    }

    /** Drops a channel the run gave up before its program started (a warm sandbox's hand-out that failed). */
    public void closeChannel() {
        EgressChannel c = channel;
        CodeTools.LibraryFiles l = library;
        boolean owned = ownsChannel;
        channel = null;
        library = null;
        codeRun = null;
        if (owned && c != null) c.close();
        if (owned && l != null) l.close();
    }

    /**
     * The run's program. One of its own ({@code owned}) is killed by {@link #cancel} and closed (its whole tree) by
     * {@link #close}; a borrowed one only by {@link #stopProgram}. A run cancelled or past its workspace's limits
     * before this point has its program killed at once.
     */
    public SandboxProcess program(SandboxProcess p, boolean owned) {
        process = p;
        ownsProcess = owned;
        if (owned && (cancelled || workspaceLimit)) p.kill();
        return p;
    }

    /**
     * Starts the readers of a program of its own: stdout and stderr drained to their end by {@code out} and
     * {@code err}, and {@code stdin} written (then closed) on a thread of its own.
     */
    public void readOutput(OutputCollector out, OutputCollector err, byte[] stdin, ThreadFactory threads) {
        SandboxProcess p = process;
        Thread o = threads.newThread(out);
        Thread e = threads.newThread(err);
        readers = new Thread[] {o, e};
        o.start();
        e.start();
        OutputStream in = p.stdin();
        threads.newThread(() -> {
            try (in) {
                in.write(stdin);
            } catch (IOException ex) {
                // the program exited or closed its stdin without reading it all: not an error
            }
        }).start();
    }

    /** Dispatches the run's output and progress to the caller's listener; ended by {@link #complete}/{@link #close}. */
    public ListenerDispatcher progress(OutputListener listener, ThreadFactory threads, Duration interval) {
        progress = new ListenerDispatcher(listener, threads, interval);
        return progress;
    }

    // ---- the end -------------------------------------------------------------------------------------------------

    /**
     * Stops a program that has not ended by itself: killed (its whole tree), then the run's network ended (its
     * connections close with it, not after the wait), then a wait for the tree to go.
     */
    public void stopProgram() throws InterruptedException {
        SandboxProcess p = process;
        if (p == null) return;
        p.kill();
        endNetwork();
        p.waitFor(KILL_WAIT);
    }

    /**
     * Waits for the readers to reach the end of their streams; they do once the program ended unless something it
     * left behind still holds the pipes, which a kill of the whole tree ends.
     */
    public void joinOutput() throws InterruptedException {
        for (Thread t : readers) {
            if (!t.join(DRAIN_GRACE)) {
                SandboxProcess p = process;
                if (p != null) p.kill();
                t.join(DRAIN_GRACE);
            }
        }
    }

    /**
     * Ends the run's network: the channel's open connections closed and the code-tools calls in flight cancelled
     * upstream; its report is kept for the result. A channel the run owns refuses everything from here on; a
     * session's serves its next call.
     */
    public Optional<NetworkReport> endNetwork() {
        EgressChannel c = channel;
        if (c != null && network == null) network = c.finish();
        return Optional.ofNullable(network);
    }

    /**
     * What the run did, attached to the result its end decided: its network, its tool calls, its packages, and its
     * files (after its watches and cleanups ended: the workspace as the program left it).
     */
    public ExecutionResult complete(ExecutionResult r) {
        endNetwork();
        endBeforeFiles();
        ExecutionResult out = r;
        if (network != null) out = out.withNetwork(network);
        if (codeRun != null) out = out.withToolCalls(codeRun.report());
        if (packages != null)
            out = out.withPackages(new ExecutionResult.PackagesUsed(packages.resolved(), packages.installMs()));
        if (diff != null) {
            WorkspaceDiff.Changes changes = diff.after();
            out = out.withFiles(changes.files(), changes.truncated());
        }
        return out;
    }

    /** Gives the last output to the listener, waiting at most {@code grace} for a slow one. */
    public void finishProgress(Duration grace) throws InterruptedException {
        ListenerDispatcher d = progress;
        if (d != null) d.finish(grace);
    }

    /** Releases what the run holds, in one order; on every path, once or more. */
    @Override
    public void close() {
        ListenerDispatcher d = progress;
        progress = null;
        if (d != null) d.abandon();
        SandboxProcess p = process;
        process = null;
        if (p != null && ownsProcess) p.close();
        closeChannel();
        endBeforeFiles();
        Workspaces.Hold h = hold;
        hold = null;
        if (h != null) h.close();
        PackageStore.Lease l = packages;
        packages = null;
        if (l != null) l.close();
    }

    private void endBeforeFiles() {
        AutoCloseable c;
        while ((c = beforeFiles.poll()) != null) closeQuietly(c);
    }

    private void killOwned() {
        SandboxProcess p = process;
        if (p != null && ownsProcess) p.kill();
    }

    private void closeQuietly(AutoCloseable c) {
        try {
            c.close();
        } catch (Exception e) {
            LOG.warn("{}: {}", id, e.toString());
        }
    }
}
