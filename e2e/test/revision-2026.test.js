// MCP revision 2026-07-28 end to end (issue 41): the real jar, real sandboxes, raw HTTP as a client of that revision
// speaks it (no initialize, no Mcp-Session-Id; each request carries MCP-Protocol-Version, Mcp-Method, Mcp-Name and its
// revision, client info and capabilities in _meta), on the same /mcp where the official TypeScript SDK client speaks
// 2025-11-25 at the same time. Tenants alice and bob (API_KEYS_FILE), a WORKSPACE_ROOT.
// Covered: server/discover; execute_code with its output streamed as progress on the request's own stream, and
// cancelled by notifications/cancelled (the run's process tree gone); a workspace file written by a run read as a
// resource, and refused to the other tenant; a python session across calls; an image as content; a task (the tasks
// extension) created, polled while it runs, cancelled, and one polled to completion with its result inline.
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { startServer, sleep, withLog, hostProcessesWith } from '../lib/server.js';
import { makeBase, keysAppend } from '../lib/server3.js';

const REVISION = '2026-07-28';
const TASKS = 'io.modelcontextprotocol/tasks';

let base;
before(() => { base = makeBase(); });
after(() => base.remove());

describe('MCP 2026-07-28 beside 2025-11-25 on one /mcp', () => {
    let server; let aliceKey; let bobKey; let nextId = 1;
    before(async () => {
        const keys = join(base.dir, 'keys');
        aliceKey = keysAppend(keys, 'alice');
        bobKey = keysAppend(keys, 'bob');
        server = await startServer({ API_KEY: '', API_KEYS_FILE: keys, WARM_POOL: 'off', DATA_DIR: base.dataDir,
            WORKSPACE_ROOT: base.workspaceRoot('ws-2026') });
    });
    after(async () => { await server?.stop(); });

    /** One request of the revision; answers { status, messages } (the JSON body, or each SSE event's data). */
    async function post(key, method, params = {}, { name, capabilities = {}, id = nextId++, signal } = {}) {
        const meta = { ...(params._meta || {}), 'io.modelcontextprotocol/protocolVersion': REVISION,
            'io.modelcontextprotocol/clientInfo': { name: 'e2e-2026', version: '1' },
            'io.modelcontextprotocol/clientCapabilities': capabilities };
        const headers = { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream',
            'MCP-Protocol-Version': REVISION, 'Mcp-Method': method, Authorization: `Bearer ${key}` };
        if (name) headers['Mcp-Name'] = name;
        const body = id === null ? { jsonrpc: '2.0', method, params: { ...params, _meta: meta } }
            : { jsonrpc: '2.0', id, method, params: { ...params, _meta: meta } };
        const r = await fetch(server.url, { method: 'POST', headers, body: JSON.stringify(body), signal });
        const text = await r.text();
        assert.equal(r.headers.get('mcp-session-id'), null, 'no session in 2026-07-28');
        const messages = (r.headers.get('content-type') || '').startsWith('text/event-stream')
            ? text.split('\n').filter((l) => l.startsWith('data:')).map((l) => JSON.parse(l.slice(5)))
            : text ? [JSON.parse(text)] : [];
        return { status: r.status, messages, id };
    }

    async function result(key, method, params, options) {
        const r = await post(key, method, params, options);
        const last = r.messages.at(-1);
        assert.ok(last && last.result, `${method}: a result, got ${JSON.stringify(r.messages)}`);
        return last.result;
    }

    const call = (key, tool, args, options = {}) => result(key, 'tools/call', { name: tool, arguments: args,
        ...(options.progressToken ? { _meta: { progressToken: options.progressToken } } : {}) }, { name: tool, ...options });

    test('server/discover names both revisions\' server, its tools, and the tasks extension', withLog(() => server, async () => {
        const d = await result(aliceKey, 'server/discover', {});
        assert.ok(d.supportedVersions.includes(REVISION));
        assert.ok(d.capabilities.tools);
        assert.ok(d.capabilities.extensions?.[TASKS], JSON.stringify(d.capabilities));
    }));

    test('execute_code streams its output as progress on the request\'s own stream', { timeout: 60_000 }, withLog(() => server, async () => {
        const r = await post(aliceKey, 'tools/call', { name: 'execute_code', arguments: { language: 'python',
            code: 'import time\nfor i in range(3):\n    print("line", i, flush=True)\n    time.sleep(0.3)\n' },
        _meta: { progressToken: 'p-1' } }, { name: 'execute_code' });
        const progress = r.messages.filter((m) => m.method === 'notifications/progress');
        assert.ok(progress.length >= 1, JSON.stringify(r.messages));
        assert.ok(progress.every((p) => p.params.progressToken === 'p-1'));
        const res = r.messages.at(-1).result;
        assert.equal(res.resultType, 'complete');
        assert.match(res.structuredContent.stdout, /line 0\nline 1\nline 2/);
    }));

    test('notifications/cancelled kills the run: no process of it is left', { timeout: 60_000 }, withLog(() => server, async () => {
        // a sleep whose argument no other process has: its command line is the marker
        const marker = `sleep 300.${Date.now() % 1000000}`;
        const id = 9001;
        const running = post(aliceKey, 'tools/call', { name: 'execute_code', arguments: { language: 'shell',
            code: marker } }, { name: 'execute_code', id });
        for (let i = 0; i < 100 && hostProcessesWith(marker).length === 0; i++) await sleep(100);
        assert.ok(hostProcessesWith(marker).length > 0, 'the run started');
        const n = await post(aliceKey, 'notifications/cancelled', { requestId: id }, { id: null });
        assert.ok(n.status < 300, `notification accepted: ${n.status}`);
        const r = await running;
        assert.match(JSON.stringify(r.messages.at(-1)), /cancel/);
        for (let i = 0; i < 50 && hostProcessesWith(marker).length > 0; i++) await sleep(100);
        assert.deepEqual(hostProcessesWith(marker), []);
    }));

    test('a workspace file is a resource of its tenant only; a session keeps state across calls; images come as content',
        { timeout: 90_000 }, withLog(() => server, async () => {
            const w = await call(aliceKey, 'execute_code', { language: 'python', workspace: 'proj',
                code: 'open("notes.txt","w").write("kept in 2026")\n' });
            assert.equal(w.isError, false, JSON.stringify(w));
            const read = await result(aliceKey, 'resources/read', { uri: 'ws://proj/notes.txt' }, { name: 'ws://proj/notes.txt' });
            assert.equal(read.contents[0].text, 'kept in 2026');
            const refused = await post(bobKey, 'resources/read', { uri: 'ws://proj/notes.txt' }, { name: 'ws://proj/notes.txt' });
            const last = refused.messages.at(-1);
            assert.ok(last.error, `bob is refused alice's file: ${JSON.stringify(last)}`);
            assert.doesNotMatch(JSON.stringify(last), /kept in 2026/);

            const s1 = await call(aliceKey, 'execute_code', { language: 'python', session: 's26', code: 'x = 41' });
            assert.equal(s1.isError, false, JSON.stringify(s1));
            const s2 = await call(aliceKey, 'execute_code', { language: 'python', session: 's26', code: 'print(x + 1)' });
            assert.match(s2.structuredContent.stdout, /^42/);
            const bobs = await call(bobKey, 'execute_code', { language: 'python', session: 's26', code: 'print("x" in dir())' });
            assert.match(bobs.structuredContent.stdout, /^False/, 'a session name is per tenant');

            const png = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==';
            const img = await call(aliceKey, 'execute_code', { language: 'python', workspace: 'proj',
                code: `import base64\nopen("dot.png","wb").write(base64.b64decode("${png}"))\n` });
            assert.ok(img.content.some((c) => c.type === 'image' && c.mimeType === 'image/png'), JSON.stringify(img.content.map((c) => c.type)));
        }));

    /** tasks/get polled until the task is no longer working (20 s at most); its last state. */
    async function settled(key, taskId, capabilities) {
        let t;
        for (let i = 0; i < 200; i++) {
            t = await result(key, 'tasks/get', { taskId }, { name: taskId, capabilities });
            if (t.status !== 'working') break;
            await sleep(100);
        }
        return t;
    }

    test('tasks: execute_code becomes a task, polled while it runs, cancelled; another polled to completion', { timeout: 90_000 },
        withLog(() => server, async () => {
            const caps = { extensions: { [TASKS]: {} } };
            const marker = `sleep 301.${Date.now() % 1000000}`;
            const created = await call(aliceKey, 'execute_code', { language: 'shell', code: `echo started; ${marker}` },
                { capabilities: caps });
            assert.equal(created.resultType, 'task', JSON.stringify(created));
            const id = created.taskId;
            for (let i = 0; i < 100 && hostProcessesWith(marker).length === 0; i++) await sleep(100);
            const working = await result(aliceKey, 'tasks/get', { taskId: id }, { name: id, capabilities: caps });
            assert.equal(working.status, 'working');
            const bobSees = await post(bobKey, 'tasks/get', { taskId: id }, { name: id, capabilities: caps });
            assert.equal(bobSees.messages.at(-1).error?.code, -32602, 'another tenant\'s task is unknown');
            const ack = await result(aliceKey, 'tasks/cancel', { taskId: id }, { name: id, capabilities: caps });
            assert.equal(ack.resultType, 'complete');
            let t = await settled(aliceKey, id, caps);
            assert.equal(t.status, 'cancelled');
            for (let i = 0; i < 50 && hostProcessesWith(marker).length > 0; i++) await sleep(100);
            assert.deepEqual(hostProcessesWith(marker), [], 'the cancelled task\'s processes are gone');

            const done = await call(aliceKey, 'execute_code', { language: 'python', code: 'print(6 * 7)' }, { capabilities: caps });
            assert.equal(done.resultType, 'task');
            t = await settled(aliceKey, done.taskId, caps);
            assert.equal(t.status, 'completed', JSON.stringify(t));
            assert.match(t.result.structuredContent.stdout, /^42/);

            // a session's call is no job: it runs as a task of the server's, in the session
            await call(aliceKey, 'execute_code', { language: 'python', session: 'tasked', code: 'y = 20' });
            const inSession = await call(aliceKey, 'execute_code', { language: 'python', session: 'tasked', code: 'print(y + 1)' },
                { capabilities: caps });
            assert.equal(inSession.resultType, 'task', JSON.stringify(inSession));
            t = await settled(aliceKey, inSession.taskId, caps);
            assert.equal(t.status, 'completed', JSON.stringify(t));
            assert.match(t.result.structuredContent.stdout, /^21/);
            const bobsView = await post(bobKey, 'tasks/get', { taskId: inSession.taskId }, { name: inSession.taskId, capabilities: caps });
            assert.equal(bobsView.messages.at(-1).error?.code, -32602);
        }));

    test('a 2025-11-25 client (the TypeScript SDK) on the same /mcp at the same time is unaffected', { timeout: 60_000 },
        withLog(() => server, async () => {
            const { client } = await server.connect({ apiKey: aliceKey });
            try {
                const [old, modern] = await Promise.all([
                    client.callTool({ name: 'execute_code', arguments: { language: 'python', code: 'print("old")' } }),
                    call(aliceKey, 'execute_code', { language: 'python', code: 'print("new")' }),
                ]);
                assert.match(old.structuredContent.stdout, /^old/);
                assert.equal(old.resultType, undefined);
                assert.match(modern.structuredContent.stdout, /^new/);
                // the SDK's session sees alice's workspace file too: one tenant, two revisions
                const r = await client.readResource({ uri: 'ws://proj/notes.txt' });
                assert.equal(r.contents[0].text, 'kept in 2026');
            } finally {
                await client.close();
            }
        }));
});
