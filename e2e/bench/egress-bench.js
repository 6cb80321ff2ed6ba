// Benchmark of egress (docs/network.md): what the checking proxy costs a run that uses the network, and
// that runs without it pay nothing. One machine, one run, each figure next to a bare reference measured in the
// same run, samples interleaved so that machine drift hits every side alike:
//   1. a 50 MiB download from a plain HTTP fixture on 127.0.0.1 (served by this process): the host's curl directly
//      versus curl in a sandbox through the proxy (EGRESS=on, WARM_POOL=off), alternating rounds; MB/s and ratio.
//      Beside them, the host's curl through reference-relay.c, the floor of any proxy (one user-space hop that
//      checks nothing), with read/write and with splice: what this machine allows a proxy at all.
//   2. python hello end to end (p50/p95) and throughput at concurrency 4 on a server with EGRESS off, one with
//      EGRESS=on and an allow-list (calls with `network: false`; the same calls without `network` for latency
//      too), and, with BENCH_BEFORE_JAR, the server from before egress; each against the bare spawn of python3.
//      The servers run at the same time (idle between their samples) so that their samples can be interleaved.
//   3. python requests.get of 1 KiB through the proxy: the call end to end, the request inside the sandbox, the
//      proxy's own record of the connection (`ms`), and the same script run directly on the host.
// The only traffic is on loopback: the fixture listens on 127.0.0.1 and the proxy is told fixture.test=127.0.0.1
// (EGRESS_RESOLVE) and allowed that address (EGRESS_ALLOW_CIDRS=127.0.0.1/32).
//
// Environment (defaults): BENCH_EGRESS_ITERATIONS (10 rounds per side, after BENCH_EGRESS_WARMUP 2),
// BENCH_HELLO_ITERATIONS (100), BENCH_THROUGHPUT_SECONDS (10 per side, in BENCH_THROUGHPUT_ROUNDS 4 alternating
// rounds), BENCH_WARMUP_RUNS (500 untimed hello runs per server: a modest JIT warm-up), BENCH_REQUESTS_ITERATIONS
// (30), BENCH_BEFORE_JAR (a jar to compare against, e.g. the server before egress), BENCH_JSON (write the
// figures there too), CODE_EXEC_JAR (the jar under test; default target/code-exec-mcp.jar), BENCH_DATA_DIR (the
// servers' shared DATA_DIR, kept afterwards so that a later run skips the Go cache warm-up; default a fresh one).
import { spawn } from 'node:child_process';
import { createServer } from 'node:http';
import { mkdtempSync, mkdirSync, rmSync, writeFileSync, existsSync } from 'node:fs';
import { tmpdir, loadavg, cpus } from 'node:os';
import { join, resolve } from 'node:path';
import { startServer, sleep, JAR } from '../lib/server.js';
import { RawSession } from '../lib/rawmcp.js';
import { pct, throughput as measureThroughput } from './measure.js';

const EGRESS_N = Number(process.env.BENCH_EGRESS_ITERATIONS || 10);
const EGRESS_WARMUP = Number(process.env.BENCH_EGRESS_WARMUP ?? 2);
const HELLO_N = Number(process.env.BENCH_HELLO_ITERATIONS || 100);
const TP_SECONDS = Number(process.env.BENCH_THROUGHPUT_SECONDS || 10);
const TP_ROUNDS = Number(process.env.BENCH_THROUGHPUT_ROUNDS || 4);
const WARMUP_RUNS = Number(process.env.BENCH_WARMUP_RUNS ?? 500);
const REQUESTS_N = Number(process.env.BENCH_REQUESTS_ITERATIONS || 30);
const BEFORE_JAR = process.env.BENCH_BEFORE_JAR ? resolve(process.env.BENCH_BEFORE_JAR) : '';
const CONCURRENCY = 4;
const BLOB_BYTES = 50 * 1024 * 1024;
const SMALL_BYTES = 1024;
const HOST = 'fixture.test';

const scratch = mkdtempSync(join(tmpdir(), 'code-exec-egress-bench-'));
// The bare spawns get a clean, small environment, as a sandbox does (and no proxy variables of the host's).
const bareEnv = { PATH: '/usr/local/bin:/usr/bin:/bin', LANG: 'C.UTF-8', HOME: scratch };
const CURL_FORMAT = "'%{size_download} %{time_total}'";

