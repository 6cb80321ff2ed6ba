// Port previews (docs/previews.md) end to end: the real jar, real sandboxes, the official TypeScript MCP SDK client,
// Node's fetch and raw sockets, and Debian's Chromium (playwright-core) for the page, its WebSocket and the origin
// checks. One server: tenants alice and bob (API_KEYS_FILE) and an admin key for the console, the preview listener
// on a free port (PREVIEW_PORT=0), PREVIEW_MAX_CONNECTIONS=4 so that the cap is reached with a few streams.
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { connect as tcpConnect } from 'node:net';
import { chromium } from 'playwright-core';
import { makeBase, keysAdd, keysAppend, startServer3, callTool as tool, sleep } from '../lib/server3.js';

const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';
const CHROMIUM_ARGS = ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync'];

let base; let srv; let alice; let bob; let aliceKey; let bobKey; let adminKey; let browser;

before(async () => {
    base = makeBase();
    const keys = `${base.dir}/keys`;
    adminKey = keysAdd(keys, 'ops', true);
    aliceKey = keysAppend(keys, 'alice');
    bobKey = keysAppend(keys, 'bob');
    srv = await startServer3(base, {
        API_KEYS_FILE: keys, WORKSPACE_ROOT: base.workspaceRoot('ws'), WARM_POOL: 'off',
        PREVIEW_PORT: '0', PREVIEW_MAX_CONNECTIONS: '4',
    });
    alice = await srv.connect(aliceKey);
    bob = await srv.connect(bobKey);
});

after(async () => {
    await browser?.close();
    await alice?.close().catch(() => {});
    await bob?.close().catch(() => {});
    await srv?.stop();
    base?.remove();
});

async function until(fn, timeoutMs, stepMs = 150) {
    const end = Date.now() + timeoutMs;
    for (;;) {
        const v = await fn().catch(() => null);
        if (v) return v;
        if (Date.now() > end) return v;
        await sleep(stepMs);
    }
}

/** GET through a preview: { status, body, headers }. */
async function get(url, headers = {}) {
    const r = await fetch(url, { headers, redirect: 'manual' });
    return { status: r.status, body: await r.text(), headers: r.headers };
}

/** GET on a connection of its own (Connection: close, no client pool): { status, body }. */
function rawGet(url) {
    const u = new URL(url);
    return new Promise((resolve, reject) => {
        let data = '';
        const s = tcpConnect(Number(u.port), u.hostname, () => {
            s.write(`GET ${u.pathname} HTTP/1.1\r\nHost: ${u.host}\r\nConnection: close\r\n\r\n`);
        });
        s.setEncoding('utf8');
        s.on('data', (d) => { data += d; });
        s.on('end', () => resolve({ status: Number(data.split(' ')[1]), body: data }));
        s.on('error', reject);
    });
}

/** A server that answers /, /sse (three events 400 ms apart) and a WebSocket at /ws that echoes text, on PORT. */
const NODE_APP = String.raw`
const http = require('http'), crypto = require('crypto');
const port = Number(process.argv[2]);
const page = '<!doctype html><title>app</title><p id="out">waiting</p><script>' +
  'const ws = new WebSocket(location.href.replace(/^http/, "ws") + "ws");' +
  'ws.onopen = () => ws.send("ping");' +
  'ws.onmessage = (e) => { document.getElementById("out").textContent = "echo:" + e.data; };' +
  '</script>';
const server = http.createServer((req, res) => {
  if (req.url.endsWith('/sse')) {
    res.writeHead(200, { 'Content-Type': 'text/event-stream', 'Cache-Control': 'no-store' });
    let n = 0;
    const t = setInterval(() => { res.write('data: ' + (++n) + ' ' + Date.now() + '\n\n'); if (n === 3) { clearInterval(t); res.end(); } }, 400);
    return;
  }
  res.writeHead(200, { 'Content-Type': 'text/html', 'X-Seen-Forwarded-Host': req.headers['x-forwarded-host'] || '',
    'X-Seen-Auth': req.headers['authorization'] ? 'yes' : 'no' });
  res.end(page);
});
server.on('upgrade', (req, socket) => {
  const accept = crypto.createHash('sha1').update(req.headers['sec-websocket-key'] + '258EAFA5-E914-47DA-95CA-C5AB0DC85B11').digest('base64');
  socket.write('HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ' + accept + '\r\n\r\n');
  socket.on('data', (buf) => {
    // one small masked text frame from the browser: unmask it and send it back unmasked
    const len = buf[1] & 0x7f, mask = buf.slice(2, 6), data = Buffer.alloc(len);
    for (let i = 0; i < len; i++) data[i] = buf[6 + i] ^ mask[i % 4];
    socket.write(Buffer.concat([Buffer.from([0x81, len]), data]));
  });
});
server.listen(port, '0.0.0.0');
`;

