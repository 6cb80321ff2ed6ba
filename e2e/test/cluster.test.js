// Issue #6, the worker tier end to end: real processes on loopback (e2e/lib/cluster.js), driven by the official
// TypeScript MCP SDK through the gateways. One cluster for the whole file: three workers (w1 and w2 with
// MAX_CONCURRENT=4, w3 with MAX_CONCURRENT=1: the slow one), gateway A (WORKER_BALANCING=weighted_round_robin, the
// default) and gateway B (least_request), one tenant, one shared WORKSPACE_ROOT with WORKSPACE_QUOTA_MB=2.
// Tests that kill, stop or drain a worker start it again on the same port before they end, so the order of the
// tests matters only for time. Placement follows load, so a test that needs work on one worker puts it there
// itself: through a gateway in front of that worker alone (clientOn), or with a session its key hashes onto it. The worker's own gRPC surface (health, token refusal) is reached with Node's
// HTTP/2 (e2e/lib/grpc.js), no gRPC library.
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';

import { exec, sleep, hostProcessesWith, looksLikeStackTrace } from '../lib/server.js';
import { restClient } from '../lib/server3.js';
import { startCluster, workersOf } from '../lib/cluster.js';
import { Code, workerExecute } from '../lib/grpc.js';
import { startModelServer, toolResultsOf } from '../fixtures/model-server.js';

const MiB = 1024 * 1024;
const SLOTS = { w1: 4, w2: 4, w3: 1 };
const GATEWAY_QUEUE_TIMEOUT_MS = 5000;
const GATEWAY_SLACK_MS = 15_000;
/** The gateway's deadline for a call with this timeout, plus a little for the client and a loaded machine. */
const deadlineOf = (timeoutMs) => timeoutMs + GATEWAY_QUEUE_TIMEOUT_MS + GATEWAY_SLACK_MS + 5000;
const SLEEP_CODE = (s) => `import time\ntime.sleep(${s})\nprint("done")\n`;
// A run shows on the host under its marker (an argument on its command line) only when it is cold: an extra
// environment variable keeps it off the warm pool, whose interpreters were started before the run.
const COLD = { E2E_COLD: '1' };
const TICKER = 'import sys, time\ni = 0\nwhile True:\n    print("tick", i, flush=True)\n    i += 1\n    time.sleep(0.1)\n';

let cluster; let A; let B; let clientA; let clientB; let key; let apiA; let apiB;
// The chat agent's model: the scripted one of the chat tests (fixtures/model-server.js), for the gateways.
let model; const LLM_KEY = `sk-${randomBytes(12).toString('hex')}`;

before(async () => {
    model = await startModelServer();
    cluster = await startCluster({
        workers: [{ name: 'w1' }, { name: 'w2' }, { name: 'w3', env: { MAX_CONCURRENT: '1' } }],
        gateways: [{ name: 'A' }, { name: 'B', env: { WORKER_BALANCING: 'least_request' } }],
        env: { WORKSPACE_QUOTA_MB: '2', WARM_POOL: 'python=1' },
        // A drain waits this long for the runs still on the worker (the drain test holds one until it releases it).
        // Background jobs are kept by the workers that run them, in their job slots.
        workerEnv: { MAX_CONCURRENT: '4', SHUTDOWN_GRACE_SECONDS: '60', MAX_JOBS: '6', MAX_JOBS_PER_TENANT: '6' },
        // A gateway's deadline for a run is timeout + QUEUE_TIMEOUT_MS + 15 s of slack: a shorter queue wait
        // keeps the deadline of a call to a hung worker short.
        gatewayEnv: { QUEUE_TIMEOUT_MS: String(GATEWAY_QUEUE_TIMEOUT_MS), LLM_MODEL: 'scripted', LLM_BASE_URL: model.url,
            LLM_API_KEY: LLM_KEY },
        tenants: ['alice'],
    });
    ({ A, B } = cluster.gateways);
    key = cluster.keys.alice;
    clientA = (await A.connect({ apiKey: key })).client;
    clientB = (await B.connect({ apiKey: key })).client;
    apiA = restClient(A.base, key);
    apiB = restClient(B.base, key);
    await cluster.waitWorkers(['w1', 'w2', 'w3'], true, 30_000);
});

after(async () => {
    await model?.stop().catch(() => {});
    await clientA?.close().catch(() => {});
    await clientB?.close().catch(() => {});
    for (const o of Object.values(only)) await o.client.close().catch(() => {});
    if (process.env.E2E_CLUSTER_LOGS && cluster) {
        for (const w of Object.values(cluster.workers)) process.stderr.write(`\n==== worker ${w.name}\n${w.log().slice(-20000)}`);
        for (const g of Object.values(cluster.gateways)) process.stderr.write(`\n==== gateway ${g.name}\n${g.log().slice(-20000)}`);
    }
    await cluster?.stop();
});

/** Any tool; { isError, sc, text }. */
async function tool(client, name, args = {}, timeout = 60_000) {
    const raw = await client.callTool({ name, arguments: args }, undefined, { timeout });
    const text = (raw.content || []).filter((c) => c.type === 'text').map((c) => c.text).join('\n');
    return { isError: raw.isError === true, sc: raw.structuredContent, text, raw };
}

/** execute_code that never rejects: { r, error, ms, worker } (error: the client-side failure, e.g. a timeout). */
async function run(client, args, { timeout = 60_000, signal } = {}) {
    const t0 = Date.now();
    try {
        const r = await exec(client, args, { timeout, signal });
        return { r, ms: Date.now() - t0, worker: r.sc?.worker };
    } catch (error) {
        return { error, ms: Date.now() - t0 };
    }
}

/** Closed-loop load: `concurrency` callers run `args` back to back until `seconds` pass. */
async function load(client, args, { seconds, concurrency = 8, timeout = 60_000 }) {
    const end = Date.now() + seconds * 1000;
    const results = [];
    await Promise.all(Array.from({ length: concurrency }, async () => {
        while (Date.now() < end) results.push(await run(client, args, { timeout }));
    }));
    return results;
}