// ---------------------------------------------------------------- helpers (the style of bench.js)

async function timeIt(fn) {
    const t = process.hrtime.bigint();
    const v = await fn();
    return { ms: Number(process.hrtime.bigint() - t) / 1e6, v };
}


const summary = (xs) => ({ n: xs.length, p50: pct(xs, 50), p95: pct(xs, 95) });

/** Runs a host command; resolves with its stdout, rejects unless it exits 0. */
function run(cmd, args) {
    return new Promise((res, rej) => {
        const child = spawn(cmd, args, { env: bareEnv, cwd: scratch, stdio: ['ignore', 'pipe', 'pipe'] });
        let out = '';
        let err = '';
        child.stdout.on('data', (b) => { out += b; });
        child.stderr.on('data', (b) => { err += b; });
        child.on('error', rej);
        child.on('close', (code) => (code === 0 ? res(out) : rej(new Error(`${cmd} exited ${code}: ${err}`))));
    });
}

/** execute_code with any arguments; throws unless the run exited 0 (and printed `expect`, when given). */
async function execute(session, args, expect) {
    const res = await session.post({ jsonrpc: '2.0', id: session.nextId++, method: 'tools/call',
        params: { name: 'execute_code', arguments: args } });
    const sc = res.result?.structuredContent;
    if (res.error || res.result?.isError || !sc || sc.exitCode !== 0 || (expect !== undefined && sc.stdout.trim() !== expect))
        throw new Error(`unexpected result: ${JSON.stringify(res).slice(0, 800)}`);
    return sc;
}

/** `runOnce` at concurrency 4 until `seconds` pass or `max` runs started; { runs, seconds }. */
const throughput = (runOnce, max, seconds) => measureThroughput(runOnce, max, seconds, CONCURRENCY);

/** Waits until every language of every server's pool is at its target (a refill's CPU would hit the next sample). */
async function waitPoolsFull(servers, timeoutMs = 60_000) {
    const end = Date.now() + timeoutMs;
    for (const server of servers) {
        for (;;) {
            const pool = (await server.healthz()).body.warmPool ?? {};
            if (Object.values(pool).every((l) => l.ready >= l.target)) break;
            if (Date.now() > end) throw new Error(`warm pool not full in ${timeoutMs} ms: ${JSON.stringify(pool)}`);
            await sleep(5);
        }
    }
}

/** `startServer` of another jar: a second instance of e2e/lib/server.js, evaluated with CODE_EXEC_JAR set to it. */
async function startServerOf(jar, env) {
    if (!jar || resolve(jar) === resolve(JAR)) return startServer(env);
    if (!existsSync(jar)) throw new Error(`BENCH_BEFORE_JAR ${jar} does not exist`);
    const saved = process.env.CODE_EXEC_JAR;
    process.env.CODE_EXEC_JAR = jar;
    try {
        const mod = await import(`../lib/server.js?jar=${encodeURIComponent(jar)}`);
        return await mod.startServer(env);
    } finally {
        if (saved === undefined) delete process.env.CODE_EXEC_JAR;
        else process.env.CODE_EXEC_JAR = saved;
    }
}

/** startServer (of `jar`, when given), then once more until its start-up work (the Go cache warm-up) is over. */
async function start(env, jar = '') {
    const server = await startServerOf(jar, env);
    // startServer's own wait can end in the gap between two steps of the Go cache warm-up; a second wait catches it.
    if (!(await server.waitQuiet())) process.stderr.write('egress-bench: WARNING: server still has start-up work; figures may be noisy\n');
    return server;
}

async function openSession(server) {
    return new RawSession(server.url, server.apiKey).open();
}

/** The loopback fixture: /blob (50 MiB) and /small (1 KiB), from memory. */
function startFixture() {
    const blob = Buffer.alloc(BLOB_BYTES, 0x61);
    const small = Buffer.alloc(SMALL_BYTES, 0x62);
    const requests = { blob: 0, small: 0, other: 0 };
    const server = createServer((req, res) => {
        const body = req.url === '/blob' ? blob : req.url === '/small' ? small : null;
        requests[body === blob ? 'blob' : body === small ? 'small' : 'other']++;
        if (!body) {
            res.writeHead(404, { 'Content-Length': 0 });
            res.end();
            return;
        }
        res.writeHead(200, { 'Content-Type': 'application/octet-stream', 'Content-Length': body.length });
        res.end(body);
    });
    return new Promise((res, rej) => {
        server.on('error', rej);
        server.listen(0, '127.0.0.1', () => res({ server, port: server.address().port, requests }));
    });
}

