// Starts a cluster of real processes on loopback for the issue #6 tests and the cluster benchmark: N workers
// (`java -jar code-exec-mcp.jar worker`, each on its own free port with its own DATA_DIR) and M gateways (the
// normal server with WORKERS=static:///...), all sharing one WORKSPACE_ROOT and one API_KEYS_FILE, the way a
// Kubernetes deployment shares a volume and a Secret. Workers are handles the tests can kill -9, SIGSTOP,
// SIGTERM and restart on the same port; gateways are the harness's ordinary servers (e2e/lib/server.js).
//
// A worker counts as started when the standard gRPC health service says SERVING (asked over Node's own HTTP/2,
// e2e/lib/grpc.js) and its start-up work (the Go cache warm-up, language warm-ups) is done: on 2 cores, five JVMs
// warming Go at once would take minutes, so only the first worker warms the Go build cache and the others get a
// copy of it before they start (a warm cache is marked as such; the copy is what a persistent volume would hold).
import { spawn, execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, chmodSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';

import { JAR, JAVA, freePort, sleep, startServer, hostProcessesWith, INTERPRETER_RUNNER, WAITING_SANDBOX, seedGoCache, GO_CACHE_MARKER } from './server.js';

export { GO_CACHE_MARKER };
import { makeBase, keysAppend } from './server3.js';
import { health, workerStatus } from './grpc.js';

/**
 * Unmounts what is still mounted below `dir`: a worker killed with -9 cannot take down the mount of its
 * DATA_DIR/late (where warm sandboxes get their working directory), and rm would fail with EBUSY on it.
 */
function unmountBelow(dir) {
    const mounts = readFileSync('/proc/self/mounts', 'utf8').split('\n')
        .map((l) => l.split(' ')[1]).filter((m) => m && (m === dir || m.startsWith(`${dir}/`)))
        .sort((a, b) => b.length - a.length);
    for (const m of mounts) {
        try {
            execFileSync('umount', ['-l', m]);
        } catch (e) {
            process.stderr.write(`e2e: umount ${m}: ${e.message}\n`);
        }
    }
}

function childProcesses(pid) {
    try {
        return execFileSync('ps', ['-o', 'pid=,args=', '--ppid', String(pid)], { encoding: 'utf8' })
            .split('\n').filter((l) => l.trim());
    } catch (e) {
        return []; // ps exits 1 when there is none
    }
}

/** The parent pid of `pid`, or 0 when it is gone. */
function parentOf(pid) {
    try {
        return Number(execFileSync('ps', ['-o', 'ppid=', '-p', String(pid)], { encoding: 'utf8' }).trim()) || 0;
    } catch (e) {
        return 0;
    }
}

/**
 * Starts one worker and waits until it is SERVING and quiet.
 * @param {{name: string, dataDir: string, port?: number, token?: string, env?: Record<string,string>,
 *          startTimeoutMs?: number}} opts
 */
export async function startWorker({ name, dataDir, port, token, env = {}, startTimeoutMs = 90_000 }) {
    if (!existsSync(JAR)) throw new Error(`server jar missing: ${JAR} (build it with ./mvnw -B -q package -DskipTests)`);
    mkdirSync(dataDir, { recursive: true, mode: 0o711 });
    chmodSync(dataDir, 0o711);
    const childEnv = {
        PATH: process.env.PATH,
        HOME: process.env.HOME,
        LANG: 'C.UTF-8',
        JAVA_HOME: process.env.JAVA_HOME || '/usr/lib/jvm/temurin-25-jdk-amd64',
        WORKER_HOST: '127.0.0.1',
        WORKER_PORT: String(port ?? await freePort()),
        WORKER_NAME: name,
        DATA_DIR: dataDir,
        ...(token === undefined ? {} : { WORKER_TOKEN: token }),
        ...env,
    };
    const address = `127.0.0.1:${childEnv.WORKER_PORT}`;
    let child;
    let log = '';
    let exited = null;
    let exitWaiters = [];

    const spawnIt = () => {
        log += `---- e2e: starting worker ${name} on ${address} ----\n`;
        exited = null;
        child = spawn(JAVA, ['-jar', JAR, 'worker'], { env: childEnv, stdio: ['ignore', 'pipe', 'pipe'] });
        const keep = (b) => {
            log += b.toString();
            if (log.length > 400_000) log = log.slice(-200_000);
        };
        child.stdout.on('data', keep);
        child.stderr.on('data', keep);
        const mine = child;
        child.on('exit', (code, signal) => {
            if (mine !== child) return;
            exited = { code, signal };
            log += `---- e2e: worker ${name} exited ${JSON.stringify(exited)} ----\n`;
            const w = exitWaiters;
            exitWaiters = [];
            w.forEach((f) => f(exited));
        });
    };

    const waitExit = (timeoutMs) => new Promise((res) => {
        if (exited) return res(exited);
        const t = setTimeout(() => res(null), timeoutMs);
        exitWaiters.push((e) => { clearTimeout(t); res(e); });
    });

    const worker = {
        name, address, dataDir, token, env: childEnv,
        port: Number(childEnv.WORKER_PORT),
        get pid() { return child.pid; },
        log: () => log,
        alive: () => exited === null,
        exitInfo: () => exited,
        /** The standard health service's answer ('SERVING', 'NOT_SERVING', 'timeout', 'unreachable: ...'). */
        health: (timeoutMs) => health(address, '', timeoutMs),
        /** Worker.Status with the worker's token, or with the one given (undefined: no token at all). */
        status: (...withToken) => workerStatus(address, withToken.length ? withToken[0] : token),
        signal(sig) {
            process.kill(child.pid, sig);
        },
        /** Waits until the health service says SERVING and start-up work is done; throws after the timeout. */
        async waitServing(timeoutMs = startTimeoutMs, { quiet = true } = {}) {
            const end = Date.now() + timeoutMs;
            let last = '';
            for (;;) {
                if (exited) throw new Error(`worker ${name} exited during start (${JSON.stringify(exited)}); log:\n${log.slice(-4000)}`);
                last = await health(address, '', 1000);
                if (last === 'SERVING') break;
                if (Date.now() > end) {
                    throw new Error(`worker ${name} not SERVING in ${timeoutMs} ms (last: ${last}); log:\n${log.slice(-4000)}`);
                }
                await sleep(100);
            }
            if (quiet && !(await worker.waitQuiet(Math.max(5000, end - Date.now() + 120_000)))) {
                process.stderr.write(`e2e: worker ${name} still busy with start-up work\n`);
            }
        },
        /** Child processes of the worker JVM right now. */
        children: () => childProcesses(child.pid),
        /** Child processes that are start-up work (not the warm pool's or sessions' waiting interpreters). */
        startupChildren: () => childProcesses(child.pid).filter((l) => !INTERPRETER_RUNNER.test(l) && !WAITING_SANDBOX.test(l)),
        async waitQuiet(timeoutMs = 180_000) {
            const end = Date.now() + timeoutMs;
            while (worker.startupChildren().length && Date.now() < end) await sleep(250);
            return worker.startupChildren().length === 0;
        },
        /** Sandbox processes of this worker's runner scripts (their command lines name its DATA_DIR). */
        sandboxProcesses: (marker = '') => hostProcessesWith(`${dataDir}/runtime/${marker}`),
        /** True when `pid` descends from this worker's JVM (a sandbox it started). */
        owns(pid) {
            for (let p = pid, i = 0; p > 1 && i < 64; i++) {
                if (p === child.pid) return true;
                p = parentOf(p);
            }
            return false;
        },
        /** kill -9, and wait until the JVM is gone. */
        async kill() {
            if (exited) return exited;
            child.kill('SIGKILL');
            return waitExit(30_000);
        },
        /** Resolves with { code, signal } when the JVM exits, or null after the timeout. */
        waitExit,
        /** SIGTERM (a drain), then SIGKILL after `graceMs`; resolves with how it exited. */
        async stop(graceMs = 30_000) {
            if (exited) return exited;
            try { process.kill(child.pid, 'SIGCONT'); } catch (e) { /* gone */ }
            child.kill('SIGTERM');
            const e = await waitExit(graceMs);
            if (e) return e;
            child.kill('SIGKILL');
            return waitExit(30_000);
        },
        /**
         * Starts the worker again on the same port, DATA_DIR and environment (a restarted pod); resolves when it
         * is SERVING and, with `quiet`, done with its start-up work.
         */
        async restart({ quiet = true } = {}) {
            if (!exited) await worker.stop();
            spawnIt();
            await worker.waitServing(startTimeoutMs, { quiet });
        },
    };
    spawnIt();
    await worker.waitServing();
    return worker;
}

/**
 * A gateway's view of its workers from /healthz (`workers: {total, healthy, list: [...]}`), as the list of
 * { address, name, healthy, draining, running, queued, slots, sessions, warmPool, lastSeen, error }.
 */
export function workersOf(healthzBody) {
    const w = healthzBody?.workers;
    return Array.isArray(w) ? w : Array.isArray(w?.list) ? w.list : [];
}

/**
 * Starts workers, then gateways, on loopback.
 * @param {{workers: Array<{name: string, env?: Record<string,string>}>,
 *          gateways?: Array<{name: string, env?: Record<string,string>, workers?: string[]}>,
 *          env?: Record<string,string>, workerEnv?: Record<string,string>, gatewayEnv?: Record<string,string>,
 *          tenants?: string[]}} spec
 *   `env` goes to every process, `workerEnv` / `gatewayEnv` to one kind; a gateway's `workers` lists the names of
 *   the workers it is given (default: all). `tenants` become API keys (API_KEYS_FILE) shared by the gateways.
 */
export async function startCluster(spec) {
    const base = makeBase();
    const workspaceRoot = base.workspaceRoot('workspaces');
    const token = randomSecret('wt-');
    const keysFile = join(base.dir, 'keys');
    const keys = {};
    for (const t of spec.tenants ?? ['alice']) keys[t] = keysAppend(keysFile, t);
    const common = { WORKSPACE_ROOT: workspaceRoot, ...(spec.env ?? {}) };
    const dataDirOf = (name) => join(base.dir, `data-${name}`);

    const cluster = { base, token, keysFile, keys, workspaceRoot, workers: {}, gateways: {} };
    const stopAll = async () => {
        await Promise.all(Object.values(cluster.gateways).map((g) => g.stop().catch(() => {})));
        await Promise.all(Object.values(cluster.workers).map((w) => w.stop(20_000).catch(() => {})));
        unmountBelow(base.dir);
        try {
            base.remove();
        } catch (e) {
            process.stderr.write(`e2e: could not remove ${base.dir}: ${e.message}\n`);
        }
    };
    cluster.stop = stopAll;
    try {
        // The first worker warms the Go build cache (or gets it from a warm E2E_DATA_DIR); the rest copy it.
        const [first, ...rest] = spec.workers;
        const start = async (w) => {
            seedGoCache(process.env.E2E_DATA_DIR, dataDirOf(w.name));
            if (cluster.workers[first.name]) seedGoCache(cluster.workers[first.name].dataDir, dataDirOf(w.name));
            cluster.workers[w.name] = await startWorker({ name: w.name, dataDir: dataDirOf(w.name), token,
                env: { ...common, ...(spec.workerEnv ?? {}), ...(w.env ?? {}) } });
        };
        await start(first);
        await Promise.all(rest.map(start));

        cluster.workersString = (names = Object.keys(cluster.workers)) =>
            `static:///${names.map((n) => cluster.workers[n].address).join(',')}`;

        /** Starts one more gateway (also used by tests for a gateway with a wrong token). */
        cluster.startGateway = async ({ name, env = {}, workers, ready } = {}) => {
            const dataDir = dataDirOf(name);
            mkdirSync(dataDir, { recursive: true, mode: 0o711 });
            seedGoCache(cluster.workers[first.name].dataDir, dataDir);
            const g = await startServer({ API_KEY: '', API_KEYS_FILE: keysFile, DATA_DIR: dataDir,
                WORKERS: cluster.workersString(workers), WORKER_TOKEN: token,
                ...common, ...(spec.gatewayEnv ?? {}), ...env }, ready ? { ready } : {});
            g.name = name;
            cluster.gateways[name] = g;
            return g;
        };
        await Promise.all((spec.gateways ?? []).map((g) => cluster.startGateway(g)));

        /**
         * Waits until every gateway lists each of `names` with `healthy` equal to `want`; returns the time it took
         * in ms, or throws with the gateways' last views.
         */
        cluster.waitWorkers = async (names, want = true, timeoutMs = 30_000, gateways = Object.values(cluster.gateways)) => {
            const t0 = Date.now();
            let views = [];
            for (;;) {
                views = await Promise.all(gateways.map(async (g) => workersOf((await g.healthz()).body)));
                const ok = views.every((v) => names.every((n) => {
                    const w = v.find((x) => x.name === n || String(x.address ?? '').includes(cluster.workers[n].address));
                    return w && w.healthy === want;
                }));
                if (ok) return Date.now() - t0;
                if (Date.now() - t0 > timeoutMs) {
                    throw new Error(`workers ${names} not healthy=${want} in ${timeoutMs} ms: ${JSON.stringify(views)}`);
                }
                await sleep(100);
            }
        };
        return cluster;
    } catch (e) {
        await stopAll();
        throw e;
    }
}

function randomSecret(prefix) {
    return `${prefix}${randomBytes(16).toString('hex')}`;
}
