// End to end over Streamable HTTP with the official TypeScript MCP SDK against the real jar.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, exec, hostProcessesWith, looksLikeStackTrace, randomSecret, sleep } from '../lib/server.js';
import { requires } from '../lib/requires.js';

let server;
let client;
let transport;

before(async () => {
    // Cold runs: the cancel tests find a run's processes on the host by an argument in their command line, and a
    // warm run's arguments travel over its control channel instead (warm.test.js and WarmPoolTest cover warm
    // runs, cancel included).
    server = await startServer({ WARM_POOL: 'off' });
    ({ client, transport } = await server.connect());
});

after(async () => {
    await client?.close().catch(() => {});
    await server?.stop();
});

const RESULT_FIELDS = ['language', 'exitCode', 'stdout', 'stderr', 'durationMs', 'timedOut', 'truncated', 'outcome', 'sandbox', 'network'];

test('initialize reports the server and its tool capability', () => {
    const info = client.getServerVersion();
    assert.ok(info?.name, 'serverInfo.name present');
    assert.ok(info?.version, 'serverInfo.version present');
    assert.ok(client.getServerCapabilities()?.tools, 'tools capability declared');
    assert.ok(transport.sessionId, 'initialize returned an Mcp-Session-Id');
});

test('tools/list declares execute_code and runtime_info with input and output schemas', async () => {
    const { tools } = await client.listTools();
    const byName = Object.fromEntries(tools.map((t) => [t.name, t]));
    const ec = byName.execute_code;
    assert.ok(ec, 'execute_code listed');
    assert.ok(byName.runtime_info, 'runtime_info listed');
    assert.equal(ec.inputSchema.type, 'object');
    for (const p of ['language', 'code', 'stdin', 'timeout_ms', 'args', 'env'])
        assert.ok(ec.inputSchema.properties?.[p], `input property ${p}`);
    assert.deepEqual([...ec.inputSchema.required].sort(), ['code', 'language']);
    assert.ok(ec.outputSchema?.properties, 'execute_code has an output schema');
    for (const f of RESULT_FIELDS) assert.ok(ec.outputSchema.properties[f], `output property ${f}`);
});

const HELLO = {
    python: 'print("hello from python")',
    nodejs: 'console.log("hello from " + "nodejs")',
    typescript: 'const who: string = "typescript";\nconsole.log(`hello from ${who}`);',
    go: 'package main\n\nimport "fmt"\n\nfunc main() { fmt.Println("hello from go") }\n',
    java: 'public class Main {\n  public static void main(String[] a) { System.out.println("hello from java"); }\n}\n',
    shell: 'x=shell; echo "hello from $x"',
    bash: 'parts=(hello from bash); echo "${parts[@]}"',
};

for (const [language, code] of Object.entries(HELLO)) {
    test(`hello world in ${language}`, { timeout: 90_000 }, async () => {
        const r = await exec(client, { language, code });
        assert.equal(r.isError, false, r.text);
        for (const f of RESULT_FIELDS) assert.ok(f in r.sc, `structuredContent.${f} present`);
        assert.equal(r.sc.outcome, 'exited', r.sc.stderr);
        assert.equal(r.sc.exitCode, 0, r.sc.stderr);
        assert.equal(r.sc.stdout.trim(), `hello from ${language}`);
        assert.equal(r.sc.timedOut, false);
        assert.equal(r.sc.truncated, false);
        assert.equal(r.sc.sandbox, 'bwrap');
        assert.match(r.text, new RegExp(`hello from ${language}`), 'content carries a readable summary');
    });
}

test('hello world in c, when the server offers c', { timeout: 60_000 }, async (t) => {
    const { tools } = await client.listTools();
    const languages = tools.find((x) => x.name === 'execute_code').inputSchema.properties.language.enum || [];
    if (!requires(t, languages.includes('c'), `c in the language enum (a C compiler; the enum has ${languages.join(', ')})`)) return;
    const r = await exec(client, { language: 'c', code: '#include <stdio.h>\nint main(void) { puts("hello from c"); return 0; }\n' });
    assert.equal(r.isError, false, r.text);
    assert.equal(r.sc.stdout, 'hello from c\n', r.sc.stderr);
});

test('stdin is fed to the program', async () => {
    const r = await exec(client, { language: 'python', code: 'import sys\nprint(sys.stdin.read().upper(), end="")', stdin: 'abc\ndef\n' });
    assert.equal(r.sc.stdout, 'ABC\nDEF\n');
});

