// Benchmark: a fresh server, as a user meets it (issue 20, "Fast from the first call"). bench.js measures a server
// after a long JIT warm-up; this measures new processes on new, empty DATA_DIRs in their first minutes, side by side
// with the bare spawns of the same interpreters in the same run, and reports the ratios:
//   1. start to healthy: spawn of `java -jar JAR` to the first /healthz 200 with status "ok" (polled every 20 ms), on a
//      new DATA_DIR and on one a previous server used (a desktop user's usual case), and over stdio the spawn to the
//      `initialize` response; the JVM's idle RSS ~5 s after healthy.
//   2. on one new server, from the moment it is healthy: python and node hello over its first BENCH_FRESH_CALLS calls,
//      shell and bash echo, typescript hello (against node hello), java, c and go hello, then node and typescript hello
//      in a burst of BENCH_FRESH_BURST (20) calls at once each (issue 42); each MCP call in a row alternates with
//      the bare spawn (for the compiled languages the same compile and run commands as the server's languages table,
//      with warm caches), so that drift hits both sides. Each compiled-language call is a program of its own (the hello
//      with a `// call N` line), the same text on both sides: a user's code is new at each call, and with one fixed
//      program Go's build cache would hand the bare side the compiled main package, which the server's read-only
//      shared cache never keeps (a run cannot write to it, see GoCacheWarmer).
//   3. a new python session on a new server: its calls 1-50.
//   4. python hello at concurrency 4 over a new server's first BENCH_FRESH_THROUGHPUT_RUNS runs (or as many as
//      BENCH_FRESH_THROUGHPUT_SECONDS allow), then the bare spawn's rate at concurrency 4 over as many runs right after.
//   5. where runsc is installed, a new server with SANDBOX=gvisor: python hello BENCH_FRESH_GVISOR_CALLS times, each
//      call when a warm (pre-started) gVisor sandbox is ready (the wait untimed: /healthz's warmPool), then as many
//      calls in a row (a burst drains the pool, whose refill is a gVisor start), each beside the bare python3 -c; then
//      node hello as many times with a warm sandbox ready, beside the bare node -e.
// Goals (issue 20) are checked on the last line. Servers run one after the other (2 cores); each is stopped, and its
// DATA_DIR removed, before the next one starts, also when a step fails.
//
// Environment: BENCH_FRESH_STARTS (3 starts per start figure), BENCH_FRESH_CALLS (100 python/node/shell/bash calls),
// BENCH_FRESH_COMPILED_CALLS (20 typescript/go/java/c calls), BENCH_FRESH_BURST (20), BENCH_FRESH_SESSION_CALLS (50), BENCH_FRESH_GVISOR_CALLS (30),
// BENCH_FRESH_THROUGHPUT_RUNS (2000 per side), BENCH_FRESH_THROUGHPUT_SECONDS (60, a cap per side), BENCH_JSON
// (adds a `fresh` object to that file), CODE_EXEC_JAR, JAVA_HOME (the server's JDK).
import { spawn, execFileSync } from 'node:child_process';
import { mkdtempSync, mkdirSync, writeFileSync, readFileSync, rmSync, existsSync } from 'node:fs';
import { tmpdir, loadavg, cpus } from 'node:os';
import { join, dirname } from 'node:path';
import { JAR, JAVA, REPO, INTERPRETER_RUNNER, WAITING_SANDBOX, freePort, randomSecret, sleep } from '../lib/server.js';
import { RawSession } from '../lib/rawmcp.js';
import { pct, summary, timeIt, bareRun, sideBySide, throughput, fmt, writeJson } from './measure.js';

const STARTS = Number(process.env.BENCH_FRESH_STARTS || 3);
const CALLS = Number(process.env.BENCH_FRESH_CALLS || 100);
const COMPILED_CALLS = Number(process.env.BENCH_FRESH_COMPILED_CALLS || 20);
const SESSION_CALLS = Number(process.env.BENCH_FRESH_SESSION_CALLS || 50);
const GVISOR_CALLS = Number(process.env.BENCH_FRESH_GVISOR_CALLS || 30);
const TP_RUNS = Number(process.env.BENCH_FRESH_THROUGHPUT_RUNS || 2000);
// A cap for a slow or busy machine (2,000 runs take ~35 s on a quiet one); the bare side then does as many runs.
const TP_SECONDS = Number(process.env.BENCH_FRESH_THROUGHPUT_SECONDS || 60);
const CONCURRENCY = 4;
const BURST = Number(process.env.BENCH_FRESH_BURST || 20);
const RSS_AFTER_MS = 5000;
const POLL_MS = 20;
const START_TIMEOUT_MS = 120_000;
const NODE = '/usr/bin/node';
// The server's JDK ({javaHome} of the languages table is the server JVM's java.home).
const JAVA_HOME = dirname(dirname(JAVA));
// The table's default {heapMb}: half of MEMORY_LIMIT_MB (2048) unless set.
const HEAP_MB = String(Math.max(32, Math.floor(Number(process.env.MEMORY_LIMIT_MB || 2048) / 2)));

