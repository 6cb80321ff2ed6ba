// Benchmark of declared packages (execute_code's `packages`): what a run whose set is already in the package store
// costs next to the same run without `packages`, what a first install costs, and how big the store gets. One
// machine, one run, servers started fresh (as users meet them, no long JIT warm-up), samples interleaved so that
// machine drift hits every side alike. The issue's goal: "A run whose packages are already in the store: p50 at most
// 5 ms more than the same run without `packages`."
//   1. python `print(6*7)` with packages ["tinylib==1.0"] (installed once, untimed, before) against the same code
//      without packages; beside them the same run with `import tinylib` (what using the set adds) and the bare
//      spawn of `/usr/bin/python3 -c 'print(6*7)'` on the host (no sandbox, no server: the ratio reference). Each
//      round runs every side once, in rotated order. Timed: the execute_code round trip from the client (raw
//      JSON-RPC over fetch, one session: lib/rawmcp.js), and from the server: the run's durationMs (program start
//      to end, whole ms, truncated) and its sandbox start (codeexec_sandbox_start_seconds of /metrics, scraped
//      untimed after every run: its one new sample, with its start="warm"|"cold" label). What is left of the
//      round trip is HTTP, JSON-RPC, the store lookup and the result.
//      Twice, on two servers one after the other:
//      (a) WARM_POOL=off: both sides start cold, so the difference is what the store and its mount cost;
//      (b) WARM_POOL at its default (python=2,nodejs=1): what a user sees. The side without packages is served by a
//          warm sandbox; the side with packages too when the server hands a warm sandbox the set's entry, else it
//          starts cold (then (b) compares a cold start with a warm one). The report's `started` column and the
//          title of (b) say which, from the server's own count of warm and cold starts. Every warm pool is full
//          before each sample (waited for, untimed).
//      PASS/FAIL against 5 ms on the p50 difference of (a); (b) reported as measured, with the same verdict.
//   2. The first install of a small set on an empty store, on server (b): each repetition clears the store
//      (DELETE /api/admin/packages) and runs `import tinylib; print(tinylib.VERSION)` with ["tinylib==1.0"] and
//      with ["tinylib==2.0"] (which pulls in tinydep 1.0), in alternating order: installMs as the result reports
//      it, the round trip, and how many requests the index saw. Beside them the server's very first install
//      (server (a), just started: its JVM, pip and the index all cold).
//   3. The store after those installs: GET /api/admin/packages (counts.bytes, each entry's bytes) and du of
//      DATA_DIR/packages (what the entries take on disk).
// Beside the figures, the CPU the machine spent during each timed part: this benchmark's own (this process with the
// bare spawns, the server JVM with the sandboxes it reaped) and everything else's (/proc/stat's busy time minus
// ours): other work on the machine hits every side, unevenly, and a note says when there was some.
// The index: e2e/fixtures/pypi-index.mjs on 127.0.0.1, which the servers reach as pypi.test (EGRESS_RESOLVE) through
// their egress proxy with EGRESS_ALLOW_CIDRS=127.0.0.1/32. Only loopback traffic.
//
// Environment (defaults): BENCH_PKG_ROUNDS (100 timed rounds per server), BENCH_PKG_WARMUP (5 untimed rounds first),
// BENCH_PKG_INSTALLS (5 repetitions of part 2), BENCH_JSON (write the figures there too), CODE_EXEC_JAR (the jar
// under test; default target/code-exec-mcp.jar), BENCH_DATA_DIR (the servers' DATA_DIR, kept afterwards so that a
// later run skips the Go cache warm-up; default a fresh one, removed).
import { spawn, execFileSync } from 'node:child_process';
import { mkdtempSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir, loadavg, cpus } from 'node:os';
import { join, resolve } from 'node:path';
import { startServer, sleep, JAR } from '../lib/server.js';
import { RawSession } from '../lib/rawmcp.js';
import { pct } from './measure.js';
import { startPypiIndex } from '../fixtures/pypi-index.mjs';