test('args reach the program', async () => {
    const r = await exec(client, { language: 'python', code: 'import sys, json\nprint(json.dumps(sys.argv[1:]))', args: ['one', 'two words', '--x=3'] });
    assert.deepEqual(JSON.parse(r.sc.stdout), ['one', 'two words', '--x=3']);
});

test('env variables reach the program; a bad name is refused', async () => {
    const r = await exec(client, { language: 'shell', code: 'printf "%s" "$GREETING"', env: { GREETING: 'hi there' } });
    assert.equal(r.sc.stdout, 'hi there');
    const bad = await exec(client, { language: 'shell', code: 'true', env: { 'BAD=NAME': 'x' } });
    assert.equal(bad.isError, true, 'an env name with "=" is refused');
});

test('a non-zero exit is a normal result, not a tool error', async () => {
    const r = await exec(client, { language: 'python', code: 'import sys\nprint("out")\nprint("err", file=sys.stderr)\nsys.exit(3)' });
    assert.equal(r.isError, false);
    assert.equal(r.sc.exitCode, 3);
    assert.equal(r.sc.outcome, 'exited');
    assert.equal(r.sc.stdout, 'out\n');
    assert.match(r.sc.stderr, /^err\n/);
});

test('unknown language is a tool error with a clear message', async () => {
    const r = await exec(client, { language: 'cobol', code: 'DISPLAY "HI".' });
    assert.equal(r.isError, true);
    assert.match(r.text, /language/i);
    assert.match(r.text, /cobol/);
    assert.ok(!looksLikeStackTrace(r.text), r.text);
});

test('timeout_ms out of range is a tool error with a clear message', async () => {
    for (const timeout_ms of [999_999, 0, -5]) {
        const r = await exec(client, { language: 'python', code: 'print(1)', timeout_ms });
        assert.equal(r.isError, true, `timeout_ms=${timeout_ms} refused`);
        assert.match(r.text, /timeout/i);
        assert.ok(!looksLikeStackTrace(r.text), r.text);
    }
});

test('runtime_info lists languages, the sandbox and the limits', async () => {
    const raw = await client.callTool({ name: 'runtime_info', arguments: {} });
    assert.notEqual(raw.isError, true);
    const all = JSON.stringify(raw.structuredContent ?? {}) + (raw.content || []).map((c) => c.text || '').join('\n');
    for (const word of ['python', 'nodejs', 'typescript', 'go', 'java', 'bash', 'bwrap']) assert.ok(all.includes(word), `runtime_info mentions ${word}`);
});

test('progress notifications carry output before the result arrives', { timeout: 30_000 }, async () => {
    const progress = [];
    const code = 'import time\nprint("first", flush=True)\ntime.sleep(1.5)\nprint("second", flush=True)\n';
    const r = await exec(client, { language: 'python', code }, {
        onprogress: (p) => progress.push({ at: Date.now(), p }),
    });
    const resultAt = Date.now();
    assert.equal(r.sc.stdout, 'first\nsecond\n');
    assert.ok(progress.length >= 1, 'at least one progress notification');
    const firstAt = progress[0].at;
    assert.ok(firstAt < resultAt, 'first progress before the result');
    // The program sleeps 1.5 s between its two lines: output that streams shows up well before the end.
    assert.ok(resultAt - firstAt >= 700, `first progress ${resultAt - firstAt} ms before the result`);
    assert.ok(progress.some((x) => JSON.stringify(x.p).includes('first')), 'a progress message carries the printed text');
});

test('progress: one notification per line, in the order written across stdout and stderr, each with its stream and time (issue 22)', { timeout: 60_000 }, async () => {
    // print(1) is two writes ("1", then "\n"): one line, one notification. The pauses are far longer than the
    // server's readers take to wake, so the order written is the order read.
    const code = 'import sys, time\nprint(1)\ntime.sleep(0.2)\nprint("to stderr", file=sys.stderr)\ntime.sleep(0.2)\nprint("two")\n';
    for (const session of [undefined, 'stream-nb']) {
        const progress = [];
        const r = await exec(client, { language: 'python', code, ...(session ? { session } : {}) }, { onprogress: (p) => progress.push(p) });
        assert.equal(r.sc.stdout, '1\ntwo\n', r.sc.stderr);
        assert.deepEqual(progress.map((p) => p.message), ['1\n', '[stderr] to stderr\n', 'two\n'], session ?? 'a run');
        assert.deepEqual(progress.map((p) => p._meta?.['dev.codeexec/stream']), ['stdout', 'stderr', 'stdout']);
        const times = progress.map((p) => Date.parse(p._meta?.['dev.codeexec/at']));
        assert.ok(times.every((t, i) => Number.isFinite(t) && (i === 0 || t >= times[i - 1] + 150)), `read ~200 ms apart: ${times}`);
    }
    assert.notEqual((await client.callTool({ name: 'session_close', arguments: { session: 'stream-nb' } })).isError, true);
});

