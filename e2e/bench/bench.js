// Benchmark: execute_code end to end over Streamable HTTP versus the bare spawn of the same interpreter, in one
// run on one machine. The client is raw JSON-RPC over fetch with one session, so that client overhead stays small
// next to what is measured. Prints per-case p50/p95 and ratios, and throughput at concurrency 4.
//
// Environment: BENCH_ITERATIONS (30), BENCH_WARMUP (3), BENCH_THROUGHPUT_SECONDS (15), BENCH_THROUGHPUT_MAX (200),
// BENCH_CASES (comma list, default all), BENCH_JSON (write the figures there too).
import { spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir, loadavg, cpus } from 'node:os';
import { join } from 'node:path';
import { startServer } from '../lib/server.js';

const N = Number(process.env.BENCH_ITERATIONS || 30);
const WARMUP = Number(process.env.BENCH_WARMUP || 3);
const TP_SECONDS = Number(process.env.BENCH_THROUGHPUT_SECONDS || 15);
const TP_MAX = Number(process.env.BENCH_THROUGHPUT_MAX || 200);
const CONCURRENCY = 4;
const GO = process.env.GO_BIN || '/usr/lib/go-1.23/bin/go';
const NODE = process.env.NODE_BIN || '/usr/bin/node';

const scratch = mkdtempSync(join(tmpdir(), 'code-exec-bench-'));
const goSource = join(scratch, 'hello.go');
const GO_HELLO = 'package main\n\nimport "fmt"\n\nfunc main() { fmt.Println("hello") }\n';
writeFileSync(goSource, GO_HELLO);
// The bare spawn gets a clean, small environment, as the sandbox does (a big inherited one slows node start).
const bareEnv = { PATH: '/usr/local/bin:/usr/bin:/bin', LANG: 'C.UTF-8', HOME: scratch };
const goEnv = { ...bareEnv, GOCACHE: join(scratch, 'gocache'), GOPATH: join(scratch, 'gopath'), GO111MODULE: 'off', GOTOOLCHAIN: 'local' };

const CASES = [
    { name: 'python hello', language: 'python', code: 'print("hello")', bare: ['/usr/bin/python3', ['-c', 'print("hello")'], bareEnv] },
    { name: 'node hello', language: 'nodejs', code: 'console.log("hello")', bare: [NODE, ['-e', 'console.log("hello")'], bareEnv] },
    { name: 'shell echo', language: 'shell', code: 'echo hello', bare: ['/bin/sh', ['-c', 'echo hello'], bareEnv] },
    { name: 'go hello', language: 'go', code: GO_HELLO, bare: [GO, ['run', goSource], goEnv], iterations: Math.min(N, 15) },
].filter((c) => !process.env.BENCH_CASES || process.env.BENCH_CASES.split(',').some((x) => c.name.startsWith(x.trim())));

/** One JSON-RPC session over raw fetch; handles both JSON and SSE responses. */
class RawSession {
    constructor(url, apiKey) {
        this.url = url;
        this.headers = { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream', Authorization: `Bearer ${apiKey}` };
        this.nextId = 1;
    }

    async open() {
        const init = await this.post({ jsonrpc: '2.0', id: this.nextId++, method: 'initialize',
            params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'bench', version: '1' } } }, true);
        this.headers['Mcp-Protocol-Version'] = init.result.protocolVersion;
        await this.post({ jsonrpc: '2.0', method: 'notifications/initialized' });
    }

    async post(message, captureSession = false) {
        const r = await fetch(this.url, { method: 'POST', headers: this.headers, body: JSON.stringify(message) });
        if (captureSession) this.headers['Mcp-Session-Id'] = r.headers.get('mcp-session-id');
        if (message.id === undefined) {
            await r.arrayBuffer();
            if (r.status >= 300) throw new Error(`notification got HTTP ${r.status}`);
            return null;
        }
        const text = await r.text();
        if (r.status !== 200) throw new Error(`HTTP ${r.status}: ${text.slice(0, 300)}`);
        const type = r.headers.get('content-type') || '';
        if (type.includes('text/event-stream')) {
            for (const line of text.split('\n')) {
                if (!line.startsWith('data:')) continue;
                const msg = JSON.parse(line.slice(5));
                if (msg.id === message.id) return msg;
            }
            throw new Error(`no response for id ${message.id} in SSE body`);
        }
        return JSON.parse(text);
    }

    async execute(language, code) {
        const res = await this.post({ jsonrpc: '2.0', id: this.nextId++, method: 'tools/call',
            params: { name: 'execute_code', arguments: { language, code } } });
        const sc = res.result?.structuredContent;
        if (res.error || res.result?.isError || !sc || sc.exitCode !== 0 || sc.stdout.trim() !== 'hello')
            throw new Error(`unexpected result: ${JSON.stringify(res).slice(0, 500)}`);
        return sc;
    }
}

function bareRun([cmd, args, env]) {
    return new Promise((res, rej) => {
        const child = spawn(cmd, args, { env, cwd: scratch, stdio: ['ignore', 'pipe', 'pipe'] });
        let out = '';
        let err = '';
        child.stdout.on('data', (b) => { out += b; });
        child.stderr.on('data', (b) => { err += b; });
        child.on('error', rej);
        child.on('close', (code) => (code === 0 && out.trim() === 'hello' ? res() : rej(new Error(`${cmd} exited ${code}: ${err}`))));
    });
}

async function timeIt(fn) {
    const t = process.hrtime.bigint();
    await fn();
    return Number(process.hrtime.bigint() - t) / 1e6;
}