const scratch = mkdtempSync(join(tmpdir(), 'code-exec-fresh-'));
// The bare spawn gets a clean, small environment, as the sandbox does (bench.js does the same).
const bareEnv = { PATH: '/usr/local/bin:/usr/bin:/bin', LANG: 'C.UTF-8', HOME: scratch };
const PY_BARE = ['/usr/bin/python3', ['-c', 'print("hello")'], bareEnv];
const NODE_BARE = [NODE, ['-e', 'console.log("hello")'], bareEnv];
const bare = (spec) => bareRun(spec, { cwd: scratch });

const GO_HELLO = 'package main\n\nimport "fmt"\n\nfunc main() { fmt.Println("hello") }\n';
const JAVA_HELLO = 'public class Main {\n    public static void main(String[] args) {\n        System.out.println("hello");\n    }\n}\n';
const C_HELLO = '#include <stdio.h>\n\nint main(void) { puts("hello"); return 0; }\n';

// Everything this process started that must not outlive it, also on a failure or a signal.
const live = new Set(); // child processes
const dataDirs = new Set();
function killAll(signal) {
    for (const c of live) {
        try {
            c.kill(signal);
        } catch (e) {
            // gone
        }
    }
}
function removeDirs() {
    for (const d of dataDirs) rmSync(d, { recursive: true, force: true, maxRetries: 3 });
    dataDirs.clear();
    rmSync(scratch, { recursive: true, force: true, maxRetries: 3 });
}
process.on('exit', () => {
    killAll('SIGKILL');
    try {
        removeDirs();
    } catch (e) {
        // best effort at exit
    }
});
for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
    process.on(sig, () => {
        process.stderr.write(`fresh: ${sig}: stopping the servers\n`);
        killAll('SIGKILL');
        process.exit(130);
    });
}

function newDataDir() {
    const d = mkdtempSync(join(tmpdir(), 'code-exec-fresh-data-'));
    dataDirs.add(d);
    return d;
}

function dropDataDir(d) {
    rmSync(d, { recursive: true, force: true, maxRetries: 3 });
    dataDirs.delete(d);
}

/**
 * The JVM options scripts/run.sh gives (the README's command): its AOT cache when scripts/aot-cache.sh made one for
 * this jar (bench.sh runs it first; BENCH_AOT=off measures without), JVM log lines on stderr.
 */
const AOT_CACHE = process.env.BENCH_AOT === 'off' ? null : JAR.replace(/\.jar$/, '.aot');
const JVM_OPTIONS = ['-Xlog:disable', '-Xlog:all=warning:stderr',
    ...(AOT_CACHE && existsSync(AOT_CACHE) ? [`-XX:AOTCache=${AOT_CACHE}`] : [])];

/** `java -jar JAR` as scripts/run.sh starts it, the environment a user's server gets, its output kept. */
function spawnServer(env, stdin = 'ignore') {
    const child = spawn(JAVA, [...JVM_OPTIONS, '-jar', JAR], {
        env: { PATH: process.env.PATH, HOME: process.env.HOME, LANG: 'C.UTF-8', JAVA_HOME, ...env },
        stdio: [stdin, 'pipe', 'pipe'],
    });
    live.add(child);
    const proc = { child, pid: child.pid, exited: null, log: '' };
    const keep = (b) => {
        proc.log += b.toString();
        if (proc.log.length > 400_000) proc.log = proc.log.slice(-200_000);
    };
    child.stderr.on('data', keep);
    if (stdin === 'ignore') child.stdout.on('data', keep);
    child.on('exit', (code, signal) => {
        proc.exited = { code, signal };
        live.delete(child);
    });
    proc.stop = async () => {
        if (proc.exited === null) {
            child.kill('SIGTERM');
            const end = Date.now() + 15_000;
            while (proc.exited === null && Date.now() < end) await sleep(50);
            if (proc.exited === null) child.kill('SIGKILL');
            while (proc.exited === null) await sleep(20);
        }
    };
    return proc;
}

/**
 * Starts an HTTP server on `dataDir` and times it: spawn to the first /healthz 200 with status "ok", polled every
 * POLL_MS. Returns the server ({ pid, url, apiKey, dataDir, healthz(), startupChildren(), rssMiB(), stop() }) and `ms`.
 */
