// Starts the real server jar as a child process for one test file and gives the tests what they need to talk
// to it: its URL, its API key, /healthz, and connected MCP SDK clients. One server per test file keeps the whole
// run short on a 2-core machine; each file gets a fresh DATA_DIR so no state leaks between files.
import { spawn, execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, existsSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, dirname, resolve } from 'node:path';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { AS_USER, ensureUser, userDir, asUserArgv, seedGoCache, GO_CACHE_MARKER } from './user.js';

export { seedGoCache, GO_CACHE_MARKER };

export const REPO = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
export const JAR = process.env.CODE_EXEC_JAR || join(REPO, 'target', 'code-exec-mcp.jar');
export const JAVA = process.env.JAVA_HOME ? join(process.env.JAVA_HOME, 'bin', 'java')
    : '/usr/lib/jvm/temurin-25-jdk-amd64/bin/java';

/** A port nobody listens on right now (the server gets it explicitly, so the test knows it up front). */
// Ports handed out by freePort in this process: a server started without waiting (a test's upstream, say) binds its
// port only a second or two later, and until then the kernel may offer that port again; a second server given it
// fails to bind while the first answers its health check, and its client then talks to the wrong server.
const handedOut = new Set();

/** A loopback port free now and not handed out before by this process. */
export async function freePort() {
    for (;;) {
        const port = await new Promise((res, rej) => {
            const s = createServer();
            s.unref();
            s.on('error', rej);
            s.listen(0, '127.0.0.1', () => {
                const { port: p } = s.address();
                s.close(() => res(p));
            });
        });
        if (!handedOut.has(port)) {
            handedOut.add(port);
            return port;
        }
    }
}

