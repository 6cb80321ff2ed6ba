// Network access behind a gateway: the gateway decides the caller's policy (its EGRESS_ALLOW, narrowed by the
// call's `network`) and passes it on; the worker's own proxy enforces it and reports each connection back; a worker
// with EGRESS=off refuses a run that asks for network instead of running it without. Loopback only: the fixture is
// an HTTP server of this process, reached under a name the workers pin to 127.0.0.1 (EGRESS_RESOLVE).
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { exec } from '../lib/server.js';
import { startCluster } from '../lib/cluster.js';

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
    cluster = await startCluster({
        workers: [
            { name: 'wnet', env: { EGRESS: 'on', EGRESS_ALLOW_CIDRS: '127.0.0.1/32', EGRESS_RESOLVE: 'fixture.test=127.0.0.1' } },
            { name: 'woff' },
        ],
        gateways: [
            { name: 'G1', workers: ['wnet'] },
            { name: 'G2', workers: ['woff'] },
        ],
        env: { WARM_POOL: 'python=1' },
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
});
