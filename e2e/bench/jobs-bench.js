// Benchmark of background jobs (docs/jobs.md): does an interactive call stay fast while jobs burn CPU? One machine,
// one freshly started server (WARM_POOL at its default), as users meet it. Interleaved, in rounds:
//   idle: python `print("hello")` through execute_code with no job running;
//   busy: the same while two CPU-bound background jobs (python `while True: pass`, each in its own sandbox, at the
//         jobs' lower CPU weight: nice 10, and cgroup v2 cpu.weight where the cpu controller is on) run;
// beside each side the bare spawn of `/usr/bin/python3 -c 'print("hello")'` on the host (no sandbox, no server)
// in the same state of the machine (with the jobs burning, or not), as the reference; and, for comparison, fg: the
// same two CPU burners as interactive runs (execute_code without background: the weight every run had before jobs).
// The goal: the busy p50 at most 1.5x the idle p50. Reports p50/p95 of every side, the ratios, PASS/FAIL.
// Environment (defaults): BENCH_JOBS_ROUNDS (40 calls per side), BENCH_JOBS_WARMUP (5), BENCH_JSON (write the
// figures there too), CODE_EXEC_JAR (the jar under test; default target/code-exec-mcp.jar).
import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { startServer, sleep } from '../lib/server.js';
import { RawSession } from '../lib/rawmcp.js';
import { summary } from './measure.js';

const ROUNDS = Number(process.env.BENCH_JOBS_ROUNDS || 40);
const WARMUP = Number(process.env.BENCH_JOBS_WARMUP ?? 5);
const GOAL = 1.5;
const HELLO = 'print("hello")';
const BURN = 'while True:\n    pass\n';

function bare() {
    const t0 = process.hrtime.bigint();
    execFileSync('/usr/bin/python3', ['-c', HELLO], { env: { PATH: '/usr/bin:/bin', LANG: 'C.UTF-8' } });
    return Number(process.hrtime.bigint() - t0) / 1e6;
}

async function call(s) {
    const t0 = process.hrtime.bigint();
    await s.execute('python', HELLO);
    return Number(process.hrtime.bigint() - t0) / 1e6;
}

async function side(s, label) {
    for (let i = 0; i < WARMUP; i++) await call(s);
    const server = [], host = [];
    for (let i = 0; i < ROUNDS; i++) {
        server.push(await call(s));
        host.push(bare());
    }
    const r = { label, server: summary(server), bare: summary(host) };
    console.log(`${label.padEnd(5)} execute_code p50 ${r.server.p50.toFixed(1)} ms p95 ${r.server.p95.toFixed(1)} ms | `
        + `bare spawn p50 ${r.bare.p50.toFixed(1)} ms p95 ${r.bare.p95.toFixed(1)} ms`);
    return r;
}

const load = loadavg()[0];
const srv = await startServer({ MAX_JOBS: '2', MAX_JOBS_PER_TENANT: '2' });
try {
    const s = await new RawSession(srv.url, srv.apiKey).open();
    const idle = await side(s, 'idle');
    const jobs = [];
    for (let i = 0; i < 2; i++) {
        const r = await s.call('execute_code', { language: 'python', code: BURN, background: true, timeout_ms: 600000 });
        jobs.push(r.structuredContent.job);
    }
    await sleep(1500); // both burning
    const busy = await side(s, 'busy');
    for (const j of jobs) await s.call('job_cancel', { job: j });
    // The same load as two interactive runs (what users had before jobs: same slots, same CPU weight as the call).
    const other = await new RawSession(srv.url, srv.apiKey).open();
    const burning = [0, 1].map(() => other.post({ jsonrpc: '2.0', id: other.nextId++, method: 'tools/call',
        params: { name: 'execute_code', arguments: { language: 'python', code: BURN, timeout_ms: 20000 } } }));
    await sleep(1500);
    const fg = await side(s, 'fg');
    await Promise.all(burning);
    const ratio = busy.server.p50 / idle.server.p50;
    const bareRatio = busy.bare.p50 / idle.bare.p50;
    const fgRatio = fg.server.p50 / idle.server.p50;
    console.log(`busy/idle p50: execute_code ${ratio.toFixed(2)}x (goal <= ${GOAL}x), bare spawn ${bareRatio.toFixed(2)}x; `
        + `the same load as interactive runs: ${fgRatio.toFixed(2)}x; `
        + `load average ${load.toFixed(1)} before, ${loadavg()[0].toFixed(1)} after`);
    console.log(ratio <= GOAL ? 'PASS' : 'FAIL');
    if (process.env.BENCH_JSON) writeFileSync(process.env.BENCH_JSON, JSON.stringify({ idle, busy, fg, ratio, bareRatio, fgRatio }, null, 2));
} finally {
    await srv.stop();
}