/** Connection records that are not a plain allowed-and-closed connection to the fixture, as short strings. */
function oddRecords(sc, port, what) {
    const n = sc.network;
    if (!n) return [`${what}: the result has no network report`];
    const odd = [];
    for (const c of n.connections ?? [])
        if (c.decision !== 'allowed' || c.reason !== 'closed' || c.host !== HOST || c.port !== port)
            odd.push(`${what}: ${c.host}:${c.port} ${c.decision}/${c.reason} (${c.message}) in ${c.bytesIn} B, ${c.ms} ms`);
    if ((n.connections ?? []).length !== 1) odd.push(`${what}: ${(n.connections ?? []).length} connection records (1 expected)`);
    if (n.connectionsLeftOut) odd.push(`${what}: connectionsLeftOut ${n.connectionsLeftOut}`);
    return odd;
}

const MB = (bytes, ms) => bytes / 1e6 / (ms / 1000);
const f1 = (x) => (x === undefined || Number.isNaN(x) ? '-' : x.toFixed(1));
const f2 = (x) => (x === undefined || Number.isNaN(x) ? '-' : x.toFixed(2));
const ms = (x) => `${f1(x)} ms`;
const col = (s, w) => String(s).padStart(w);

// ---------------------------------------------------------------- 1. download rate

async function download(fixture, results, notes) {
    const port = fixture.port;
    process.stderr.write('egress-bench: 1. download: server with EGRESS=on, WARM_POOL=off ...\n');
    const server = await start({ LOG_LEVEL: 'info', WARM_POOL: 'off', ...egressEnv(port) });
    try {
        const session = await openSession(server);
        const url = (host, p = port) => `http://${host}:${p}/blob`;
        const parse = (out, what) => {
            const [size, seconds] = out.trim().split(/\s+/);
            if (Number(size) !== BLOB_BYTES) throw new Error(`${what}: size_download ${size}, expected ${BLOB_BYTES} (output '${out.trim()}')`);
            return Number(seconds) * 1000;
        };
        const direct = async () => {
            const { ms: e2e, v } = await timeIt(() => run('/usr/bin/curl', ['-s', '-o', '/dev/null', '-w', CURL_FORMAT.slice(1, -1), url('127.0.0.1')]));
            return { transferMs: parse(v, 'direct curl'), e2eMs: e2e };
        };
        const proxied = async () => {
            const { ms: e2e, v: sc } = await timeIt(() => execute(session, { language: 'shell',
                code: `curl -s -o /dev/null -w ${CURL_FORMAT} ${url(HOST)}` }));
            notes.push(...oddRecords(sc, port, 'download'));
            const c = sc.network?.connections?.[0];
            return { transferMs: parse(sc.stdout, 'proxied curl'), e2eMs: e2e, runMs: sc.durationMs, recordMs: c?.ms, recordBytesIn: c?.bytesIn };
        };
        const refs = await startReferenceRelays(port);
        const viaRef = (mode) => async () => {
            const v = await run('/usr/bin/curl', ['-s', '-o', '/dev/null', '-w', CURL_FORMAT.slice(1, -1), url('127.0.0.1', refs[mode].port)]);
            return { transferMs: parse(v, `curl through the reference relay (${mode})`) };
        };
        const sides = [['d', direct], ['p', proxied], ['rw', viaRef('rw')], ['splice', viaRef('splice')]];
        const got = { d: [], p: [], rw: [], splice: [] };
        try {
            for (let i = 0; i < EGRESS_WARMUP; i++) for (const [, fn] of sides) await fn();
            for (let i = 0; i < EGRESS_N; i++) {
                // Rotate which side goes first, so that none always follows another's page-cache and CPU state.
                for (let k = 0; k < sides.length; k++) {
                    const [name, fn] = sides[(i + k) % sides.length];
                    got[name].push(await fn());
                }
            }
        } finally {
            for (const r of Object.values(refs)) r.child.kill('SIGKILL');
        }
        const { d, p } = got;
        const rate = (xs) => xs.map((x) => MB(BLOB_BYTES, x.transferMs));
        results.download = {
            bytes: BLOB_BYTES, rounds: EGRESS_N, warmupRounds: EGRESS_WARMUP,
            direct: { mbPerSecondP50: pct(rate(d), 50), transferMs: summary(d.map((x) => x.transferMs)), spawnMs: summary(d.map((x) => x.e2eMs)) },
            proxied: { mbPerSecondP50: pct(rate(p), 50), transferMs: summary(p.map((x) => x.transferMs)), callMs: summary(p.map((x) => x.e2eMs)),
                runMs: summary(p.map((x) => x.runMs)), recordMs: summary(p.map((x) => x.recordMs ?? NaN)),
                recordBytesIn: summary(p.map((x) => x.recordBytesIn ?? NaN)) },
        };
        results.download.ratio = results.download.proxied.mbPerSecondP50 / results.download.direct.mbPerSecondP50;
        for (const mode of ['rw', 'splice']) {
            const mb = pct(rate(got[mode]), 50);
            results.download[`reference_${mode}`] = { mbPerSecondP50: mb, transferMs: summary(got[mode].map((x) => x.transferMs)),
                ratio: mb / results.download.direct.mbPerSecondP50 };
        }
        // One audit line per connection (docs/network.md): the log is at info here, so they can be counted.
        const audit = server.log().split('\n').filter((l) => /\begress run=/.test(l));
        const expected = EGRESS_N + EGRESS_WARMUP;
        results.download.auditLines = audit.length;
        if (audit.length !== expected) notes.push(`download: ${audit.length} egress audit lines for ${expected} connections`);
        const odd = audit.filter((l) => !/decision=allowed reason=closed/.test(l));
        if (odd.length) notes.push(`download: audit lines not allowed/closed: ${odd.slice(0, 3).join(' | ')}`);
        collectLogNotes(server, 'download server', notes);
    } finally {
        await server.stop();
    }
}

