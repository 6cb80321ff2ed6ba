// Background jobs (docs/jobs.md) end to end: the real jar, real HTTP, the official TypeScript MCP SDK client. Three
// server starts, one after the other:
//  1. tenants alice and bob (API_KEYS_FILE), MAX_TIMEOUT_MS=2000 (and DEFAULT_TIMEOUT_MS, which may not exceed it:
//     a job outlives a foreground run's limit),
//     JOB_LOG_MB=1 (head and tail of a big log), a WORKSPACE_ROOT: a job outlives the MCP session that started it
//     and a second session waits for it with progress; `since` reads each byte once; the log past its cap; cancel
//     leaves no process; another tenant gets not_found everywhere; REST start, list and events;
//  2. on a DATA_DIR of this file's own, MAX_JOBS=1, MAX_JOBS_PER_TENANT=1, JOB_QUEUE_SIZE=1: the queue and its
//     refusal; then a running job and the server killed with SIGKILL;
//  3. the same DATA_DIR again: the job is `lost`, its output still readable.
// The warm pool is off: a job never uses one, and its idle sandboxes would only compete for the cores.
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { startServer, randomSecret, seedGoCache, sleep, withLog } from '../lib/server.js';
import { makeBase, keysAppend } from '../lib/server3.js';

let base;
before(() => { base = makeBase(); });
after(() => base.remove());

/** A tool call with a long client timeout: { isError, sc, text, raw }. */
async function tool(client, name, args = {}, options = {}) {
    const raw = await client.callTool({ name, arguments: args }, undefined, { timeout: 150_000, ...options });
    const text = (raw.content || []).filter((c) => c.type === 'text').map((c) => c.text).join('\n');
    return { isError: raw.isError === true, sc: raw.structuredContent, text, raw };
}

/** execute_code with `background: true`; asserts the job was accepted and answers its status. */
async function startJob(client, args) {
    const r = await tool(client, 'execute_code', { language: 'python', background: true, ...args });
    assert.equal(r.isError, false, `the job was refused: ${r.text}`);
    assert.match(r.sc.job, /^job-[0-9a-f]{32}$/);
    return r.sc;
}

/** The host processes whose command line holds `marker` (pgrep -f; none: []). */
function pgrep(marker) {
    try {
        return execFileSync('pgrep', ['-af', marker], { encoding: 'utf8' }).split('\n').filter((l) => l.trim());
    } catch (e) {
        return []; // pgrep exits 1 when nothing matches
    }
}

async function until(fn, timeoutMs, stepMs = 100) {
    const end = Date.now() + timeoutMs;
    for (;;) {
        const v = await fn();
        if (v) return v;
        if (Date.now() > end) return v;
        await sleep(stepMs);
    }
}

/** Reads a job's whole stdout through job_status with `since`, piece by piece, from offset 0: the pieces in order. */
async function readAll(client, job) {
    const pieces = [];
    let offsets = { stdout: 0, stderr: 0 };
    for (let i = 0; i < 1000; i++) {
        const r = await tool(client, 'job_status', { job, since: offsets });
        assert.equal(r.isError, false, r.text);
        pieces.push(r.sc);
        offsets = r.sc.offsets;
        if (!r.sc.more) return pieces;
    }
    throw new Error('job_status never said there was no more');
}

const expectedLines = (n, f) => Array.from({ length: n }, (_, i) => f(i)).join('');

