// Benchmark of code mode (docs/code-mode.md): what one tool call from sandboxed code costs next to the same call
// made directly by an MCP client on the same machine. The issue's goal: at most 2 ms more per call (p50, side by
// side in one run). One machine, one run, samples interleaved so that machine drift hits every side alike:
//   - the upstream: e2e/fixtures/upstream-mcp.mjs over Streamable HTTP on 127.0.0.1 (bearer token), started here;
//   - direct: the official TypeScript SDK (Client + StreamableHTTPClientTransport) connected once to the fixture,
//     timing each `add` call (and each `big` call) with process.hrtime.bigint();
//   - from code: one execute_code run per round on a server with UPSTREAM_MCP_FILE (WARM_POOL at its default), in
//     Python (`mcp_tools.fx.add(...)` in a loop, each call timed inside the sandbox with time.perf_counter_ns) and
//     in Node (`await fx.add(...)` in a loop, process.hrtime.bigint); the run prints its per-call times as JSON.
//   Each round runs every side once, in rotated order, each after every warm pool is full again (untimed).
//   Per-call p50 from code minus the direct p50 is the overhead; PASS when it is <= 2 ms. Beside it, the overhead
//   paired by round (the median over rounds of each round's p50 difference), which drift between rounds cannot move.
// Also: the first call of a fresh run (with the import of the library; beside it a fresh SDK client's connect and
// first call), a larger result (`big`, 64 KiB of text) both ways, and where a call's time goes, measured in the
// same runs, each request on a new connection as the libraries make them: in Python the same POST made with
// http.client on a new connection instead of the library (which keeps one connection alive); in both, a POST for a tool the upstream does not have (the server
// answers without an upstream call: the sandbox's HTTP request, the relay through the run's channel and the
// server's handling) and a GET of an unknown path of the endpoint (the channel and the server's HTTP parsing
// only); on the host (a fourth side of each round, no sandbox), the same language's GET of the fixture's /stats
// (what a plain loopback request costs that language) and, for comparison, Python's import of urllib.request (which
// the library does not use); and the server's own
// record of each call (toolCalls `ms`, whole milliseconds, truncated).
// Before the timed rounds, an untimed warm-up: BENCH_CM_WARMUP_CALLS calls from code (Python and Node runs) and as
// many direct calls, so that both the JVM's and the client's JIT have seen the path.
// Only loopback traffic: the fixture listens on 127.0.0.1.
//
// Environment (defaults): BENCH_CM_ROUNDS (20), BENCH_CM_CALLS (50 `add` calls per side per round),
// BENCH_CM_BIG_CALLS (10 `big` calls per side per round), BENCH_CM_BIG_KB (64), BENCH_CM_PARTS_CALLS (15 of each
// breakdown request per run), BENCH_CM_WARMUP_CALLS (5000), BENCH_JSON (write the figures there too),
// CODE_EXEC_JAR (the jar under test; default target/code-exec-mcp.jar), BENCH_DATA_DIR (the server's DATA_DIR,
// kept afterwards so that a later run skips the Go cache warm-up; default a fresh one, removed).
// The server gets CODE_TOOLS_MAX_CALLS=100000 (a counter; the default 100 per run would cut the warm-up runs short).
import { spawn } from 'node:child_process';
import { setMaxListeners } from 'node:events';
import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir, loadavg, cpus } from 'node:os';
import { join, resolve } from 'node:path';
import { startServer, sleep, JAR, randomSecret } from '../lib/server.js';
import { RawSession } from '../lib/rawmcp.js';
import { pct } from './measure.js';
import { startUpstreamFixture } from '../lib/upstream.js';