/**
 * reference-relay.c, built into the scratch directory with cc, started in both modes in front of the fixture:
 * { rw: { port, child }, splice: { port, child } }.
 */
async function startReferenceRelays(target) {
    const bin = join(scratch, 'reference-relay');
    await run('cc', ['-O2', '-o', bin, resolve(import.meta.dirname, 'reference-relay.c')]);
    const refs = {};
    for (const mode of ['rw', 'splice']) {
        const child = spawn(bin, [String(target), mode], { stdio: ['ignore', 'pipe', 'inherit'] });
        const port = await new Promise((res, rej) => {
            child.stdout.once('data', (b) => res(Number(String(b).trim())));
            child.on('error', rej);
            child.on('exit', (code) => rej(new Error(`reference-relay ${mode} exited ${code}`)));
        });
        refs[mode] = { port, child };
    }
    return refs;
}

function egressEnv(port) {
    return { EGRESS: 'on', EGRESS_ALLOW: `${HOST}:${port}`, EGRESS_ALLOW_CIDRS: '127.0.0.1/32', EGRESS_RESOLVE: `${HOST}=127.0.0.1` };
}

/** WARN/ERROR lines of a server's log (the start-up's are kept too), as notes. */
function collectLogNotes(server, name, notes) {
    const lines = server.log().split('\n').filter((l) => /\b(WARN|ERROR)\b/.test(l));
    if (lines.length) notes.push(`${name}: ${lines.length} WARN/ERROR log lines, e.g. ${lines.slice(0, 3).map((l) => l.slice(0, 240)).join(' | ')}`);
}

// ---------------------------------------------------------------- 2. runs without egress pay nothing

const PY_HELLO = 'print("hello")';