const ROUNDS = Number(process.env.BENCH_PKG_ROUNDS || 100);
const WARMUP = Number(process.env.BENCH_PKG_WARMUP ?? 5);
const INSTALLS = Number(process.env.BENCH_PKG_INSTALLS || 5);
const GOAL_MS = 5;
const SET = ['tinylib==1.0'];
const CODE = 'print(6*7)';
const CODE_IMPORT = 'import tinylib\nprint(6*7)';
const BARE = ['/usr/bin/python3', ['-c', 'print(6*7)']];

const scratch = mkdtempSync(join(tmpdir(), 'code-exec-packages-bench-'));
// The bare spawn gets a clean, small environment, as the sandbox does (bench.js does the same).
const bareEnv = { PATH: '/usr/local/bin:/usr/bin:/bin', LANG: 'C.UTF-8', HOME: scratch };

// ---------------------------------------------------------------- helpers

const summary = (xs) => (xs.length ? { n: xs.length, p50: pct(xs, 50), p95: pct(xs, 95), min: Math.min(...xs), max: Math.max(...xs) }
    : { n: 0 });
const f1 = (x) => (x === undefined || Number.isNaN(x) ? '-' : x.toFixed(1));
const f2 = (x) => (x === undefined || Number.isNaN(x) ? '-' : x.toFixed(2));
const sgn = (x) => (x === undefined || Number.isNaN(x) ? '-' : `${x >= 0 ? '+' : ''}${x.toFixed(2)}`);
const col = (s, w) => String(s).padStart(w);
const KiB = (b) => `${(b / 1024).toFixed(1)} KiB`;

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

/** The server's python sandbox starts so far, from /metrics: { cold: {count, sum}, warm: {count, sum} } (sum in s). */
async function starts(server) {
    const r = await fetch(`${server.base}/metrics`, { headers: { Authorization: `Bearer ${server.apiKey}` } });
    const text = await r.text();
    if (r.status !== 200) throw new Error(`GET /metrics: HTTP ${r.status}: ${text.slice(0, 200)}`);
    const out = { cold: { count: 0, sum: 0 }, warm: { count: 0, sum: 0 } };
    for (const line of text.split('\n')) {
        const m = /^codeexec_sandbox_start_seconds_(count|sum)\{([^}]*)\}\s+(\S+)/.exec(line);
        if (!m) continue;
        const labels = Object.fromEntries([...m[2].matchAll(/(\w+)="([^"]*)"/g)].map((x) => [x[1], x[2]]));
        if (labels.language !== 'python' || !out[labels.start]) continue;
        out[labels.start][m[1]] += Number(m[3]);
    }
    return out;
}

/** The one sandbox start between two /metrics scrapes: { kind: 'cold'|'warm'|'?', ms }. */
function startBetween(a, b) {
    const dc = b.cold.count - a.cold.count;
    const dw = b.warm.count - a.warm.count;
    if (dc + dw !== 1) return { kind: '?', ms: NaN };
    const k = dc === 1 ? 'cold' : 'warm';
    return { kind: k, ms: (b[k].sum - a[k].sum) * 1000 };
}

/** utime + stime + cutime + cstime of a process (its reaped children included), in USER_HZ ticks (1/100 s). */
function cpuTicks(pid) {
    const st = readFileSync(`/proc/${pid}/stat`, 'latin1');
    const f = st.slice(st.lastIndexOf(')') + 2).split(' '); // f[0] is field 3 (state): utime is field 14
    return Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14]);
}

/**
 * A CPU snapshot: the machine's busy ticks (/proc/stat user+nice+system+irq+softirq), its steal, and this
 * benchmark's own (this process, with the bare spawns it reaped, and the server JVM, with the sandboxes it reaped).
 */
