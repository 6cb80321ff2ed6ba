// Benchmark of the two MCP revisions /mcp serves (issue 41): an `execute_code` shell call (`echo hi`) under
// 2025-11-25 (initialize once, then requests on its Mcp-Session-Id) and under 2026-07-28 (stateless: no initialize,
// no session; MCP-Protocol-Version, Mcp-Method and Mcp-Name headers, revision, client info and capabilities in
// params._meta), side by side in one run against ONE freshly started server, with the bare spawn of
// `sh -c 'echo hi'` on the host as the floor. Also what a new client of each revision pays before its first call:
// the 2025-11-25 handshake (initialize + notifications/initialized, on a new session each time; the session is
// DELETEd afterwards, untimed) and the 2026-07-28 `server/discover`.
//
// Each round times all five, interleaved so that machine noise falls on every row alike; the two execute_code calls
// swap places every round (A B, then B A), so that neither always comes right after the other. Before each timed
// execute_code the bench waits (untimed) until the shell warm pool is full again, so both revisions take a warm
// sandbox: a call that found the pool being refilled would run cold and measure the pool, not the revision.
// Every timed answer is checked (exit 0, stdout "hi"; discover lists 2026-07-28; the handshake agreed on 2025-11-25
// and gave a session id); anything else fails the run.
//
// Environment (defaults): BENCH_REVISIONS_ITERATIONS (100 timed rounds), BENCH_REVISIONS_WARMUP (20 untimed
// rounds), BENCH_JSON (write the figures there too), CODE_EXEC_JAR (the jar under test; default
// target/code-exec-mcp.jar).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir, loadavg } from 'node:os';
import { join } from 'node:path';
import { startServer } from '../lib/server.js';
import { RawSession } from '../lib/rawmcp.js';
import { pct, summary, timeIt, bareRun, fmt, writeJson } from './measure.js';

const N = Number(process.env.BENCH_REVISIONS_ITERATIONS || 100);
const WARMUP = Number(process.env.BENCH_REVISIONS_WARMUP ?? 20);
const OLD = '2025-11-25';
const NEW = '2026-07-28';
const ARGS = { language: 'shell', code: 'echo hi' };
const EXPECT = 'hi';
const CLIENT = { name: 'revisions-bench', version: '1' };

const scratch = mkdtempSync(join(tmpdir(), 'code-exec-bench-rev-'));
// The bare spawn gets a clean, small environment, as the sandbox does (as in bench.js).
const BARE = ['/bin/sh', ['-c', 'echo hi'], { PATH: '/usr/local/bin:/usr/bin:/bin', LANG: 'C.UTF-8', HOME: scratch }];

function fail(what, detail) {
    throw new Error(`revisions-bench: ${what}: ${typeof detail === 'string' ? detail : JSON.stringify(detail)}`.slice(0, 1500));
}

/** The JSON-RPC message answering `id` in a response body: its one JSON object, or the SSE event that carries it. */
function answerOf(res, text, id) {
    if ((res.headers.get('content-type') || '').includes('text/event-stream')) {
        for (const line of text.split('\n')) {
            if (!line.startsWith('data:')) continue;
            const msg = JSON.parse(line.slice(5));
            if (msg.id === id) return msg;
        }
        fail(`no response for id ${id} in the SSE body`, text.slice(0, 500));
    }
    return JSON.parse(text);
}

/** A 2025-11-25 session: RawSession (the benchmarks' raw client), asking for 2025-11-25 and checking it got it. */
class Session2025 extends RawSession {
    async open() {
        const init = await this.post({ jsonrpc: '2.0', id: this.nextId++, method: 'initialize',
            params: { protocolVersion: OLD, capabilities: {}, clientInfo: CLIENT } }, true);
        if (init.error || init.result?.protocolVersion !== OLD) fail(`initialize did not agree on ${OLD}`, init);
        if (!this.headers['Mcp-Session-Id']) fail('initialize gave no Mcp-Session-Id', init);
        this.headers['Mcp-Protocol-Version'] = OLD;
        await this.post({ jsonrpc: '2.0', method: 'notifications/initialized' });
        return this;
    }

    /** Ends the session (DELETE /mcp with its id); untimed housekeeping, so handshakes do not pile up sessions. */
    async close() {
        const r = await fetch(this.url, { method: 'DELETE', headers: this.headers });
        await r.arrayBuffer();
        return r.status;
    }
}

/** Revision 2026-07-28, stateless: each request stands alone (headers and _meta as in Revision2026Test.post). */
class Client2026 {
    constructor(url, apiKey) {
        this.url = url;
        this.apiKey = apiKey;
        this.nextId = 1;
    }