export function randomSecret(prefix) {
    return `${prefix}${randomBytes(12).toString('hex')}`;
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** The command line of a sandbox kept waiting for code: a warm pool entry or a session's interpreter. */
export const INTERPRETER_RUNNER = /\/runtime\/((warm|session)_(python\.py|node\.js)|ts-strip-server\.js)\b/;
/**
 * The command line of a warm pool's waiting sandbox (shell, bash, compiled languages: its init waits for the run's
 * command): idle for as long as the server runs, never start-up work (counting it made every server's start wait
 * the whole 180 s of waitQuiet).
 */
export const WAITING_SANDBOX = / init (--\S+ \S+ )*--await-exec\b/;
/** The command line of code mode's stdio upstream fixture, started by a server for as long as it runs. */
const STDIO_UPSTREAM = /\/fixtures\/upstream-mcp\.mjs --stdio\b/;

/**
 * Starts `java -jar target/code-exec-mcp.jar` over HTTP on a free loopback port.
 * @param {Record<string,string>} env extra/override environment variables for the server
 * @param {{ready?: (httpStatus: number, body: object) => boolean}} opts `ready` says when /healthz means started
 *        (default: `status` is "ok"); a gateway whose workers all refuse it is started but not "ok"
 */
export async function startServer(env = {}, opts = {}) {
    const ready = opts.ready ?? ((status, body) => status === 200 && body.status === 'ok');
    if (!existsSync(JAR)) throw new Error(`server jar missing: ${JAR} (build it with ./mvnw -B -q package -DskipTests)`);
    const port = await freePort();
    // scripts/e2e.sh gives all files of one run the same fresh DATA_DIR, so that only the first server warms the
    // shared Go build cache; alone, a file gets its own.
    const sharedDataDir = process.env.E2E_DATA_DIR;
    // normal-user mode (E2E_AS_USER): the same server, started as that user with a DATA_DIR it owns
    const user = AS_USER ? ensureUser(AS_USER) : null;
    const dataDir = user ? userDir(user) : sharedDataDir || mkdtempSync(join(tmpdir(), 'code-exec-e2e-'));
    const apiKey = env.API_KEY ?? randomSecret('key-');
    const childEnv = {
        PATH: process.env.PATH,
        HOME: process.env.HOME,
        LANG: 'C.UTF-8',
        JAVA_HOME: process.env.JAVA_HOME || '/usr/lib/jvm/temurin-25-jdk-amd64',
        PORT: String(port),
        HOST: '127.0.0.1',
        API_KEY: apiKey,
        DATA_DIR: dataDir,
        // the preview listener on a free port: servers of one run would otherwise all try 8081
        PREVIEW_PORT: '0',
        ...env,
    };
    if (childEnv.API_KEY === '') delete childEnv.API_KEY;
    let child;
    if (user) {
        childEnv.HOME = user.home;
        delete childEnv.JAVA_HOME;
        const [command, ...args] = asUserArgv(user, JAVA, JAR, childEnv);
        child = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    } else {
        child = spawn(JAVA, ['-jar', JAR], { env: childEnv, stdio: ['ignore', 'pipe', 'pipe'] });
    }
    let log = '';
    const keep = (b) => {
        log += b.toString();
        if (log.length > 400_000) log = log.slice(-200_000);
    };
    child.stdout.on('data', keep);
    child.stderr.on('data', keep);
    let exited = null;
    child.on('exit', (code, signal) => { exited = { code, signal }; });

    const base = `http://127.0.0.1:${port}`;
    const deadline = Date.now() + 60_000;
    let lastErr = '';
    for (;;) {
        if (exited) throw new Error(`server exited during start (${JSON.stringify(exited)}); log:\n${log.slice(-4000)}`);
        if (Date.now() > deadline) {
            child.kill('SIGKILL');
            throw new Error(`server did not become healthy in 60 s (${lastErr}); log:\n${log.slice(-4000)}`);
        }
        try {
            const r = await fetch(`${base}/healthz`);
            const h = await r.json().catch(() => ({}));
            if (ready(r.status, h)) break;
            lastErr = `healthz HTTP ${r.status} status ${h.status}`;
        } catch (e) {
            lastErr = e.message;
        }
        await sleep(150);
    }

    const server = {
        // the DATA_DIR the server really has (a test may give its own in `env`)
        port, base, url: `${base}/mcp`, apiKey, dataDir: childEnv.DATA_DIR, pid: child.pid, env: childEnv,
        log: () => log,
        alive: () => exited === null,
        async healthz() {
            const r = await fetch(`${base}/healthz`);
            return { status: r.status, body: await r.json() };
        },
        /** Waits until /healthz reports `running` = 0 (true) or the timeout passes (false). */
        async waitIdle(timeoutMs = 8000) {
            const end = Date.now() + timeoutMs;
            for (;;) {
                const { body } = await server.healthz();
                if (body.running === 0) return true;
                if (Date.now() > end) return false;
                await sleep(100);
            }
        },
        /**
         * Waits until /healthz shows at least `min` ready warm sandboxes of `language` (true) or the timeout passes
         * (false): a call made right after takes one of them.
         */
        async waitWarm(language = 'python', min = 1, timeoutMs = 60_000) {
            const end = Date.now() + timeoutMs;
            for (;;) {
                const { body } = await server.healthz();
                if ((body.warmPool?.[language]?.ready ?? 0) >= min) return true;
                if (Date.now() > end) return false;
                await sleep(25);
            }
        },
        /** Processes of the sandbox uid started by this server (their command lines name its DATA_DIR). */
        sandboxProcesses(marker = '') {
            return hostProcessesWith(`${childEnv.DATA_DIR}/runtime/${marker}`);
        },
        /** Child processes of the server JVM right now (e.g. the background Go cache warm-up, or sandboxes). */
        children() {
            try {
                return execFileSync('ps', ['-o', 'pid=,args=', '--ppid', String(child.pid)], { encoding: 'utf8' })
                    .split('\n').filter((l) => l.trim());
            } catch (e) {
                return []; // ps exits 1 when there is none
            }
        },
        /**
         * Child processes that are start-up work: everything but the sandboxes of the warm pool (interpreters and
         * sandboxes waiting for their command) and of sessions,
         * and code mode's stdio upstreams (e2e/fixtures/upstream-mcp.mjs), which live as long as the server (or the
         * session) and are not work that competes with a test.
         */
        startupChildren() {
            return server.children().filter((l) => !INTERPRETER_RUNNER.test(l) && !STDIO_UPSTREAM.test(l)
                && !WAITING_SANDBOX.test(l));
        },
        /** Waits until the server has no start-up child process (e.g. warming the Go cache is done). */
        async waitQuiet(timeoutMs = 180_000) {
            const end = Date.now() + timeoutMs;
            while (server.startupChildren().length && Date.now() < end) await sleep(250);
            return server.startupChildren().length === 0;
        },
        /** An SDK client with a session (imported lazily: the benchmark uses this file without the SDK). */
        async connect(opts = {}) {
            const { Client } = await import('@modelcontextprotocol/sdk/client/index.js');
            const { StreamableHTTPClientTransport } = await import('@modelcontextprotocol/sdk/client/streamableHttp.js');
            const client = new Client({ name: 'code-exec-e2e', version: '0.1.0' }, { capabilities: {} });
            const transport = new StreamableHTTPClientTransport(new URL(server.url), {
                requestInit: { headers: { Authorization: `Bearer ${opts.apiKey ?? apiKey}` } },
            });
            await client.connect(transport);
            return { client, transport };
        },
        async stop() {
            if (exited === null) {
                child.kill('SIGTERM');
                const end = Date.now() + 15_000;
                while (exited === null && Date.now() < end) await sleep(100);
                if (exited === null) child.kill('SIGKILL');
                while (exited === null) await sleep(50);
            }
            if (!sharedDataDir || user) rmSync(dataDir, { recursive: true, force: true, maxRetries: 3 });
        },
    };
    // Start-up work in the background (the Go cache warm-up) would compete for the 2 cores with the tests.
    if (!(await server.waitQuiet(180_000))) process.stderr.write('e2e: server still busy with start-up work after 180 s\n');
    return server;
}

/**
 * Calls execute_code and returns { isError, sc (structuredContent), text (all text content joined), raw }.
 * The SDK's default 60 s request timeout is raised so that long runs are bounded by the server, not the client.
 */
export async function exec(client, args, options = {}) {
    const raw = await client.callTool({ name: 'execute_code', arguments: args }, undefined,
        { timeout: 150_000, ...options });
    const text = (raw.content || []).filter((c) => c.type === 'text').map((c) => c.text).join('\n');
    return { isError: raw.isError === true, sc: raw.structuredContent, text, raw };
}

/**
 * Whether a host uid is one a sandbox runs as: SANDBOX_UID (65534) itself, or one of SANDBOX_UID_RANGE's `auto`
 * ranges (2000000000-2000065535, or the 4096 uids below 65534 where the server does not see every uid).
 */
export function isSandboxUid(uid) {
    // as a normal user, every sandbox runs as that user's own uid
    if (AS_USER) return uid === ensureUser(AS_USER).uid;
    return uid === 65534 || (uid >= 2000000000 && uid <= 2000065535) || (uid >= 65534 - 4096 && uid < 65534);
}

/**
 * Host processes running as a sandbox uid ({@link isSandboxUid}) whose command line holds `marker`, as
 * "pid args" lines. Each sandbox has a host uid of its own, so they are found by marker, not by one uid.
 */
export function hostProcessesWith(marker) {
    let out = '';
    try {
        out = execFileSync('ps', ['-e', '-o', 'pid=,uid=,args='], { encoding: 'utf8' });
    } catch (e) {
        out = e.stdout || '';
    }
    const lines = [];
    for (const l of out.split('\n')) {
        const m = /^\s*(\d+)\s+(\d+)\s(.*)$/.exec(l);
        if (m && isSandboxUid(Number(m[2])) && m[3].includes(marker)) lines.push(`${m[1]} ${m[3]}`);
    }
    return lines;
}

/** True when a response body looks like it carries a Java stack trace. */
export function looksLikeStackTrace(body) {
    return /\n\s*at [\w$.]+\([\w$.]*(?::\d+)?\)/.test(body) || /Exception:|java\.lang\.|\.java:\d+/.test(body);
}

export { sleep };

/**
 * Wraps a test body so that a failure carries the server's log tail (and, with {@code more}, what else the test
 * wants shown: a fixture's log), for tests whose server is started in a hook.
 */
export function withLog(getServer, body, more = () => '') {
    return async (t) => {
        try {
            await body(t);
        } catch (e) {
            const s = getServer();
            if (s) e.message += `\n--- server log (tail) ---\n${s.log().slice(-5000)}`;
            const extra = more();
            if (extra) e.message += extra;
            throw e;
        }
    };
}