const ROUNDS = Number(process.env.BENCH_CM_ROUNDS || 20);
const CALLS = Number(process.env.BENCH_CM_CALLS || 50);
const BIG_CALLS = Number(process.env.BENCH_CM_BIG_CALLS ?? 10);
const BIG_KB = Number(process.env.BENCH_CM_BIG_KB || 64);
const PARTS = Number(process.env.BENCH_CM_PARTS_CALLS ?? 15);
const WARMUP_CALLS = Number(process.env.BENCH_CM_WARMUP_CALLS ?? 5000);
const GOAL_MS = 2;
const NODE = process.execPath;
const TOKEN = randomSecret('fxtok-');

const scratch = mkdtempSync(join(tmpdir(), 'code-exec-code-mode-bench-'));

// ---------------------------------------------------------------- helpers

const summary = (xs) => ({ n: xs.length, p50: pct(xs, 50), p95: pct(xs, 95), min: Math.min(...xs) });
const f2 = (x) => (x === undefined || Number.isNaN(x) ? '-' : x.toFixed(2));
const ms = (x) => `${f2(x)} ms`;
const col = (s, w) => String(s).padStart(w);
const nsToMs = (xs) => xs.map((x) => Number(x) / 1e6);

/** Waits until every language of the server's pool is at its target (a refill's CPU would hit the next sample). */
async function waitPoolsFull(server, timeoutMs = 60_000) {
    const end = Date.now() + timeoutMs;
    for (;;) {
        const pool = (await server.healthz()).body.warmPool ?? {};
        if (Object.values(pool).every((l) => l.ready >= l.target)) return;
        if (Date.now() > end) throw new Error(`warm pool not full in ${timeoutMs} ms: ${JSON.stringify(pool)}`);
        await sleep(5);
    }
}

/** The HTTP fixture: { proc, port } (lib/upstream.js). */
const startFixture = () => startUpstreamFixture(TOKEN, NODE);