function cpuSnapshot(server) {
    const v = readFileSync('/proc/stat', 'latin1').split('\n')[0].trim().split(/\s+/).slice(1).map(Number);
    return { at: process.hrtime.bigint(), busy: v[0] + v[1] + v[2] + v[5] + v[6], steal: v[7] ?? 0,
        ours: cpuTicks('self') + cpuTicks(server.pid) };
}

/** Cores busy on average between two snapshots: { ours, others (everything else on the machine), steal }. */
function cpuBetween(a, b) {
    const s = Number(b.at - a.at) / 1e9;
    const cores = (ticks) => Math.round((ticks / 100 / s) * 100) / 100;
    return { seconds: Math.round(s * 10) / 10, ours: cores(b.ours - a.ours), others: cores(Math.max(0, (b.busy - a.busy) - (b.ours - a.ours))),
        steal: cores(b.steal - a.steal) };
}

/** The admin API with the server's API_KEY. */
async function admin(server, method, path) {
    const r = await fetch(`${server.base}${path}`, { method, headers: { Authorization: `Bearer ${server.apiKey}` } });
    const text = await r.text();
    if (r.status !== 200) throw new Error(`${method} ${path}: HTTP ${r.status}: ${text.slice(0, 300)}`);
    return JSON.parse(text);
}

/**
 * One execute_code call, timed from the client; throws unless it exited 0 with `expect` on stdout.
 * Returns { ms (round trip), sc (structuredContent) }.
 */
async function execute(session, code, packages, expect) {
    const args = { language: 'python', code };
    if (packages) args.packages = packages;
    const msg = { jsonrpc: '2.0', id: session.nextId++, method: 'tools/call', params: { name: 'execute_code', arguments: args } };
    const t = process.hrtime.bigint();
    const res = await session.post(msg);
    const ms = Number(process.hrtime.bigint() - t) / 1e6;
    const sc = res.result?.structuredContent;
    if (res.error || res.result?.isError || !sc || sc.exitCode !== 0 || sc.stdout.trim() !== expect)
        throw new Error(`unexpected result: ${JSON.stringify(res).slice(0, 2000)}`);
    return { ms, sc };
}

/** The bare spawn on the host, timed (ms). */
function bareRun() {
    return new Promise((res, rej) => {
        const t = process.hrtime.bigint();
        const child = spawn(BARE[0], BARE[1], { env: bareEnv, cwd: scratch, stdio: ['ignore', 'pipe', 'pipe'] });
        let out = '';
        let err = '';
        child.stdout.on('data', (b) => { out += b; });
        child.stderr.on('data', (b) => { err += b; });
        child.on('error', rej);
        child.on('close', (code) => {
            const ms = Number(process.hrtime.bigint() - t) / 1e6;
            if (code === 0 && out.trim() === '42') res(ms);
            else rej(new Error(`bare python3 exited ${code}: ${err}`));
        });
    });
}

/** du -sb / -sk of a directory: { bytes (apparent), diskBytes (allocated) }, or null. */
function du(dir) {
    try {
        const apparent = Number(execFileSync('du', ['-sb', dir], { encoding: 'utf8' }).split('\t')[0]);
        const disk = Number(execFileSync('du', ['-sk', dir], { encoding: 'utf8' }).split('\t')[0]) * 1024;
        return { bytes: apparent, diskBytes: disk };
    } catch (e) {
        return null;
    }
}

// ---------------------------------------------------------------- part 1: from the store vs without packages

/**
 * The sides of part 1 on `server`, interleaved: WARMUP untimed rounds, then ROUNDS timed ones. Returns per side
 * the samples { ms (round trip), run (durationMs), start (ms), kind ('cold'|'warm'), round } (the bare side: ms, round).
 */