    async request(method, params = {}, name = null) {
        const id = this.nextId++;
        const body = { jsonrpc: '2.0', id, method, params: { ...params, _meta: { ...(params._meta || {}),
            'io.modelcontextprotocol/protocolVersion': NEW,
            'io.modelcontextprotocol/clientInfo': CLIENT,
            'io.modelcontextprotocol/clientCapabilities': {} } } };
        const headers = { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream',
            Authorization: `Bearer ${this.apiKey}`, 'MCP-Protocol-Version': NEW, 'Mcp-Method': method };
        if (name !== null) headers['Mcp-Name'] = name;
        const r = await fetch(this.url, { method: 'POST', headers, body: JSON.stringify(body) });
        const text = await r.text();
        if (r.status !== 200) fail(`${method} HTTP ${r.status}`, text.slice(0, 500));
        if (r.headers.get('mcp-session-id')) fail(`${method} under ${NEW} got an Mcp-Session-Id`, r.headers.get('mcp-session-id'));
        return answerOf(r, text, id);
    }

    async execute() {
        const res = await this.request('tools/call', { name: 'execute_code', arguments: ARGS }, 'execute_code');
        return checkRun(res, NEW);
    }

    async discover() {
        const res = await this.request('server/discover');
        if (res.error || !JSON.stringify(res.result?.supportedVersions ?? '').includes(NEW)) fail('server/discover', res);
        return res.result;
    }
}

/** structuredContent of a right answer to `echo hi` (exit 0, stdout "hi"); fails loudly on anything else. */
function checkRun(res, revision) {
    const sc = res.result?.structuredContent;
    if (res.error || res.result?.isError || !sc || sc.exitCode !== 0 || String(sc.stdout).trim() !== EXPECT
        || (res.result.resultType !== undefined && res.result.resultType !== 'complete'))
        fail(`execute_code under ${revision} did not answer "${EXPECT}"`, res);
    return sc;
}

/** The shell warm pool's counters from runtime_info (untimed; asked on the 2025-11-25 session). */
async function shellPool(s) {
    const r = await s.call('runtime_info');
    const text = (r.content || []).find((c) => c.type === 'text')?.text;
    const info = r.structuredContent ?? (text ? JSON.parse(text) : {});
    return info.warmPool?.languages?.shell ?? {};
}

async function execute2025(s) {
    const res = await s.post({ jsonrpc: '2.0', id: s.nextId++, method: 'tools/call',
        params: { name: 'execute_code', arguments: ARGS } });
    return checkRun(res, OLD);
}