/** An SDK client connected to the fixture (the "direct" side). */
async function directClient(port) {
    const { Client } = await import('@modelcontextprotocol/sdk/client/index.js');
    const { StreamableHTTPClientTransport } = await import('@modelcontextprotocol/sdk/client/streamableHttp.js');
    const client = new Client({ name: 'code-mode-bench', version: '1' }, { capabilities: {} });
    const transport = new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${port}/mcp`), {
        requestInit: { headers: { Authorization: `Bearer ${TOKEN}` } },
    });
    await client.connect(transport);
    // Every request's fetch adds an abort listener to the transport's one AbortSignal, dropped only when the
    // request is garbage-collected: thousands of calls between two GCs make Node warn of a leak (it is none).
    if (transport._abortController?.signal) setMaxListeners(0, transport._abortController.signal);
    return client;
}

/** execute_code; throws unless the run exited 0; returns { out: the last stdout line as JSON, sc }. */
async function run(session, language, code) {
    const res = await session.post({ jsonrpc: '2.0', id: session.nextId++, method: 'tools/call',
        params: { name: 'execute_code', arguments: { language, code } } });
    const sc = res.result?.structuredContent;
    if (res.error || res.result?.isError || !sc || sc.exitCode !== 0)
        throw new Error(`unexpected result: ${JSON.stringify(res).slice(0, 1500)}`);
    return { out: JSON.parse(sc.stdout.trim().split('\n').at(-1)), sc };
}

// ---------------------------------------------------------------- the code of the runs

/** Python: the import and first call, `n` add calls, `big` big calls, and the breakdown requests; all timed. */
const pyCode = (n, big, parts) => `
import time
_t0 = time.perf_counter_ns()
import mcp_tools
_t1 = time.perf_counter_ns()
_r = mcp_tools.fx.add(a=1, b=2)
_t2 = time.perf_counter_ns()
import urllib.request
_ta = time.perf_counter_ns()
import json, os, http.client, urllib.parse
assert _r == {"sum": 3}, _r
fx = mcp_tools.fx
add, sums = [], []
_c0 = time.process_time_ns()
for i in range(${n}):
    t = time.perf_counter_ns()
    r = fx.add(a=i, b=1)
    add.append(time.perf_counter_ns() - t)
    sums.append(r["sum"])
_cpu = time.process_time_ns() - _c0
assert sums == [i + 1 for i in range(${n})]
big = []
for i in range(${big}):
    t = time.perf_counter_ns()
    s = fx.big(kb=${BIG_KB})
    big.append(time.perf_counter_ns() - t)
    assert len(s) == ${BIG_KB * 1024}
u = urllib.parse.urlsplit(os.environ["CODE_TOOLS_URL"])
def req(method, path, body=None):
    c = http.client.HTTPConnection(u.hostname, u.port)
    c.request(method, u.path + path, body, {"Content-Type": "application/json"} if body else {})
    r = c.getresponse()
    d = r.read()
    c.close()
    return r.status, d
raw, unknown, ping = [], [], []
for i in range(${parts}):
    t = time.perf_counter_ns()
    st, d = req("POST", "/call", json.dumps({"server": "fx", "tool": "add", "arguments": {"a": i, "b": 1}}).encode())
    raw.append(time.perf_counter_ns() - t)
    assert st == 200 and json.loads(d)["result"]["sum"] == i + 1, (st, d)
    t = time.perf_counter_ns()
    st, d = req("POST", "/call", b'{"server": "fx", "tool": "no_such_tool", "arguments": {}}')
    unknown.append(time.perf_counter_ns() - t)
    assert st == 404, (st, d)
    t = time.perf_counter_ns()
    st, d = req("GET", "/nothing-here")
    ping.append(time.perf_counter_ns() - t)
    assert st == 404, (st, d)
print(json.dumps({"import": _t1 - _t0, "importUrllib": _ta - _t2, "first": _t2 - _t1, "cpu": _cpu // ${n}, "add": add, "big": big, "raw": raw, "unknown": unknown,
                  "ping": ping}))
`;

/** Host python (no sandbox): the import of urllib.request, and `n` http.client GETs of the fixture's /stats after `warm` untimed. */
const hostPyCode = (port, n, warm) => `
import time
t0 = time.perf_counter_ns()
import urllib.request
t1 = time.perf_counter_ns()
import http.client, json
get = []
for i in range(${warm} + ${n}):
    t = time.perf_counter_ns()
    c = http.client.HTTPConnection("127.0.0.1", ${port})
    c.request("GET", "/stats")
    r = c.getresponse()
    d = r.read()
    c.close()
    if i >= ${warm}:
        get.append(time.perf_counter_ns() - t)
    assert r.status == 200, r.status
print(json.dumps({"importUrllib": t1 - t0, "get": get}))
`;

/** Host node (no sandbox): `n` GETs of the fixture's /stats after `warm` untimed, each on a new connection (agent: false). */
const hostNodeCode = (port, n, warm) => `
const http = require('http');
const get = (path) => new Promise((resolve, reject) => {
  const r = http.request({ host: '127.0.0.1', port: ${port}, path, agent: false }, (res) => {
    res.on('data', () => {});
    res.on('end', () => resolve(res.statusCode));
  });
  r.on('error', reject);
  r.end();
});
(async () => {
  const out = [];
  for (let i = 0; i < ${warm} + ${n}; i++) {
    const t = process.hrtime.bigint();
    const st = await get('/stats');
    if (i >= ${warm}) out.push(Number(process.hrtime.bigint() - t));
    if (st !== 200) throw new Error('HTTP ' + st);
  }
  console.log(JSON.stringify({ nodeGet: out }));
})().catch((e) => { console.error(e); process.exit(1); });
`;

/** Runs a host interpreter (python3 or node) with `code`; its last stdout line as JSON. */
function hostRun(cmd, code) {
    return new Promise((res, rej) => {
        const child = spawn(cmd, [cmd.endsWith('node') ? '-e' : '-c', code], { env: { PATH: '/usr/local/bin:/usr/bin:/bin', LANG: 'C.UTF-8' },
            cwd: scratch, stdio: ['ignore', 'pipe', 'pipe'] });
        let out = '';
        let err = '';
        child.stdout.on('data', (b) => { out += b; });
        child.stderr.on('data', (b) => { err += b; });
        child.on('error', rej);
        child.on('close', (code) => (code === 0 ? res(JSON.parse(out.trim().split('\n').at(-1))) : rej(new Error(`host ${cmd} exited ${code}: ${err}`))));
    });
}

/** Node: the require and first call, `n` add calls and `big` big calls, timed. */
const nodeCode = (n, big, parts) => `
const t0 = process.hrtime.bigint();
const { fx } = require('mcp-tools');
const t1 = process.hrtime.bigint();
const http = require('http');
const u = new URL(process.env.CODE_TOOLS_URL);
/** One request on a new connection (as the library makes them): its status. */
const req = (method, path, body) => new Promise((resolve, reject) => {
  const r = http.request({ host: u.hostname, port: u.port, path: u.pathname + path, method, agent: false,
    headers: body ? { 'content-type': 'application/json', 'content-length': body.length } : {} }, (res) => {
    res.on('data', () => {});
    res.on('end', () => resolve(res.statusCode));
  });
  r.on('error', reject);
  r.end(body);
});
(async () => {
  const r0 = await fx.add({ a: 1, b: 2 });
  const t2 = process.hrtime.bigint();
  if (r0.sum !== 3) throw new Error('add(1, 2) gave ' + JSON.stringify(r0));
  const add = [], sums = [], big = [];
  const c0 = process.cpuUsage();
  for (let i = 0; i < ${n}; i++) {
    const t = process.hrtime.bigint();
    const r = await fx.add({ a: i, b: 1 });
    add.push(Number(process.hrtime.bigint() - t));
    sums.push(r.sum);
  }
  const c = process.cpuUsage(c0);
  const cpu = Math.round(((c.user + c.system) * 1000) / ${n});
  sums.forEach((s, i) => { if (s !== i + 1) throw new Error('bad sum ' + s + ' at ' + i); });
  for (let i = 0; i < ${big}; i++) {
    const t = process.hrtime.bigint();
    const s = await fx.big({ kb: ${BIG_KB} });
    big.push(Number(process.hrtime.bigint() - t));
    if (s.length !== ${BIG_KB * 1024}) throw new Error('big gave ' + s.length + ' characters');
  }
  const unknown = [], ping = [];
  for (let i = 0; i < ${parts}; i++) {
    let t = process.hrtime.bigint();
    let st = await req('POST', '/call', Buffer.from('{"server": "fx", "tool": "no_such_tool", "arguments": {}}'));
    unknown.push(Number(process.hrtime.bigint() - t));
    if (st !== 404) throw new Error('unknown tool: HTTP ' + st);
    t = process.hrtime.bigint();
    st = await req('GET', '/nothing-here');
    ping.push(Number(process.hrtime.bigint() - t));
    if (st !== 404) throw new Error('ping: HTTP ' + st);
  }
  console.log(JSON.stringify({ import: Number(t1 - t0), first: Number(t2 - t1), cpu, add, big, unknown, ping }));
})().catch((e) => { console.error('FAILED', e); process.exit(1); });
`;

// ---------------------------------------------------------------- sides

async function directRound(client, n, big) {
    const add = [];
    const bigs = [];
    for (let i = 0; i < n; i++) {
        const t = process.hrtime.bigint();
        const r = await client.callTool({ name: 'add', arguments: { a: i, b: 1 } });
        add.push(Number(process.hrtime.bigint() - t));
        if (r.structuredContent?.sum !== i + 1) throw new Error(`direct add gave ${JSON.stringify(r)}`);
    }
    for (let i = 0; i < big; i++) {
        const t = process.hrtime.bigint();
        const r = await client.callTool({ name: 'big', arguments: { kb: BIG_KB } });
        bigs.push(Number(process.hrtime.bigint() - t));
        if (r.content?.[0]?.text?.length !== BIG_KB * 1024) throw new Error('direct big gave a wrong length');
    }
    return { add, big: bigs };
}

/** A fresh SDK client: its connect (initialize) and its first add, in ns. */
async function directFresh(port) {
    const t0 = process.hrtime.bigint();
    const client = await directClient(port);
    const t1 = process.hrtime.bigint();
    const r = await client.callTool({ name: 'add', arguments: { a: 1, b: 2 } });
    const t2 = process.hrtime.bigint();
    if (r.structuredContent?.sum !== 3) throw new Error('fresh direct add failed');
    await client.close();
    return { connect: Number(t1 - t0), first: Number(t2 - t1) };
}

/** The server's records of the run's ok `add` calls (toolCalls ms, whole milliseconds). */
const recordMs = (sc) => (sc.toolCalls?.calls ?? []).filter((c) => c.tool === 'add' && c.ok).map((c) => c.ms);

// ---------------------------------------------------------------- the benchmark

async function bench(results, notes) {
    const fixture = await startFixture();
    const file = join(scratch, 'upstream.json');
    writeFileSync(file, JSON.stringify({ mcpServers: { fx: { url: `http://127.0.0.1:${fixture.port}/mcp`,
        headers: { Authorization: 'Bearer ${FIXTURE_TOKEN}' } } } }), { mode: 0o600 });
    let server;
    let client;
    try {
        process.stderr.write('code-mode-bench: starting the server (UPSTREAM_MCP_FILE, WARM_POOL default) ...\n');
        server = await startServer({ UPSTREAM_MCP_FILE: file, FIXTURE_TOKEN: TOKEN, CODE_TOOLS_MAX_CALLS: '100000' });
        if (!(await server.waitQuiet())) notes.push('the server still had start-up work (the Go cache warm-up): figures may be noisy');
        const session = await new RawSession(server.url, server.apiKey).open();
        client = await directClient(fixture.port);

        // Warm-up, untimed: both JITs see the path (the server's ~thousands of calls; the client's as many).
        const perRun = 500;
        process.stderr.write(`code-mode-bench: warm-up: ${WARMUP_CALLS} calls from code (python and node runs of <= ${perRun}) and ${WARMUP_CALLS} direct ...\n`);
        const tw = Date.now();
        for (let done = 0, k = 0; done < WARMUP_CALLS; k++) {
            const n = Math.min(perRun, WARMUP_CALLS - done);
            await waitPoolsFull(server);
            if (k % 2 === 0) await run(session, 'python', pyCode(n, 1, 2));
            else await run(session, 'nodejs', nodeCode(n, 1, 2));
            await directRound(client, n, 1);
            done += n;
        }
        results.warmupSeconds = (Date.now() - tw) / 1000;

        process.stderr.write(`code-mode-bench: ${ROUNDS} rounds x ${CALLS} add + ${BIG_CALLS} big calls per side, rotated ...\n`);
        const got = { direct: { add: [], big: [], connect: [], first: [], roundP50: [] },
            python: { add: [], big: [], import: [], importUrllib: [], first: [], cpu: [], raw: [], unknown: [], ping: [], record: [], roundP50: [] },
            nodejs: { add: [], big: [], import: [], first: [], cpu: [], unknown: [], ping: [], record: [], roundP50: [] },
            host: { importUrllib: [], get: [], nodeGet: [] } };
        const sides = [
            ['direct', async () => {
                const r = await directRound(client, CALLS, BIG_CALLS);
                const f = await directFresh(fixture.port);
                return { ...r, connect: f.connect, first: f.first };
            }],
            ['python', async () => {
                const { out, sc } = await run(session, 'python', pyCode(CALLS, BIG_CALLS, PARTS));
                return { ...out, record: recordMs(sc).slice(1, 1 + CALLS) };
            }],
            ['nodejs', async () => {
                const { out, sc } = await run(session, 'nodejs', nodeCode(CALLS, BIG_CALLS, PARTS));
                return { ...out, record: recordMs(sc).slice(1, 1 + CALLS) };
            }],
            ['host', async () => ({ ...(await hostRun('/usr/bin/python3', hostPyCode(fixture.port, PARTS, CALLS))),
                ...(await hostRun(NODE, hostNodeCode(fixture.port, PARTS, CALLS))) })],
        ];
        for (let i = 0; i < ROUNDS; i++) {
            for (let k = 0; k < sides.length; k++) {
                const [name, fn] = sides[(i + k) % sides.length];
                await waitPoolsFull(server);
                const r = await fn();
                const g = got[name];
                for (const key of Object.keys(g)) {
                    if (key === 'roundP50') g.roundP50.push(pct(nsToMs(r.add), 50)); // (not the host side's: no add)
                    else if (Array.isArray(r[key])) g[key].push(...r[key]);
                    else if (r[key] !== undefined) g[key].push(r[key]);
                }
            }
        }
        const ns = (xs) => summary(nsToMs(xs));
        const D = got.direct;
        results.direct = { add: ns(D.add), big: ns(D.big), freshConnect: ns(D.connect), freshFirst: ns(D.first), roundP50s: D.roundP50 };
        results.host = { pythonImportUrllib: ns(got.host.importUrllib), pythonGet: ns(got.host.get), nodeGet: ns(got.host.nodeGet) };
        for (const lang of ['python', 'nodejs']) {
            const g = got[lang];
            const o = { add: ns(g.add), big: ns(g.big), import: ns(g.import), first: ns(g.first),
                importPlusFirst: summary(g.import.map((x, j) => (x + g.first[j]) / 1e6)), recordMs: summary(g.record),
                recordMeanMs: g.record.reduce((a, b) => a + b, 0) / g.record.length, roundP50s: g.roundP50 };
            o.overheadP50 = o.add.p50 - results.direct.add.p50;
            // Paired by round (each round's p50 minus the direct side's p50 of the same round): drift between rounds cancels.
            o.pairedOverheadP50 = pct(g.roundP50.map((x, j) => x - D.roundP50[j]), 50);
            o.overheadP95 = o.add.p95 - results.direct.add.p95;
            o.bigOverheadP50 = o.big.p50 - results.direct.big.p50;
            o.pass = o.overheadP50 <= GOAL_MS;
            Object.assign(o, { unknown: ns(g.unknown), ping: ns(g.ping), cpuPerCall: ns(g.cpu) });
            if (lang === 'python') Object.assign(o, { raw: ns(g.raw), importUrllib: ns(g.importUrllib) });
            results[lang] = o;
        }
        const lines = server.log().split('\n').filter((l) => /\b(WARN|ERROR)\b/.test(l));
        if (lines.length) notes.push(`server: ${lines.length} WARN/ERROR log lines, e.g. ${lines.slice(0, 3).map((l) => l.slice(0, 240)).join(' | ')}`);
    } finally {
        await client?.close().catch(() => {});
        await server?.stop().catch(() => {});
        fixture.proc.kill('SIGTERM');
    }
}