async function sideBySide(server, session, label) {
    const call = (code, packages) => async () => {
        await waitPoolsFull(server);
        const a = await starts(server);
        const { ms, sc } = await execute(session, code, packages, '42');
        const b = await starts(server);
        const s = startBetween(a, b);
        if (packages && sc.installMs !== 0) throw new Error(`${label}: a run of a stored set reported installMs ${sc.installMs}`);
        if (packages && JSON.stringify(sc.packages) !== JSON.stringify({ tinylib: '1.0' }))
            throw new Error(`${label}: packages ${JSON.stringify(sc.packages)}`);
        return { ms, run: sc.durationMs, start: s.ms, kind: s.kind };
    };
    const sides = [
        ['without', call(CODE)],
        ['with', call(CODE, SET)],
        ['withImport', call(CODE_IMPORT, SET)],
        ['bare', async () => {
            await waitPoolsFull(server);
            return { ms: await bareRun() };
        }],
    ];
    const got = Object.fromEntries(sides.map(([n]) => [n, []]));
    for (let i = 0; i < WARMUP + ROUNDS; i++) {
        for (let k = 0; k < sides.length; k++) {
            const [name, fn] = sides[(i + k) % sides.length];
            const r = await fn();
            if (i >= WARMUP) got[name].push({ ...r, round: i - WARMUP });
        }
    }
    return got;
}

/** Figures of one server's part 1. */
function phaseFigures(got, warmPool) {
    const side = (xs) => {
        const o = { e2e: summary(xs.map((x) => x.ms)) };
        if (xs[0]?.run !== undefined) {
            o.durationMs = summary(xs.map((x) => x.run));
            const st = xs.filter((x) => !Number.isNaN(x.start));
            o.startMs = summary(st.map((x) => x.start));
            o.otherMs = summary(st.map((x) => x.ms - x.run - x.start)); // HTTP, JSON-RPC, store lookup, result
            o.starts = { cold: xs.filter((x) => x.kind === 'cold').length, warm: xs.filter((x) => x.kind === 'warm').length,
                unknown: xs.filter((x) => x.kind === '?').length };
        }
        return o;
    };
    const f = { warmPool, sides: Object.fromEntries(Object.entries(got).map(([k, xs]) => [k, side(xs)])) };
    const S = f.sides;
    const bare = S.bare.e2e.p50;
    for (const k of ['without', 'with', 'withImport']) S[k].ratioToBare = S[k].e2e.p50 / bare;
    // the median of the rounds' differences (each round's two samples of a pair): slow drift cancels
    const paired = (a, b, v = (x) => x.ms) => pct(got[a].map((x, j) => v(x) - v(got[b][j])).filter((x) => !Number.isNaN(x)), 50);
    const other = (x) => x.ms - x.run - x.start;
    f.diff = {
        p50: S.with.e2e.p50 - S.without.e2e.p50,
        p95: S.with.e2e.p95 - S.without.e2e.p95,
        pairedP50: paired('with', 'without'),
        durationP50: S.with.durationMs.p50 - S.without.durationMs.p50,
        startP50: S.with.startMs.p50 - S.without.startMs.p50,
        otherP50: S.with.otherMs.p50 - S.without.otherMs.p50,
        durationPairedP50: paired('with', 'without', (x) => x.run),
        startPairedP50: paired('with', 'without', (x) => x.start),
        otherPairedP50: paired('with', 'without', other),
        importP50: S.withImport.e2e.p50 - S.with.e2e.p50,
        importPairedP50: paired('withImport', 'with'),
    };
    f.pass = f.diff.p50 <= GOAL_MS;
    const r2 = (x) => (typeof x === 'number' ? Math.round(x * 100) / 100 : x);
    f.samples = Object.fromEntries(Object.entries(got).map(([k, xs]) => [k, xs.map((x) => Object.fromEntries(
        Object.entries(x).map(([kk, v]) => [kk, r2(v)])))]));
    return f;
}

// ---------------------------------------------------------------- part 2: first installs

const INSTALL_SETS = [
    { name: 'tinylib==1.0', packages: ['tinylib==1.0'], expect: '1.0', resolved: { tinylib: '1.0' } },
    { name: 'tinylib==2.0', packages: ['tinylib==2.0'], expect: '2.0', resolved: { tinydep: '1.0', tinylib: '2.0' } },
];
const INSTALL_CODE = 'import tinylib\nprint(tinylib.VERSION)';