const ok = (x, stdout = 'done\n') => !x.error && !x.r.isError && x.r.sc?.exitCode === 0 && x.r.sc?.stdout === stdout;
const describeFailure = (x) => (x.error ? `client error: ${x.error.message}` : `${x.r.sc?.outcome} ${x.r.text.slice(0, 300)}`);

function countBy(results) {
    const c = {};
    for (const x of results) c[x.worker ?? '?'] = (c[x.worker ?? '?'] ?? 0) + 1;
    return c;
}

/** The gateway's /healthz entry of worker `name` (matched by name or by address). */
async function viewOf(gateway, name) {
    const w = cluster.workers[name];
    return workersOf((await gateway.healthz()).body)
        .find((x) => x.name === name || String(x.address ?? '').includes(w.address));
}

async function until(fn, timeoutMs, stepMs = 100) {
    const end = Date.now() + timeoutMs;
    for (;;) {
        if (await fn()) return true;
        if (Date.now() > end) return false;
        await sleep(stepMs);
    }
}

/** Worker name → { gateway, client }: a gateway in front of that worker alone, started by clientOn. */
const only = {};

/** An MCP client whose runs land on worker `name` and nowhere else: a gateway with that one worker (started once). */
async function clientOn(name) {
    if (!only[name]) {
        const gateway = await cluster.startGateway({ name: `only-${name}`, workers: [name] });
        only[name] = { gateway, client: (await gateway.connect({ apiKey: key })).client };
    }
    return only[name].client;
}

/** The gateways that list worker `name`: A, B and the one in front of it alone, once started. */
const gatewaysOf = (name) => [A, B, ...(only[name] ? [only[name].gateway] : [])];

/** Restarts a worker on its port and waits until every gateway of it sees it healthy again. */
async function restart(name) {
    await cluster.workers[name].restart();
    return cluster.waitWorkers([name], true, 30_000, gatewaysOf(name));
}

/** The pid at the start of a `ps -o pid=,args=` line. */
const pidOf = (line) => Number(line.trim().split(/\s+/)[0]);

/** Python that waits until the file "release" appears in its workspace, then prints done. */
const HOLD_CODE = 'import os, time\nwhile not os.path.exists("release"):\n    time.sleep(0.05)\nprint("done")\n';

describe('a fresh gateway', () => {
    test('spreads its first burst: 30 concurrent calls right after /healthz shows three healthy workers, at most half on one', { timeout: 120_000 }, async (t) => {
        // a gateway started now: its balanced channel has served nothing yet. It connects to the workers when its
        // polls see them healthy; when it connected on the first call instead, it gave the burst to whichever
        // worker was READY first (29 / 1 / 0)
        const g = await cluster.startGateway({ name: 'fresh' });
        try {
            await cluster.waitWorkers(['w1', 'w2', 'w3'], true, 30_000, [g]); // throws when they are not
            const c = (await g.connect({ apiKey: key })).client;
            try {
                const results = await Promise.all(Array.from({ length: 30 },
                    () => run(c, { language: 'shell', code: 'echo done' }, { timeout: 90_000 })));
                const counts = countBy(results);
                t.diagnostic(`first burst: ${JSON.stringify(counts)}`);
                assert.deepEqual(results.filter((x) => !ok(x)).map(describeFailure), []);
                assert.ok(Math.max(...Object.values(counts)) <= 15, `no worker got more than half: ${JSON.stringify(counts)}`);
            } finally {
                await c.close().catch(() => {});
            }
        } finally {
            await g.stop();
            delete cluster.gateways.fresh;
        }
    });
});