// ---------------------------------------------------------------- report

function report(results, notes) {
    const L = [];
    const D = results.direct;
    const P = results.python;
    const N = results.nodejs;
    L.push(`code-exec-mcp code-mode benchmark, one run (${new Date().toISOString()}; ${cpus().length} cpus, load avg `
        + `${results.loadBefore.map((x) => x.toFixed(1)).join('/')} before, ${results.loadAfter.map((x) => x.toFixed(1)).join('/')} after)`);
    L.push(`jar ${results.jar}; upstream: e2e/fixtures/upstream-mcp.mjs over Streamable HTTP on 127.0.0.1; server: WARM_POOL default`);
    L.push(`warm-up (untimed): ${results.warmupCalls} calls from code and ${results.warmupCalls} direct, ${results.warmupSeconds.toFixed(0)} s; `
        + `then ${results.rounds} rounds, each side once per round in rotated order, every warm pool full before each (untimed)`);
    L.push('');
    L.push(`1. one call of fx.add (${results.rounds} x ${results.calls} per side; per call, timed where the call is made)`);
    L.push(`${'side'.padEnd(40)}${col('p50', 10)}${col('p95', 10)}${col('min', 10)}${col('+p50', 10)}${col('+p95', 10)}`);
    L.push(`${'direct: TS SDK client -> fixture'.padEnd(40)}${col(ms(D.add.p50), 10)}${col(ms(D.add.p95), 10)}${col(ms(D.add.min), 10)}`);
    for (const [label, o] of [['python: mcp_tools.fx.add(a=, b=)', P], ['node: await fx.add({a, b})', N]])
        L.push(`${label.padEnd(40)}${col(ms(o.add.p50), 10)}${col(ms(o.add.p95), 10)}${col(ms(o.add.min), 10)}`
            + `${col(`+${f2(o.overheadP50)}`, 10)}${col(`+${f2(o.overheadP95)}`, 10)}`);
    for (const [label, o] of [['python', P], ['node', N]])
        L.push(`${label} overhead p50 ${ms(o.overheadP50)} (goal <= ${GOAL_MS} ms): ${o.pass ? 'PASS' : 'FAIL'}; `
            + `paired by round (median of the rounds' p50 differences): ${ms(o.pairedOverheadP50)}`);
    L.push(`per-round p50s, direct: ${D.roundP50s.map(f2).join(' ')}`);
    L.push(`per-round p50s, python: ${P.roundP50s.map(f2).join(' ')}`);
    L.push(`per-round p50s, node:   ${N.roundP50s.map(f2).join(' ')}`);
    L.push('');
    L.push(`2. one call of fx.big(kb=${results.bigKb}) (${results.rounds} x ${results.bigCalls} per side)`);
    L.push(`${'side'.padEnd(40)}${col('p50', 10)}${col('p95', 10)}${col('+p50', 10)}`);
    L.push(`${'direct'.padEnd(40)}${col(ms(D.big.p50), 10)}${col(ms(D.big.p95), 10)}`);
    for (const [label, o] of [['python', P], ['node', N]])
        L.push(`${label.padEnd(40)}${col(ms(o.big.p50), 10)}${col(ms(o.big.p95), 10)}${col(`+${f2(o.bigOverheadP50)}`, 10)}`);
    L.push('');
    L.push(`3. the first call of a fresh run (n=${results.rounds} each; p50 / p95)`);
    L.push(`python: import mcp_tools ${ms(P.import.p50)} / ${ms(P.import.p95)} (for comparison, urllib.request, which it does not use: `
        + `${ms(P.importUrllib.p50)}; on the host ${ms(results.host.pythonImportUrllib.p50)}), first add ${ms(P.first.p50)} / ${ms(P.first.p95)}, `
        + `both ${ms(P.importPlusFirst.p50)} / ${ms(P.importPlusFirst.p95)}`);
    L.push(`node:   require('mcp-tools') ${ms(N.import.p50)} / ${ms(N.import.p95)}, first add ${ms(N.first.p50)} / ${ms(N.first.p95)}, `
        + `both ${ms(N.importPlusFirst.p50)} / ${ms(N.importPlusFirst.p95)}`);
    L.push(`direct: a fresh SDK client's connect ${ms(D.freshConnect.p50)} / ${ms(D.freshConnect.p95)}, its first add ${ms(D.freshFirst.p50)} / ${ms(D.freshFirst.p95)}`);
    L.push('');
    const H = results.host;
    L.push(`4. where a call's time goes (p50 per request, each on a new connection, n=${P.ping.n} each, in the same runs)`);
    L.push(`${''.padEnd(64)}${col('python', 10)}${col('node', 10)}`);
    const row = (label, p, n) => L.push(`${label.padEnd(64)}${col(p === undefined ? '-' : ms(p), 10)}${col(n === undefined ? '-' : ms(n), 10)}`);
    row('a. fx.add through the library (section 1)', P.add.p50, N.add.p50);
    row('b. the same POST /call with http.client', P.raw.p50);
    row('c. POST /call of a tool the upstream lacks (no upstream call)', P.unknown.p50, N.unknown.p50);
    row('d. GET of an unknown endpoint path (no JSON, no upstream)', P.ping.p50, N.ping.p50);
    row("e. on the host, no sandbox: GET of the fixture's /stats", H.pythonGet.p50, H.nodeGet.p50);
    row('f. direct: the TS SDK client calls add (section 1)', D.add.p50, D.add.p50);
    L.push(`d-e  the relay through the run's channel + the server's HTTP: python ${ms(P.ping.p50 - H.pythonGet.p50)}, node ${ms(N.ping.p50 - H.nodeGet.p50)}`);
    L.push(`c-d  the server's handling of a call (JSON, checks, record, audit line, answer): python ${ms(P.unknown.p50 - P.ping.p50)}, node ${ms(N.unknown.p50 - N.ping.p50)}`);
    L.push(`a-c  a call through the library (kept connection) minus one the server answers itself (new connection): python `
        + `${ms(P.add.p50 - P.unknown.p50)}, node ${ms(N.add.p50 - N.unknown.p50)}: the upstream leg less the connection set-up the `
        + `library saves; f: the TS SDK client's whole call ${ms(D.add.p50)}`);
    L.push(`a-b  the library (kept connection) vs http.client on a new connection: ${ms(P.add.p50 - P.raw.p50)}; e: the language's own request on loopback`);
    L.push(`CPU of the calling process per add call (its own, in the sandbox; median of the runs): python ${ms(P.cpuPerCall.p50)}, node ${ms(N.cpuPerCall.p50)}`);
    L.push(`the server's record of each add (toolCalls ms, whole ms, truncated): python runs p50 ${P.recordMs.p50}, mean ${f2(P.recordMeanMs)}; `
        + `node runs p50 ${N.recordMs.p50}, mean ${f2(N.recordMeanMs)}`);
    L.push('');
    L.push(notes.length ? `notes (${notes.length}):\n  ${[...new Set(notes)].slice(0, 20).join('\n  ')}` : 'notes: none (no WARN/ERROR log lines)');
    return L.join('\n');
}