async function startHttp(dataDir, env = {}) {
    const port = await freePort();
    const apiKey = randomSecret('key-');
    const base = `http://127.0.0.1:${port}`;
    const t0 = performance.now();
    const proc = spawnServer({ PORT: String(port), HOST: '127.0.0.1', API_KEY: apiKey, DATA_DIR: dataDir, ...env });
    let ms;
    for (;;) {
        if (proc.exited) throw new Error(`server exited during start (${JSON.stringify(proc.exited)}); log:\n${proc.log.slice(-4000)}`);
        if (performance.now() - t0 > START_TIMEOUT_MS) {
            await proc.stop();
            throw new Error(`server not healthy in ${START_TIMEOUT_MS} ms; log:\n${proc.log.slice(-4000)}`);
        }
        try {
            const r = await fetch(`${base}/healthz`);
            const body = await r.json().catch(() => ({}));
            if (r.status === 200 && body.status === 'ok') {
                ms = performance.now() - t0;
                break;
            }
        } catch (e) {
            // not listening yet
        }
        await sleep(POLL_MS);
    }
    const server = {
        pid: proc.pid, url: `${base}/mcp`, apiKey, dataDir,
        log: () => proc.log,
        async healthz() {
            return (await fetch(`${base}/healthz`)).json();
        },
        /** Child processes of the JVM that are start-up work (Go cache, language warm-ups), not pooled sandboxes. */
        startupChildren() {
            try {
                return execFileSync('ps', ['-o', 'pid=,args=', '--ppid', String(proc.pid)], { encoding: 'utf8' })
                    .split('\n').filter((l) => l.trim() && !INTERPRETER_RUNNER.test(l) && !WAITING_SANDBOX.test(l));
            } catch (e) {
                return []; // ps exits 1 when there is none
            }
        },
        /** The JVM's resident memory (VmRSS) in MiB. */
        rssMiB() {
            const m = readFileSync(`/proc/${proc.pid}/status`, 'latin1').match(/^VmRSS:\s+(\d+) kB/m);
            return m ? Number(m[1]) / 1024 : NaN;
        },
        stop: proc.stop,
    };
    return { server, ms };
}

/** Runs `body(server)` on a server started on `dataDir` (timed, `env` added), and stops the server whatever happens. */
async function withServer(dataDir, body, env = {}) {
    const { server, ms } = await startHttp(dataDir, env);
    try {
        return await body(server, ms);
    } catch (e) {
        e.message += `\n--- server log (tail) ---\n${server.log().slice(-4000)}`;
        throw e;
    } finally {
        await server.stop();
    }
}

/** Spawn of `TRANSPORT=stdio java -jar JAR` (an initialize request written at once) to its initialize response. */
async function startStdio(dataDir) {
    const t0 = performance.now();
    const proc = spawnServer({ TRANSPORT: 'stdio', DATA_DIR: dataDir }, 'pipe');
    try {
        proc.child.stdin.on('error', () => {}); // a server that died early: the wait below reports it
        proc.child.stdin.write(`${JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize',
            params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'bench-fresh', version: '1' } } })}\n`);
        const ms = await new Promise((res, rej) => {
            let out = '';
            const timer = setTimeout(() => rej(new Error(`no initialize response in ${START_TIMEOUT_MS} ms; log:\n${proc.log.slice(-4000)}`)), START_TIMEOUT_MS);
            proc.child.on('exit', () => { clearTimeout(timer); rej(new Error(`stdio server exited before answering; log:\n${proc.log.slice(-4000)}`)); });
            proc.child.stdout.on('data', (b) => {
                out += b;
                let nl;
                while ((nl = out.indexOf('\n')) >= 0) {
                    const line = out.slice(0, nl).trim();
                    out = out.slice(nl + 1);
                    if (!line) continue;
                    let msg;
                    try {
                        msg = JSON.parse(line);
                    } catch (e) {
                        continue;
                    }
                    if (msg.id === 1) {
                        clearTimeout(timer);
                        if (msg.result?.protocolVersion) res(performance.now() - t0);
                        else rej(new Error(`initialize failed: ${line.slice(0, 500)}`));
                    }
                }
            });
        });
        proc.child.stdin.end(); // the stdio server shuts down when its input ends
        return ms;
    } finally {
        const end = Date.now() + 15_000;
        while (proc.exited === null && Date.now() < end) await sleep(50);
        await proc.stop();
    }
}

/** The languages table the jar runs (its languages.json), else the one in the source tree. */
function languagesTable() {
    try {
        return JSON.parse(execFileSync('unzip', ['-p', JAR, 'languages.json'], { encoding: 'utf8', maxBuffer: 1 << 22 }));
    } catch (e) {
        return JSON.parse(readFileSync(join(REPO, 'src', 'main', 'resources', 'languages.json'), 'utf8'));
    }
}

/**
 * The bare side of a compiled language: the compile and run commands of its row in the server's languages table,
 * with the same environment, outside the sandbox. Sandbox paths map to this run's scratch directory: the working
 * directory holds the code file, /tmp/... goes to a private tmp, {goCache} and {runtimeDir} (the Java AOT cache) to
 * caches of the bare side's own that `prepare()` warms the way the server's start-up does.
 */