const load = loadavg()[0];
const srv = await startServer({});
let failed = false;
try {
    const health = (await srv.healthz()).body;
    const poolTarget = health.warmPool?.shell?.target ?? 0;
    // Waits (untimed) until the shell pool is full again; no pool (no bwrap, or WARM_POOL without shell): no wait.
    const waitPool = async () => {
        if (poolTarget > 0 && !(await srv.waitWarm('shell', poolTarget, 30_000))) fail('shell warm pool not refilled in 30 s', (await srv.healthz()).body);
    };
    const old = await new Session2025(srv.url, srv.apiKey).open();
    const neu = new Client2026(srv.url, srv.apiKey);
    const bare = () => bareRun(BARE, { cwd: scratch, expect: EXPECT });
    const handshake = async () => {
        const s = new Session2025(srv.url, srv.apiKey);
        const ms = await timeIt(() => s.open());
        const st = await s.close();
        if (st >= 300 && st !== 405) fail('DELETE of a handshake session', `HTTP ${st}`);
        return ms;
    };

    const t = { exec2025: [], exec2026: [], bare: [], handshake2025: [], discover2026: [], paired: [],
        serverMs2025: [], serverMs2026: [] };
    const round = async (i, timed) => {
        const one = async (rev) => {
            await waitPool();
            let sc;
            const ms = await timeIt(async () => { sc = rev === OLD ? await execute2025(old) : await neu.execute(); });
            return { ms, serverMs: sc.durationMs };
        };
        const order = i % 2 === 0 ? [OLD, NEW] : [NEW, OLD];
        const got = {};
        for (const rev of order) got[rev] = await one(rev);
        const b = await timeIt(bare);
        const h = await handshake();
        const d = await timeIt(() => neu.discover());
        if (!timed) return;
        t.exec2025.push(got[OLD].ms);
        t.exec2026.push(got[NEW].ms);
        t.paired.push(got[NEW].ms - got[OLD].ms);
        if (typeof got[OLD].serverMs === 'number') t.serverMs2025.push(got[OLD].serverMs);
        if (typeof got[NEW].serverMs === 'number') t.serverMs2026.push(got[NEW].serverMs);
        t.bare.push(b);
        t.handshake2025.push(h);
        t.discover2026.push(d);
    };
    for (let i = 0; i < WARMUP; i++) await round(i, false);
    const before = await shellPool(old);
    for (let i = 0; i < N; i++) await round(i, true);
    const after = await shellPool(old);
    // every timed execute_code should have taken a warm sandbox: 2 per round, none missed
    const pool = { served: (after.served ?? 0) - (before.served ?? 0), missed: (after.missed ?? 0) - (before.missed ?? 0) };

    const s = Object.fromEntries(['exec2025', 'exec2026', 'bare', 'handshake2025', 'discover2026'].map((k) => [k, summary(t[k])]));
    const results = {
        revisions: {
            iterations: N, warmup: WARMUP, shellWarmPool: poolTarget, shellPoolDuringTimedRounds: pool, loadBefore: load, loadAfter: loadavg()[0],
            ...s,
            serverDurationMsP50: { exec2025: t.serverMs2025.length ? pct(t.serverMs2025, 50) : null,
                exec2026: t.serverMs2026.length ? pct(t.serverMs2026, 50) : null },
            pairedDifferenceMs: summary(t.paired), // per round: 2026 call minus 2025 call
            ratios: {
                exec2026Over2025: { p50: s.exec2026.p50 / s.exec2025.p50, p95: s.exec2026.p95 / s.exec2025.p95 },
                exec2025OverBare: { p50: s.exec2025.p50 / s.bare.p50, p95: s.exec2025.p95 / s.bare.p95 },
                exec2026OverBare: { p50: s.exec2026.p50 / s.bare.p50, p95: s.exec2026.p95 / s.bare.p95 },
                discover2026OverHandshake2025: { p50: s.discover2026.p50 / s.handshake2025.p50, p95: s.discover2026.p95 / s.handshake2025.p95 },
            },
        },
    };
    const r = results.revisions;
    const x = (v) => `${v.toFixed(2)}x`.padStart(7);
    const row = (label, k, extra = '') => console.log(`${label.padEnd(48)}${fmt(s[k].p50)}${fmt(s[k].p95)}${extra}`);
    console.log(`MCP revisions, ${N} rounds after ${WARMUP} untimed, one server (shell warm pool ${poolTarget}), `
        + `load average ${load.toFixed(1)} before, ${r.loadAfter.toFixed(1)} after`);
    console.log(`${''.padEnd(48)}${'p50'.padStart(10)}${'p95'.padStart(10)}   vs bare p50 / p95`);
    row(`execute_code shell "echo hi", ${OLD}`, 'exec2025', `   ${x(r.ratios.exec2025OverBare.p50)} ${x(r.ratios.exec2025OverBare.p95)}`);
    row(`execute_code shell "echo hi", ${NEW}`, 'exec2026', `   ${x(r.ratios.exec2026OverBare.p50)} ${x(r.ratios.exec2026OverBare.p95)}`);
    row(`bare sh -c 'echo hi' on the host`, 'bare');
    row(`new client: ${OLD} initialize + initialized`, 'handshake2025');
    row(`new client: ${NEW} server/discover`, 'discover2026');
    console.log(`execute_code ${NEW}/${OLD}: p50 ${x(r.ratios.exec2026Over2025.p50).trim()}, p95 ${x(r.ratios.exec2026Over2025.p95).trim()}; `
        + `paired difference (${NEW} minus ${OLD}) p50 ${r.pairedDifferenceMs.p50.toFixed(2)} ms, p95 ${r.pairedDifferenceMs.p95.toFixed(2)} ms; `
        + `server's own durationMs p50 ${r.serverDurationMsP50.exec2025} / ${r.serverDurationMsP50.exec2026} ms`);
    console.log(`new client: server/discover / handshake p50 ${x(r.ratios.discover2026OverHandshake2025.p50).trim()}, `
        + `p95 ${x(r.ratios.discover2026OverHandshake2025.p95).trim()}`);
    console.log(`shell warm pool during the timed rounds: ${pool.served} served, ${pool.missed} missed (of ${2 * N} calls)`
        + (poolTarget > 0 && (pool.served !== 2 * N || pool.missed) ? '  WARNING: not every timed call was warm' : ''));
    if (process.env.BENCH_JSON) writeJson(process.env.BENCH_JSON, results);
} catch (e) {
    failed = true;
    console.error(e.stack || String(e));
    console.error(`--- server log (tail) ---\n${srv.log().slice(-3000)}`);
} finally {
    await srv.stop();
    rmSync(scratch, { recursive: true, force: true });
}
if (failed) process.exit(1);
