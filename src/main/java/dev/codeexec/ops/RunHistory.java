package dev.codeexec.ops;

import dev.codeexec.engine.RunEnd;
import dev.codeexec.engine.ExecutionResult;
import dev.codeexec.engine.Outcome;
import dev.codeexec.engine.RunObserver;
import dev.codeexec.engine.SessionRef;
import dev.codeexec.workspace.Workspace;

import java.time.Instant;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalDouble;
import java.util.OptionalInt;
import java.util.OptionalLong;
import java.util.TreeMap;
import java.util.function.Predicate;

/**
 * The recent runs and per-tenant counters behind the admin console: a {@link RunObserver} that keeps, in memory,
 * the last {@link #CAPACITY} runs (in flight ones included) and counts every run since the server started. Nothing
 * is written to disk: a restart starts an empty history and zero counters.
 *
 * <p><b>Memory bound.</b> Keeping 64 KB of code and 2 × 16 KB of output for all 10,000 runs would allow about
 * 1 GB. So only the newest {@link #DETAILED} runs keep that much ({@link #CODE_BYTES}, {@link #OUTPUT_BYTES} per
 * stream, in UTF-8 bytes); when a run becomes older than that its code is cut to {@link #OLD_CODE_BYTES} and each
 * output stream to {@link #OLD_OUTPUT_BYTES}: 1,000 × 96 KB + 9,000 × 4 KB ≈ 132 MB of text at most. Measured
 * (10,000 runs, every one over every cap, heap after GC): 134 MB for ASCII text; Java stores a string with any
 * character beyond Latin-1 at two bytes per character, so mostly-ASCII text with one such character can take up
 * to about twice that. Ordinary runs (a few lines of code and output) take about 600 bytes each: 6 MB when full.
 *
 * <p>Counters ({@link #stats}) are per tenant since start, not bounded by the history; durations (p50, p95) are
 * over the finished runs the history holds. Thread-safe: observers are called on engine threads, queries on
 * request threads; one lock guards the ring, queries filter a copy of it outside the lock.
 */
public final class RunHistory implements RunObserver {

    public static final int CAPACITY = 10_000;
    /** Runs (the newest) that keep their code and output at the full caps. */
    public static final int DETAILED = 1_000;
    public static final int CODE_BYTES = 64 * 1024;
    public static final int OUTPUT_BYTES = 16 * 1024;
    public static final int OLD_CODE_BYTES = 2 * 1024;
    public static final int OLD_OUTPUT_BYTES = 1024;
    /** The outcome of a run still in flight (queued or executing). */
    public static final String RUNNING = "running";
    /** The outcome of a run that was never attempted: queue full, no slot in time, executor unavailable. */
    public static final String REJECTED = "rejected";
    /** Not an outcome: the filter value for every failed run (see {@link Run#failed}). */
    public static final String FAILED = "failed";
    /** The tenant of a run whose surface named none (stdio serves one user). */
    static final String NO_TENANT = "default";
    static final int EXCERPT_CHARS = 120;

    private final int capacity;
    private final int detailed;
    private final Run[] ring;
    /** Sequence number of the next run; run {@code seq} sits in {@code ring[seq % capacity]} while it is kept. */
    private long next;
    private final Map<String, Long> seqById = new HashMap<>();
    /** Runs submitted and not yet finished, by id, with their tenant: counted as running even once out of the ring. */
    private final Map<String, String> inFlight = new HashMap<>();
    private final Map<String, Counters> counters = new HashMap<>();

    public RunHistory() {
        this(CAPACITY, DETAILED);
    }

    RunHistory(int capacity, int detailed) {
        if (capacity < 1 || detailed < 0) throw new IllegalArgumentException("capacity >= 1, detailed >= 0");
        this.capacity = capacity;
        this.detailed = detailed;
        this.ring = new Run[capacity];
    }

    public int capacity() {
        return capacity;
    }

    /** Runs held now (at most the capacity). */
    public synchronized int size() {
        return (int) Math.min(next, capacity);
    }

    @Override
    public void submitted(RunStart start) {
        var req = start.request();
        Cut code = Cut.of(req.code(), CODE_BYTES);
        String tenant = req.audit().tenant().orElse(NO_TENANT);
        synchronized (this) {
            long seq = next++;
            int slot = slot(seq);
            if (ring[slot] != null) seqById.remove(ring[slot].id());
            Run run = new Run(seq, start.id(), start.submittedAt(), tenant, req.language(),
                    req.workspace().map(Workspace::name), req.session().map(SessionRef::name), req.audit().httpRequestId(),
                    code.text(), code.truncated(), Optional.empty());
            ring[slot] = detailed(seq) ? run : run.shrunk();
            seqById.put(run.id(), seq);
            inFlight.put(run.id(), tenant);
            long demoted = seq - detailed;
            if (demoted >= 0 && demoted > seq - capacity) {
                int d = slot(demoted);
                if (ring[d] != null && ring[d].seq() == demoted) ring[d] = ring[d].shrunk();
            }
        }
    }