function bareProgram(table, id, code) {
    const l = table.languages.find((x) => x.id === id);
    if (!l) return null;
    const root = join(scratch, `bare-${id}`);
    const work = join(root, 'work');
    const tmp = join(root, 'tmp');
    const runtimeDir = join(scratch, 'runtime');
    for (const d of [work, tmp, runtimeDir]) mkdirSync(d, { recursive: true });
    const ph = { dir: work, javaHome: JAVA_HOME, goCache: join(scratch, 'go-cache'), runtimeDir, heapMb: HEAP_MB };
    const host = (s) => (s === '/tmp' ? tmp : s.startsWith('/tmp/') ? join(tmp, s.slice(5)) : s);
    const filler = (extra) => (s) => host(s).replace(/\{([A-Za-z]+)\}/g, (m, k) => ({ ...ph, ...extra })[k] ?? m);
    const envOf = (fill, ...maps) => {
        const env = { PATH: '/usr/local/bin:/usr/bin:/bin', HOME: tmp, LANG: 'C.UTF-8', TMPDIR: tmp, PYTHONUNBUFFERED: '1', MPLBACKEND: 'Agg' };
        for (const m of maps) for (const [k, v] of Object.entries(m ?? {})) env[k] = fill(v);
        return env;
    };
    const name = 'code_bench';
    const file = join(work, `${name}.${l.extension}`);
    writeFileSync(file, code);
    const fill = filler({ file, name });
    const env = envOf(fill, l.env);
    const compile = l.compile ? [l.compile[0], l.compile.slice(1)].map((x, i) => (i ? x.map(fill) : fill(x))) : null;
    const run = [fill(l.run[0]), l.run.slice(1).map(fill)];
    let warmup = null;
    if (l.warmup) {
        // as LanguageWarmup does: the table's program as Main.<ext> in a directory of its own, {output} = `produces`
        const wdir = join(root, 'warmup');
        mkdirSync(wdir, { recursive: true });
        const wfile = join(wdir, `Main.${l.extension}`);
        writeFileSync(wfile, l.warmup.program);
        const wfill = filler({ file: wfile, name: 'Main', dir: wdir, output: filler({})(l.warmup.produces) });
        const argv = l.warmup.argv.map(wfill);
        warmup = { spec: [argv[0], argv.slice(1), envOf(wfill, l.env, l.warmup.env)], cwd: wdir };
    }
    // `text`: this call's program (see `unique` in helloCases); the file is rewritten only when it changes
    let written = code;
    const once = async (text = code) => {
        if (text !== written) {
            writeFileSync(file, text);
            written = text;
        }
        if (compile) await bareRun([compile[0], compile[1], env], { cwd: work, expect: null });
        await bareRun([run[0], run[1], env], { cwd: work });
    };
    return {
        command: [...(compile ? [[compile[0], ...compile[1]].join(' ')] : []), [run[0], ...run[1]].join(' ')].join(' && '),
        once,
        async prepare() {
            if (warmup) await bareRun(warmup.spec, { cwd: warmup.cwd, expect: null });
            for (let i = 0; i < 2; i++) await once(); // the first fills the build cache; both the page cache
        },
    };
}

/**
 * The case table of part 2: what the server runs, its bare counterpart, how many calls, the goal; `unique`: each call
 * runs the code with a `// call N` line added, on both sides (see the top of this file).
 */
function helloCases(table) {
    const compiled = (id, code) => bareProgram(table, id, code);
    const spawnOf = (spec) => ({ once: () => bare(spec), prepare: async () => { await bare(spec); }, command: [spec[0], ...spec[1]].join(' ') });
    return [
        { name: 'python hello', language: 'python', code: 'print("hello")', n: CALLS, bare: spawnOf(PY_BARE), goal: { ratio: 1.0, label: `python first-${CALLS}` } },
        { name: 'node hello', language: 'nodejs', code: 'console.log("hello")', n: CALLS, bare: spawnOf(NODE_BARE), goal: { ratio: 1.0, label: `node first-${CALLS}` } },
        { name: 'shell echo', language: 'shell', code: 'echo hello', n: CALLS, bare: spawnOf(['/bin/sh', ['-c', 'echo hello'], bareEnv]), goal: { ms: 8, label: 'shell p50' } },
        { name: 'bash echo', language: 'bash', code: 'echo hello', n: CALLS, bare: spawnOf(['/bin/bash', ['-c', 'echo hello'], bareEnv]), goal: { ms: 8, label: 'bash p50' } },
        // its goal is against the server's node hello (the bare column is `node -e`, for the drift)
        { name: 'typescript hello', language: 'typescript', code: 'console.log("hello")', n: COMPILED_CALLS, bare: spawnOf(NODE_BARE), goal: { vsNode: 1.2, label: 'typescript/node p50' } },
        { name: 'java hello', language: 'java', code: JAVA_HELLO, unique: true, n: COMPILED_CALLS, bare: compiled('java', JAVA_HELLO), goal: { ratio: 1.3, label: 'java' } },
        { name: 'c hello', language: 'c', code: C_HELLO, unique: true, n: COMPILED_CALLS, bare: compiled('c', C_HELLO), goal: { ratio: 1.3, label: 'c' } },
        // last: its first call waits for the rest of the server's Go cache warm-up, which the others run beside
        { name: 'go hello', language: 'go', code: GO_HELLO, unique: true, n: COMPILED_CALLS, bare: compiled('go', GO_HELLO), goal: { ratio: 1.3, label: 'go' } },
    ];
}

