// /mcp-no-code-execute end to end: the upstream MCP servers' tools offered one by one (SERVER__TOOL), called
// directly by the server with the credentials it holds. The real jar, real HTTP, the official TypeScript MCP SDK as
// the client, and code mode's HTTP upstream fixture (fixtures/upstream-mcp.mjs, which wants
// `Authorization: Bearer $FIXTURE_TOKEN`). Two tenants from an API_KEYS_FILE: `fx` is open to both, `narrow` (add
// and echo only) too, `only-a` to alice only. Nothing here connects anywhere but this machine's loopback.
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { startServer, randomSecret, withLog } from '../lib/server.js';
import { makeBase, keysAppend } from '../lib/server3.js';
import { startUpstreamFixture } from '../lib/upstream.js';

const NODE = '/usr/bin/node';
const FX_TOOLS = ['add', 'big', 'echo', 'enable_extra', 'fail', 'slow', 'whoami'];
const HTTP_TOKEN = randomSecret('fxtok-');

let base;
let fx;

before(async () => {
    base = makeBase();
    fx = await startUpstreamFixture(HTTP_TOKEN, NODE);
});
after(() => {
    fx?.stop();
    base?.remove();
});

/** The fixture's tool events so far: {tool, event, at, args}. */
const fxEvents = async () => (await fetch(`http://127.0.0.1:${fx.port}/events`)).json();

/** An SDK client of /mcp-no-code-execute with `apiKey`. */
async function directClient(server, apiKey) {
    const { Client } = await import('@modelcontextprotocol/sdk/client/index.js');
    const { StreamableHTTPClientTransport } = await import('@modelcontextprotocol/sdk/client/streamableHttp.js');
    const client = new Client({ name: 'code-exec-e2e-direct', version: '0.1.0' }, { capabilities: {} });
    await client.connect(new StreamableHTTPClientTransport(new URL(`${server.base}/mcp-no-code-execute`), {
        requestInit: { headers: { Authorization: `Bearer ${apiKey}` } },
    }));
    return client;
}

const text = (r) => (r.content || []).filter((c) => c.type === 'text').map((c) => c.text).join('\n');
const names = async (client) => (await client.listTools()).tools.map((t) => t.name).sort();

