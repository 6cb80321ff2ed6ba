// More concurrent calls than MAX_CONCURRENT + QUEUE_SIZE: the extra calls get a clear "busy" tool error at once,
// the others run, and nothing hangs. A separate server with small limits keeps this quick.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, exec, looksLikeStackTrace } from '../lib/server.js';

const MAX_CONCURRENT = 2;
const QUEUE_SIZE = 2;
const CALLS = 8;

let server;
let client;

before(async () => {
    server = await startServer({ MAX_CONCURRENT: String(MAX_CONCURRENT), QUEUE_SIZE: String(QUEUE_SIZE), QUEUE_TIMEOUT_MS: '20000' });
    ({ client } = await server.connect());
});

after(async () => {
    await client?.close().catch(() => {});
    await server?.stop();
});

test(`${CALLS} concurrent calls with MAX_CONCURRENT=${MAX_CONCURRENT} QUEUE_SIZE=${QUEUE_SIZE}: some run, the rest are refused as busy, none hang`,
    { timeout: 60_000 }, async (t) => {
        const t0 = Date.now();
        const calls = Array.from({ length: CALLS }, (_, i) => exec(client, {
            language: 'shell', code: `sleep 2; echo done-${i}`, timeout_ms: 10_000,
        }).then((r) => ({ ...r, at: Date.now() - t0 })));
        const results = await Promise.all(calls);
        t.diagnostic(`answers (ms after start): ${results.map((r) => `${r.isError ? 'busy' : 'ran'}@${r.at}`).join(' ')}`);
        const ran = results.filter((r) => !r.isError);
        const busy = results.filter((r) => r.isError);
        assert.ok(ran.length >= MAX_CONCURRENT, `${ran.length} ran`);
        assert.ok(ran.length <= MAX_CONCURRENT + QUEUE_SIZE, `${ran.length} ran, at most slots + queue`);
        assert.ok(busy.length >= CALLS - MAX_CONCURRENT - QUEUE_SIZE, `${busy.length} refused`);
        for (const r of ran) {
            assert.equal(r.sc.outcome, 'exited');
            assert.match(r.sc.stdout, /^done-\d\n$/);
        }
        for (const r of busy) {
            assert.match(r.text, /busy|queue|capacity|too many/i, r.text);
            assert.ok(!looksLikeStackTrace(r.text), r.text);
            // A refused call is answered at once, not after waiting for a slot.
            assert.ok(r.at < 1900, `refusal took ${r.at} ms`);
        }
        const h = await server.healthz();
        t.diagnostic(`healthz after the burst (+${Date.now() - t0} ms): ${JSON.stringify(h.body)}`);
        assert.equal(h.body.status, 'ok');
        assert.equal(await server.waitIdle(5000), true);
    });

test('after the burst the server runs code normally', async () => {
    const r = await exec(client, { language: 'python', code: 'print("ok")' });
    assert.equal(r.sc.stdout, 'ok\n');
});
