// Starts the real server jar for the workspace tests (issue #3). It differs from a plain start in what the
// workspace tests need: a WORKSPACE_ROOT the sandbox uid can reach (a 0711 temp dir), tenants from an
// API_KEYS_FILE, the server's pid (peak RSS from /proc), and a restart on the same directories (expiry runs at
// start). One base temp dir per test file holds everything; DATA_DIR (and its warm Go cache) is shared by the
// file's servers, or taken from E2E_DATA_DIR when scripts/e2e.sh gives one.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, mkdirSync, chmodSync, rmSync, existsSync, readFileSync, appendFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createHash, randomBytes } from 'node:crypto';

import { REPO, JAR, JAVA, sleep, startServer } from './server.js';

export { REPO, JAR, JAVA, sleep };
export const JAVA_HOME = process.env.JAVA_HOME || '/usr/lib/jvm/temurin-25-jdk-amd64';

/** A base directory for one test file: mode 0711 so that uid 65534 can pass through it to WORKSPACE_ROOT. */
export function makeBase() {
    const base = mkdtempSync(join(tmpdir(), 'code-exec-ws-e2e-'));
    chmodSync(base, 0o711);
    const dataDir = process.env.E2E_DATA_DIR || join(base, 'data');
    if (!existsSync(dataDir)) mkdirSync(dataDir, { mode: 0o711 });
    return {
        dir: base,
        dataDir,
        /** A fresh, empty WORKSPACE_ROOT below the base (the server creates and owns what is inside). */
        workspaceRoot(name) {
            const p = join(base, name);
            mkdirSync(p, { mode: 0o711 });
            chmodSync(p, 0o711);
            return p;
        },
        remove() {
            rmSync(base, { recursive: true, force: true, maxRetries: 3 });
        },
    };
}

/**
 * Adds a tenant with the server's own CLI (`keys add TENANT`), which appends `TENANT SHA256HEX` to the file and
 * prints the key once. Returns the key; checks the appended line really is the key's hash and holds no key.
 */
export function keysAdd(keysFile, tenant, admin = false) {
    const out = execFileSync(JAVA, ['-jar', JAR, 'keys', 'add', tenant, ...(admin ? ['--admin'] : [])], {
        env: { PATH: process.env.PATH, HOME: process.env.HOME, JAVA_HOME, API_KEYS_FILE: keysFile },
        encoding: 'utf8',
    });
    const key = out.trim().split(/\s+/).pop();
    const line = readFileSync(keysFile, 'utf8').split('\n').find((l) => l.startsWith(`${tenant} `));
    const hash = createHash('sha256').update(key).digest('hex');
    if (!line || !line.includes(hash) || line.includes(key)) {
        throw new Error(`keys add ${tenant}: unexpected output ${JSON.stringify(out)} / line ${JSON.stringify(line)}`);
    }
    return key;
}

/** The hand-written alternative to `keys add`: a line with the SHA-256 of a fresh key. */
export function keysAppend(keysFile, tenant) {
    const key = `k-${randomBytes(16).toString('hex')}`;
    appendFileSync(keysFile, `${tenant} ${createHash('sha256').update(key).digest('hex')}\n`, { mode: 0o600 });
    return key;
}

/**
 * Starts the jar through the harness's startServer (free loopback port, healthy, start-up work done) with this
 * file's DATA_DIR and no API_KEY: `env` must carry WORKSPACE_ROOT and the auth (API_KEYS_FILE). Adds what the
 * workspace tests need on top: the server's memory figures and a client per key.
 */
export async function startServer3(base, env) {
    const server = await startServer({ API_KEY: '', DATA_DIR: base.dataDir, ...env });
    return {
        url: server.base,
        pid: server.pid,
        env: server.env,
        log: server.log,
        alive: server.alive,
        /** VmHWM (peak resident set) and VmRSS of the server JVM, in bytes. */
        memory() {
            const status = readFileSync(`/proc/${server.pid}/status`, 'utf8');
            const kb = (k) => Number(status.match(new RegExp(`^${k}:\\s+(\\d+) kB`, 'm'))[1]) * 1024;
            return { hwm: kb('VmHWM'), rss: kb('VmRSS') };
        },
        /**
         * Resets VmHWM to the current RSS (`echo 5 > /proc/PID/clear_refs`, Linux 4.0+, needs root), so that a
         * later peak belongs to what ran in between. Returns false where the kernel refuses.
         */
        resetPeak() {
            try {
                writeFileSync(`/proc/${server.pid}/clear_refs`, '5');
                return true;
            } catch (e) {
                return false;
            }
        },
        /** An MCP SDK client (Streamable HTTP) authenticated with `key`. */
        async connect(key) {
            return (await server.connect({ apiKey: key })).client;
        },
        stop: () => server.stop(),
    };
}

/** A REST client for one key: `api('GET', '/api/workspaces')` → fetch Response. */
export function restClient(url, key) {
    return (method, path, init = {}) => fetch(`${url}${path}`, {
        method,
        ...init,
        headers: { Authorization: `Bearer ${key}`, ...(init.headers || {}) },
    });
}

/** Calls a tool with a long client timeout; returns { isError, sc, text, raw }. */
export async function callTool(client, name, args) {
    const raw = await client.callTool({ name, arguments: args }, undefined, { timeout: 150_000 });
    const text = (raw.content || []).filter((c) => c.type === 'text').map((c) => c.text).join('\n');
    return { isError: raw.isError === true, sc: raw.structuredContent, text, raw };
}