/** One run that must install `set` now: { installMs, ms, run, indexRequests }. */
async function installOnce(server, session, index, set) {
    await waitPoolsFull(server);
    const r0 = index.requests.length;
    const { ms, sc } = await execute(session, INSTALL_CODE, set.packages, set.expect);
    if (!(sc.installMs > 0)) throw new Error(`${set.name}: expected an install, got installMs ${sc.installMs}`);
    const sorted = (o) => JSON.stringify(Object.fromEntries(Object.entries(o ?? {}).sort(([a], [b]) => a.localeCompare(b))));
    if (sorted(sc.packages) !== sorted(set.resolved)) throw new Error(`${set.name}: packages ${JSON.stringify(sc.packages)}`);
    return { installMs: sc.installMs, ms, run: sc.durationMs, indexRequests: index.requests.length - r0 };
}

async function installs(server, session, index) {
    const got = Object.fromEntries(INSTALL_SETS.map((s) => [s.name, []]));
    for (let i = 0; i < INSTALLS; i++) {
        const cleared = await admin(server, 'DELETE', '/api/admin/packages');
        const st = await admin(server, 'GET', '/api/admin/packages');
        if (st.entries.length !== 0) throw new Error(`the store is not empty after DELETE: ${JSON.stringify(cleared)} ${JSON.stringify(st.entries)}`);
        const order = i % 2 === 0 ? INSTALL_SETS : [...INSTALL_SETS].reverse();
        for (const set of order) got[set.name].push(await installOnce(server, session, index, set));
    }
    return Object.fromEntries(INSTALL_SETS.map((s) => {
        const xs = got[s.name];
        return [s.name, { resolved: s.resolved, installMs: summary(xs.map((x) => x.installMs)), e2e: summary(xs.map((x) => x.ms)),
            e2eMinusInstall: summary(xs.map((x) => x.ms - x.installMs)), durationMs: summary(xs.map((x) => x.run)),
            indexRequests: summary(xs.map((x) => x.indexRequests)), samples: xs }];
    }));
}

// ---------------------------------------------------------------- the benchmark

function serverEnv(index, extra) {
    return {
        LOG_LEVEL: 'warn',
        PACKAGE_INDEX_PYTHON: index.urlFor('pypi.test'),
        EGRESS_RESOLVE: 'pypi.test=127.0.0.1',
        EGRESS_ALLOW_CIDRS: '127.0.0.1/32',
        ...extra,
    };
}

function serverNotes(server, label, notes) {
    const lines = server.log().split('\n').filter((l) => /\b(WARN|ERROR)\b/.test(l));
    if (lines.length) notes.push(`server ${label}: ${lines.length} WARN/ERROR log lines, e.g. ${lines.slice(0, 3).map((l) => l.slice(0, 240)).join(' | ')}`);
}