async function hello(fixture, results, notes, servers) {
    const sides = [];
    process.stderr.write('egress-bench: 2. hello: server with EGRESS off ...\n');
    servers.off = await start({ LOG_LEVEL: 'warn' });
    process.stderr.write('egress-bench: 2. hello: server with EGRESS=on ...\n');
    servers.on = await start({ LOG_LEVEL: 'warn', ...egressEnv(fixture.port) });
    if (BEFORE_JAR) {
        process.stderr.write(`egress-bench: 2. hello: server of BENCH_BEFORE_JAR ${BEFORE_JAR} ...\n`);
        servers.before = await start({ LOG_LEVEL: 'warn' }, BEFORE_JAR);
    }
    const all = Object.values(servers);
    const sess = {};
    for (const [k, s] of Object.entries(servers)) sess[k] = await openSession(s);
    const call = (k, extra = {}) => () => execute(sess[k], { language: 'python', code: PY_HELLO, ...extra }, 'hello');
    sides.push({ key: 'bare', label: 'bare /usr/bin/python3 -c', once: async () => {
        if ((await run('/usr/bin/python3', ['-c', PY_HELLO])).trim() !== 'hello') throw new Error('bare python printed no hello');
    }, throughput: true });
    sides.push({ key: 'off', label: 'EGRESS off', once: call('off'), throughput: true });
    sides.push({ key: 'onFalse', label: 'EGRESS=on, network:false', once: call('on', { network: false }), throughput: true });
    sides.push({ key: 'onOmitted', label: 'EGRESS=on, network omitted', once: call('on'), throughput: false });
    if (servers.before) sides.push({ key: 'before', label: 'before (BENCH_BEFORE_JAR)', once: call('before'), throughput: true });

    // The modest JIT warm-up: untimed runs per server at concurrency 4 (the egress server alternates its two kinds).
    for (const [k, s] of Object.entries(servers)) {
        process.stderr.write(`egress-bench: 2. hello: ${WARMUP_RUNS} untimed warm-up runs on the ${k} server ...\n`);
        await waitPoolsFull([s]);
        let i = 0;
        const mix = k === 'on' ? [call('on', { network: false }), call('on')] : [call(k)];
        if (WARMUP_RUNS > 0) await throughput(() => mix[i++ % mix.length](), WARMUP_RUNS, Infinity);
    }

    process.stderr.write(`egress-bench: 2. hello: ${HELLO_N} interleaved samples per side ...\n`);
    const lat = Object.fromEntries(sides.map((s) => [s.key, { e2e: [], run: [] }]));
    for (let i = 0; i < HELLO_N; i++) {
        for (let j = 0; j < sides.length; j++) {
            const s = sides[(i + j) % sides.length];
            await waitPoolsFull(all); // untimed: every pool full, so a sample neither waits for nor races a refill
            const { ms: t, v: sc } = await timeIt(s.once);
            lat[s.key].e2e.push(t);
            if (sc?.durationMs !== undefined) lat[s.key].run.push(sc.durationMs);
        }
    }

    process.stderr.write(`egress-bench: 2. hello: throughput at concurrency ${CONCURRENCY}, ${TP_SECONDS} s per side in ${TP_ROUNDS} rounds ...\n`);
    const tpSides = sides.filter((s) => s.throughput);
    const tp = Object.fromEntries(tpSides.map((s) => [s.key, { runs: 0, seconds: 0 }]));
    for (let r = 0; r < TP_ROUNDS; r++) {
        for (let j = 0; j < tpSides.length; j++) {
            const s = tpSides[(r + j) % tpSides.length];
            await waitPoolsFull(all);
            await sleep(200);
            const t = await throughput(s.once, Infinity, TP_SECONDS / TP_ROUNDS);
            tp[s.key].runs += t.runs;
            tp[s.key].seconds += t.seconds;
        }
    }

    const out = { iterations: HELLO_N, warmupRunsPerServer: WARMUP_RUNS, concurrency: CONCURRENCY, throughputSecondsPerSide: TP_SECONDS,
        throughputRounds: TP_ROUNDS, sides: {} };
    const bareP50 = pct(lat.bare.e2e, 50);
    const bareRate = tp.bare.runs / tp.bare.seconds;
    for (const s of sides) {
        const o = { label: s.label, ...summary(lat[s.key].e2e) };
        if (lat[s.key].run.length) o.runP50 = pct(lat[s.key].run, 50);
        o.p50VsBare = o.p50 / bareP50;
        if (tp[s.key]) {
            o.runsPerSecond = tp[s.key].runs / tp[s.key].seconds;
            o.throughputVsBare = o.runsPerSecond / bareRate;
        }
        out.sides[s.key] = o;
    }
    const S = out.sides;
    out.onVsOff = { p50: S.onFalse.p50 / S.off.p50, p95: S.onFalse.p95 / S.off.p95, throughput: S.onFalse.runsPerSecond / S.off.runsPerSecond,
        omittedP50: S.onOmitted.p50 / S.off.p50 };
    if (S.before) out.onVsBefore = { p50: S.onFalse.p50 / S.before.p50, throughput: S.onFalse.runsPerSecond / S.before.runsPerSecond,
        offVsBeforeP50: S.off.p50 / S.before.p50 };
    results.hello = out;
    return sess;
}