describe('port previews', () => {
    test('a bash session\'s python http.server: 502 until it listens, then its listing and a file; session_list shows the preview; it ends with the session', { timeout: 120_000 }, async () => {
        let r = await tool(alice, 'execute_code', { language: 'bash', session: 'web', workspace: 'site',
            code: 'echo "hello preview" > hello.txt; pwd' });
        assert.equal(r.isError, false, r.text);
        const exposed = await tool(alice, 'expose_port', { session: 'web', port: 8000 });
        assert.equal(exposed.isError, false, exposed.text);
        const url = exposed.sc.url;
        assert.match(url, /^http:\/\/127\.0\.0\.1:\d+\/p\/[0-9a-f]{48}\/$/);
        assert.ok(Date.parse(exposed.sc.expiresAt) > Date.now());
        assert.equal(new URL(url).port !== new URL(srv.url).port, true, 'an origin of its own');
        const before = await get(url);
        assert.equal(before.status, 502);
        assert.match(before.body, /port 8000/);

        r = await tool(alice, 'execute_code', { language: 'bash', session: 'web', workspace: 'site',
            code: 'nohup python3 -m http.server 8000 --bind 127.0.0.1 > /tmp/http.log 2>&1 &\necho started' });
        assert.equal(r.isError, false, r.text);
        const listing = await until(async () => { const x = await get(url); return x.status === 200 ? x : null; }, 30_000);
        assert.ok(listing, 'the server answers once it listens');
        assert.match(listing.body, /hello\.txt/);
        const file = await get(`${url}hello.txt`);
        assert.equal(file.status, 200);
        assert.equal(file.body, 'hello preview\n');

        const again = await tool(alice, 'expose_port', { session: 'web', port: 8000 });
        assert.equal(again.sc.url, url, 'exposing the same port again gives the same URL');
        const listed = await tool(alice, 'session_list');
        assert.deepEqual(listed.sc.sessions.find((s) => s.name === 'web').previews.map((p) => p.url), [url]);

        // a wrong token, bob's view of alice's session: nothing
        assert.equal((await get(url.replace(/\/p\/(.)/, (m, c) => `/p/${c === 'a' ? 'b' : 'a'}`))).status, 404);
        const bobs = await tool(bob, 'expose_port', { session: 'web', port: 8000 });
        assert.equal(bobs.isError, true, 'bob cannot expose alice\'s session');

        assert.equal((await tool(alice, 'session_close', { session: 'web' })).isError, false);
        const gone = await until(async () => { const x = await get(url); return x.status === 404 ? x : null; }, 10_000);
        assert.ok(gone, 'an ended session\'s preview answers 404');
        assert.doesNotMatch(gone.body, /8000|web|alice/);
    });

    test('a background Node job: its page opens a WebSocket back and sees the echo in Chromium; SSE arrives event by event; the page cannot read the API or the console', { timeout: 180_000 }, async () => {
        const job = await tool(alice, 'execute_code', { language: 'nodejs', background: true, timeout_ms: 600_000,
            code: NODE_APP, args: ['3000'] });
        assert.equal(job.isError, false, job.text);
        const exposed = await tool(alice, 'expose_port', { job: job.sc.job, port: 3000 });
        assert.equal(exposed.isError, false, exposed.text);
        const url = exposed.sc.url;
        const page0 = await until(async () => { const x = await get(url); return x.status === 200 ? x : null; }, 30_000);
        assert.ok(page0, 'the job\'s server answers');
        assert.equal(page0.headers.get('x-seen-forwarded-host'), new URL(url).host, 'X-Forwarded-Host reaches the app');
        const st = await tool(alice, 'job_status', { job: job.sc.job });
        assert.deepEqual(st.sc.previews.map((p) => p.url), [url], 'job_status lists the preview');

        // SSE: three events 400 ms apart, each read as it comes
        const sse = await fetch(`${url}sse`);
        const reader = sse.body.getReader();
        const arrivals = [];
        let text = '';
        for (;;) {
            const { value, done } = await reader.read();
            if (done) break;
            const chunk = Buffer.from(value).toString();
            text += chunk;
            for (const _ of chunk.matchAll(/data: /g)) arrivals.push(Date.now());
        }
        assert.equal(arrivals.length, 3, text);
        assert.ok(arrivals[2] - arrivals[0] >= 600, `events arrive as sent, not at the end: ${arrivals.map((t) => t - arrivals[0])}`);

        browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: CHROMIUM_ARGS });
        const context = await browser.newContext();
        // the console first, signed in: its key is in the console origin's storage
        const consolePage = await context.newPage();
        await consolePage.goto(`${srv.url}/admin/`);
        await consolePage.evaluate((k) => { sessionStorage.setItem('codeexec.key', k); localStorage.setItem('codeexec.key', k); }, adminKey);
        const page = await context.newPage();
        await page.goto(url);
        await page.waitForFunction(() => document.getElementById('out').textContent === 'echo:ping', null, { timeout: 20_000 });
        const probe = await page.evaluate(async (api) => {
            const out = { storage: localStorage.length + sessionStorage.length };
            for (const path of ['/api/workspaces', '/admin/api/stats', '/api/jobs']) {
                try {
                    const r = await fetch(api + path, { credentials: 'include' });
                    out[path] = `status ${r.status}: ${(await r.text()).slice(0, 80)}`;
                } catch (e) {
                    out[path] = 'blocked';
                }
            }
            return out;
        }, srv.url);
        assert.equal(probe.storage, 0, 'the preview origin holds none of the console\'s storage');
        for (const path of ['/api/workspaces', '/admin/api/stats', '/api/jobs'])
            assert.equal(probe[path], 'blocked', `a preview page gets no answer from ${path}: ${probe[path]}`);
        await context.close();

        assert.equal((await tool(alice, 'job_cancel', { job: job.sc.job })).isError, false);
        assert.ok(await until(async () => (await get(url)).status === 404, 10_000), 'an ended job\'s preview answers 404');
    });

    test('key previews: no key 401, another tenant\'s key 404, the tenant\'s key passes and never reaches the app; unexpose_port ends it', { timeout: 120_000 }, async () => {
        const job = await tool(alice, 'execute_code', { language: 'nodejs', background: true, timeout_ms: 600_000,
            code: NODE_APP, args: ['3001'] });
        const exposed = await tool(alice, 'expose_port', { job: job.sc.job, port: 3001, auth: 'key' });
        assert.equal(exposed.isError, false, exposed.text);
        const url = exposed.sc.url;
        assert.ok(await until(async () => (await get(url, { Authorization: `Bearer ${aliceKey}` })).status === 200, 30_000));
        assert.equal((await get(url)).status, 401);
        const other = await get(url, { Authorization: `Bearer ${bobKey}` });
        assert.equal(other.status, 404);
        assert.doesNotMatch(other.body, /3001|alice|job/);
        const own = await get(url, { 'X-API-Key': aliceKey });
        assert.equal(own.status, 200);
        assert.equal(own.headers.get('x-seen-auth'), 'no', 'the key is not passed on to the app');

        const un = await tool(alice, 'unexpose_port', { url });
        assert.equal(un.sc.ended, 1);
        assert.equal((await get(url, { Authorization: `Bearer ${aliceKey}` })).status, 404);
        await tool(alice, 'job_cancel', { job: job.sc.job });
    });

    test('bounds: connections over PREVIEW_MAX_CONNECTIONS get 503 while another preview still answers; bytes are counted', { timeout: 120_000 }, async () => {
        const job = await tool(alice, 'execute_code', { language: 'nodejs', background: true, timeout_ms: 600_000,
            code: NODE_APP.replace('n === 3', 'n === 1000'), args: ['3002'] });
        const a = (await tool(alice, 'expose_port', { job: job.sc.job, port: 3002 })).sc.url;
        const b = (await tool(alice, 'expose_port', { job: job.sc.job, port: 3002, auth: 'key' })).sc.url;
        // preview a is reached on connections of its own only: a client's pooled connection would hold a place
        assert.ok(await until(async () => (await rawGet(a)).status === 200, 30_000));
        // four streams held open on preview a; each holds its place from the moment its response head is on its way
        const held = [];
        const u = new URL(a);
        for (let i = 0; i < 4; i++) {
            held.push(await new Promise((resolve, reject) => {
                const s = tcpConnect(Number(u.port), u.hostname, () => {
                    s.write(`GET ${u.pathname}sse HTTP/1.1\r\nHost: ${u.host}\r\n\r\n`);
                    resolve(s);
                });
                s.seen = '';
                s.setEncoding('utf8');
                s.on('data', (d) => { s.seen += d; });
                s.on('error', reject);
            }));
        }
        // every held stream is answered (a stream that was not would not hold its place: say what it got instead)
        assert.ok(await until(async () => held.every((s) => /^HTTP\/1\.1 \S+/.test(s.seen)), 20_000),
            `the held streams are answered: ${JSON.stringify(held.map((s) => s.seen.slice(0, 60)))}`);
        assert.deepEqual(held.map((s) => s.seen.split(' ')[1]), ['200', '200', '200', '200'],
            `the held streams are served: ${JSON.stringify(held.map((s) => s.seen.slice(0, 200)))}`);
        let over = null;
        assert.ok(await until(async () => { over = await rawGet(a); return over.status === 503; }, 10_000),
            `a fifth connection is refused: ${over?.status} ${over?.body?.slice(0, 200)}; `
            + `held: ${JSON.stringify(held.map((s) => [s.destroyed, s.seen.length, s.seen.slice(-80)]))}`);
        const other = await get(b, { Authorization: `Bearer ${aliceKey}` });
        assert.equal(other.status, 200, 'another preview is not held up');
        for (const s of held) s.destroy();
        assert.ok(await until(async () => (await rawGet(a)).status === 200, 10_000), 'served again once the streams close');
        const metrics = await (await fetch(`${srv.url}/metrics`, { headers: { Authorization: `Bearer ${adminKey}` } })).text();
        assert.match(metrics, /codeexec_preview_requests_total\{[^}]*\} [1-9]/);
        assert.match(metrics, /codeexec_preview_bytes_total\{[^}]*direction="out"[^}]*\} [1-9]/);
        await tool(alice, 'job_cancel', { job: job.sc.job });
    });
});
