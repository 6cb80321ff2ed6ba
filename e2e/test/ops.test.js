// Operations: JSON logs with an audit line per run, the CPU limit and signal outcomes, and graceful shutdown on
// SIGTERM (running executions may finish within the grace, the rest are killed, nothing is left behind).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, exec, hostProcessesWith, randomSecret, sleep, seedGoCache } from '../lib/server.js';

const GRACE_SECONDS = 3;
let server;
let client;

before(async () => {
    server = await startServer({ LOG_FORMAT: 'json', SHUTDOWN_GRACE_SECONDS: String(GRACE_SECONDS), CPU_LIMIT_SECONDS: '1' });
    ({ client } = await server.connect());
});

after(async () => {
    await client?.close().catch(() => {});
    await server?.stop();
});

test('LOG_FORMAT=json: every log line is a JSON object, and each run has an audit line', async () => {
    const marker = randomSecret('audit-');
    const r = await exec(client, { language: 'python', code: `print("${marker}")` });
    assert.equal(r.sc.stdout, `${marker}\n`);
    await sleep(300);
    const lines = server.log().split('\n').filter((l) => l.trim());
    assert.ok(lines.length > 0);
    for (const l of lines) assert.doesNotThrow(() => JSON.parse(l), `not JSON: ${l.slice(0, 200)}`);
    const audit = lines.filter((l) => l.includes(marker));
    assert.equal(audit.length, 1, 'one audit line names this run (its code starts with the marker)');
    assert.match(audit[0], /python/);
    assert.match(audit[0], /exited/);
});

test('CPU_LIMIT_SECONDS=1: a busy loop ends with outcome cpu_limit long before its wall timeout', async () => {
    const r = await exec(client, { language: 'python', code: 'while True:\n    pass\n', timeout_ms: 20_000 });
    assert.equal(r.isError, false);
    assert.equal(r.sc.outcome, 'cpu_limit');
    assert.match(r.sc.stderr, /\[terminated\] CPU time limit 1 s exceeded/);
    assert.ok(r.sc.durationMs < 15_000, `durationMs ${r.sc.durationMs}`);
});

test('a program killed by a signal it raised itself ends with outcome killed_by_signal and exit code 128+n', async () => {
    const r = await exec(client, { language: 'python', code: 'import os, signal\nprint("before", flush=True)\nos.kill(os.getpid(), signal.SIGSEGV)\n' });
    assert.equal(r.sc.outcome, 'killed_by_signal');
    assert.equal(r.sc.exitCode, 128 + 11);
    assert.equal(r.sc.stdout, 'before\n');
});

test('SIGTERM: a short run finishes within the grace, a long one is killed, the server exits clean', { timeout: 60_000 }, async (t) => {
    const shortMarker = randomSecret('short-');
    const longMarker = randomSecret('long-');
    const short = exec(client, { language: 'bash', code: 'bash -c \'exec -a "$0" sleep 1\' "$1"; echo done', args: [shortMarker] })
        .then((r) => ({ r }), (e) => ({ e }));
    const long = exec(client, { language: 'bash', code: 'exec -a "$1" sleep 300', args: [longMarker], timeout_ms: 120_000 })
        .then((r) => ({ r }), (e) => ({ e }));
    const t0 = Date.now();
    while ((hostProcessesWith(shortMarker).length === 0 || hostProcessesWith(longMarker).length === 0) && Date.now() - t0 < 10_000) await sleep(50);
    assert.ok(hostProcessesWith(longMarker).length >= 1, 'both runs are going');
    const stopping = server.stop(); // SIGTERM, then waits for the exit
    const s = await short;
    assert.ok(s.r, `the short run returns a result during the grace (${s.e})`);
    assert.equal(s.r.sc.outcome, 'exited');
    assert.equal(s.r.sc.stdout, 'done\n');
    const l = await long;
    t.diagnostic(`long run: ${l.r ? `result ${l.r.sc?.outcome} ${l.r.text.slice(0, 120)}` : `error ${l.e?.message}`}`);
    // The call may get a last answer (outcome cancelled) or lose its connection as the server goes.
    if (l.r) assert.equal(l.r.sc.outcome, 'cancelled', 'the long run was ended by the shutdown');
    await stopping;
    const took = Date.now() - t0;
    assert.ok(took < (GRACE_SECONDS + 12) * 1000, `server gone ${took} ms after SIGTERM`);
    assert.equal(server.alive(), false);
    assert.deepEqual(hostProcessesWith(longMarker), [], 'the long run was killed');
    assert.deepEqual(hostProcessesWith(shortMarker), []);
});

test('a POSIX locale (LANG=C) does not stop the server: /etc entries with non-ASCII names are copied into the sandbox', { timeout: 90_000 }, async () => {
    const { mkdtempSync, readdirSync } = await import('node:fs');
    const { tmpdir } = await import('node:os');
    const { join } = await import('node:path');
    // Debian's /etc/ssl/certs has names such as NetLock_..._Főtanúsítvány.pem; a fresh DATA_DIR makes the server copy them.
    const nonAscii = readdirSync('/etc/ssl/certs').filter((n) => /[^\x00-\x7f]/.test(n));
    // with the Go build cache of this run's other servers: a fresh one would be built first (minutes on a busy machine)
    const dataDir = mkdtempSync(join(tmpdir(), 'code-exec-posix-'));
    seedGoCache(process.env.E2E_DATA_DIR, dataDir);
    const posix = await startServer({ LANG: 'C', LC_ALL: 'C', WARM_POOL: 'off', DATA_DIR: dataDir });
    try {
        const { client: c } = await posix.connect();
        try {
            const r = await exec(c, { language: 'python', code: 'import os; print(sum(1 for n in os.listdir(b"/etc/ssl/certs") if any(ch > 127 for ch in n)))' });
            assert.equal(r.sc.outcome, 'exited', r.sc.stderr);
            assert.equal(r.sc.stdout.trim(), String(nonAscii.length));
        } finally {
            await c.close().catch(() => {});
        }
    } finally {
        await posix.stop();
    }
});