const TICKER = 'import sys, time\ni = 0\nwhile True:\n    print("tick", i, flush=True)\n    i += 1\n    time.sleep(0.1)\n';

test('cancelling through the SDK (notifications/cancelled) kills the run', { timeout: 30_000 }, async (t) => {
    const marker = randomSecret('cancel-marker-');
    const ac = new AbortController();
    t.after(() => ac.abort());
    let ticks = 0;
    // Settle into a value at once, so that a failed assertion below cannot leave an unhandled rejection.
    const call = exec(client, { language: 'python', code: TICKER, args: [marker], timeout_ms: 60_000 }, {
        signal: ac.signal,
        onprogress: () => { ticks++; },
    }).then((r) => ({ result: r }), (e) => ({ error: e }));
    const started = Date.now();
    while (ticks < 3 && Date.now() - started < 10_000) await sleep(50);
    assert.ok(ticks >= 3, 'the run streamed output before the abort');
    assert.ok(hostProcessesWith(marker).length >= 1, 'the run is visible on the host as a sandbox uid');
    // The server side too: a run is counted as running.
    assert.ok((await server.healthz()).body.running >= 1, '/healthz counts the run');
    ac.abort('test cancels');
    const settled = await call;
    assert.ok(settled.error, `the aborted call rejects on the client (got ${JSON.stringify(settled.result?.sc)})`);
    assert.equal(await server.waitIdle(5000), true, '/healthz running back to 0 after cancel');
    for (let i = 0; i < 30 && hostProcessesWith(marker).length; i++) await sleep(100);
    assert.deepEqual(hostProcessesWith(marker), [], 'no process of the cancelled run remains');
    const after = await exec(client, { language: 'python', code: 'print("still fine")' });
    assert.equal(after.sc.stdout, 'still fine\n');
});

test('a raw notifications/cancelled kills the run while its response stream stays open', { timeout: 30_000 }, async (t) => {
    // The SDK may also drop the HTTP stream on abort; here the stream stays open, so only the notification can
    // be what stops the run.
    const marker = randomSecret('raw-cancel-marker-');
    const headers = { ...MCP_HEADERS, Authorization: `Bearer ${server.apiKey}` };
    const init = await fetch(server.url, { method: 'POST', headers, body: JSON.stringify(INIT) });
    await init.text();
    headers['Mcp-Session-Id'] = init.headers.get('mcp-session-id');
    headers['Mcp-Protocol-Version'] = '2025-06-18';
    await (await fetch(server.url, { method: 'POST', headers, body: JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }) })).text();
    const reader = new AbortController();
    t.after(() => reader.abort());
    const call = fetch(server.url, {
        method: 'POST', headers, signal: reader.signal,
        body: JSON.stringify({ jsonrpc: '2.0', id: 5, method: 'tools/call', params: { name: 'execute_code',
            arguments: { language: 'python', code: TICKER, args: [marker], timeout_ms: 60_000 }, _meta: { progressToken: 'p5' } } }),
    }).then(async (r) => ({ status: r.status, body: await r.text() }), (e) => ({ error: e }));
    const started = Date.now();
    while (hostProcessesWith(marker).length === 0 && Date.now() - started < 10_000) await sleep(50);
    assert.ok(hostProcessesWith(marker).length >= 1, 'the run started');
    const cancel = await fetch(server.url, { method: 'POST', headers,
        body: JSON.stringify({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 5, reason: 'e2e' } }) });
    await cancel.text();
    assert.equal(cancel.status, 202, 'the notification is accepted');
    for (let i = 0; i < 50 && hostProcessesWith(marker).length; i++) await sleep(100);
    assert.deepEqual(hostProcessesWith(marker), [], 'the run was killed');
    assert.equal(await server.waitIdle(5000), true, '/healthz running back to 0');
    reader.abort();
    await call;
    await fetch(server.url, { method: 'DELETE', headers });
});