async function bench(results, notes) {
    const index = await startPypiIndex();
    let server;
    try {
        // (a) WARM_POOL=off
        process.stderr.write(`packages-bench: server (a) WARM_POOL=off${results.freshDataDir ? ' (a fresh DATA_DIR: it first warms its Go build cache)' : ''} ...\n`);
        let t = Date.now();
        server = await startServer(serverEnv(index, { WARM_POOL: 'off' }));
        results.seconds = { startA: (Date.now() - t) / 1000 };
        let session = await new RawSession(server.url, server.apiKey).open();
        await admin(server, 'DELETE', '/api/admin/packages'); // a kept BENCH_DATA_DIR may hold entries: the first install is a real one
        let r = await execute(session, CODE, SET, '42');
        results.firstInstallOfServer = { set: SET, installMs: r.sc.installMs, ms: r.ms, durationMs: r.sc.durationMs };
        process.stderr.write(`packages-bench: (a) ${WARMUP} untimed + ${ROUNDS} timed rounds ...\n`);
        t = Date.now();
        let c0 = cpuSnapshot(server);
        results.off = phaseFigures(await sideBySide(server, session, '(a)'), 'off');
        results.cpu = { roundsA: cpuBetween(c0, cpuSnapshot(server)) };
        results.seconds.roundsA = (Date.now() - t) / 1000;
        serverNotes(server, '(a)', notes);
        await server.stop();
        server = null;

        // (b) WARM_POOL default
        process.stderr.write('packages-bench: server (b) WARM_POOL default ...\n');
        server = await startServer(serverEnv(index, {}));
        session = await new RawSession(server.url, server.apiKey).open();
        const pool = (await server.healthz()).body.warmPool ?? {};
        r = await execute(session, CODE, SET, '42'); // in the store since (a): installMs 0
        if (r.sc.installMs !== 0) notes.push(`(b): the set was not in the store at start (installMs ${r.sc.installMs})`);
        process.stderr.write(`packages-bench: (b) ${WARMUP} untimed + ${ROUNDS} timed rounds ...\n`);
        t = Date.now();
        c0 = cpuSnapshot(server);
        results.default = phaseFigures(await sideBySide(server, session, '(b)'),
            Object.entries(pool).map(([k, v]) => `${k}=${v.target}`).join(',') || 'none');
        results.cpu.roundsB = cpuBetween(c0, cpuSnapshot(server));
        results.seconds.roundsB = (Date.now() - t) / 1000;

        process.stderr.write(`packages-bench: first installs, ${INSTALLS} repetitions on an emptied store ...\n`);
        t = Date.now();
        c0 = cpuSnapshot(server);
        results.installs = await installs(server, session, index);
        results.cpu.installs = cpuBetween(c0, cpuSnapshot(server));
        results.seconds.installs = (Date.now() - t) / 1000;
        const st = await admin(server, 'GET', '/api/admin/packages');
        results.store = { counts: st.counts, entries: st.entries.map((e) => ({ key: e.key, specs: e.specs, resolved: e.resolved, bytes: e.bytes })),
            du: du(join(server.dataDir, 'packages')) };
        serverNotes(server, '(b)', notes);
    } finally {
        await server?.stop().catch(() => {});
        await index.stop();
    }
}

// ---------------------------------------------------------------- report

/** How a side's runs started: "cold", "warm", or "mixed". */
const startedAs = (o) => (o.starts.cold === o.e2e.n ? 'cold' : o.starts.warm === o.e2e.n ? 'warm' : 'mixed');

function phaseLines(L, f, title) {
    const S = f.sides;
    L.push(title);
    L.push(`${'side'.padEnd(52)}${col('e2e p50', 9)}${col('p95', 8)}${col('min', 8)}${col('x bare', 8)}${col('run p50', 9)}`
        + `${col('start p50', 11)}${col('other p50', 11)}  started`);
    const row = (label, o) => L.push(`${label.padEnd(52)}${col(f2(o.e2e.p50), 9)}${col(f2(o.e2e.p95), 8)}${col(f2(o.e2e.min), 8)}`
        + `${col(o.ratioToBare ? `${o.ratioToBare.toFixed(2)}x` : '', 8)}${col(o.durationMs ? o.durationMs.p50 : '', 9)}`
        + `${col(o.startMs ? f2(o.startMs.p50) : '', 11)}${col(o.otherMs ? f2(o.otherMs.p50) : '', 11)}`
        + `${o.starts ? `  ${o.starts.cold} cold, ${o.starts.warm} warm${o.starts.unknown ? `, ${o.starts.unknown} ?` : ''}` : ''}`);
    row(`without packages, print(6*7) (${startedAs(S.without)})`, S.without);
    row(`with ["tinylib==1.0"] stored, print(6*7) (${startedAs(S.with)})`, S.with);
    row(`with ["tinylib==1.0"] stored, import tinylib (${startedAs(S.withImport)})`, S.withImport);
    row("bare /usr/bin/python3 -c 'print(6*7)' on the host", S.bare);
    const d = f.diff;
    L.push(`with - without: p50 ${sgn(d.p50)} ms, p95 ${sgn(d.p95)} ms, paired by round (median of the rounds' differences) `
        + `${sgn(d.pairedP50)} ms; goal p50 <= ${GOAL_MS} ms: ${f.pass ? 'PASS' : 'FAIL'}`);
    L.push(`  where it goes, with - without (p50s; paired): run (durationMs) ${sgn(d.durationP50)}; ${sgn(d.durationPairedP50)}, `
        + `sandbox start ${sgn(d.startP50)}; ${sgn(d.startPairedP50)}, other (HTTP, JSON-RPC, store lookup, result) `
        + `${sgn(d.otherP50)}; ${sgn(d.otherPairedP50)} ms`);
    L.push(`  import tinylib from the mounted entry: ${sgn(d.importP50)} ms p50 (paired ${sgn(d.importPairedP50)})`);
}

