// Network access behind a gateway: the gateway decides the caller's policy (its EGRESS_ALLOW, narrowed by the
// call's `network`) and passes it on; the worker's own proxy enforces it and reports each connection back; a worker
// with EGRESS=off refuses a run that asks for network instead of running it without. Loopback only: the fixture is
// an HTTP server of this process, reached under a name the workers pin to 127.0.0.1 (EGRESS_RESOLVE).
// Code mode behind the gateway too: the gateway and every worker get the same UPSTREAM_MCP_FILE (the upstream
// fixture e2e/fixtures/upstream-mcp.mjs over Streamable HTTP on 127.0.0.1, with a token only their environment has).
// Declared packages behind the gateway: each worker installs a set into its own store from the loopback PEP 503
// index fixture (e2e/fixtures/pypi-index.mjs, pinned as pypi.test), and the result is the same on either.
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { mkdtempSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { exec, randomSecret } from '../lib/server.js';
import { startCluster } from '../lib/cluster.js';
import { callTool } from '../lib/server3.js';
import { startUpstreamFixture } from '../lib/upstream.js';
import { startPypiIndex } from '../fixtures/pypi-index.mjs';

const FIXTURE_TOKEN = randomSecret('fxtok-');
let fx; // the upstream MCP fixture (lib/upstream.js)
let fxDir; // holds the UPSTREAM_MCP_FILE


let pypi; // the PEP 503 index fixture
let fixture;
let port;
let hits = 0;
let cluster;
let onEgress; // a gateway whose worker has EGRESS=on
let onOff; // a gateway whose worker has EGRESS=off
let clientOn;
let clientOff;

before(async () => {
    fixture = createServer((req, res) => {
        hits++;
        res.end('hello from the fixture\n');
    });
    await new Promise((r) => fixture.listen(0, '127.0.0.1', r));
    port = fixture.address().port;
    fx = await startUpstreamFixture(FIXTURE_TOKEN);
    pypi = await startPypiIndex({ bigMb: 1 });
    const fxPort = fx.port;
    fxDir = mkdtempSync(join(tmpdir(), 'code-exec-egress-cluster-'));
    const upstreamFile = join(fxDir, 'upstream.json');
    writeFileSync(upstreamFile, JSON.stringify({ mcpServers: {
        fx: { url: `http://127.0.0.1:${fxPort}/mcp`, headers: { Authorization: 'Bearer ${FIXTURE_TOKEN}' }, tools: ['add', 'echo'] },
    } }), { mode: 0o600 });
    cluster = await startCluster({
        workers: [
            { name: 'wnet', env: { EGRESS: 'on', EGRESS_ALLOW_CIDRS: '127.0.0.1/32', EGRESS_RESOLVE: 'fixture.test=127.0.0.1,pypi.test=127.0.0.1' } },
            { name: 'woff', env: { EGRESS_ALLOW_CIDRS: '127.0.0.1/32', EGRESS_RESOLVE: 'pypi.test=127.0.0.1' } },
        ],
        gateways: [
            { name: 'G1', workers: ['wnet'] },
            { name: 'G2', workers: ['woff'] },
        ],
        // the gateways' and the workers'
        env: { WARM_POOL: 'python=1', UPSTREAM_MCP_FILE: upstreamFile, FIXTURE_TOKEN, PACKAGE_INDEX_PYTHON: pypi.urlFor('pypi.test') },
        gatewayEnv: { EGRESS: 'on', EGRESS_ALLOW: `fixture.test:${port}` },
        tenants: ['alice'],
    });
    ({ G1: onEgress, G2: onOff } = cluster.gateways);
    await cluster.waitWorkers(['wnet'], true, 30_000, [onEgress]);
    await cluster.waitWorkers(['woff'], true, 30_000, [onOff]);
    clientOn = (await onEgress.connect({ apiKey: cluster.keys.alice })).client;
    clientOff = (await onOff.connect({ apiKey: cluster.keys.alice })).client;
});

after(async () => {
    await clientOn?.close().catch(() => {});
    await clientOff?.close().catch(() => {});
    await cluster?.stop();
    fixture?.close();
    fx?.stop();
    await pypi?.stop();
    if (fxDir) rmSync(fxDir, { recursive: true, force: true });
});

const FETCH = (p) => `import urllib.request\nprint(urllib.request.urlopen("http://fixture.test:${p}/").read().decode().strip())\n`;

describe('egress behind a gateway', () => {
    test('the worker enforces the policy the gateway passed on, and reports the connection back', async () => {
        const before = hits;
        const r = await exec(clientOn, { language: 'python', code: FETCH(port) });
        assert.equal(r.isError, false, r.text);
        assert.equal(r.sc.exitCode, 0, r.text);
        assert.equal(r.sc.stdout.trim(), 'hello from the fixture');
        assert.equal(r.sc.worker, 'wnet');
        assert.deepEqual(r.sc.network.allow, [`fixture.test:${port}`]);
        const c = r.sc.network.connections;
        assert.equal(c.length, 1, JSON.stringify(r.sc.network));
        assert.equal(c[0].host, 'fixture.test');
        assert.equal(c[0].decision, 'allowed');
        assert.ok(c[0].bytesIn > 0);
        assert.equal(hits, before + 1);
    });

    test('a host the gateway did not allow is refused by the worker\'s proxy, with its reason', async () => {
        const r = await exec(clientOn, { language: 'shell', code: `curl -sS http://other.test:${port}/ ; echo "rc=$?"` });
        assert.equal(r.isError, false, r.text);
        assert.match(r.sc.stdout, /refused \(not_allowed\)/);
        assert.equal(r.sc.network.connections[0].reason, 'not_allowed');
    });

    test('a call cannot widen its list at the gateway', async () => {
        const r = await exec(clientOn, { language: 'python', code: 'print(1)', network: ['evil.test'] });
        assert.equal(r.isError, true);
        assert.match(r.text, /'evil\.test' is outside your allow-list/);
    });

    test('network: false reaches nothing, through the gateway too', async () => {
        const before = hits;
        const r = await exec(clientOn, { language: 'shell', code: `curl -sS http://fixture.test:${port}/ ; echo "rc=$?"`, network: false });
        assert.equal(r.isError, false, r.text);
        assert.doesNotMatch(r.sc.stdout, /hello from the fixture/);
        assert.equal(hits, before);
    });

    test('a worker with EGRESS=off refuses a run with network instead of running it without', async () => {
        const before = hits;
        const r = await exec(clientOff, { language: 'python', code: FETCH(port) });
        assert.ok(r.isError || r.sc?.outcome === 'failed_to_start', r.text);
        assert.match(r.text, /network access is off on this server/);
        assert.equal(hits, before);
        const plain = await exec(clientOff, { language: 'python', code: 'print(6*7)', network: false });
        assert.equal(plain.sc.stdout.trim(), '42', plain.text);
    });

    test('code mode through the gateway: list_code_tools, two calls made on the worker, toolCalls back over gRPC, not_allowed', async () => {
        const l = await callTool(clientOn, 'list_code_tools', {});
        assert.equal(l.isError, false, l.text);
        assert.deepEqual(l.sc.servers.map((x) => x.name), ['fx'], l.text);
        const one = await callTool(clientOn, 'list_code_tools', { server: 'fx' });
        assert.deepEqual(one.sc.tools.map((x) => x.name).sort(), ['add', 'echo'], one.text);
        const r = await exec(clientOn, { language: 'python', code: `
import json, mcp_tools
res = {"add": mcp_tools.fx.add(a=40, b=2), "echo": mcp_tools.fx.echo(text="ab", times=2)}
try:
    mcp_tools.fx.big(kb=1)
    res["big"] = "no error"
except AttributeError as e:
    res["big"] = ["AttributeError", str(e)]
except mcp_tools.McpToolError as e:
    res["big"] = [e.reason, str(e)]
print(json.dumps(res))
` });
        const show = JSON.stringify({ isError: r.isError, text: r.text?.slice(0, 2000), toolCalls: r.sc?.toolCalls });
        assert.equal(r.isError, false, show);
        assert.equal(r.sc.exitCode, 0, show);
        assert.equal(r.sc.worker, 'wnet', show);
        const out = JSON.parse(r.sc.stdout.trim().split('\n').at(-1));
        assert.deepEqual(out.add, { sum: 42 });
        assert.equal(out.echo, 'abab');
        assert.ok(Array.isArray(out.big), JSON.stringify(out));
        assert.match(out.big[1], /big/, JSON.stringify(out));
        if (out.big[0] !== 'AttributeError') assert.equal(out.big[0], 'not_allowed', JSON.stringify(out));
        const tc = r.sc.toolCalls;
        assert.ok(tc && Array.isArray(tc.calls), show);
        assert.equal(tc.callsLeftOut, 0, show);
        assert.deepEqual(tc.calls.filter((c) => c.ok).map((c) => [c.server, c.tool]), [['fx', 'add'], ['fx', 'echo']], show);
        for (const c of tc.calls) {
            assert.equal(typeof c.ms, 'number', show);
            assert.ok(c.bytesIn > 0 && c.bytesOut > 0, show);
            if (!c.ok) assert.deepEqual([c.tool, c.reason], ['big', 'not_allowed'], show);
        }
        // the endpoint says it plainly: 403 not_allowed
        const e = await exec(clientOn, { language: 'shell',
            code: 'curl -sS --noproxy "*" -X POST -H "Content-Type: application/json" -d \'{"server":"fx","tool":"big","arguments":{"kb":1}}\' -w " %{http_code}" "$CODE_TOOLS_URL/call"' });
        assert.equal(e.isError, false, e.text);
        assert.match(e.sc.stdout, /"reason"\s*:\s*"not_allowed".* 403$/s, e.sc.stdout);
        assert.ok(!JSON.stringify(r.raw).includes(FIXTURE_TOKEN) && !JSON.stringify(e.raw).includes(FIXTURE_TOKEN), 'no token in the results');
    });
});

describe('declared packages behind a gateway', () => {
    test('each worker installs the set into its own store once; the result is the same on either', async () => {
        const code = 'import tinylib\nprint(tinylib.VERSION)\n';
        // network: false — woff has EGRESS=off and the gateways give every call their allow-list otherwise; the
        // install's own access to the index does not depend on it
        const args = { language: 'python', code, packages: ['tinylib==1.0'], network: false };
        const seen = {};
        for (const [client, worker] of [[clientOn, 'wnet'], [clientOff, 'woff']]) {
            const first = await exec(client, args);
            assert.equal(first.isError, false, first.text);
            assert.equal(first.sc.stdout, '1.0\n', first.text);
            assert.equal(first.sc.worker, worker);
            assert.ok(first.sc.installMs > 0, `the first run on ${worker} installs: ${first.text}`);
            const again = await exec(client, args);
            assert.equal(again.sc.stdout, '1.0\n', again.text);
            assert.equal(again.sc.installMs, 0, `the second run on ${worker} comes from its store`);
            seen[worker] = first.sc.packages;
        }
        assert.deepEqual(seen.wnet, { tinylib: '1.0' });
        assert.deepEqual(seen.woff, seen.wnet);
    });

    test('a refused requirement is refused at the gateway, before any worker or index sees it', async () => {
        const before = pypi.requests.length;
        const r = await exec(clientOn, { language: 'python', code: 'print(1)', packages: ['tinylib @ http://pypi.test/x.whl'] });
        assert.equal(r.isError, true);
        assert.match(r.text, /package 'tinylib @ http:\/\/pypi\.test\/x\.whl' refused/);
        assert.equal(pypi.requests.length, before);
    });
});