    @Override
    public void finished(RunEnd end) {
        End e = End.of(end);
        String id = end.start().id();
        var req = end.start().request();
        String tenant = req.audit().tenant().orElse(NO_TENANT);
        String language = end.result().map(ExecutionResult::language).orElse(req.language());
        synchronized (this) {
            inFlight.remove(id);
            counters.computeIfAbsent(tenant, t -> new Counters()).add(language, e);
            Long seq = seqById.get(id);
            if (seq == null) return; // pushed out of the ring while it ran: counted, not listed
            int slot = slot(seq);
            Run done = ring[slot].withEnd(e);
            ring[slot] = detailed(seq) ? done : done.shrunk();
        }
    }

    private int slot(long seq) {
        return (int) (seq % capacity);
    }

    /** Whether run {@code seq} is among the newest {@link #DETAILED} (caller holds the lock). */
    private boolean detailed(long seq) {
        return seq >= next - detailed;
    }

    /** The run with this id, if the history still holds it. */
    public synchronized Optional<Run> find(String id) {
        Long seq = seqById.get(id);
        return seq == null ? Optional.empty() : Optional.of(ring[slot(seq)]);
    }

    /** The held runs, newest (latest submitted) first. */
    private synchronized Run[] newestFirst() {
        int n = (int) Math.min(next, capacity);
        Run[] out = new Run[n];
        for (int i = 0; i < n; i++) out[i] = ring[slot(next - 1 - i)];
        return out;
    }

    /** Runs matching the filter, newest first, from {@code offset}, at most {@code limit}; with the count of all matches. */
    public Page query(Filter filter, int offset, int limit) {
        List<Run> page = new ArrayList<>();
        int total = 0;
        Predicate<Run> matches = filter.predicate();
        for (Run r : newestFirst()) {
            if (!matches.test(r)) continue;
            if (total >= offset && page.size() < limit) page.add(r);
            total++;
        }
        return new Page(page, total);
    }

    /** Counters since start and durations over the history, for one tenant or (empty) for all. */
    public Stats stats(Optional<String> tenant) {
        Counters sum = new Counters();
        int running = 0;
        synchronized (this) {
            for (var c : counters.entrySet()) {
                if (tenant.isEmpty() || tenant.get().equals(c.getKey())) sum.addAll(c.getValue());
            }
            for (String t : inFlight.values()) {
                if (tenant.isEmpty() || tenant.get().equals(t)) running++;
            }
        }
        Run[] runs = newestFirst();
        long[] durations = new long[runs.length];
        int n = 0;
        int held = 0;
        for (Run r : runs) {
            if (tenant.isPresent() && !tenant.get().equals(r.tenant())) continue;
            held++;
            OptionalLong d = r.end().map(End::durationMs).orElse(OptionalLong.empty());
            if (d.isPresent()) durations[n++] = d.getAsLong();
        }
        Arrays.sort(durations, 0, n);
        Map<String, Long> byOutcome = new LinkedHashMap<>();
        for (Outcome o : Outcome.values()) byOutcome.put(o.wireName(), 0L);
        byOutcome.put(REJECTED, 0L);
        sum.byOutcome.forEach(byOutcome::put);
        return new Stats(sum.total, sum.failed, sum.timedOut, running, new TreeMap<>(sum.byLanguage), byOutcome,
                percentile(durations, n, 50), percentile(durations, n, 95), n, held, capacity);
    }

    /** Nearest-rank percentile of the first {@code n} sorted values. */
    static OptionalLong percentile(long[] sorted, int n, int p) {
        if (n == 0) return OptionalLong.empty();
        int rank = (int) Math.ceil(p / 100.0 * n);
        return OptionalLong.of(sorted[Math.max(0, rank - 1)]);
    }

    /** The first {@link #EXCERPT_CHARS} characters of code on one line: runs of whitespace become one space. */
    public static String excerpt(String code) {
        StringBuilder b = new StringBuilder(EXCERPT_CHARS);
        boolean gap = false;
        for (int i = 0; i < code.length() && b.length() < EXCERPT_CHARS; i++) {
            char c = code.charAt(i);
            if (Character.isWhitespace(c) || Character.isISOControl(c)) {
                gap = b.length() > 0;
                continue;
            }
            if (gap) {
                b.append(' ');
                gap = false;
                if (b.length() == EXCERPT_CHARS) break;
            }
            b.append(c);
        }
        if (!b.isEmpty() && Character.isHighSurrogate(b.charAt(b.length() - 1))) b.setLength(b.length() - 1);
        return b.toString();
    }