describe('tenants alice and bob, MAX_TIMEOUT_MS=2000, JOB_LOG_MB=1, MEMORY_LIMIT_MB=256, MAX_OUTPUT_DRAIN_MB=16', () => {
    let server; let alice; let aliceKey; let bob; let bobKey;
    const rest = (key) => (method, path, init = {}) => fetch(`${server.base}${path}`, {
        method, ...init, headers: { Authorization: `Bearer ${key}`, ...(init.headers || {}) },
    });
    before(async () => {
        const keys = join(base.dir, 'keys');
        aliceKey = keysAppend(keys, 'alice');
        bobKey = keysAppend(keys, 'bob');
        server = await startServer({ API_KEY: '', API_KEYS_FILE: keys, WARM_POOL: 'off', DATA_DIR: base.dataDir,
            MAX_TIMEOUT_MS: '2000', DEFAULT_TIMEOUT_MS: '2000', JOB_LOG_MB: '1', WORKSPACE_ROOT: base.workspaceRoot('ws-jobs'),
            MEMORY_LIMIT_MB: '256', MAX_OUTPUT_DRAIN_MB: '16' });
        alice = (await server.connect({ apiKey: aliceKey })).client;
        bob = (await server.connect({ apiKey: bobKey })).client;
    });
    after(async () => {
        await alice?.close().catch(() => {});
        await bob?.close().catch(() => {});
        await server?.stop();
    });

    test('a job answers at once, outlives its MCP session and MAX_TIMEOUT_MS, and a second session waits for it with progress',
        { timeout: 60_000 }, withLog(() => server, async () => {
            const first = await server.connect({ apiKey: aliceKey });
            const code = 'import time\nfor i in range(5):\n    print("tick", i, flush=True)\n    time.sleep(1)\n'
                + 'open("made-by-job.txt", "w").write("done\\n")\n'
                // a 1x1 PNG: the ended job's answer shows it inline, as a foreground run's does
                + 'import base64\nopen("dot.png", "wb").write(base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="))\n'
                + 'print("end", flush=True)\n';
            const t0 = Date.now();
            const started = await startJob(first.client, { code, workspace: 'jobws', timeout_ms: 20_000 });
            const answeredMs = Date.now() - t0;
            assert.ok(answeredMs < 1500, `execute_code with background answered in ${answeredMs} ms`);
            assert.ok(['running', 'queued'].includes(started.status), started.status);
            assert.equal(started.timeoutMs, 20_000);
            assert.equal(started.workspace, 'jobws');

            await first.transport.terminateSession();
            assert.equal(first.transport.sessionId, undefined, 'the SDK saw the session end');
            await first.client.close().catch(() => {});

            const second = await server.connect({ apiKey: aliceKey });
            try {
                const progress = [];
                const w0 = Date.now();
                const r = await tool(second.client, 'job_wait', { job: started.job, timeout_ms: 30_000 },
                    { onprogress: (p) => progress.push(p) });
                const waitedMs = Date.now() - w0;
                assert.equal(r.isError, false, r.text);
                assert.equal(r.sc.status, 'exited', `the job ran past MAX_TIMEOUT_MS=2000 and past its session: ${r.text}`);
                assert.equal(r.sc.exitCode, 0);
                assert.ok(r.sc.durationMs >= 4500, `it ran its ~5 s (${r.sc.durationMs} ms)`);
                assert.ok(waitedMs < 25_000, `job_wait answered at the job's end (${waitedMs} ms), not at its own timeout`);
                assert.equal(r.sc.stdout, expectedLines(5, (i) => `tick ${i}\n`) + 'end\n');
                assert.deepEqual(r.sc.result.files.map((f) => f.path).sort(), ['dot.png', 'made-by-job.txt']);
                const images = (r.raw.content || []).filter((c) => c.type === 'image');
                assert.equal(images.length, 1, `the job's image comes back as image content: ${JSON.stringify(r.raw.content.map((c) => c.type))}`);
                assert.equal(images[0].mimeType, 'image/png');
                const streamed = progress.map((p) => p.message ?? '').join('');
                assert.match(streamed, /tick 4\n/, `the waiting session got the job's output as progress: ${JSON.stringify(progress)}`);
                assert.match(streamed, /end\n/);
            } finally {
                await second.client.close().catch(() => {});
            }
        }));

    test('job_status with `since` returns each byte once: the pieces read while the job runs make up its whole output',
        { timeout: 60_000 }, withLog(() => server, async () => {
            const code = 'import sys, time\nfor i in range(30):\n    print(f"{i:04d} ünïcødé € 🙂", flush=True)\n'
                + '    print(f"e{i}", file=sys.stderr, flush=True)\n    time.sleep(0.1)\n';
            const { job } = await startJob(alice, { code, timeout_ms: 20_000 });
            let offsets = { stdout: 0, stderr: 0 };
            let out = ''; let err = '';
            let piecesWhileRunning = 0;
            for (let i = 0; i < 600; i++) {
                const r = await tool(alice, 'job_status', { job, since: offsets });
                assert.equal(r.isError, false, r.text);
                assert.ok(r.sc.offsets.stdout >= offsets.stdout && r.sc.offsets.stderr >= offsets.stderr, 'offsets never go back');
                if (r.sc.status === 'running' && r.sc.stdout) piecesWhileRunning++;
                out += r.sc.stdout;
                err += r.sc.stderr;
                offsets = r.sc.offsets;
                if (!['queued', 'running'].includes(r.sc.status) && !r.sc.more) {
                    assert.equal(r.sc.status, 'exited');
                    break;
                }
                await sleep(150);
            }
            assert.ok(piecesWhileRunning >= 2, `read in several pieces while it ran (${piecesWhileRunning})`);
            assert.equal(out, expectedLines(30, (i) => `${String(i).padStart(4, '0')} ünïcødé € 🙂\n`));
            assert.equal(err, expectedLines(30, (i) => `e${i}\n`));
            assert.equal(offsets.stdout, Buffer.byteLength(out), 'offsets count bytes');
            assert.equal(offsets.stderr, Buffer.byteLength(err));
        }));

    test('a log past JOB_LOG_MB keeps its head and its tail, and says how much it left out (MCP and Range)',
        { timeout: 60_000 }, withLog(() => server, async () => {
            const N = 75_000;
            const line = (i) => `line ${String(i).padStart(7, '0')} ${'x'.repeat(56)}\n`; // 70 bytes
            const code = `import sys\nw = sys.stdout.write\nfor i in range(${N}):\n    w(f"line {i:07d} {'x' * 56}\\n")\n`;
            const { job } = await startJob(alice, { code, timeout_ms: 30_000 });
            const done = await tool(alice, 'job_wait', { job, timeout_ms: 30_000 });
            assert.equal(done.sc.status, 'exited', done.text);
            const total = N * 70;
            assert.equal(done.sc.sizes.stdout, total, 'sizes count every byte written');

            const pieces = await readAll(alice, job);
            const text = pieces.map((p) => p.stdout).join('');
            assert.ok(text.startsWith(line(0) + line(1)), `the head: ${text.slice(0, 100)}`);
            assert.ok(text.endsWith(line(N - 2) + line(N - 1)), `the tail: ${text.slice(-100)}`);
            const skipped = pieces.reduce((s, p) => s + (p.skipped?.stdout ?? 0), 0);
            assert.ok(skipped > 0, 'a reader from 0 is told it skipped bytes');
            assert.match(text, new RegExp(`\\[\\.\\.\\. ${skipped} bytes left out \\(JOB_LOG_MB\\) \\.\\.\\.\\]\\n`));
            const kept = Buffer.byteLength(text.replace(/\[\.\.\. \d+ bytes left out \(JOB_LOG_MB\) \.\.\.\]\n/, ''));
            assert.equal(kept + skipped, total, 'kept and skipped bytes add up to all written');
            assert.ok(kept <= 1 << 20, `at most JOB_LOG_MB kept (${kept})`);

            const api = rest(aliceKey);
            let res = await api('GET', `/api/jobs/${job}/stdout`, { headers: { Range: 'bytes=0-' } });
            assert.equal(res.status, 206);
            const m = /^bytes 0-(\d+)\/(\d+)$/.exec(res.headers.get('content-range') ?? '');
            assert.ok(m, `Content-Range: ${res.headers.get('content-range')}`);
            assert.equal(Number(m[2]), total);
            const body = await res.text();
            assert.equal(Buffer.byteLength(body), Number(m[1]) + 1, 'the body is the range it names');
            assert.ok(body.startsWith(line(0)));
            res = await api('GET', `/api/jobs/${job}/stdout`, { headers: { Range: `bytes=${total / 2}-` } });
            assert.equal(res.status, 206);
            const skippedHere = Number(res.headers.get('x-codeexec-skipped'));
            assert.ok(skippedHere > 0, 'a start in the dropped part is said to skip');
            // tailing: each piece from the end of the last, until 416 says there is nothing more yet
            let tail = '';
            let at = total / 2;
            for (let i = 0; i < 20; i++) {
                const r = /^bytes (\d+)-(\d+)\/(\d+)$/.exec(res.headers.get('content-range') ?? '');
                assert.ok(r, `Content-Range: ${res.headers.get('content-range')}`);
                assert.equal(Number(r[1]), at + (i === 0 ? skippedHere : 0), 'each piece starts where it was asked (past the gap)');
                tail += await res.text();
                at = Number(r[2]) + 1;
                res = await api('GET', `/api/jobs/${job}/stdout`, { headers: { Range: `bytes=${at}-` } });
                if (res.status !== 206) break;
            }
            assert.equal(res.status, 416, 'nothing past the end');
            assert.equal(res.headers.get('content-range'), `bytes */${total}`);
            await res.text();
            assert.equal(at, total);
            assert.ok(tail.endsWith(line(N - 2) + line(N - 1)), 'the tail read by ranges ends with the last line');
            assert.equal(Buffer.byteLength(tail) + skippedHere, total / 2, 'from the middle: skipped plus read is the rest');
        }));

    test('job_cancel ends a running job `cancelled` and leaves none of its processes',
        { timeout: 60_000 }, withLog(() => server, async () => {
            const marker = randomSecret('jobcancel');
            const code = 'import subprocess, sys\nprint("started", flush=True)\n'
                + 'subprocess.run(["bash", "-c", "exec -a sleep-" + sys.argv[1] + " sleep 300"])\n';
            const { job } = await startJob(alice, { code, args: [marker], timeout_ms: 600_000 });
            const seen = await until(() => pgrep(`sleep-${marker}`).length > 0 && pgrep(marker).length >= 2, 15_000);
            assert.ok(seen, `the job's python and its sleep run on the host: ${pgrep(marker)}`);
            const r = await tool(alice, 'job_cancel', { job });
            assert.equal(r.isError, false, r.text);
            assert.equal(r.sc.status, 'cancelled', r.text);
            const gone = await until(() => pgrep(marker).length === 0, 5000);
            assert.ok(gone, `no process of the cancelled job remains: ${pgrep(marker)}`);
            const s = await tool(alice, 'job_status', { job });
            assert.equal(s.sc.status, 'cancelled');
            assert.equal(s.sc.stdout, 'started\n', 'its output stays');
        }));

    test('another tenant gets not_found from every tool, resource and route, and does not see the job listed',
        { timeout: 60_000 }, withLog(() => server, async () => {
            const { job } = await startJob(alice, { code: 'import time\nprint("alice", flush=True)\ntime.sleep(60)\n', timeout_ms: 120_000 });
            try {
                for (const [name, args] of [['job_status', { job }], ['job_wait', { job, timeout_ms: 100 }], ['job_cancel', { job }]]) {
                    const r = await tool(bob, name, args);
                    assert.equal(r.isError, true, `${name}: ${r.text}`);
                    assert.match(r.text, /^Error \[not_found\]/, name);
                    assert.doesNotMatch(r.text, /alice/);
                }
                await assert.rejects(bob.readResource({ uri: `job://${job}` }));
                await assert.rejects(bob.readResource({ uri: `job://${job}/stdout` }));
                const list = await tool(bob, 'job_list');
                assert.equal(list.isError, false, list.text);
                assert.ok(!list.sc.jobs.some((j) => j.job === job), 'not in bob\'s job_list');
                const B = rest(bobKey);
                for (const method of ['GET', 'DELETE']) {
                    const res = await B(method, `/api/jobs/${job}`);
                    assert.equal(res.status, 404, `${method} /api/jobs/{job}`);
                    assert.doesNotMatch(await res.text(), /alice/);
                }
                for (const part of ['stdout', 'events']) {
                    const res = await B('GET', `/api/jobs/${job}/${part}`);
                    assert.equal(res.status, 404, part);
                    await res.text();
                }
                const listed = await (await B('GET', '/api/jobs')).json();
                assert.ok(!listed.jobs.some((j) => j.job === job), 'not in bob\'s GET /api/jobs');

                // the control: alice finds it by each of those, and bob's cancels did nothing
                const mine = await tool(alice, 'job_status', { job });
                assert.equal(mine.sc.status, 'running', 'bob\'s job_cancel and DELETE left it running');
                assert.equal(JSON.parse((await alice.readResource({ uri: `job://${job}` })).contents[0].text).job, job);
                assert.ok((await tool(alice, 'job_list')).sc.jobs.some((j) => j.job === job));
                const res = await rest(aliceKey)('GET', `/api/jobs/${job}`);
                assert.equal(res.status, 200);
                assert.equal((await res.json()).tenant, 'alice');
            } finally {
                await tool(alice, 'job_cancel', { job });
            }
        }));

    test('its timeout, the memory limit and an output flood end a job as they end a run, each with its outcome',
        { timeout: 120_000 }, withLog(() => server, async () => {
            const timeout = await startJob(alice, { code: 'import time\nprint("waiting", flush=True)\ntime.sleep(60)\n', timeout_ms: 3000 });
            const memory = await startJob(alice, { code: 'b = []\nwhile True:\n    b.append(bytearray(16 << 20))\n', timeout_ms: 60_000 });
            // a job's flood is counted per MAX_TIMEOUT_MS of its timeout: 2 periods of 2 s here, 2 x 16 MB
            const flood = await startJob(alice, { code: 'import sys\nline = "x" * 1023 + "\\n"\nwhile True:\n    sys.stdout.write(line)\n', timeout_ms: 4000 });
            const end = async (job) => {
                const r = await tool(alice, 'job_wait', { job, timeout_ms: 55_000 });
                assert.equal(r.isError, false, r.text);
                return r.sc;
            };
            const t = await end(timeout.job);
            assert.equal(t.status, 'timeout', JSON.stringify(t));
            assert.ok(t.durationMs >= 2900 && t.durationMs < 15_000, `ended at its own 3 s timeout (${t.durationMs} ms)`);
            assert.equal(t.stdout, 'waiting\n');
            const m = await end(memory.job);
            assert.equal(m.status, 'memory_limit', JSON.stringify(m));
            const f = await end(flood.job);
            assert.equal(f.status, 'output_limit', JSON.stringify(f));
            assert.ok(f.sizes.stdout >= 32 << 20, `the flood wrote past 2 x MAX_OUTPUT_DRAIN_MB before it was stopped (${f.sizes.stdout})`);
        }));

    test('REST: POST /api/jobs answers 202 with Location, GET /api/jobs lists it, /events streams its output then its end',
        { timeout: 60_000 }, withLog(() => server, async () => {
            const api = rest(aliceKey);
            const code = 'import time\nfor i in range(4):\n    print("ev", i, flush=True)\n    time.sleep(0.4)\n';
            const res = await api('POST', '/api/jobs', { headers: { 'Content-Type': 'application/json' },
                body: JSON.stringify({ language: 'python', code, timeout_ms: 20_000 }) });
            assert.equal(res.status, 202);
            const started = await res.json();
            assert.match(started.job, /^job-[0-9a-f]{32}$/);
            assert.equal(res.headers.get('location'), `/api/jobs/${started.job}`);
            const listed = await (await api('GET', '/api/jobs')).json();
            assert.equal(listed.jobs[0].job, started.job, 'newest first');

            const ev = await api('GET', `/api/jobs/${started.job}/events`);
            assert.equal(ev.status, 200);
            assert.match(ev.headers.get('content-type'), /^text\/event-stream/);
            const events = [];
            let buf = '';
            const decoder = new TextDecoder();
            for await (const chunk of ev.body) {
                buf += decoder.decode(chunk, { stream: true });
                let i;
                while ((i = buf.indexOf('\n\n')) >= 0) {
                    const block = buf.slice(0, i);
                    buf = buf.slice(i + 2);
                    const event = /^event: (.*)$/m.exec(block)?.[1];
                    const data = /^data: (.*)$/m.exec(block)?.[1];
                    events.push({ event, data: JSON.parse(data), at: Date.now() });
                }
            }
            const outputs = events.filter((e) => e.event === 'output');
            assert.ok(outputs.length >= 2, `output came in pieces as it was written: ${JSON.stringify(events)}`);
            assert.equal(outputs.filter((e) => e.data.stream === 'stdout').map((e) => e.data.text).join(''),
                expectedLines(4, (i) => `ev ${i}\n`));
            const last = events.at(-1);
            assert.equal(last.event, 'status', 'the stream ends with the status');
            assert.equal(last.data.status, 'exited');
            assert.equal(last.data.exitCode, 0);
        }));
});