const median = (xs) => pct(xs, 50);
const T0 = Date.now();
const log = (m) => process.stderr.write(`fresh: [${((Date.now() - T0) / 1000).toFixed(0).padStart(3)} s] ${m}\n`);

/** Part 1: start to healthy on new DATA_DIRs (with the idle RSS), and over stdio. */
async function starts(out) {
    log(`stdio start to initialize, ${STARTS} starts on new DATA_DIRs ...`);
    const stdio = [];
    for (let i = 0; i < STARTS; i++) {
        const d = newDataDir();
        stdio.push(await startStdio(d));
        dropDataDir(d);
    }
    out.stdioStart = { ...summary(stdio), samples: stdio };
    log(`HTTP start to healthy, ${STARTS} starts on new DATA_DIRs (idle RSS ${RSS_AFTER_MS / 1000} s after healthy) ...`);
    out.httpStartNew = await httpStarts(() => newDataDir(), true);
}

/** `STARTS` HTTP starts, each on `dir()`; the JVM's RSS RSS_AFTER_MS after healthy. */
async function httpStarts(dir, drop) {
    const ms = [];
    const rss = [];
    for (let i = 0; i < STARTS; i++) {
        const d = dir();
        await withServer(d, async (server, t) => {
            ms.push(t);
            await sleep(RSS_AFTER_MS);
            rss.push(server.rssMiB());
        });
        if (drop) dropDataDir(d);
    }
    return { ...summary(ms), samples: ms, rssMiB: { p50: median(rss), samples: rss } };
}

/** Part 2 on one new server, from the moment it is healthy; returns its DATA_DIR (kept for the second starts). */
async function helloOnFreshServer(out, cases) {
    const d = newDataDir();
    log('one new server: hello in every language from its first call ...');
    await withServer(d, async (server, startMs) => {
        out.startMs = startMs;
        const s = await new RawSession(server.url, server.apiKey).open();
        const t0 = performance.now();
        out.cases = {};
        let langs = null;
        for (const c of cases) {
            if (c.language !== 'python' && c.language !== 'nodejs' && !langs) {
                // untimed, after the first 2 x CALLS calls: which languages this server has
                langs = (await s.call('runtime_info')).structuredContent?.languages ?? {};
            }
            if (langs && !langs[c.language]?.available) {
                out.cases[c.name] = { goal: c.goal, skipped: `the server does not list ${c.language} as available` };
                continue;
            }
            if (!c.bare) {
                out.cases[c.name] = { goal: c.goal, skipped: `no ${c.language} row in the languages table for the bare side` };
                continue;
            }
            let note;
            if (c.language === 'go') note = `Go cache ${(await s.call('runtime_info')).structuredContent?.goCache} at the first call`;
            log(`${c.name}: ${c.n} calls, each followed by the bare spawn (${c.bare.command}) ...`);
            const atS = (performance.now() - t0) / 1000;
            let call = 0;
            let text = c.code;
            const r = await sideBySide(c.n, () => {
                if (c.unique) text = `${c.code}// call ${++call}\n`;
                return s.execute(c.language, text);
            }, () => c.bare.once(text));
            out.cases[c.name] = { goal: c.goal, n: c.n, startedAtSeconds: atS, firstCall: r.mcp[0], mcp: summary(r.mcp), bare: summary(r.bare),
                serverDurationP50: pct(r.results.map((sc) => sc.durationMs), 50), bareCommand: c.bare.command, ...(note ? { note } : {}) };
        }
        // issue 42: TypeScript against Node when BURST calls come at once (each call's time, and the whole burst's)
        const ts = out.cases['typescript hello'];
        if (ts && !ts.skipped) {
            out.bursts = {};
            for (const [name, language] of [['node', 'nodejs'], ['typescript', 'typescript']]) {
                log(`${name} hello: a burst of ${BURST} calls at once ...`);
                const t1 = performance.now();
                const times = await Promise.all(Array.from({ length: BURST },
                    () => timeIt(() => s.execute(language, 'console.log("hello")'))));
                out.bursts[name] = { ...summary(times), wallMs: performance.now() - t1 };
            }
        }
        // the DATA_DIR a desktop user starts the next server on: its start-up work (Go cache, warm-ups) complete
        const end = Date.now() + 180_000;
        while (server.startupChildren().length && Date.now() < end) await sleep(250);
    });
    return d;
}