    /**
     * One run as the history keeps it.
     *
     * @param seq           its place in submission order since start
     * @param requestId     the X-Request-Id of the HTTP request that started it (as in the log MDC and the audit
     *                      line's {@code httpRequestId=}); empty outside HTTP
     * @param codeTruncated the code was longer than what is kept
     * @param end           how it ended; empty while it is in flight
     */
    public record Run(long seq, String id, Instant submittedAt, String tenant, String language,
            Optional<String> workspace, Optional<String> session, Optional<String> requestId, String code,
            boolean codeTruncated, Optional<End> end) {

        public boolean running() {
            return end.isEmpty();
        }

        /** {@link #RUNNING}, {@link #REJECTED} or the wire name of the run's {@link Outcome}. */
        public String outcome() {
            return end.map(End::outcome).orElse(RUNNING);
        }

        /** Not a clean end: a non-zero exit, an outcome other than exited or timeout, or rejected. */
        public boolean failed() {
            return end.map(End::failed).orElse(false);
        }

        /** The worker that ran it (gateway mode), once it has ended; empty for local and rejected runs. */
        public Optional<String> worker() {
            return end.flatMap(End::worker);
        }

        Run withEnd(End e) {
            return new Run(seq, id, submittedAt, tenant, language, workspace, session, requestId, code, codeTruncated,
                    Optional.of(e));
        }

        /** The same run with code and output cut to the caps of older runs. */
        Run shrunk() {
            Cut c = Cut.of(code, OLD_CODE_BYTES);
            return new Run(seq, id, submittedAt, tenant, language, workspace, session, requestId, c.text(),
                    codeTruncated || c.truncated(), end.map(e -> e.cut(OLD_OUTPUT_BYTES)));
        }
    }

    /**
     * How a run ended.
     *
     * @param outcome         {@link #REJECTED} or an {@link Outcome}'s wire name
     * @param exitCode        empty for a rejected run
     * @param durationMs      the run's own wall time; empty for a rejected run
     * @param outputTruncated the engine cut the output at its cap, or the history cut what it keeps
     * @param error           why a rejected run was not attempted (the engine's client-safe message)
     * @param worker          the name of the worker that ran it, from its result (gateway mode)
     */
    public record End(Instant endedAt, String outcome, OptionalInt exitCode, OptionalLong durationMs, String stdout,
            String stderr, boolean outputTruncated, boolean timedOut, OptionalDouble cpuTimeMs,
            OptionalLong peakMemoryBytes, Optional<String> error, Optional<String> worker) {

        static End of(RunEnd e) {
            if (e.result().isEmpty()) {
                String why = e.error().map(Throwable::getMessage).orElse("the run was not attempted");
                return new End(e.endedAt(), REJECTED, OptionalInt.empty(), OptionalLong.empty(), "", "", false, false,
                        OptionalDouble.empty(), OptionalLong.empty(), Optional.of(why), Optional.empty());
            }
            ExecutionResult r = e.result().get();
            return new End(e.endedAt(), r.outcome().wireName(), OptionalInt.of(r.exitCode()),
                    OptionalLong.of(r.durationMs()), r.stdout(), r.stderr(), r.truncated(), r.timedOut(), r.cpuTimeMs(),
                    r.peakMemoryBytes(), Optional.empty(), r.worker()).cut(OUTPUT_BYTES);
        }

        boolean failed() {
            if (outcome.equals(REJECTED)) return true;
            if (outcome.equals(Outcome.TIMEOUT.wireName())) return false;
            if (outcome.equals(Outcome.EXITED.wireName())) return exitCode.orElse(0) != 0;
            return true;
        }

        End cut(int maxBytes) {
            Cut out = Cut.of(stdout, maxBytes);
            Cut err = Cut.of(stderr, maxBytes);
            if (!out.truncated() && !err.truncated()) return this;
            return new End(endedAt, outcome, exitCode, durationMs, out.text(), err.text(), true, timedOut, cpuTimeMs,
                    peakMemoryBytes, error, worker);
        }
    }