// ---------------------------------------------------------------- 3. one small request through the proxy

const requestsCode = (url) => [
    'import time, requests',
    't = time.perf_counter()',
    `r = requests.get(${JSON.stringify(url)}, timeout=30)`,
    'dt = time.perf_counter() - t',
    'print(r.status_code, len(r.content), f"{dt * 1000:.3f}")',
].join('\n');

async function smallRequest(fixture, results, notes, servers, sess) {
    process.stderr.write(`egress-bench: 3. requests.get 1 KiB: ${REQUESTS_N} interleaved samples ...\n`);
    const port = fixture.port;
    const all = Object.values(servers);
    const parse = (out, what) => {
        const [status, len, getMs] = out.trim().split(/\s+/);
        if (status !== '200' || Number(len) !== SMALL_BYTES) throw new Error(`${what}: got '${out.trim()}', expected 200 ${SMALL_BYTES} <ms>`);
        return Number(getMs);
    };
    const sandbox = async () => {
        const { ms: t, v: sc } = await timeIt(() => execute(sess.on, { language: 'python', code: requestsCode(`http://${HOST}:${port}/small`) }));
        notes.push(...oddRecords(sc, port, 'requests.get'));
        return { e2e: t, get: parse(sc.stdout, 'sandbox requests.get'), run: sc.durationMs, record: sc.network?.connections?.[0]?.ms ?? NaN,
            bytesIn: sc.network?.connections?.[0]?.bytesIn ?? NaN };
    };
    const host = async () => {
        const { ms: t, v } = await timeIt(() => run('/usr/bin/python3', ['-c', requestsCode(`http://127.0.0.1:${port}/small`)]));
        return { e2e: t, get: parse(v, 'host requests.get') };
    };
    // A python hello on the same server, in the same loop: what the call costs without import requests + the request.
    const plain = async () => (await timeIt(() => execute(sess.on, { language: 'python', code: PY_HELLO }, 'hello'))).ms;
    for (let i = 0; i < 2; i++) {
        await waitPoolsFull(all);
        await sandbox();
        await host();
    }
    const sb = [];
    const hs = [];
    const hello = [];
    for (let i = 0; i < REQUESTS_N; i++) {
        const order = [async () => sb.push(await sandbox()), async () => hs.push(await host()), async () => hello.push(await plain())];
        for (let j = 0; j < order.length; j++) {
            await waitPoolsFull(all);
            await order[(i + j) % order.length]();
        }
    }
    results.requests = {
        iterations: REQUESTS_N,
        sandbox: { callMs: summary(sb.map((x) => x.e2e)), runMs: summary(sb.map((x) => x.run)), getMs: summary(sb.map((x) => x.get)),
            recordMs: summary(sb.map((x) => x.record)), recordBytesIn: pct(sb.map((x) => x.bytesIn), 50) },
        host: { spawnMs: summary(hs.map((x) => x.e2e)), getMs: summary(hs.map((x) => x.get)) },
        helloSameServerMs: summary(hello),
    };
    results.requests.getOverheadP50Ms = results.requests.sandbox.getMs.p50 - results.requests.host.getMs.p50;
}

// ---------------------------------------------------------------- report