describe('a gateway in front of three workers', () => {
    test('runtime_info and /healthz list the workers: address, name, healthy, slots', async () => {
        for (const g of [A, B]) {
            const { status, body } = await g.healthz();
            assert.equal(status, 200, JSON.stringify(body));
            const views = workersOf(body);
            assert.equal(views.length, 3, JSON.stringify(body.workers));
            for (const [name, slots] of Object.entries(SLOTS)) {
                const v = await viewOf(g, name);
                assert.ok(v, `${name} listed: ${JSON.stringify(body.workers)}`);
                assert.equal(v.name, name);
                assert.ok(String(v.address).includes(cluster.workers[name].address), JSON.stringify(v));
                assert.equal(v.healthy, true, JSON.stringify(v));
                assert.equal(v.slots, slots, JSON.stringify(v));
            }
        }
        const ri = await tool(clientA, 'runtime_info');
        assert.equal(ri.isError, false, ri.text);
        const info = ri.sc ?? JSON.parse(ri.text);
        assert.equal(info.mode, 'gateway', JSON.stringify(info).slice(0, 500));
        assert.deepEqual(info.workers.map((w) => w.name).sort(), ['w1', 'w2', 'w3']);
        for (const w of info.workers) {
            assert.equal(w.healthy, true, JSON.stringify(w));
            assert.equal(w.slots, SLOTS[w.name], JSON.stringify(w));
            assert.equal(typeof w.running, 'number', JSON.stringify(w));
            assert.ok(String(w.address).includes(cluster.workers[w.name].address), JSON.stringify(w));
        }
        // Languages still come from the workers.
        assert.match(JSON.stringify(info), /python/);
        const r = await exec(clientA, { language: 'python', code: 'print("hello")' });
        assert.equal(r.sc.stdout, 'hello\n');
        assert.ok(Object.keys(SLOTS).includes(r.sc.worker), `worker named in the result: ${r.sc.worker}`);
    });

    test('load spreads by capacity: the slow worker (1 slot) gets clearly fewer runs', { timeout: 180_000 }, async (t) => {
        // Runs that mostly sleep, so that a slot, not the 2 shared cores, is what a worker is short of. 1.5 s, not
        // less: on a loaded machine a fast worker's four concurrent starts cost it several tenths of a second per run
        // that w3, starting one at a time, does not pay (CI saw 0.88× with 0.6 s runs under least_request).
        const args = { language: 'python', code: SLEEP_CODE(1.5), timeout_ms: 30_000 };
        // weighted_round_robin weighs workers by their load reports, which need a few seconds of load to mean
        // something (the worker smooths them over ~2 s): a warm-up phase is run, checked, and not counted.
        const warm = await load(clientA, args, { seconds: 12 });
        t.diagnostic(`A (weighted_round_robin) warm-up: ${JSON.stringify(countBy(warm))}`);
        assert.deepEqual(warm.filter((x) => !ok(x)).map(describeFailure), []);
        // weighted_round_robin weighs by capacity (qps / utilization), so w3 should get about a quarter of a fast
        // worker's share; least_request evens out calls in flight, and w3's queue counts as in flight, so it keeps
        // more (measured ~0.55× with 0.6 s runs; 0.5-0.8× with 0.3 s runs, where the shared cores weigh more). In
        // the whole suite on a loaded CI machine it has also kept an even share (11/12/12 and 10/14/11 of 35 runs,
        // 2026-12-02, twice; 0.6-0.7× when this file runs alone), so for it the check is only that w3 gets no more
        // than a fast worker: capacity is what weighted_round_robin is for.
        for (const [label, client, bound] of [['A (weighted_round_robin)', clientA, 0.5], ['B (least_request)', clientB, 1.0]]) {
            const results = await load(client, args, { seconds: 12 });
            const c = countBy(results);
            t.diagnostic(`${label}: ${results.length} runs at concurrency 8: ${JSON.stringify(c)}`);
            assert.deepEqual(results.filter((x) => !ok(x)).map(describeFailure), [], `${label}: every run succeeds`);
            assert.deepEqual(Object.keys(c).filter((w) => !SLOTS[w]), [], 'every result names its worker');
            assert.ok(Math.min(c.w1 ?? 0, c.w2 ?? 0) > 0, `${label}: both fast workers ran code: ${JSON.stringify(c)}`);
            // Against the fast workers' mean: ~60 runs over two equal workers split unevenly by chance (24/30 seen),
            // and the smaller of two noisy counts is no measure of a fast worker's share.
            const fast = ((c.w1 ?? 0) + (c.w2 ?? 0)) / 2;
            assert.ok((c.w3 ?? 0) <= bound * fast, `${label}: w3 (1 slot) got at most ${bound}× a fast worker's average: ${JSON.stringify(c)}`);
        }
    });

    test('shared workspaces: REST upload at A, runs on every worker read it, REST download at B, quota', { timeout: 180_000 }, async (t) => {
        const content = `from-rest-${randomBytes(8).toString('hex')}`;
        let res = await apiA('POST', '/api/workspaces/shared/files/input.txt', { body: content });
        assert.equal(res.status, 201, await res.text());
        // Runs spread by load read it...
        const reads = await Promise.all(Array.from({ length: 9 }, () => run(clientA,
            { language: 'python', workspace: 'shared', code: 'import time\nprint(open("input.txt").read())\ntime.sleep(0.5)\n' })));
        assert.deepEqual(reads.filter((x) => !ok(x, `${content}\n`)).map(describeFailure), []);
        t.diagnostic(`reads through A: ${JSON.stringify(countBy(reads))}`);
        // ... and so does a run on each worker, placed there through a gateway in front of it alone.
        const names = Object.keys(SLOTS);
        const clients = [];
        for (const name of names) clients.push(await clientOn(name));
        const onEach = await Promise.all(clients.map((c) => run(c, { language: 'python', workspace: 'shared',
            code: 'print(open("input.txt").read())' })));
        assert.deepEqual(onEach.filter((x) => !ok(x, `${content}\n`)).map(describeFailure), []);
        assert.deepEqual(onEach.map((x) => x.worker), names, 'each read ran on its worker');

        // Each worker writes a file of its own; gateway A serves all of them.
        const writes = await Promise.all(names.map((name, i) => run(clients[i], { language: 'python', workspace: 'shared',
            code: `open("out-${name}.txt", "w").write("written on ${name}")\nprint("done")\n` })));
        assert.deepEqual(writes.filter((x) => !ok(x)).map(describeFailure), []);
        assert.deepEqual(writes.map((x) => x.worker), names, 'each write ran on its worker');
        for (const name of names) {
            res = await apiA('GET', `/api/workspaces/shared/files/out-${name}.txt`);
            assert.equal(res.status, 200, `out-${name}.txt`);
            assert.equal(await res.text(), `written on ${name}`);
        }
        const r = await exec(clientA, { language: 'python', workspace: 'shared', code: 'open("made.txt", "w").write("made on a worker")' });
        assert.equal(r.sc.exitCode, 0, r.sc.stderr);
        assert.ok(r.sc.files.some((f) => f.path === 'made.txt'), `the result lists the file: ${JSON.stringify(r.sc.files)}`);
        res = await apiB('GET', '/api/workspaces/shared/files/made.txt');
        assert.equal(await res.text(), 'made on a worker');

        // WORKSPACE_QUOTA_MB=2: the gateway refuses an upload over it, a worker's run cannot write past it.
        res = await apiB('POST', '/api/workspaces/shared/files/big.bin', { body: randomBytes(3 * MiB) });
        assert.equal(res.status, 507);
        assert.equal((await res.json()).error, 'quota_exceeded');
        // One worker after the other, each through its own gateway: a run's files stop at the space left when it
        // started, so runs at the same time could pass the quota together (it bounds each file, not their sum).
        const bigCode = [
            'try:',
            '    with open("big.bin", "wb") as f:',
            '        f.write(b"x" * (3 * 1024 * 1024))',
            '    print("WROTE")',
            'except OSError as e:',
            '    print("ERRNO", e.errno)',
        ].join('\n');
        for (const [i, name] of names.entries()) {
            const x = await run(clients[i], { language: 'python', workspace: 'shared', code: bigCode });
            assert.ok(!x.error && !x.r.isError, describeFailure(x));
            assert.equal(x.r.sc.stdout, 'ERRNO 27\n', `on ${name}: ${x.r.sc.stdout} ${x.r.sc.stderr}`);
            const info = await (await apiA('GET', '/api/workspaces/shared')).json();
            assert.ok(info.size <= 2 * MiB, `after the run on ${name}: workspace size ${info.size} over the 2 MB quota`);
        }
    });

    test('sessions are sticky across two gateway replicas; a session whose worker died says it was lost', { timeout: 180_000 }, async (t) => {
        // Six sessions, and more until they sit on two workers at least: a session's worker follows from a hash of
        // its name, and six names can all land on one worker.
        const names = [];
        const home = {};
        for (let i = 0; i < 30 && (i < 6 || new Set(Object.values(home)).size < 2); i++) {
            const session = `sticky-${i}`;
            const r = await exec(clientA, { language: 'python', session, code: `x = ${i} * 10` });
            assert.equal(r.isError, false, r.text);
            assert.equal(r.sc.sessionCreated, true);
            names.push(session);
            home[session] = r.sc.worker;
        }
        t.diagnostic(`session → worker: ${JSON.stringify(home)}`);
        assert.ok(new Set(Object.values(home)).size >= 2, 'sessions hash onto more than one worker');
        for (const [i, session] of names.entries()) {
            const r = await exec(clientB, { language: 'python', session, code: 'x + 1' });
            assert.equal(r.isError, false, r.text);
            assert.equal(r.sc.sessionCreated, false, `${session} continued at B, not created again`);
            assert.equal(r.sc.result, String(i * 10 + 1), `${session}: the variable from gateway A`);
            assert.equal(r.sc.worker, home[session], `${session} on the same worker through B`);
        }
        const listed = (await tool(clientB, 'session_list')).sc.sessions.map((s) => s.name);
        for (const n of names) assert.ok(listed.includes(n), `session_list at B lists ${n}: ${listed}`);

        // kill -9 the worker of sticky-0: its sessions are lost (and say so), the others keep their state.
        const victim = home[names[0]];
        await cluster.workers[victim].kill();
        try {
            const lost = await exec(clientB, { language: 'python', session: names[0], code: 'x' });
            t.diagnostic(`a session call after its worker died: ${lost.sc?.outcome} ${lost.text.slice(0, 200)}`);
            assert.equal(lost.sc?.outcome, 'failed_to_start', lost.text);
            assert.match(lost.text, /session/i);
            assert.match(lost.text, /lost/i);
            assert.equal(looksLikeStackTrace(lost.text), false, lost.text);
            for (const [i, session] of names.entries()) {
                if (home[session] === victim) continue;
                const r = await exec(clientA, { language: 'python', session, code: 'x' });
                assert.equal(r.isError, false, r.text);
                assert.equal(r.sc.result, String(i * 10), `${session} on ${home[session]} kept its state`);
                assert.equal(r.sc.worker, home[session]);
            }
        } finally {
            await restart(victim);
        }
    });

    test('a session lost with its worker is reported at the gateway that served it, even after another gateway reused the name', {
        timeout: 120_000,
    }, async (t) => {
        const r = await exec(clientA, { language: 'python', session: 'cross-gw', code: 'x = 7' });
        assert.equal(r.isError, false, r.text);
        const home = r.sc.worker;
        await cluster.workers[home].kill();
        try {
            const viaB = await exec(clientB, { language: 'python', session: 'cross-gw', code: 'print(globals().get("x"))' });
            t.diagnostic(`via B (never served it): outcome ${viaB.sc?.outcome}, sessionCreated ${viaB.sc?.sessionCreated}, on ${viaB.sc?.worker}`);
            const viaA = await exec(clientA, { language: 'python', session: 'cross-gw', code: 'print(globals().get("x"))' });
            t.diagnostic(`via A (served it on ${home}): outcome ${viaA.sc?.outcome}, sessionCreated ${viaA.sc?.sessionCreated}, stdout ${JSON.stringify(viaA.sc?.stdout)}`);
            assert.ok(viaA.sc?.outcome === 'failed_to_start' || viaA.sc?.sessionCreated === true,
                `A's client must learn that x is gone: ${JSON.stringify(viaA.sc)}`);
        } finally {
            await tool(clientA, 'session_close', { session: 'cross-gw' }).catch(() => {});
            await restart(home);
        }
    });

    test('cancel through the gateway (SDK AbortSignal) kills the run on the worker', { timeout: 60_000 }, async (t) => {
        const marker = `cancel-${randomBytes(8).toString('hex')}`;
        const ac = new AbortController();
        t.after(() => ac.abort());
        const call = run(clientA, { language: 'python', code: TICKER, args: [marker], env: COLD, timeout_ms: 60_000 }, { signal: ac.signal });
        assert.ok(await until(() => hostProcessesWith(marker).length > 0, 15_000), 'the run started');
        const pid = Number(hostProcessesWith(marker)[0].trim().split(/\s+/)[0]);
        const owner = Object.values(cluster.workers).find((w) => w.owns(pid));
        assert.ok(owner, `the run's process ${pid} descends from a worker JVM`);
        assert.ok(owner.sandboxProcesses().length > 0, `it is one of ${owner.name}'s sandboxes`);
        ac.abort('test cancels');
        const settled = await call;
        assert.ok(settled.error, `the aborted call rejects on the client (got ${JSON.stringify(settled.r?.sc)})`);
        assert.ok(await until(() => hostProcessesWith(marker).length === 0, 5000),
            `no process of the cancelled run remains on ${owner.name}: ${hostProcessesWith(marker)}`);
        assert.ok(await until(async () => (await owner.status()).running === 0, 5000), `${owner.name} reports nothing running`);
        assert.ok(await until(async () => (await viewOf(A, owner.name))?.running === 0, 10_000), 'the gateway view agrees');
    });

    test('the worker token: raw gRPC without or with a wrong token is refused; a gateway with a wrong token runs nothing', { timeout: 120_000 }, async (t) => {
        const w1 = cluster.workers.w1;
        let res = await apiA('POST', '/api/workspaces/tok/files/seed.txt', { body: 'seed' });
        assert.equal(res.status, 201, await res.text());
        const proof = (label) => `open("proof-${label}.txt", "w").write("ran")\nprint("ran")\n`;
        // Positive control: the raw client does reach a worker and run code when it has the token.
        const good = await workerExecute(w1.address, cluster.token, { language: 'python', code: proof('good'), tenant: 'alice', workspace: 'tok' });
        assert.equal(good.status, Code.OK, `${good.message} ${good.error}`);
        assert.equal(good.events[0], 'accepted');
        assert.equal(good.events.at(-1).result.stdout, 'ran\n');
        assert.equal(good.events.at(-1).result.worker, 'w1');
        for (const [label, token] of [['missing', undefined], ['wrong', 'wt-not-the-token'], ['empty', '']]) {
            const bad = await workerExecute(w1.address, token, { language: 'python', code: proof(label), tenant: 'alice', workspace: 'tok' });
            assert.equal(bad.status, Code.UNAUTHENTICATED, `${label} token: ${bad.status} ${bad.message} ${bad.error}`);
            assert.deepEqual(bad.events, [], `${label} token: no event at all`);
            assert.equal((await w1.status(token)).status, Code.UNAUTHENTICATED, `${label} token: Status refused too`);
        }
        assert.equal(await w1.health(), 'SERVING', 'the health service needs no token (probes)');

        // Gateways with a wrong or no token: clear errors, and no code reaches a worker.
        for (const [name, env] of [['wrongtoken', { WORKER_TOKEN: 'wt-not-the-token' }], ['notoken', { WORKER_TOKEN: '' }]]) {
            const g = await cluster.startGateway({ name, env, ready: (status, body) => [200, 503].includes(status) && !!body.status });
            try {
                const c = (await g.connect({ apiKey: key })).client;
                const t0 = Date.now();
                const r = await exec(c, { language: 'python', workspace: 'tok', code: proof(name), timeout_ms: 5000 }, { timeout: 60_000 });
                assert.equal(r.isError, true, `${name}: ${r.text}`);
                t.diagnostic(`gateway ${name}: ${Date.now() - t0} ms: ${r.text.slice(0, 300)}`);
                assert.ok(Date.now() - t0 < 40_000, `${name}: the refusal came in ${Date.now() - t0} ms`);
                assert.match(r.text, /unauthenticated|token|authori[sz]|refused|no (healthy )?worker/i, `${name}: a clear error: ${r.text}`);
                assert.equal(looksLikeStackTrace(r.text), false, r.text);
                const h = await g.healthz();
                for (const v of workersOf(h.body)) assert.equal(v.healthy, false, `${name}: a worker that refuses the gateway is not healthy for it: ${JSON.stringify(v)}`);
                await c.close();
            } finally {
                await g.stop();
                delete cluster.gateways[name];
            }
        }
        const tree = await (await apiA('GET', '/api/workspaces/tok/tree')).json();
        assert.deepEqual(tree.map((e) => e.name).sort(), ['proof-good.txt', 'seed.txt'], 'only the authenticated call ran code');
    });

    test('drain: SIGTERM a worker during a run: the run completes, new runs go elsewhere, it exits 0', { timeout: 180_000 }, async (t) => {
        const w2 = cluster.workers.w2;
        let res = await apiA('POST', '/api/workspaces/drain/files/seed.txt', { body: 'seed' });
        assert.equal(res.status, 201, await res.text());
        const marker = `drain-${randomBytes(6).toString('hex')}`;
        // A run on w2 for sure (through the gateway in front of it alone) that goes on until the test releases it:
        // the drain and the calls below all happen while it runs.
        const held = run(await clientOn('w2'), { language: 'python', workspace: 'drain', code: HOLD_CODE, args: [marker],
            env: COLD, timeout_ms: 110_000 }, { timeout: 180_000 });
        assert.ok(await until(() => hostProcessesWith(marker).some((l) => w2.owns(pidOf(l))), 60_000),
            'the held run is running on w2');
        w2.signal('SIGTERM');
        const health = [];
        const watch = (async () => {
            while (w2.alive()) {
                health.push(await w2.health(500));
                await sleep(50);
            }
        })();
        assert.ok(await until(() => health.includes('NOT_SERVING'), 30_000), `health says NOT_SERVING while draining: ${health}`);
        const during = [];
        for (let i = 0; i < 6; i++) during.push(await run(clientB, { language: 'python', code: 'print("done")' }));
        res = await apiA('POST', '/api/workspaces/drain/files/release', { body: 'go' });
        assert.equal(res.status, 201, await res.text());
        const finished = await held;
        const exit = await w2.waitExit(40_000);
        await watch;
        t.diagnostic(`during the drain: ${JSON.stringify(countBy(during))}; w2 health seen: ${[...new Set(health)]}`);
        assert.ok(ok(finished), `the held run completed: ${describeFailure(finished)}`);
        assert.equal(finished.worker, 'w2');
        assert.deepEqual(during.filter((x) => !ok(x)).map(describeFailure), []);
        assert.deepEqual(during.filter((x) => x.worker === 'w2').length, 0, 'no new run on the draining worker');
        assert.deepEqual(exit, { code: 0, signal: null }, 'the drained worker exits 0');
        await restart('w2');
    });

    test('a SIGSTOPped worker: calls fail within their deadline, new calls avoid it', { timeout: 180_000 }, async (t) => {
        const w1 = cluster.workers.w1;
        const TIMEOUT = 3000;
        // A session that lives on w1: its calls must go there (consistent hashing), so one surely meets the stop.
        let pinned = null;
        for (let i = 0; i < 30 && !pinned; i++) {
            const r = await exec(clientA, { language: 'python', session: `stop-${i}`, code: 'x = 1' });
            assert.equal(r.isError, false, r.text);
            if (r.sc.worker === 'w1') pinned = `stop-${i}`;
            else await tool(clientA, 'session_close', { session: `stop-${i}` });
        }
        assert.ok(pinned, 'a session name that hashes onto w1');
        w1.signal('SIGSTOP');
        const t0 = Date.now();
        const noticed = until(async () => (await viewOf(A, 'w1'))?.healthy === false, 40_000, 100).then((v) => (v ? Date.now() - t0 : null));
        try {
            const s = await run(clientA, { language: 'python', session: pinned, code: 'print("done")', timeout_ms: TIMEOUT }, { timeout: 120_000 });
            t.diagnostic(`a call in ${pinned} (on the stopped w1) ended in ${s.ms} ms: ${describeFailure(s).slice(0, 300)}`);
            assert.ok(!s.error, `the gateway answers: ${describeFailure(s)}`);
            assert.ok(!ok(s), 'it did not run');
            assert.ok(s.ms < deadlineOf(TIMEOUT), `it ended within its deadline (timeout + queue wait + slack): ${s.ms} ms`);
            // ring_hash keeps a session on its worker while the connection looks alive: the gateway's status polls
            // notice the silence and end the call after 10 s of it, long before the deadline.
            assert.ok(s.ms < 25_000, `a call pinned to a hung worker ends once the gateway sees it hung: ${s.ms} ms`);
            assert.match(s.r?.sc?.stderr ?? '', /session unavailable.*has not answered/s, describeFailure(s));
            assert.equal(looksLikeStackTrace(s.r.text), false, s.r.text);
            const first = await Promise.all(Array.from({ length: 9 }, () => run(clientA,
                { language: 'python', code: 'print("done")', timeout_ms: TIMEOUT }, { timeout: 120_000 })));
            const slowest = Math.max(...first.map((x) => x.ms));
            const failed = first.filter((x) => !ok(x));
            t.diagnostic(`first batch after SIGSTOP: ${first.length - failed.length} ok ${JSON.stringify(countBy(first))}, ` +
                `${failed.length} failed in ${failed.map((x) => x.ms)} ms: ${failed.slice(0, 2).map(describeFailure)}`);
            for (const x of failed) {
                assert.ok(!x.error, `the gateway answers, the client does not time out: ${describeFailure(x)}`);
                assert.equal(looksLikeStackTrace(x.r.text), false, x.r.text);
            }
            assert.ok(slowest < deadlineOf(TIMEOUT), `every call ended within its deadline: slowest ${slowest} ms`);
            assert.equal(first.filter((x) => x.worker === 'w1' && ok(x)).length, 0, 'nothing ran on the stopped worker');

            const noticedMs = await noticed;
            t.diagnostic(`gateway A lists w1 unhealthy ${noticedMs === null ? 'never (40 s)' : `${noticedMs} ms after SIGSTOP`}`);
            assert.ok(noticedMs !== null && noticedMs < 20_000, `the gateway marks the stopped worker unhealthy (keepalive, status polls): ${noticedMs} ms`);
            const next = await load(clientA, { language: 'python', code: 'print("done")', timeout_ms: TIMEOUT }, { seconds: 3, concurrency: 4 });
            t.diagnostic(`after keepalive: ${JSON.stringify(countBy(next))}`);
            assert.deepEqual(next.filter((x) => !ok(x)).map(describeFailure), [], 'new calls succeed');
            assert.equal(next.filter((x) => x.worker === 'w1').length, 0, 'new calls avoid the stopped worker');
        } finally {
            w1.signal('SIGCONT');
        }
        const back = await cluster.waitWorkers(['w1'], true, 60_000, gatewaysOf('w1'));
        t.diagnostic(`w1 healthy again ${back} ms after SIGCONT`);
    });

    test('background jobs: they spread over the workers, every gateway finds them (status, output, wait, list, cancel), a job whose worker is killed ends lost naming it, and its record and output come back with the worker', { timeout: 300_000 }, async (t) => {
        const marker = `job-${randomBytes(6).toString('hex')}`;
        const started = [];
        for (let i = 0; i < 6; i++) {
            const r = await tool(clientA, 'execute_code', { language: 'python', workspace: 'jobs', code: `print("job ${i} up", flush=True)\n` + HOLD_CODE,
                args: [marker], env: COLD, background: true, timeout_ms: 120_000 });
            assert.equal(r.isError, false, r.text);
            started.push(r.sc.job);
        }
        const owners = () => {
            const lines = hostProcessesWith(marker);
            const names = new Set();
            for (const l of lines) for (const [name, w] of Object.entries(cluster.workers)) if (w.owns(pidOf(l))) names.add(name);
            return names;
        };
        assert.ok(await until(() => owners().size >= 2, 60_000), `the jobs' runs are on two workers or more: ${[...owners()]}`);
        t.diagnostic(`six jobs' runs on ${[...owners()].join(', ')}`);
        for (const job of started) {
            assert.ok(await until(async () => (await tool(clientB, 'job_status', { job })).sc?.stdout?.includes('up'), 30_000),
                `job ${job}, started at A, is found at B with its output`);
        }
        const listedAtB = (await tool(clientB, 'job_list')).sc.jobs.map((j) => j.job);
        for (const job of started) assert.ok(listedAtB.includes(job), `B lists ${job}: ${listedAtB}`);
        // ids route to the worker process that keeps the job
        assert.ok(new Set(started.map((j) => j.split('-')[1])).size >= 2, `the ids name two worker processes or more: ${started}`);
        // released: all end exited, each result naming the worker that ran it
        assert.equal((await apiA('POST', '/api/workspaces/jobs/files/release', { body: 'go' })).status, 201);
        const workers = new Set();
        for (const [i, job] of started.entries()) {
            const w = await tool(i % 2 ? clientB : clientA, 'job_wait', { job, timeout_ms: 55_000 });
            assert.equal(w.sc.status, 'exited', w.text);
            assert.match(w.sc.stdout, /up\ndone\n$/);
            assert.ok(['w1', 'w2', 'w3'].includes(w.sc.result.worker), JSON.stringify(w.sc.result));
            workers.add(w.sc.result.worker);
        }
        assert.ok(workers.size >= 2, `results name two workers or more: ${[...workers]}`);
        // a job started at B is cancelled at A (REST), and B sees it cancelled
        const c = await tool(clientB, 'execute_code', { language: 'python', code: 'import time\ntime.sleep(100)\n', env: COLD,
            background: true, timeout_ms: 110_000 });
        assert.equal(c.isError, false, c.text);
        assert.ok(await until(async () => (await tool(clientA, 'job_status', { job: c.sc.job })).sc?.status === 'running', 30_000));
        const del = await apiA('DELETE', `/api/jobs/${c.sc.job}`);
        assert.equal(del.status, 200);
        assert.equal((await del.json()).status, 'cancelled');
        assert.equal((await tool(clientB, 'job_status', { job: c.sc.job })).sc.status, 'cancelled');

        // A job on w2 (through the gateway in front of it alone); w2 is killed while it runs.
        const lostMarker = `job-lost-${randomBytes(6).toString('hex')}`;
        const viaW2 = await clientOn('w2');
        const j = await tool(viaW2, 'execute_code', { language: 'python', code: 'import time\nprint("before", flush=True)\ntime.sleep(100)\n',
            args: [lostMarker], env: COLD, background: true, timeout_ms: 110_000 });
        assert.equal(j.isError, false, j.text);
        const w2 = cluster.workers.w2;
        assert.ok(await until(() => hostProcessesWith(lostMarker).some((l) => w2.owns(pidOf(l))), 60_000), 'the job runs on w2');
        assert.ok(await until(async () => (await tool(viaW2, 'job_status', { job: j.sc.job })).sc?.stdout === 'before\n', 30_000));
        await w2.kill();
        const lost = await tool(viaW2, 'job_wait', { job: j.sc.job, timeout_ms: 55_000 });
        assert.equal(lost.sc.status, 'lost', lost.text);
        assert.match(lost.sc.message, /\bw2\b/, `the message names the worker: ${lost.sc.message}`);
        t.diagnostic(`lost: ${lost.sc.message}`);
        // w2 comes back on its volume: the job's record (lost) and output are read back there, and any gateway finds
        // them (A has never seen this job: its id names a process that is gone, so A asks every worker)
        await restart('w2');
        const back = await tool(clientA, 'job_status', { job: j.sc.job });
        assert.equal(back.sc.status, 'lost', back.text);
        assert.match(back.sc.message, /\bw2\b/, back.sc.message);
        assert.equal(back.sc.stdout, 'before\n', 'the output written before the loss is kept on the worker');
    });

    test('the chat agent at a gateway: its execute_code runs on a worker, files persist across turns through the shared workspace, and the conversation is kept by the gateway that has it', { timeout: 120_000 }, async (t) => {
        const post = (base, body) => fetch(`${base}/api/chat`, { method: 'POST',
            headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: JSON.stringify(body) });
        model.reset();
        model.script([
            { toolCalls: [{ name: 'execute_code', arguments: { language: 'python', code: 'open("note.txt", "w").write("kept")\nprint("wrote")' } }] },
            { text: 'Written.' },
            { toolCalls: [{ name: 'execute_code', arguments: { language: 'bash', code: 'cat note.txt' } }] },
            { text: 'It says kept.' },
        ]);
        const first = await post(A.base, { message: 'write a note' });
        const one = await first.json();
        assert.equal(first.status, 200, JSON.stringify(one));
        assert.equal(one.response, 'Written.');
        assert.match(one.toolCalls[0].output, /worker w[123]/, 'the run was a worker\'s');
        const second = await post(A.base, { message: 'read it back', conversation: one.conversation });
        const two = await second.json();
        assert.equal(second.status, 200, JSON.stringify(two));
        assert.match(two.toolCalls[0].output, /kept/, 'the conversation\'s workspace, on the shared volume, whichever worker ran it');
        const results = toolResultsOf(model.requests[3]).map((r) => r.text);
        assert.match(results.at(-1), /kept/, 'the model received the second run\'s real output');
        assert.equal(model.requests[0].apiKey, LLM_KEY);
        const atB = await post(B.base, { message: 'and at B?', conversation: one.conversation });
        assert.equal(atB.status, 404, 'each gateway replica keeps its own conversations (docs/chat.md)');
        t.diagnostic(`chat at A: two turns, runs on ${one.toolCalls[0].output.match(/worker (w\d)/)[1]} and ${two.toolCalls[0].output.match(/worker (w\d)/)?.[1]}`);
    });

    test('port previews behind two gateways: a session\'s server on a worker is reached through either gateway\'s listener by the same token; unexposed at one, gone at both', { timeout: 120_000 }, async (t) => {
        let r = await tool(clientA, 'execute_code', { language: 'bash', session: 'preview',
            code: 'echo "from the worker" > hello.txt\nnohup python3 -m http.server 8000 --bind 127.0.0.1 > /tmp/http.log 2>&1 &\necho started' });
        assert.equal(r.isError, false, r.text);
        const atA = await tool(clientA, 'expose_port', { session: 'preview', port: 8000 });
        assert.equal(atA.isError, false, atA.text);
        const atB = await tool(clientB, 'expose_port', { session: 'preview', port: 8000 });
        assert.equal(atB.isError, false, atB.text);
        const token = (u) => u.match(/\/p\/([0-9a-f]{48})\//)[1];
        assert.equal(token(atA.sc.url), token(atB.sc.url), 'one preview, kept by the worker: the same token at both gateways');
        assert.notEqual(new URL(atA.sc.url).port, new URL(atB.sc.url).port, 'each gateway has its own listener');
        for (const url of [atA.sc.url, atB.sc.url]) {
            let got = null;
            assert.ok(await until(async () => {
                const x = await fetch(`${url}hello.txt`);
                got = await x.text();
                return x.status === 200;
            }, 30_000), `served through ${url}: ${got}`);
            assert.equal(got, 'from the worker\n', `served through ${url}`);
        }
        const listed = (await tool(clientB, 'session_list')).sc.sessions.find((s) => s.name === 'preview');
        assert.equal(listed.previews.length, 1);
        t.diagnostic(`preview of session 'preview' through A and B: ${atA.sc.url}`);
        const un = await tool(clientB, 'unexpose_port', { url: atB.sc.url });
        assert.equal(un.sc.ended, 1);
        for (const url of [atA.sc.url, atB.sc.url])
            assert.ok(await until(async () => (await fetch(url)).status === 404, 5_000), `gone at ${url}`);
        await tool(clientA, 'session_close', { session: 'preview' });
    });

    test('kill -9 a worker under load: lost runs say so, nothing reruns, nothing hangs; it rejoins on restart', { timeout: 240_000 }, async (t) => {
        const w1 = cluster.workers.w1;
        let res = await apiA('POST', '/api/workspaces/kill/files/seed.txt', { body: 'seed' });
        assert.equal(res.status, 201, await res.text());
        const marker = `kill-${randomBytes(6).toString('hex')}`;
        const TIMEOUT = 20_000;
        // Each run appends its id to runs.log first: a silent rerun would show as an id twice.
        const code = (id, seconds = 2) => `import time\nwith open("runs.log", "a") as f:\n    f.write("${id}\\n")\ntime.sleep(${seconds})\nprint("done")\n`;
        // A run on w1 for sure (through the gateway in front of it alone), still running when w1 is killed.
        const heldMarker = `kill-held-${randomBytes(6).toString('hex')}`;
        const held = run(await clientOn('w1'), { language: 'python', workspace: 'kill', code: code('h0', 100),
            args: [heldMarker], env: COLD, timeout_ms: 110_000 }, { timeout: 180_000 });
        assert.ok(await until(() => hostProcessesWith(heldMarker).some((l) => w1.owns(pidOf(l))), 60_000),
            'the held run is running on w1');
        const calls = Array.from({ length: 12 }, (_, i) => run(i % 2 ? clientB : clientA,
            { language: 'python', workspace: 'kill', code: code(`r${i}`), args: [marker], env: COLD, timeout_ms: TIMEOUT }, { timeout: 120_000 }));
        // Killed under load: once one of these has started (its id is in runs.log, where it stays).
        assert.ok(await until(async () => {
            const log = await apiA('GET', '/api/workspaces/kill/files/runs.log');
            return log.status === 200 && /^r\d+$/m.test(await log.text());
        }, 60_000), 'the load is running');
        await w1.kill();
        const killedAt = Date.now();
        const unhealthy = until(async () => (await viewOf(A, 'w1'))?.healthy === false, 5000, 100).then((v) => ({ v, ms: Date.now() - killedAt }));
        // Calls made right after the kill succeed elsewhere.
        const afterKill = Array.from({ length: 6 }, (_, i) => run(clientA,
            { language: 'python', workspace: 'kill', code: code(`n${i}`), timeout_ms: TIMEOUT }, { timeout: 120_000 }));
        const first = await Promise.all(calls);
        const second = await Promise.all(afterKill);
        const lostHeld = await held;
        const all = [...first, ...second];
        const seen = await unhealthy;
        t.diagnostic(`under load: ${JSON.stringify(countBy(first))}; after the kill: ${JSON.stringify(countBy(second))}; ` +
            `A lists w1 unhealthy after ${seen.v ? seen.ms : 'more than 5000'} ms`);
        const lost = first.filter((x) => !ok(x));
        for (const x of lost) {
            assert.ok(!x.error, `the gateway answered: ${describeFailure(x)}`);
            assert.equal(x.r.isError, true);
            assert.equal(x.r.sc?.outcome, 'worker_lost', describeFailure(x));
            assert.match(x.r.sc?.stderr ?? x.r.text, /worker lost/i);
            if (x.worker) assert.equal(x.worker, 'w1', 'only runs on the killed worker are lost');
            assert.equal(looksLikeStackTrace(x.r.text), false, x.r.text);
        }
        assert.ok(!lostHeld.error, `the gateway answered the held run: ${describeFailure(lostHeld)}`);
        assert.equal(lostHeld.r.sc?.outcome, 'worker_lost', `the run held on w1 was lost: ${describeFailure(lostHeld)}`);
        assert.match(lostHeld.r.sc?.stderr ?? lostHeld.r.text, /worker lost/i);
        assert.ok(lost.length + 1 <= SLOTS.w1, `at most w1's ${SLOTS.w1} started runs are lost, the held one among them (queued ones are retried): ${lost.length + 1}`);
        assert.deepEqual(second.filter((x) => !ok(x)).map(describeFailure), [], 'calls after the kill succeed');
        assert.equal(second.filter((x) => x.worker === 'w1').length, 0);
        for (const x of all) assert.ok(x.ms < deadlineOf(TIMEOUT), `no call hangs: ${x.ms} ms`);
        assert.ok(seen.v, 'the killed worker shows unhealthy within 5 s');
        const h = await A.healthz();
        assert.equal(h.status, 200);
        assert.equal(h.body.status, 'degraded', 'one worker down of three: degraded');
        assert.deepEqual([h.body.workers.total, h.body.workers.healthy], [3, 2], JSON.stringify(h.body.workers));
        const ri = await tool(clientB, 'runtime_info');
        const riW1 = (ri.sc ?? JSON.parse(ri.text)).workers.find((w) => w.name === 'w1' || String(w.address).includes(w1.address));
        assert.equal(riW1?.healthy, false, `runtime_info at B: ${JSON.stringify(riW1)}`);

        // No silent rerun: every successful id exactly once, a lost one at most once (if it had started), no other.
        const lines = (await (await apiB('GET', '/api/workspaces/kill/files/runs.log')).text()).split('\n').filter(Boolean);
        const ids = (list, prefix) => list.map((x, i) => [`${prefix}${i}`, x]);
        const expected = [...ids(first, 'r'), ...ids(second, 'n'), ['h0', lostHeld]];
        for (const [id, x] of expected) {
            const n = lines.filter((l) => l === id).length;
            if (ok(x)) assert.equal(n, 1, `${id} succeeded and ran exactly once (${n})`);
            else assert.ok(n <= 1, `${id} was lost and ran at most once (${n})`);
        }
        assert.equal(lines.length, new Set(lines).size, `no id twice: ${lines}`);
        assert.ok(lines.every((l) => expected.some(([id]) => id === l)), lines.join(','));
        assert.ok(await until(() => w1.sandboxProcesses().length === 0, 5000), `the killed worker's sandboxes died with it: ${w1.sandboxProcesses()}`);

        // The restarted worker (same port) gets runs again.
        await w1.restart({ quiet: false });
        const upAt = Date.now();
        let rejoinedAfter = null;
        while (rejoinedAfter === null && Date.now() - upAt < 30_000) {
            const batch = await load(clientA, { language: 'python', code: SLEEP_CODE(0.2) }, { seconds: 1, concurrency: 8 });
            assert.deepEqual(batch.filter((x) => !ok(x)).map(describeFailure), []);
            if (batch.some((x) => x.worker === 'w1')) rejoinedAfter = Date.now() - upAt;
        }
        t.diagnostic(`w1 restarted: first run on it ${rejoinedAfter} ms after it was SERVING`);
        assert.ok(rejoinedAfter !== null && rejoinedAfter < 20_000, `the restarted worker rejoins (${rejoinedAfter} ms)`);
        await cluster.waitWorkers(['w1'], true, 30_000, gatewaysOf('w1'));
    });
});
