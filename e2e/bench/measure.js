// What the benchmarks share: percentiles and throughput at a fixed concurrency.

/** The p-th percentile (nearest rank) of the samples. */
export function pct(samples, p) {
    const s = [...samples].sort((a, b) => a - b);
    return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)];
}

/** `runOnce` by `concurrency` workers until `seconds` pass or `max` runs started; { runs, seconds }. */
export async function throughput(runOnce, max, seconds, concurrency) {
    let done = 0;
    let started = 0;
    const t0 = Date.now();
    const end = t0 + seconds * 1000;
    const worker = async () => {
        while (Date.now() < end && started < max) {
            started++;
            await runOnce();
            done++;
        }
    };
    await Promise.all(Array.from({ length: concurrency }, worker));
    return { runs: done, seconds: (Date.now() - t0) / 1000 };
}