function report(results, notes) {
    const L = [];
    L.push(`code-exec-mcp declared-packages benchmark, one run (${new Date().toISOString()}; ${cpus().length} cpus, load avg `
        + `${results.loadBefore.map((x) => x.toFixed(1)).join('/')} before, ${results.loadAfter.map((x) => x.toFixed(1)).join('/')} after)`);
    L.push(`jar ${results.jar}; index: e2e/fixtures/pypi-index.mjs on 127.0.0.1 (as pypi.test through the egress proxy, `
        + 'EGRESS_ALLOW_CIDRS=127.0.0.1/32); servers started fresh, one after the other, on one DATA_DIR');
    L.push(`${results.rounds} timed rounds per server after ${results.warmupRounds} untimed, each side once per round in rotated order, `
        + 'every warm pool full before each sample (untimed)');
    const C = results.cpu ?? {};
    const cpuPart = (k, label) => (C[k] ? `${label} ${f2(C[k].ours)} / ${f2(C[k].others)} / ${f2(C[k].steal)}` : '');
    L.push(`CPU during the timed parts, cores busy on average (this benchmark: client, server, sandboxes / other processes / steal): `
        + [cpuPart('roundsA', '(a)'), cpuPart('roundsB', '(b)'), cpuPart('installs', 'installs')].filter(Boolean).join('; '));
    L.push('');
    L.push('1. a run whose packages are in the store vs the same run without packages (python, ms)');
    L.push('   e2e = the execute_code round trip from the client; run = durationMs (program start to end, whole ms);');
    L.push('   start = codeexec_sandbox_start_seconds (sandbox start until the program runs); other = e2e - run - start');
    phaseLines(L, results.off, '(a) WARM_POOL=off: both sides start cold (what the store and its mount cost)');
    L.push('');
    const B = results.default;
    const [bw, bp] = [startedAs(B.sides.without), startedAs(B.sides.with)];
    const how = bw === 'warm' && bp === 'cold' ? 'without packages served warm, with packages cold (this server gives a run with '
        + 'packages no warm sandbox)'
        : bw === 'warm' && bp === 'warm' ? 'both sides served warm (this server hands a warm sandbox the set\'s entry)'
            : `without packages ${bw}, with packages ${bp}`;
    phaseLines(L, B, `(b) WARM_POOL default (${B.warmPool}): ${how}: what a user sees`);
    if (!B.pass && bw !== bp) L.push(`  (b) misses the ${GOAL_MS} ms goal: it compares a ${bp} start with a ${bw} one`);
    L.push('');
    const I = results.installs;
    L.push(`2. first install on an emptied store (DELETE /api/admin/packages before each of ${results.installReps} repetitions; `
        + `code: import tinylib; print(tinylib.VERSION))`);
    L.push(`${'set'.padEnd(16)}${'resolved'.padEnd(26)}${col('installMs p50', 14)}${col('p95', 7)}${col('min', 7)}${col('e2e p50', 9)}`
        + `${col('p95', 7)}${col('e2e-install p50', 16)}${col('index reqs', 11)}`);
    for (const [name, o] of Object.entries(I)) {
        L.push(`${name.padEnd(16)}${Object.entries(o.resolved).map(([k, v]) => `${k} ${v}`).join(', ').padEnd(26)}`
            + `${col(o.installMs.p50, 14)}${col(o.installMs.p95, 7)}${col(o.installMs.min, 7)}${col(f1(o.e2e.p50), 9)}${col(f1(o.e2e.p95), 7)}`
            + `${col(f1(o.e2eMinusInstall.p50), 16)}${col(o.indexRequests.p50, 11)}`);
    }
    const F = results.firstInstallOfServer;
    L.push(`the first install of server (a), just started (tinylib==1.0): installMs ${F.installMs}, e2e ${f1(F.ms)} ms`);
    L.push('');
    const S = results.store;
    L.push(`3. the store after them (GET /api/admin/packages): counts.bytes ${S.counts.bytes} (${KiB(S.counts.bytes)}) in `
        + `${S.entries.length} entries; counts: installs ${S.counts.installs}, hits ${S.counts.hits}, misses ${S.counts.misses}, `
        + `failures ${S.counts.failures}, evictions ${S.counts.evictions}`);
    for (const e of S.entries)
        L.push(`   ${e.specs.join(' ').padEnd(16)}${Object.entries(e.resolved).map(([k, v]) => `${k} ${v}`).join(', ').padEnd(26)}${col(e.bytes, 8)} bytes  ${e.key}`);
    if (S.du) L.push(`   on disk (du of DATA_DIR/packages, directories and each entry's .entry.json included): ${S.du.bytes} bytes `
        + `apparent, ${KiB(S.du.diskBytes)} allocated`);
    L.push('');
    L.push(notes.length ? `notes (${notes.length}):\n  ${[...new Set(notes)].slice(0, 20).join('\n  ')}` : 'notes: none (no WARN/ERROR log lines)');
    return L.join('\n');
}

