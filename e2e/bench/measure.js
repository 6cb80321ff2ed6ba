// What the benchmarks share: percentiles, timing, the bare spawn of a program, side-by-side samples, throughput at
// a fixed concurrency, the table's number format and the BENCH_JSON file.
import { spawn } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';

/** The p-th percentile (nearest rank) of the samples. */
export function pct(samples, p) {
    const s = [...samples].sort((a, b) => a - b);
    return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)];
}

/** { n, p50, p95 } of the samples. */
export function summary(samples) {
    return { n: samples.length, p50: pct(samples, 50), p95: pct(samples, 95) };
}

/** Milliseconds `fn` takes (awaited). */
export async function timeIt(fn) {
    const t = process.hrtime.bigint();
    await fn();
    return Number(process.hrtime.bigint() - t) / 1e6;
}

/**
 * Runs `cmd args` with exactly the environment `env` (the bare spawn: no shell) in `cwd`; resolves when it exited 0
 * with `expect` on stdout (null: any), rejects otherwise.
 */
export function bareRun([cmd, args, env], { cwd, expect = 'hello' } = {}) {
    return new Promise((res, rej) => {
        const child = spawn(cmd, args, { env, cwd, stdio: ['ignore', 'pipe', 'pipe'] });
        let out = '';
        let err = '';
        child.stdout.on('data', (b) => { out += b; });
        child.stderr.on('data', (b) => { err += b; });
        child.on('error', rej);
        child.on('close', (code) => (code === 0 && (expect === null || out.trim() === expect) ? res()
            : rej(new Error(`${cmd} exited ${code}: ${err}${out}`.slice(0, 2000)))));
    });
}

/**
 * `n` timed calls of `mcpOnce` and of `bareOnce`, alternating (one of each per round) so that machine drift hits both
 * sides alike; each MCP call after an untimed `prepare`. Returns { mcp: [ms], bare: [ms], results: [what mcpOnce
 * returned] }.
 */
export async function sideBySide(n, mcpOnce, bareOnce, prepare = async () => {}) {
    const out = { mcp: [], bare: [], results: [] };
    for (let i = 0; i < n; i++) {
        await prepare();
        let r;
        out.mcp.push(await timeIt(async () => { r = await mcpOnce(); }));
        out.results.push(r);
        out.bare.push(await timeIt(bareOnce));
    }
    return out;
}

/** p50/p95 of `n` timed calls of `fn`, each after an untimed `prepare`. */
export async function sample(n, fn, prepare = async () => {}) {
    const t = [];
    for (let i = 0; i < n; i++) {
        await prepare();
        t.push(await timeIt(fn));
    }
    return summary(t);
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

/** A duration for the tables: "12.3 ms", right-aligned in 10 characters. */
export const fmt = (ms) => `${ms.toFixed(1)} ms`.padStart(10);

/**
 * Writes `results` into the JSON file at `path`, keeping the keys of an object already there that `results` does not
 * set: scripts/bench.sh removes the file first, then its sections (fresh.js's `fresh`, then bench.js's figures) add to it.
 */
export function writeJson(path, results) {
    let prev = {};
    try {
        if (existsSync(path)) prev = JSON.parse(readFileSync(path, 'utf8'));
    } catch (e) {
        prev = {};
    }
    writeFileSync(path, JSON.stringify({ ...(prev && typeof prev === 'object' ? prev : {}), ...results }, null, 2));
}