async function main() {
    const ownDataDir = !process.env.BENCH_DATA_DIR;
    process.env.E2E_DATA_DIR = resolve(process.env.BENCH_DATA_DIR || mkdtempSync(join(tmpdir(), 'code-exec-code-mode-bench-data-')));
    if (!ownDataDir) mkdirSync(process.env.E2E_DATA_DIR, { recursive: true });
    const results = { jar: JAR, loadBefore: loadavg(), rounds: ROUNDS, calls: CALLS, bigCalls: BIG_CALLS, bigKb: BIG_KB,
        partsCalls: PARTS, warmupCalls: WARMUP_CALLS, goalMs: GOAL_MS };
    const notes = [];
    const t0 = Date.now();
    try {
        await bench(results, notes);
    } finally {
        rmSync(scratch, { recursive: true, force: true });
        if (ownDataDir) rmSync(process.env.E2E_DATA_DIR, { recursive: true, force: true, maxRetries: 3 });
    }
    results.loadAfter = loadavg();
    results.wallSeconds = (Date.now() - t0) / 1000;
    results.notes = [...new Set(notes)];
    console.log(report(results, notes));
    console.log(`(${results.wallSeconds.toFixed(0)} s in all, the server's start and the warm-up included)`);
    if (process.env.BENCH_JSON) writeFileSync(process.env.BENCH_JSON, JSON.stringify(results, null, 2));
}

main().catch((e) => {
    console.error(`code-mode-bench failed: ${e.stack || e}`);
    process.exit(1);
});