function report(results, notes) {
    const L = [];
    L.push(`code-exec-mcp egress benchmark, one run (${new Date().toISOString()}; ${cpus().length} cpus, load avg `
        + `${results.loadBefore.toFixed(1)} before, ${results.loadAfter.toFixed(1)} after)`);
    L.push(`jar ${results.jar}${results.beforeJar ? `; before: ${results.beforeJar}` : '; BENCH_BEFORE_JAR unset: no before-egress comparison'}`);
    const d = results.download;
    if (d) {
        L.push('');
        L.push(`1. 50 MiB over HTTP from a loopback fixture: host curl direct vs curl in a sandbox through the proxy `
            + `(EGRESS=on, WARM_POOL=off); ${d.rounds} alternating rounds after ${d.warmupRounds} warm-up rounds each`);
        L.push(`${'side'.padEnd(26)}${col('MB/s p50', 10)}${col('xfer p50', 11)}${col('xfer p95', 11)}${col('e2e p50', 11)}${col('e2e p95', 11)}`);
        L.push(`${'direct (host curl)'.padEnd(26)}${col(f1(d.direct.mbPerSecondP50), 10)}${col(ms(d.direct.transferMs.p50), 11)}${col(ms(d.direct.transferMs.p95), 11)}`
            + `${col(ms(d.direct.spawnMs.p50), 11)}${col(ms(d.direct.spawnMs.p95), 11)}`);
        L.push(`${'proxied (sandbox curl)'.padEnd(26)}${col(f1(d.proxied.mbPerSecondP50), 10)}${col(ms(d.proxied.transferMs.p50), 11)}${col(ms(d.proxied.transferMs.p95), 11)}`
            + `${col(ms(d.proxied.callMs.p50), 11)}${col(ms(d.proxied.callMs.p95), 11)}`);
        for (const mode of ['rw', 'splice']) {
            const r = d[`reference_${mode}`];
            if (r) L.push(`${`reference relay (${mode})`.padEnd(26)}${col(f1(r.mbPerSecondP50), 10)}${col(ms(r.transferMs.p50), 11)}${col(ms(r.transferMs.p95), 11)}`
                + `   ${f2(r.ratio)}x of direct: host curl through reference-relay.c, one hop, no checks`);
        }
        L.push(`xfer = curl's time_total; e2e = the curl spawn (direct) / the execute_code call (proxied; run p50 ${ms(d.proxied.runMs.p50)}, `
            + `proxy record ms p50 ${f1(d.proxied.recordMs.p50)}, bytesIn ${d.proxied.recordBytesIn.p50})`);
        L.push(`ratio proxied/direct ${f2(d.ratio)}x (goal >= 0.8x: ${d.ratio >= 0.8 ? 'PASS' : 'FAIL'})`);
    }
    const h = results.hello;
    if (h) {
        L.push('');
        L.push(`2. python hello, runs without egress: ${h.iterations} samples per side interleaved, every warm pool full before each `
            + `(untimed); throughput at concurrency ${h.concurrency}, ${h.throughputSecondsPerSide} s per side in ${h.throughputRounds} alternating rounds`);
        L.push(`   JIT warm-up: only ${h.warmupRunsPerServer} untimed runs per server (BENCH_WARMUP_RUNS), so absolute figures are above a long-running server's`);
        L.push(`${'side'.padEnd(28)}${col('p50', 10)}${col('p95', 10)}${col('run p50', 10)}${col('p50/bare', 10)}${col('runs/s', 9)}${col('tp/bare', 9)}`);
        for (const s of Object.values(h.sides))
            L.push(`${s.label.padEnd(28)}${col(ms(s.p50), 10)}${col(ms(s.p95), 10)}${col(s.runP50 === undefined ? '-' : ms(s.runP50), 10)}`
                + `${col(`${f2(s.p50VsBare)}x`, 10)}${col(s.runsPerSecond === undefined ? '-' : f1(s.runsPerSecond), 9)}${col(s.throughputVsBare === undefined ? '-' : `${f2(s.throughputVsBare)}x`, 9)}`);
        L.push(`egress on (network:false) / off: p50 ${f2(h.onVsOff.p50)}x, p95 ${f2(h.onVsOff.p95)}x, throughput ${f2(h.onVsOff.throughput)}x; `
            + `network omitted / off p50 ${f2(h.onVsOff.omittedP50)}x`);
        if (h.onVsBefore) L.push(`egress on (network:false) / before: p50 ${f2(h.onVsBefore.p50)}x, throughput ${f2(h.onVsBefore.throughput)}x; off / before p50 ${f2(h.onVsBefore.offVsBeforeP50)}x`);
    }
    const r = results.requests;
    if (r) {
        L.push('');
        L.push(`3. python requests.get of 1 KiB (n=${r.iterations}, interleaved): through the proxy on the EGRESS=on server vs the same script on the host`);
        L.push(`sandbox: call p50 ${ms(r.sandbox.callMs.p50)} (p95 ${ms(r.sandbox.callMs.p95)}), run p50 ${ms(r.sandbox.runMs.p50)}, `
            + `requests.get p50 ${ms(r.sandbox.getMs.p50)} (p95 ${ms(r.sandbox.getMs.p95)}), proxy record ms p50 ${f1(r.sandbox.recordMs.p50)} (p95 ${f1(r.sandbox.recordMs.p95)})`);
        L.push(`host:    spawn p50 ${ms(r.host.spawnMs.p50)}, requests.get p50 ${ms(r.host.getMs.p50)} (p95 ${ms(r.host.getMs.p95)}); `
            + `python hello on the same server p50 ${ms(r.helloSameServerMs.p50)}`);
        L.push(`per-connection overhead (requests.get p50, sandbox minus host): ${ms(r.getOverheadP50Ms)}`);
    }
    L.push('');
    L.push(notes.length ? `notes (${notes.length}):\n  ${[...new Set(notes)].slice(0, 20).join('\n  ')}` : 'notes: none (every connection allowed/closed, one record each, no WARN/ERROR log lines)');
    return L.join('\n');
}