/** Part 3: a new python session on a new server, its calls 1..SESSION_CALLS. */
async function sessionOnFreshServer(out) {
    const d = newDataDir();
    log(`a new python session on a new server: calls 1-${SESSION_CALLS} ...`);
    await withServer(d, async (server) => {
        const s = await new RawSession(server.url, server.apiKey).open();
        const t = [];
        const run = [];
        let x = 1;
        const call = async (code, expect) => { run.push((await s.execute('python', code, { session: 'fresh', expect })).durationMs); };
        t.push(await timeIt(() => call('x = 1', '')));
        for (let i = 1; i < SESSION_CALLS; i++) {
            x++;
            t.push(await timeIt(() => call('x += 1; print(x)', String(x))));
        }
        out.session = { ...summary(t), firstCall: t[0], p50Calls2On: pct(t.slice(1), 50), serverDurationP50: pct(run, 50) };
        await s.call('session_close', { session: 'fresh' });
    });
    dropDataDir(d);
}

/** Part 4: python hello at concurrency 4 over a new server's first TP_RUNS runs, then the bare spawn's rate. */
async function throughputOfFreshServer(out) {
    const d = newDataDir();
    log(`throughput: python hello at concurrency ${CONCURRENCY} over a new server's first ${TP_RUNS} runs ...`);
    const mcp = await withServer(d, async (server) => {
        const s = await new RawSession(server.url, server.apiKey).open();
        const r = await throughput(() => s.execute('python', 'print("hello")'), TP_RUNS, TP_SECONDS, CONCURRENCY);
        r.startupWorkAtEnd = server.startupChildren().length; // still compiling the Go cache etc. at the end?
        return r;
    });
    dropDataDir(d);
    log(`throughput: the bare spawn at concurrency ${CONCURRENCY}, ${mcp.runs} runs ...`);
    const b = await throughput(() => bare(PY_BARE), mcp.runs, TP_SECONDS, CONCURRENCY);
    out.throughput = { concurrency: CONCURRENCY, runs: mcp.runs, bareRuns: b.runs, mcpRunsPerSecond: mcp.runs / mcp.seconds, mcpSeconds: mcp.seconds,
        bareRunsPerSecond: b.runs / b.seconds, bareSeconds: b.seconds, startupProcessesAtEnd: mcp.startupWorkAtEnd };
    out.throughput.ratio = out.throughput.mcpRunsPerSecond / out.throughput.bareRunsPerSecond;
}

/** Part 5: python hello under SANDBOX=gvisor on a new server, warm sandbox ready (untimed wait), then in a burst. */
async function gvisorOnFreshServer(out) {
    if (!existsSync('/usr/bin/runsc')) {
        out.gvisor = { skipped: 'runsc is not installed' };
        return;
    }
    const d = newDataDir();
    log(`SANDBOX=gvisor on a new server: python hello ${GVISOR_CALLS} times with a warm sandbox ready, then ${GVISOR_CALLS} in a row, then node hello ${GVISOR_CALLS} times ...`);
    try {
        await withServer(d, async (server, startMs) => {
            const s = await new RawSession(server.url, server.apiKey).open();
            // per language, the calls whose wait for a warm sandbox gave up (30 s): they may have started cold
            const notReady = { python: 0, nodejs: 0 };
            const ready = (lang) => async () => {
                const end = Date.now() + 30_000;
                while (!((await server.healthz()).warmPool?.[lang]?.ready >= 1)) {
                    if (Date.now() > end) {
                        notReady[lang]++;
                        return;
                    }
                    await sleep(10);
                }
            };
            const hello = () => s.execute('python', 'print("hello")');
            const warm = await sideBySide(GVISOR_CALLS, hello, () => bare(PY_BARE), ready('python'));
            const burst = await sideBySide(GVISOR_CALLS, hello, () => bare(PY_BARE));
            const node = await sideBySide(GVISOR_CALLS, () => s.execute('nodejs', 'console.log("hello")'),
                () => bare(NODE_BARE), ready('nodejs'));
            const sandbox = warm.results[0]?.sandbox;
            const one = (r) => ({ mcp: summary(r.mcp), bare: summary(r.bare), serverDurationP50: pct(r.results.map((sc) => sc.durationMs), 50) });
            out.gvisor = { startMs, sandbox, n: GVISOR_CALLS, notReady, warmReady: one(warm), burst: one(burst), nodeWarmReady: one(node) };
        }, { SANDBOX: 'gvisor' });
    } catch (e) {
        // runsc installed but gVisor unusable here (not root, say): the other parts' figures stand
        out.gvisor = { skipped: `the SANDBOX=gvisor server failed: ${String(e.message).split('\n')[0]}` };
    }
    dropDataDir(d);
}