test('ending the session (DELETE) kills its runs', { timeout: 30_000 }, async () => {
    const marker = randomSecret('session-marker-');
    const s = await server.connect();
    const pending = exec(s.client, { language: 'python', code: TICKER, args: [marker], timeout_ms: 60_000 }).catch((e) => e);
    const started = Date.now();
    while (hostProcessesWith(marker).length === 0 && Date.now() - started < 10_000) await sleep(50);
    assert.ok(hostProcessesWith(marker).length >= 1, 'the run started');
    const del = await fetch(server.url, {
        method: 'DELETE',
        headers: { Authorization: `Bearer ${server.apiKey}`, 'Mcp-Session-Id': s.transport.sessionId },
    });
    assert.ok(del.status >= 200 && del.status < 300, `DELETE /mcp answered ${del.status}`);
    assert.equal(await server.waitIdle(5000), true, '/healthz running back to 0 after the session ended');
    for (let i = 0; i < 30 && hostProcessesWith(marker).length; i++) await sleep(100);
    assert.deepEqual(hostProcessesWith(marker), [], 'no process of the session run remains');
    await s.client.close().catch(() => {});
    await pending;
});

test('terminateSession() through the SDK transport kills its runs', { timeout: 30_000 }, async () => {
    const marker = randomSecret('terminate-marker-');
    const s = await server.connect();
    const pending = exec(s.client, { language: 'python', code: TICKER, args: [marker], timeout_ms: 60_000 }).catch((e) => e);
    const started = Date.now();
    while (hostProcessesWith(marker).length === 0 && Date.now() - started < 10_000) await sleep(50);
    assert.ok(hostProcessesWith(marker).length >= 1, 'the run started');
    await s.transport.terminateSession();
    assert.equal(s.transport.sessionId, undefined, 'the SDK saw the session end');
    assert.equal(await server.waitIdle(5000), true, '/healthz running back to 0');
    for (let i = 0; i < 30 && hostProcessesWith(marker).length; i++) await sleep(100);
    assert.deepEqual(hostProcessesWith(marker), []);
    await s.client.close().catch(() => {});
    await pending;
});

const INIT = {
    jsonrpc: '2.0', id: 1, method: 'initialize',
    params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
};
const MCP_HEADERS = { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream' };

test('a wrong or missing API key gets 401; /healthz needs none', async () => {
    for (const auth of ['Bearer wrong-key', undefined, `Basic ${server.apiKey}`]) {
        const headers = { ...MCP_HEADERS };
        if (auth) headers.Authorization = auth;
        const r = await fetch(server.url, { method: 'POST', headers, body: JSON.stringify(INIT) });
        const body = await r.text();
        assert.equal(r.status, 401, `auth ${auth ?? '(none)'}`);
        assert.ok(!looksLikeStackTrace(body), body);
    }
    const h = await fetch(`${server.base}/healthz`);
    assert.equal(h.status, 200);
    const hb = await h.json();
    assert.equal(hb.status, 'ok');
    for (const f of ['version', 'uptime', 'running']) assert.ok(f in hb, `/healthz has ${f}`);
});

test('an unknown session id gets 404 without a stack trace', async () => {
    const r = await fetch(server.url, {
        method: 'POST',
        headers: { ...MCP_HEADERS, Authorization: `Bearer ${server.apiKey}`, 'Mcp-Session-Id': 'no-such-session-0000', 'Mcp-Protocol-Version': '2025-06-18' },
        body: JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'tools/list', params: {} }),
    });
    const body = await r.text();
    assert.equal(r.status, 404);
    assert.ok(!looksLikeStackTrace(body), body);
});

test('malformed requests get a 4xx JSON-RPC error without a stack trace', async () => {
    const auth = { Authorization: `Bearer ${server.apiKey}` };
    const json = { ...MCP_HEADERS, ...auth };
    const cases = [
        ['POST', json, '{', 400],
        ['POST', { ...json, 'Content-Type': 'text/plain' }, '{}', 415],
        ['POST', { ...json, Accept: 'application/json' }, JSON.stringify(INIT), 400],
        ['GET', { ...auth, Accept: 'text/event-stream' }, undefined, 400],
        ['POST', json, JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }), 400],
        ['POST', json, JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: 'bad' }), 400],
        ['PUT', json, '{}', 405],
    ];
    for (const [method, headers, body, status] of cases) {
        const r = await fetch(server.url, { method, headers, body });
        const text = await r.text();
        assert.equal(r.status, status, `${method} ${body?.slice(0, 30)} -> ${r.status} ${text.slice(0, 200)}`);
        assert.ok(!looksLikeStackTrace(text), text);
        assert.equal(JSON.parse(text).jsonrpc, '2.0', 'a JSON-RPC error body');
    }
    const notFound = await fetch(`${server.base}/no-such-path`, { headers: auth });
    assert.equal(notFound.status, 404);
    assert.ok(!looksLikeStackTrace(await notFound.text()));
});