async function main() {
    const ownDataDir = !process.env.BENCH_DATA_DIR;
    process.env.E2E_DATA_DIR = resolve(process.env.BENCH_DATA_DIR || mkdtempSync(join(tmpdir(), 'code-exec-packages-bench-data-')));
    if (!ownDataDir) mkdirSync(process.env.E2E_DATA_DIR, { recursive: true });
    const results = { jar: JAR, freshDataDir: ownDataDir, loadBefore: loadavg(), rounds: ROUNDS, warmupRounds: WARMUP, installReps: INSTALLS,
        goalMs: GOAL_MS };
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
    const busy = Object.entries(results.cpu ?? {}).filter(([, c]) => c.others > 0.1 || c.steal > 0.1);
    const partName = { roundsA: 'rounds (a)', roundsB: 'rounds (b)', installs: 'installs' };
    if (busy.length) notes.push(`other processes shared the ${cpus().length} cores during ${busy.map(([k]) => partName[k]).join(', ')} `
        + `(see "CPU during the timed parts"): every side is noisier; the paired differences are the steadier figures`);
    results.notes = [...new Set(notes)];
    console.log(report(results, notes));
    const sec = results.seconds ?? {};
    console.log(`(${results.wallSeconds.toFixed(0)} s in all: server (a)'s start ${f1(sec.startA)} s${results.freshDataDir
        ? ' (a fresh DATA_DIR: its Go cache warm-up included)' : ' (BENCH_DATA_DIR kept: no Go cache warm-up)'}, rounds (a) `
        + `${f1(sec.roundsA)} s, rounds (b) ${f1(sec.roundsB)} s, installs ${f1(sec.installs)} s)`);
    if (process.env.BENCH_JSON) writeFileSync(process.env.BENCH_JSON, JSON.stringify(results, null, 2));
}

main().catch((e) => {
    console.error(`packages-bench failed: ${e.stack || e}`);
    process.exit(1);
});
