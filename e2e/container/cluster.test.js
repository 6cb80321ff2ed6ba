// compose.cluster.yaml brought up by docker-compose against podman (scripts/container-test.sh): one gateway and
// two workers of the same image. Driven through the gateway only (the workers are not published): stateless runs
// reach both workers, the shared workspaces volume makes a file uploaded to the gateway readable by runs on
// either worker (and a run's file downloadable), a session's calls stay on one worker, and a worker stopped with
// SIGTERM drains (its running call finishes, new work goes to the other) and gets work again once restarted.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { URL_BASE, auth, waitHealthy, connect, exec, tool } from './client.js';

const WORKERS = ['worker1', 'worker2'];
// Where the script put compose.cluster.yaml and .env, and the project name: the drain test stops a worker.
const COMPOSE_DIR = process.env.CTEST_COMPOSE_DIR;
const COMPOSE_PROJECT = process.env.CTEST_COMPOSE_PROJECT;
if (!COMPOSE_DIR || !COMPOSE_PROJECT) throw new Error('CTEST_COMPOSE_DIR and CTEST_COMPOSE_PROJECT must be set');
const execFileP = promisify(execFile);
const compose = (...args) => execFileP('docker-compose', ['-p', COMPOSE_PROJECT, '-f', 'compose.cluster.yaml', ...args],
    { cwd: COMPOSE_DIR });
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
let client;

/** Runs `make(i)` for i < n, `parallel` at a time, in order of i. */
async function pool(n, parallel, make) {
    const out = new Array(n);
    let next = 0;
    await Promise.all(Array.from({ length: parallel }, async () => {
        while (next < n) {
            const i = next++;
            out[i] = await make(i);
        }
    }));
    return out;
}

before(async () => {
    await waitHealthy();
    client = await connect();
    // The gateway answers before the workers have passed their sandbox self-test: wait for a run that works.
    const end = Date.now() + 120_000;
    let last;
    while (Date.now() < end) {
        last = await exec(client, { language: 'python', code: 'print("ready")' });
        if (!last.isError && last.sc?.exitCode === 0 && last.sc?.worker) return;
        await sleep(1000);
    }
    throw new Error(`no worker ran code within 120 s: ${last?.text}`);
});
after(async () => { await client?.close(); });

test('stateless runs spread over both workers, each result names its worker', async () => {
    const results = await pool(12, 3, (i) => exec(client, {
        language: 'python',
        code: `import os\nprint(${i}, os.getuid())`,
    }));
    results.forEach((r, i) => {
        assert.equal(r.isError, false, r.text);
        assert.equal(r.sc.exitCode, 0, r.sc.stderr);
        assert.equal(r.sc.stdout.trim(), `${i} 65534`);
        assert.ok(WORKERS.includes(r.sc.worker), `unexpected worker ${r.sc.worker}`);
    });
    assert.deepEqual([...new Set(results.map((r) => r.sc.worker))].sort(), WORKERS,
        `12 runs went to ${JSON.stringify(results.map((r) => r.sc.worker))}`);
});

test('runtime_info through the gateway lists both workers', async () => {
    const info = await tool(client, 'runtime_info', {});
    assert.equal(info.isError, false, info.text);
    const text = JSON.stringify(info.sc ?? info.text);
    for (const w of WORKERS) assert.ok(text.includes(w), `runtime_info does not mention ${w}: ${text.slice(0, 2000)}`);
});

test('a file uploaded to the gateway is read by runs on either worker, a run\'s file downloads from it', async () => {
    const ws = `cluster-${Date.now()}`;
    const body = `shared ${Math.random()}\n`;
    let r = await fetch(`${URL_BASE}/api/workspaces/${ws}/files/in/data.txt`, {
        method: 'POST', headers: { ...auth, 'Content-Type': 'application/octet-stream' }, body,
    });
    assert.equal(r.status, 201, await r.text());
    const seen = new Set();
    for (let round = 0; round < 8 && seen.size < WORKERS.length; round++) {
        const runs = await pool(2, 2, () => exec(client, {
            language: 'python', workspace: ws, code: 'print(open("in/data.txt").read(), end="")',
        }));
        for (const run of runs) {
            assert.equal(run.sc.exitCode, 0, run.sc.stderr);
            assert.equal(run.sc.stdout, body);
            seen.add(run.sc.worker);
        }
    }
    assert.deepEqual([...seen].sort(), WORKERS, 'both workers read the uploaded file');

    const w = await exec(client, {
        language: 'python', workspace: ws,
        code: 'import os\nos.makedirs("out", exist_ok=True)\nopen("out/result.txt", "w").write("written by a worker\\n")',
    });
    assert.equal(w.sc.exitCode, 0, w.sc.stderr);
    r = await fetch(`${URL_BASE}/api/workspaces/${ws}/files/out/result.txt`, { headers: auth });
    assert.equal(r.status, 200);
    assert.equal(await r.text(), 'written by a worker\n');
    assert.equal((await fetch(`${URL_BASE}/api/workspaces/${ws}`, { method: 'DELETE', headers: auth })).status, 204);
});