async function main() {
    const t0 = Date.now();
    const out = { jar: JAR, loadBefore: loadavg()[0] };
    const table = languagesTable();
    const cases = helloCases(table);
    try {
        log('preparing the bare side (build caches, the Java AOT cache, the page cache) ...');
        for (const c of cases) await c.bare?.prepare();
        await starts(out);
        const used = await helloOnFreshServer(out, cases);
        log(`HTTP start to healthy, ${STARTS} starts on the DATA_DIR the previous server used ...`);
        out.httpStartUsed = await httpStarts(() => used, false);
        dropDataDir(used);
        await sessionOnFreshServer(out);
        await throughputOfFreshServer(out);
        await gvisorOnFreshServer(out);
    } finally {
        killAll('SIGKILL'); // only a failure leaves one running: each part stops its own
        removeDirs();
    }
    out.loadAfter = loadavg()[0];
    out.seconds = (Date.now() - t0) / 1000;
    console.log(report(out).join('\n'));
    if (process.env.BENCH_JSON) writeJson(process.env.BENCH_JSON, { fresh: out });
}

function report(out) {
    const lines = [];
    const ms = (x) => `${Math.round(x)} ms`;
    const ratio = (x) => `${x.toFixed(2)}x`;
    lines.push(`code-exec-mcp fresh server: new processes on new DATA_DIRs vs bare spawn, same run (${new Date().toISOString()}; `
        + `${cpus().length} cpus, load avg ${out.loadBefore.toFixed(1)} before, ${out.loadAfter.toFixed(1)} after; ${out.seconds.toFixed(0)} s; `
        + `JVM ${JVM_OPTIONS.some((o) => o.startsWith('-XX:AOTCache')) ? 'with its AOT cache' : 'without an AOT cache'})`);
    const st = (label, r, rss) => lines.push(`${label.padEnd(44)}p50 ${ms(r.p50).padStart(8)}  p95 ${ms(r.p95).padStart(8)}  (${r.samples.map(ms).join(', ')})`
        + (rss ? `  idle RSS p50 ${rss.p50.toFixed(0)} MiB` : ''));
    st(`HTTP start→healthy, new DATA_DIR (n=${out.httpStartNew.n})`, out.httpStartNew, out.httpStartNew.rssMiB);
    st(`HTTP start→healthy, used DATA_DIR (n=${out.httpStartUsed.n})`, out.httpStartUsed, out.httpStartUsed.rssMiB);
    st(`stdio start→initialize, new DATA_DIR (n=${out.stdioStart.n})`, out.stdioStart);
    lines.push(`one new server (healthy in ${ms(out.startMs)}), calls in this order from its first:`);
    lines.push(`${'case'.padEnd(17)}${'n'.padStart(4)}${'1st call'.padStart(11)}${'MCP p50'.padStart(10)}${'MCP p95'.padStart(10)}${'bare p50'.padStart(10)}${'bare p95'.padStart(10)}`
        + `${'p50 ratio'.padStart(11)}${'p95 ratio'.padStart(11)}${'run p50'.padStart(10)}  at`);
    for (const [name, r] of Object.entries(out.cases)) {
        if (r.skipped) {
            lines.push(`${name.padEnd(17)}skipped: ${r.skipped}`);
            continue;
        }
        r.ratioP50 = r.mcp.p50 / r.bare.p50;
        r.ratioP95 = r.mcp.p95 / r.bare.p95;
        lines.push(`${name.padEnd(17)}${String(r.n).padStart(4)}${` ${fmt(r.firstCall).trim()}`.padStart(11)}${fmt(r.mcp.p50)}${fmt(r.mcp.p95)}${fmt(r.bare.p50)}${fmt(r.bare.p95)}`
            + `${ratio(r.ratioP50).padStart(11)}${ratio(r.ratioP95).padStart(11)}${fmt(r.serverDurationP50)}  ${r.startedAtSeconds.toFixed(0)} s${r.note ? ` (${r.note})` : ''}`);
    }
    lines.push('bare: python3 -c / node -e / sh -c / bash -c; typescript against node -e; go, java, c: the languages table\'s compile and run, warm caches');
    const b = out.bursts;
    if (b) {
        b.ratioP50 = b.typescript.p50 / b.node.p50;
        b.ratioWall = b.typescript.wallMs / b.node.wallMs;
        lines.push(`a burst of ${b.node.n} calls at once on the same server: node hello p50 ${ms(b.node.p50)}, p95 ${ms(b.node.p95)}, all in ${ms(b.node.wallMs)}; `
            + `typescript hello p50 ${ms(b.typescript.p50)}, p95 ${ms(b.typescript.p95)}, all in ${ms(b.typescript.wallMs)} (${ratio(b.ratioP50)} p50, ${ratio(b.ratioWall)} whole)`);
    }
    const ss = out.session;
    lines.push(`python session, calls 1-${ss.n} of a new server: p50 ${ss.p50.toFixed(2)} ms, p95 ${ss.p95.toFixed(2)} ms, 1st call (x = 1, starts it) ${ss.firstCall.toFixed(1)} ms, calls 2-${ss.n} p50 ${ss.p50Calls2On.toFixed(2)} ms, run p50 ${ss.serverDurationP50.toFixed(1)} ms`);
    const t = out.throughput;
    lines.push(`throughput python hello, concurrency ${t.concurrency}, a new server's first ${t.runs} runs${t.runs < TP_RUNS ? ` (of ${TP_RUNS}: capped at ${TP_SECONDS} s)` : ''}: MCP ${t.mcpRunsPerSecond.toFixed(1)} runs/s (${t.mcpSeconds.toFixed(1)} s), `
        + `bare ${t.bareRunsPerSecond.toFixed(1)} runs/s (${t.bareSeconds.toFixed(1)} s), ratio ${ratio(t.ratio)}${t.startupProcessesAtEnd ? ` (${t.startupProcessesAtEnd} start-up process${t.startupProcessesAtEnd === 1 ? '' : 'es'} of the server still running at the end)` : ''}`);
    const g = out.gvisor;
    if (g?.skipped) lines.push(`SANDBOX=gvisor: skipped (${g.skipped})`);
    else if (g) {
        const row = (label, r, lang = 'python', bareName = 'python3 -c') => lines.push(`SANDBOX=gvisor ${lang} hello, ${label}: MCP p50 ${r.mcp.p50.toFixed(1)} ms, p95 ${r.mcp.p95.toFixed(1)} ms, `
            + `bare ${bareName} p50 ${r.bare.p50.toFixed(1)} ms, run p50 ${r.serverDurationP50} ms`);
        lines.push(`SANDBOX=gvisor: a new server (healthy in ${ms(g.startMs)}, runs report sandbox "${g.sandbox}"), ${g.n} calls each`
            + `${Object.entries(g.notReady).filter(([, n]) => n).map(([lang, n]) => ` (${n} of the ${lang} calls with a warm sandbox ready found none within 30 s)`).join('')}:`);
        row('a warm sandbox ready (the wait untimed)', g.warmReady);
        row('calls in a row', g.burst);
        if (g.nodeWarmReady) row('a warm sandbox ready (the wait untimed)', g.nodeWarmReady, 'node', 'node -e');
    }
    // the goals of issue 20
    const goals = [];
    const yes = (ok) => (ok ? 'yes' : 'NO');
    const node = out.cases['node hello'];
    for (const r of Object.values(out.cases)) {
        const g = r.goal;
        if (r.skipped) {
            goals.push(`${g.label}: skipped`);
        } else if (g.ms !== undefined) {
            goals.push(`${g.label} ≤${g.ms} ms: ${r.mcp.p50.toFixed(1)} ms ${yes(r.mcp.p50 <= g.ms)}`);
        } else if (g.vsNode !== undefined) {
            if (!node || node.skipped) goals.push(`${g.label}: skipped (no node hello)`);
            else {
                r.ratioToNodeP50 = r.mcp.p50 / node.mcp.p50;
                goals.push(`${g.label} ≤${g.vsNode.toFixed(1)}x: ${ratio(r.ratioToNodeP50)} ${yes(r.ratioToNodeP50 <= g.vsNode)}`);
            }
        } else {
            goals.push(`${g.label} ≤${g.ratio.toFixed(1)}x: ${ratio(r.ratioP50)} ${yes(r.ratioP50 <= g.ratio)}`);
        }
    }
    if (b) goals.push(`typescript/node burst of ${b.node.n} p50 ≤1.2x: ${ratio(b.ratioP50)} ${yes(b.ratioP50 <= 1.2)}`);
    goals.push(`session p50 ≤3 ms: ${ss.p50.toFixed(2)} ms ${yes(ss.p50 <= 3)}`);
    goals.push(`throughput ≥0.8x: ${ratio(t.ratio)} ${yes(t.ratio >= 0.8)}`);
    if (g?.skipped) goals.push('gvisor python: skipped');
    else if (g) goals.push(`gvisor python p50 ≤150 ms (warm sandbox ready): ${g.warmReady.mcp.p50.toFixed(1)} ms ${yes(g.warmReady.mcp.p50 <= 150 && !g.notReady.python)}`);
    out.goals = goals;
    lines.push(`fresh goals: ${goals.join(', ')}`);
    return lines;
}

main().catch((e) => {
    console.error(`fresh bench failed: ${e.stack || e}`);
    process.exitCode = 1;
    killAll('SIGKILL');
});