describe('/mcp-no-code-execute: the upstream tools one by one, per tenant', () => {
    let server; let alice; let bob; let aliceKey;
    const S = () => server;

    before(async () => {
        const keys = join(base.dir, 'keys');
        aliceKey = keysAppend(keys, 'alice');
        const bobKey = keysAppend(keys, 'bob');
        const file = join(base.dir, 'upstreams.json');
        const auth = { Authorization: 'Bearer ${FIXTURE_TOKEN}' };
        const url = `http://127.0.0.1:${fx.port}/mcp`;
        writeFileSync(file, JSON.stringify({
            mcpServers: {
                fx: { url, headers: auth, description: 'Fixture over HTTP' },
                narrow: { url, headers: auth, tools: ['add', 'echo'] },
                'only-a': { url, headers: auth, tenants: ['alice'] },
            },
        }), { mode: 0o600 });
        server = await startServer({
            API_KEY: '', API_KEYS_FILE: keys, DATA_DIR: base.dataDir, WORKSPACE_ROOT: base.workspaceRoot('ws-direct'),
            UPSTREAM_MCP_FILE: file, FIXTURE_TOKEN: HTTP_TOKEN, WARM_POOL: 'off',
        });
        alice = await directClient(server, aliceKey);
        bob = await directClient(server, bobKey);
    });
    after(async () => {
        await alice?.close().catch(() => {});
        await bob?.close().catch(() => {});
        await server?.stop();
    });

    test('each tenant lists the upstream tools it may call, named SERVER__TOOL with the upstream schema', withLog(S, async () => {
        // the upstreams connect in the background after the start: wait for the listing to have them
        const end = Date.now() + 20_000;
        while ((await names(alice)).length < 2 * FX_TOOLS.length + 2 && Date.now() < end) await new Promise((r) => setTimeout(r, 200));
        const fxNames = (server) => FX_TOOLS.map((t) => `${server}__${t}`);
        assert.deepEqual(await names(alice), [...fxNames('fx'), 'narrow__add', 'narrow__echo', ...fxNames('only-a')].sort());
        assert.deepEqual(await names(bob), [...fxNames('fx'), 'narrow__add', 'narrow__echo'].sort());
        const add = (await bob.listTools()).tools.find((t) => t.name === 'fx__add');
        assert.equal(add.description, '[fx] Adds two numbers.');
        assert.deepEqual(Object.keys(add.inputSchema.properties).sort(), ['a', 'b']);
        assert.ok(add.outputSchema?.properties?.sum, `the upstream's output schema is kept: ${JSON.stringify(add)}`);
    }));

    test('a call reaches the upstream with the server-held token; the result is the upstream\'s', withLog(S, async () => {
        const before = (await fxEvents()).length;
        const sum = await alice.callTool({ name: 'fx__add', arguments: { a: 20, b: 22 } });
        assert.notEqual(sum.isError, true, text(sum));
        assert.deepEqual(sum.structuredContent, { sum: 42 });
        assert.deepEqual(JSON.parse(text(sum)), { sum: 42 });
        const who = await bob.callTool({ name: 'fx__whoami', arguments: {} });
        assert.equal(text(who), 'authorized', 'the fixture saw the token from UPSTREAM_MCP_FILE, which no client sent');
        const seen = (await fxEvents()).slice(before).filter((e) => e.event === 'start').map((e) => [e.tool, e.args]);
        assert.deepEqual(seen, [['add', { a: 20, b: 22 }], ['whoami', {}]]);
    }));

    test('another tenant\'s tool and a tool the operator closed are refused as in code mode, never reaching the upstream', withLog(S, async () => {
        const before = (await fxEvents()).length;
        const other = await bob.callTool({ name: 'only-a__whoami', arguments: {} });
        assert.equal(other.isError, true);
        assert.match(text(other), /^Error \[not_allowed\]: no server 'only-a' for this caller \(it may call: fx, narrow\)/);
        // closed by the operator (narrow's "tools"): no tool of this endpoint at all, MCP's unknown tool
        await assert.rejects(bob.callTool({ name: 'narrow__whoami', arguments: {} }), /-32602.*Unknown tool/);
        const failed = await alice.callTool({ name: 'fx__fail', arguments: { message: 'nope' } });
        assert.equal(failed.isError, true);
        assert.equal(text(failed), 'Error [tool_error]: nope');
        const seen = (await fxEvents()).slice(before).filter((e) => e.event === 'start').map((e) => e.tool);
        assert.deepEqual(seen, ['fail'], 'only the allowed call reached the upstream');
    }));

    test('each call writes code mode\'s audit line, as a run of its own of the caller\'s tenant', withLog(S, async () => {
        const from = server.log().length;
        await alice.callTool({ name: 'narrow__echo', arguments: { text: 'ab', times: 2 } });
        await bob.callTool({ name: 'only-a__add', arguments: { a: 1, b: 2 } });
        // the server's log reaches this process through a pipe: its last line may come a moment after the answer
        const audit = () => server.log().slice(from).split('\n').filter((l) => l.includes('tool_call run=direct-'));
        for (let i = 0; i < 50 && audit().length < 2; i++) await new Promise((r) => setTimeout(r, 100));
        const lines = audit();
        assert.equal(lines.length, 2, lines.join('\n'));
        assert.match(lines[0], /tenant=alice server=narrow tool=echo ok=true reason=-/);
        assert.match(lines[1], /tenant=bob server=only-a tool=add ok=false reason=not_allowed/);
        const runs = lines.map((l) => /run=(direct-[0-9a-f]+)/.exec(l)[1]);
        assert.notEqual(runs[0], runs[1], 'each call is a run of its own');
        assert.ok(!server.log().includes(HTTP_TOKEN), 'the upstream token is in no log line');
    }));

    test('the endpoint needs a key and refuses a session of another key', withLog(S, async () => {
        const res = await fetch(`${server.base}/mcp-no-code-execute`, {
            method: 'POST', headers: { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream' },
            body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} }),
        });
        assert.equal(res.status, 401);
        const session = bob.transport?.sessionId;
        assert.ok(session, 'bob has a session');
        const stolen = await fetch(`${server.base}/mcp-no-code-execute`, {
            method: 'POST',
            headers: { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream',
                Authorization: `Bearer ${aliceKey}`, 'Mcp-Session-Id': session, 'Mcp-Protocol-Version': '2025-06-18' },
            body: JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/list', params: {} }),
        });
        assert.equal(stolen.status, 404);
    }));
});