function pct(samples, p) {
    const s = [...samples].sort((a, b) => a - b);
    return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)];
}

/** Interleaves MCP and bare samples so that machine noise hits both sides alike. */
async function latency(session, c) {
    const n = c.iterations ?? N;
    for (let i = 0; i < WARMUP; i++) {
        await session.execute(c.language, c.code);
        await bareRun(c.bare);
    }
    const mcp = [];
    const bare = [];
    const run = []; // the server's own durationMs: sandbox + program, without HTTP, JSON-RPC and queueing
    for (let i = 0; i < n; i++) {
        let sc;
        mcp.push(await timeIt(async () => { sc = await session.execute(c.language, c.code); }));
        run.push(sc.durationMs);
        bare.push(await timeIt(() => bareRun(c.bare)));
    }
    return { n, mcp: { p50: pct(mcp, 50), p95: pct(mcp, 95) }, bare: { p50: pct(bare, 50), p95: pct(bare, 95) },
        serverDurationMs: { p50: pct(run, 50) } };
}

async function throughput(runOnce) {
    let done = 0;
    let started = 0;
    const t0 = Date.now();
    const end = t0 + TP_SECONDS * 1000;
    const worker = async () => {
        while (Date.now() < end && started < TP_MAX) {
            started++;
            await runOnce();
            done++;
        }
    };
    await Promise.all(Array.from({ length: CONCURRENCY }, worker));
    return done / ((Date.now() - t0) / 1000);
}

const fmt = (ms) => `${ms.toFixed(1)} ms`.padStart(10);

async function main() {
    const server = await startServer({ LOG_LEVEL: 'warn' });
    const results = { cases: {}, throughput: {}, loadBefore: loadavg()[0] };
    try {
        // A fresh DATA_DIR means the server warms its shared Go build cache in the background first: measuring
        // while that compiles would charge its CPU to whatever runs next.
        process.stderr.write('bench: waiting for the server\'s start-up work (Go cache warm-up) to finish ...\n');
        if (!(await server.waitQuiet())) process.stderr.write('bench: WARNING: server still has child processes; figures may be noisy\n');
        const session = new RawSession(server.url, server.apiKey);
        await session.open();
        for (const c of CASES) {
            process.stderr.write(`bench: ${c.name} ...\n`);
            results.cases[c.name] = await latency(session, c);
        }
        const py = CASES.find((c) => c.language === 'python') ?? { language: 'python', code: 'print("hello")', bare: ['/usr/bin/python3', ['-c', 'print("hello")'], bareEnv] };
        process.stderr.write(`bench: throughput at concurrency ${CONCURRENCY} ...\n`);
        const mcpRate = await throughput(() => session.execute(py.language, py.code));
        const bareRate = await throughput(() => bareRun(py.bare));
        results.throughput = { concurrency: CONCURRENCY, mcpRunsPerSecond: mcpRate, bareRunsPerSecond: bareRate, ratio: mcpRate / bareRate };
    } finally {
        await server.stop();
        rmSync(scratch, { recursive: true, force: true });
    }

    const lines = [];
    // Other work on the machine skews both sides, unevenly: the load average says how quiet the run was.
    results.loadAfter = loadavg()[0];
    lines.push(`code-exec-mcp benchmark: execute_code over HTTP (MCP) vs bare spawn, same run (${new Date().toISOString()}; `
        + `${cpus().length} cpus, load avg ${results.loadBefore.toFixed(1)} before, ${results.loadAfter.toFixed(1)} after)`);
    lines.push(`${'case'.padEnd(14)}${'n'.padStart(4)}${'MCP p50'.padStart(10)}${'MCP p95'.padStart(10)}${'bare p50'.padStart(10)}${'bare p95'.padStart(10)}${'p50 ratio'.padStart(11)}${'p95 ratio'.padStart(11)}${'run p50'.padStart(10)}`);
    for (const [name, r] of Object.entries(results.cases)) {
        r.ratioP50 = r.mcp.p50 / r.bare.p50;
        r.ratioP95 = r.mcp.p95 / r.bare.p95;
        lines.push(`${name.padEnd(14)}${String(r.n).padStart(4)}${fmt(r.mcp.p50)}${fmt(r.mcp.p95)}${fmt(r.bare.p50)}${fmt(r.bare.p95)}${`${r.ratioP50.toFixed(2)}x`.padStart(11)}${`${r.ratioP95.toFixed(2)}x`.padStart(11)}${fmt(r.serverDurationMs.p50)}`);
    }
    const t = results.throughput;
    lines.push(`throughput python hello, concurrency ${t.concurrency}: MCP ${t.mcpRunsPerSecond.toFixed(1)} runs/s, bare ${t.bareRunsPerSecond.toFixed(1)} runs/s, ratio ${t.ratio.toFixed(2)}x`);
    lines.push('run p50 = the durationMs the server reports (sandbox + program); MCP p50 minus it is HTTP, JSON-RPC and set-up');
    const py = results.cases['python hello'];
    if (py) lines.push(`bar (issue #2): python p50 ratio ${py.ratioP50.toFixed(2)}x <= 3.0: ${py.ratioP50 <= 3 ? 'PASS' : 'FAIL'}; throughput ratio ${t.ratio.toFixed(2)}x >= 0.4: ${t.ratio >= 0.4 ? 'PASS' : 'FAIL'}`);
    console.log(lines.join('\n'));
    if (process.env.BENCH_JSON) writeFileSync(process.env.BENCH_JSON, JSON.stringify(results, null, 2));
}

main().catch((e) => {
    console.error(`bench failed: ${e.stack || e}`);
    process.exit(1);
});