    /**
     * What to list; an empty field matches everything.
     *
     * @param outcome an outcome's wire name, {@link #RUNNING}, {@link #REJECTED} or {@link #FAILED}
     * @param q       a piece of the code (at most {@link #MAX_QUERY} characters), matched without regard to case
     * @param worker  the name of the worker that ran it (exact)
     */
    public record Filter(Optional<String> tenant, Optional<String> language, Optional<String> outcome,
            Optional<String> q, Optional<String> worker) {

        public static final int MAX_QUERY = 200;
        public static final Filter ALL = new Filter(Optional.empty(), Optional.empty(), Optional.empty(), Optional.empty());

        /** A filter on any worker. */
        public Filter(Optional<String> tenant, Optional<String> language, Optional<String> outcome, Optional<String> q) {
            this(tenant, language, outcome, q, Optional.empty());
        }

        public Filter {
            if (q.isPresent() && q.get().length() > MAX_QUERY)
                throw new IllegalArgumentException("q: at most " + MAX_QUERY + " characters");
        }

        /** The test for one query: the code search is prepared once, then linear in each run's code. */
        Predicate<Run> predicate() {
            Predicate<String> code = q.isEmpty() ? c -> true : new FoldedSearch(q.get());
            return r -> {
                if (tenant.isPresent() && !tenant.get().equals(r.tenant())) return false;
                if (language.isPresent() && !language.get().equals(r.language())) return false;
                if (worker.isPresent() && !worker.equals(r.worker())) return false;
                if (outcome.isPresent()) {
                    String o = outcome.get();
                    if (o.equals(FAILED) ? !r.failed() : !o.equals(r.outcome())) return false;
                }
                return code.test(r.code());
            };
        }
    }

    /**
     * Case-insensitive substring search in time linear in the text (Knuth–Morris–Pratt on case-folded chars): the
     * history may hold 1,000 codes of 64 KB, and a naive search with a pattern such as "aaa…ab" over codes of
     * "aaa…" is quadratic — seconds of CPU for one request of any tenant.
     */
    static final class FoldedSearch implements Predicate<String> {
        private final char[] pattern;
        private final int[] fallback;

        FoldedSearch(String part) {
            pattern = new char[part.length()];
            for (int i = 0; i < pattern.length; i++) pattern[i] = fold(part.charAt(i));
            fallback = new int[pattern.length];
            for (int i = 1, k = 0; i < pattern.length; i++) {
                while (k > 0 && pattern[i] != pattern[k]) k = fallback[k - 1];
                if (pattern[i] == pattern[k]) k++;
                fallback[i] = k;
            }
        }

        @Override
        public boolean test(String text) {
            if (pattern.length == 0) return true;
            for (int i = 0, k = 0; i < text.length(); i++) {
                char c = fold(text.charAt(i));
                while (k > 0 && c != pattern[k]) k = fallback[k - 1];
                if (c == pattern[k] && ++k == pattern.length) return true;
            }
            return false;
        }

        /** The fold String.regionMatches(true, ...) uses: upper case, then lower case. */
        private static char fold(char c) {
            return Character.toLowerCase(Character.toUpperCase(c));
        }
    }

    /** One page of a query, and how many runs matched in all. */
    public record Page(List<Run> runs, int total) {
    }

    /**
     * @param total     runs ended since start (rejected ones included; in-flight ones are only in {@code running})
     * @param running   runs submitted and not ended (queued or executing)
     * @param window    finished runs the durations are taken over
     * @param size      runs the history holds (of the tenant asked about, or of all)
     */
    public record Stats(long total, long failed, long timedOut, int running, Map<String, Long> byLanguage,
            Map<String, Long> byOutcome, OptionalLong p50, OptionalLong p95, int window, int size, int capacity) {
    }

    /** Counts of one tenant's ended runs (guarded by the history's lock). */
    private static final class Counters {
        long total;
        long failed;
        long timedOut;
        final Map<String, Long> byLanguage = new HashMap<>();
        final Map<String, Long> byOutcome = new HashMap<>();

        void add(String language, End e) {
            total++;
            if (e.failed()) failed++;
            if (e.timedOut()) timedOut++;
            byLanguage.merge(language, 1L, Long::sum);
            byOutcome.merge(e.outcome(), 1L, Long::sum);
        }

        void addAll(Counters o) {
            total += o.total;
            failed += o.failed;
            timedOut += o.timedOut;
            o.byLanguage.forEach((k, v) -> byLanguage.merge(k, v, Long::sum));
            o.byOutcome.forEach((k, v) -> byOutcome.merge(k, v, Long::sum));
        }
    }

    /** A string cut to at most a number of UTF-8 bytes, never inside a character. */
    record Cut(String text, boolean truncated) {

        static Cut of(String s, int maxBytes) {
            if (s.length() <= maxBytes / 3) return new Cut(s, false);
            int bytes = 0;
            for (int i = 0; i < s.length(); ) {
                int cp = s.codePointAt(i);
                int n = cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
                if (bytes + n > maxBytes) return new Cut(s.substring(0, i), true);
                bytes += n;
                i += Character.charCount(cp);
            }
            return new Cut(s, false);
        }
    }
}