describe('MAX_JOBS=1, MAX_JOBS_PER_TENANT=1, JOB_QUEUE_SIZE=1 on a DATA_DIR of its own, then a restart after SIGKILL', () => {
    let dataDir; let key; let server; let client;
    before(async () => {
        dataDir = join(base.dir, 'data-jobs');
        mkdirSync(dataDir, { mode: 0o711 });
        seedGoCache(base.dataDir, dataDir);
        key = randomSecret('key-');
        server = await startServer({ API_KEY: key, WARM_POOL: 'off', DATA_DIR: dataDir,
            MAX_JOBS: '1', MAX_JOBS_PER_TENANT: '1', JOB_QUEUE_SIZE: '1' });
        client = (await server.connect()).client;
    });
    after(async () => {
        await client?.close().catch(() => {});
        await server?.stop();
    });

    test('a second job waits in the queue at place 1, a third is refused busy, and the queued one runs after the first',
        { timeout: 60_000 }, withLog(() => server, async () => {
            const first = await startJob(client, { code: 'import time\ntime.sleep(3)\nprint("first")\n', timeout_ms: 20_000 });
            const second = await startJob(client, { code: 'print("second")\n', timeout_ms: 20_000 });
            assert.equal(second.status, 'queued');
            assert.equal(second.position, 1);
            const third = await tool(client, 'execute_code', { language: 'python', code: 'print(3)', background: true });
            assert.equal(third.isError, true);
            assert.match(third.text, /^Error \[busy\]/, third.text);
            const a = await tool(client, 'job_wait', { job: first.job, timeout_ms: 30_000 });
            assert.equal(a.sc.status, 'exited', a.text);
            const b = await tool(client, 'job_wait', { job: second.job, timeout_ms: 30_000 });
            assert.equal(b.sc.status, 'exited', b.text);
            assert.equal(b.sc.stdout, 'second\n');
            assert.ok(Date.parse(b.sc.startedAt) >= Date.parse(a.sc.endedAt), `the queued job started (${b.sc.startedAt}) `
                + `after the first ended (${a.sc.endedAt})`);
        }));

    test('a server killed with SIGKILL leaves its running job `lost` at the next start, with the output it wrote',
        { timeout: 120_000 }, withLog(() => server, async () => {
            const marker = randomSecret('joblost');
            const code = 'import sys, time\nfor i in range(600):\n    print("before-kill", i, flush=True)\n    time.sleep(0.2)\n';
            const { job } = await startJob(client, { code, args: [marker], timeout_ms: 600_000 });
            const seen = await until(async () => /before-kill 3\n/.test((await tool(client, 'job_status', { job })).sc.stdout), 15_000);
            assert.ok(seen, 'the job wrote output');
            await client.close().catch(() => {});
            client = null;
            process.kill(server.pid, 'SIGKILL');
            assert.ok(await until(() => !server.alive(), 10_000), 'the server died');
            assert.ok(await until(() => pgrep(marker).length === 0, 10_000),
                `no process of the job outlives its server: ${pgrep(marker)}`);
            await server.stop();

            server = await startServer({ API_KEY: key, WARM_POOL: 'off', DATA_DIR: dataDir });
            client = (await server.connect()).client;
            const r = await tool(client, 'job_status', { job });
            assert.equal(r.isError, false, r.text);
            assert.equal(r.sc.status, 'lost', r.text);
            assert.match(r.sc.message, /server stopped/);
            assert.match(r.sc.stdout, /^before-kill 0\nbefore-kill 1\nbefore-kill 2\nbefore-kill 3\n/);
            const res = await fetch(`${server.base}/api/jobs/${job}/stdout`, { headers: { Authorization: `Bearer ${key}` } });
            assert.equal(res.status, 200);
            assert.equal(await res.text(), r.sc.stdout, 'REST reads the same kept output');
            assert.ok((await tool(client, 'job_list')).sc.jobs.some((j) => j.job === job && j.status === 'lost'));
        }));
});
