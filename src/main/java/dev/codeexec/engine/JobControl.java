package dev.codeexec.engine;

import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.function.Consumer;

/**
 * The background jobs of a server: kept by itself ({@code job.Jobs}) or, behind a gateway, by the workers that run
 * them ({@code gateway.RemoteJobs}). A tenant sees its own jobs only: another tenant's id is not found, as one that
 * never existed.
 */
public interface JobControl<J extends JobHandle> extends AutoCloseable {

    /**
     * Starts a job for the request's tenant: at once when a slot is free, else queued.
     *
     * @param request a request marked {@code background} (RequestValidator made its limits)
     * @throws ExecutionException.InvalidRequest jobs are off, or the request is not a background one
     * @throws ExecutionException.Busy           the queue is full
     * @throws ExecutionException.Unavailable    no job can be taken now (shutting down, no worker)
     */
    J start(ExecutionRequest request);

    /** A job of {@code tenant} (empty: any tenant's, for an admin). */
    Optional<J> find(Optional<String> tenant, String id);

    /** The jobs of {@code tenant} (empty: every tenant's), newest first, as they are now. */
    List<JobState> list(Optional<String> tenant);

    /**
     * Calls {@code listener} after a change of a job's status (started, ended, lost); it must not block. A remote
     * keeper tells of the jobs this server has started or looked at, a little later than they change.
     */
    void onChange(Consumer<JobHandle> listener);

    /** Running jobs, all tenants. */
    int running();

    /** Queued jobs, all tenants. */
    int queued();

    /** Ended jobs since start, by status. */
    Map<String, Long> endedByStatus();

    @Override
    void close();
}