async function main() {
    // One DATA_DIR for all servers (they may share one): the Go build cache is warmed once, by the first.
    // BENCH_DATA_DIR keeps it (and its warm Go cache) for the next run; else a fresh one, removed at the end.
    const ownDataDir = !process.env.BENCH_DATA_DIR;
    process.env.E2E_DATA_DIR = process.env.BENCH_DATA_DIR || mkdtempSync(join(tmpdir(), 'code-exec-egress-bench-data-'));
    if (!ownDataDir) mkdirSync(resolve(process.env.BENCH_DATA_DIR), { recursive: true });
    process.env.E2E_DATA_DIR = resolve(process.env.E2E_DATA_DIR);
    const results = { jar: JAR, beforeJar: BEFORE_JAR || null, loadBefore: loadavg()[0], phaseSeconds: {} };
    const notes = [];
    const fixture = await startFixture();
    const servers = {};
    const t0 = Date.now();
    try {
        const phase = async (name, fn) => {
            const t = Date.now();
            const v = await fn();
            results.phaseSeconds[name] = (Date.now() - t) / 1000;
            return v;
        };
        await phase('download', () => download(fixture, results, notes));
        const sess = await phase('hello', () => hello(fixture, results, notes, servers));
        await phase('requests', () => smallRequest(fixture, results, notes, servers, sess));
        for (const [k, s] of Object.entries(servers)) collectLogNotes(s, `${k} server`, notes);
    } finally {
        for (const s of Object.values(servers)) await s.stop().catch(() => {});
        fixture.server.closeAllConnections();
        await new Promise((r) => fixture.server.close(r));
        rmSync(scratch, { recursive: true, force: true });
        if (ownDataDir) rmSync(process.env.E2E_DATA_DIR, { recursive: true, force: true, maxRetries: 3 });
    }
    if (fixture.requests.other) notes.push(`fixture: ${fixture.requests.other} requests for unknown paths`);
    results.fixtureRequests = fixture.requests;
    results.loadAfter = loadavg()[0];
    results.wallSeconds = (Date.now() - t0) / 1000;
    results.notes = [...new Set(notes)];
    console.log(report(results, notes));
    console.log(`(${results.wallSeconds.toFixed(0)} s in all: ${Object.entries(results.phaseSeconds).map(([k, v]) => `${k} ${v.toFixed(0)} s`).join(', ')}, `
        + 'server starts and warm-ups included)');
    if (process.env.BENCH_JSON) writeFileSync(process.env.BENCH_JSON, JSON.stringify(results, null, 2));
}

main().catch((e) => {
    console.error(`egress-bench failed: ${e.stack || e}`);
    process.exit(1);
});