test('a session\'s calls stay on one worker and keep its state', async () => {
    const session = `cluster-s-${Date.now()}`;
    const first = await exec(client, { language: 'python', session, code: 'x = 41' });
    assert.equal(first.isError, false, first.text);
    assert.equal(first.sc.exitCode, 0, first.sc.stderr);
    assert.ok(WORKERS.includes(first.sc.worker), `unexpected worker ${first.sc.worker}`);
    for (let i = 1; i <= 3; i++) {
        const next = await exec(client, { language: 'python', session, code: `x += 1\nprint(x)` });
        assert.equal(next.sc.exitCode, 0, next.sc.stderr);
        assert.equal(next.sc.stdout.trim(), String(41 + i), 'the state of the earlier calls is there');
        assert.equal(next.sc.worker, first.sc.worker, 'the same worker as the first call');
    }
    const closed = await tool(client, 'session_close', { session });
    assert.equal(closed.isError, false, closed.text);
});

/** The gateway's /healthz entry for one worker (the list needs no key). */
async function workerHealth(name) {
    const h = await (await fetch(`${URL_BASE}/healthz`)).json();
    return { status: h.status, entry: (h.workers?.list || []).find((w) => w.name === name) };
}

test('a worker stopped with SIGTERM finishes its running call, the other takes new work, and it rejoins', async () => {
    const session = `cluster-drain-${Date.now()}`;
    const first = await exec(client, { language: 'python', session, code: 'import time' });
    assert.equal(first.sc.exitCode, 0, first.sc.stderr);
    const victim = first.sc.worker;
    const other = WORKERS.find((w) => w !== victim);
    // 6 s: running when SIGTERM arrives, and within the worker's SHUTDOWN_GRACE_SECONDS (10 s by default).
    const long = exec(client, { language: 'python', session, code: 'time.sleep(6)\nprint("finished")' });
    await sleep(1500);
    const { stdout: id } = await compose('ps', '-q', victim);
    const stopping = compose('stop', '-t', '30', victim); // SIGTERM through tini; returns once the container exited

    // The gateway sees the worker leave (draining, then gone): /healthz turns degraded, still 200.
    const end = Date.now() + 15_000;
    let seen;
    do {
        seen = await workerHealth(victim);
        if (seen.entry && (!seen.entry.healthy || seen.entry.draining)) break;
        await sleep(200);
    } while (Date.now() < end);
    assert.ok(seen.entry && (!seen.entry.healthy || seen.entry.draining), `${victim} still healthy: ${JSON.stringify(seen)}`);
    assert.equal(seen.status, 'degraded');

    const during = await pool(4, 2, () => exec(client, { language: 'python', code: 'print("elsewhere")' }));
    for (const r of during) {
        assert.equal(r.sc.exitCode, 0, r.sc.stderr);
        assert.equal(r.sc.worker, other, 'new work avoids the draining worker');
    }
    const finished = await long;
    assert.equal(finished.isError, false, finished.text);
    assert.equal(finished.sc.exitCode, 0, finished.sc.stderr);
    assert.equal(finished.sc.stdout.trim(), 'finished', 'the running call finished during the drain');
    assert.equal(finished.sc.worker, victim);
    await stopping;
    const { stdout: exitCode } = await execFileP('podman', ['inspect', '-f', '{{.State.ExitCode}}', id.trim()]);
    assert.equal(exitCode.trim(), '0', 'a worker that drained exits with 0');

    await compose('start', victim);
    const rejoin = Date.now() + 120_000;
    let landed = false;
    while (!landed && Date.now() < rejoin) {
        const r = await exec(client, { language: 'python', code: 'print("back")' });
        assert.equal(r.sc.exitCode, 0, r.sc.stderr);
        landed = r.sc.worker === victim;
        if (!landed) await sleep(500);
    }
    assert.ok(landed, `${victim} got no work within 120 s of its restart`);
});
