// Controlled internet access ("egress", docs/network.md) end to end: the real jar, real HTTP, the official
// TypeScript MCP SDK client, real programs (curl, python requests/urllib/sockets, Node fetch, npm) in bubblewrap
// sandboxes. The hosts the runs reach are fixtures in this test process on 127.0.0.1 (plain HTTP, HTTPS with a
// certificate from a throw-away CA made with openssl, a UDP listener); the servers pin the names fixture.test and
// other.test to 127.0.0.1 and rebind.test to 127.0.0.2 (EGRESS_RESOLVE); the main server opens 127.0.0.1/32 alone
// (EGRESS_ALLOW_CIDRS), the npm one only the registry's addresses. Traffic rule: nothing here connects anywhere but this machine's loopback, except npm
// itself reaching its registry in the npm case (skipped when the registry is unreachable).
//
// Three servers, one after the other (each start costs ~30 s of warm-ups on 2 cores): egress on with
// EGRESS_MAX_MB=1 (the main one: policy, refusals, bypasses, tenants, flood, byte limit, timeout and cancel, warm
// pool, sessions, workspaces); egress on with loopback not opened (localhost and fixture.test refused; npm); EGRESS
// unset (off by default).
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync, readdirSync, readFileSync } from 'node:fs';
import { createServer as createHttpServer } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import { createSocket } from 'node:dgram';
import { createHash } from 'node:crypto';
import { tmpdir } from 'node:os';
import { lookup } from 'node:dns/promises';
import { join } from 'node:path';
import { startServer, exec, randomSecret, sleep, withLog } from '../lib/server.js';
import { makeBase, callTool } from '../lib/server3.js';

// ---------------------------------------------------------------------------------------------------------------
// Fixtures: certificates, HTTP and HTTPS servers, a UDP listener, all on 127.0.0.1 in this process.
// ---------------------------------------------------------------------------------------------------------------

let base; // makeBase(): DATA_DIR (or E2E_DATA_DIR) and WORKSPACE_ROOTs
let certDir;
let CA_FILE;
let httpServer; let httpsServer; let udp;
let P; // plain HTTP port
let PS; // HTTPS port
let UP; // UDP port
const hits = []; // every request the HTTP(S) fixtures received: { proto, path, id, host, at }
const slow = new Map(); // id of a /slow request → { openedAt, closedAt }
const udpGot = []; // datagrams the UDP listener received, as text
let httpsOpen = 0; // TCP connections open on the HTTPS fixture right now

const hitsFor = (id) => hits.filter((h) => h.id === id);

function makeCerts(dir) {
    const o = (...args) => execFileSync('openssl', args, { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] });
    writeFileSync(join(dir, 'ca.cnf'), [
        'basicConstraints=critical,CA:TRUE', 'keyUsage=critical,keyCertSign,cRLSign',
        'subjectKeyIdentifier=hash', '',
    ].join('\n'));
    writeFileSync(join(dir, 'srv.cnf'), [
        'subjectAltName=DNS:fixture.test,DNS:other.test', 'basicConstraints=critical,CA:FALSE',
        'keyUsage=critical,digitalSignature,keyEncipherment', 'extendedKeyUsage=serverAuth',
        'subjectKeyIdentifier=hash', 'authorityKeyIdentifier=keyid,issuer', '',
    ].join('\n'));
    o('req', '-new', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'ca.key', '-out', 'ca.csr', '-subj', '/CN=code-exec-mcp e2e egress test CA');
    o('x509', '-req', '-in', 'ca.csr', '-signkey', 'ca.key', '-out', 'ca.pem', '-days', '2', '-extfile', 'ca.cnf');
    o('req', '-new', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'srv.key', '-out', 'srv.csr', '-subj', '/CN=fixture.test');
    o('x509', '-req', '-in', 'srv.csr', '-CA', 'ca.pem', '-CAkey', 'ca.key', '-CAcreateserial', '-out', 'srv.pem',
        '-days', '2', '-extfile', 'srv.cnf');
}

function handler(proto) {
    return (req, res) => {
        const u = new URL(req.url, 'http://fixture');
        const id = u.searchParams.get('id');
        hits.push({ proto, path: u.pathname, id, host: req.headers.host, at: Date.now() });
        if (u.pathname === '/hi') {
            res.writeHead(200, { 'Content-Type': 'text/plain' });
            res.end('hello');
        } else if (u.pathname === '/big') {
            const n = Number(u.searchParams.get('n') || 3 << 20);
            res.writeHead(200, { 'Content-Type': 'application/octet-stream', 'Content-Length': String(n) });
            const chunk = Buffer.alloc(64 * 1024, 0x61);
            let sent = 0;
            const pump = () => {
                while (sent < n && !res.destroyed) {
                    const k = Math.min(chunk.length, n - sent);
                    sent += k;
                    if (!res.write(chunk.subarray(0, k))) { res.once('drain', pump); return; }
                }
                if (!res.destroyed) res.end();
            };
            pump();
        } else if (u.pathname === '/slow') {
            // one byte, then the connection stays open until the other side closes it
            const rec = { openedAt: Date.now(), closedAt: null };
            slow.set(id, rec);
            req.socket.once('close', () => { rec.closedAt = Date.now(); });
            res.writeHead(200, { 'Content-Type': 'text/plain' });
            res.write('x');
        } else {
            res.writeHead(404);
            res.end('no such fixture');
        }
    };
}

const listen = (srv) => new Promise((res, rej) => {
    srv.once('error', rej);
    srv.listen(0, '127.0.0.1', () => res(srv.address().port));
});

before(async () => {
    base = makeBase();
    certDir = mkdtempSync(join(tmpdir(), 'code-exec-egress-certs-'));
    makeCerts(certDir);
    CA_FILE = join(certDir, 'ca.pem');
    httpServer = createHttpServer(handler('http'));
    httpsServer = createHttpsServer({
        key: readFileSync(join(certDir, 'srv.key')),
        cert: readFileSync(join(certDir, 'srv.pem')),
    }, handler('https'));
    httpsServer.on('connection', (s) => { httpsOpen++; s.once('close', () => { httpsOpen--; }); });
    P = await listen(httpServer);
    PS = await listen(httpsServer);
    udp = createSocket('udp4');
    udp.on('message', (m) => udpGot.push(m.toString()));
    await new Promise((res) => udp.bind(0, '127.0.0.1', res));
    UP = udp.address().port;
});

after(async () => {
    for (const s of [httpServer, httpsServer]) {
        s?.closeAllConnections?.();
        await new Promise((res) => (s ? s.close(() => res()) : res()));
    }
    udp?.close();
    if (certDir) rmSync(certDir, { recursive: true, force: true });
    base?.remove();
});

// ---------------------------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------------------------

const conns = (sc) => sc?.network?.connections ?? [];
const show = (r) => JSON.stringify({ isError: r.isError, text: r.text?.slice(0, 1500), network: r.sc?.network }, null, 1);

/** The one connection record for host:port (asserts there is exactly one). */
function record(r, host, port) {
    const list = conns(r.sc).filter((c) => c.host === host && c.port === port);
    assert.equal(list.length, 1, `one network record for ${host}:${port}: ${show(r)}`);
    return list[0];
}

/** A finished allowed connection: the run ended it or it closed by itself (the two race at a run's end). */
function assertAllowed(c, what) {
    assert.equal(c.decision, 'allowed', `${what}: ${JSON.stringify(c)}`);
    assert.ok(['closed', 'run_ended'].includes(c.reason), `${what}: ended normally: ${JSON.stringify(c)}`);
    assert.ok(c.bytesIn > 0 && c.bytesOut > 0, `${what}: bytes both ways: ${JSON.stringify(c)}`);
}

function assertRefused(c, reason, what) {
    assert.equal(c.decision, 'refused', `${what}: ${JSON.stringify(c)}`);
    assert.equal(c.reason, reason, `${what}: ${JSON.stringify(c)}`);
    assert.ok(c.message.length > 10, `${what}: a message says why: ${JSON.stringify(c)}`);
    assert.equal(c.bytesIn, 0, `${what}: nothing came back from anywhere`);
}

/** Waits until `cond()` is true (true) or `ms` passes (false). */
async function until(cond, ms, step = 50) {
    const end = Date.now() + ms;
    while (!cond()) {
        if (Date.now() > end) return false;
        await sleep(step);
    }
    return true;
}


/** The egress environment a caller's runtime_info shows. */
async function networkInfo(client) {
    const r = await client.callTool({ name: 'runtime_info', arguments: {} });
    return r.structuredContent.network;
}

const id = () => randomSecret('r');

// ---------------------------------------------------------------------------------------------------------------
// 1. The main server: egress on.
// ---------------------------------------------------------------------------------------------------------------

/** The npm registry this machine's npm uses (read from its config: no traffic). */
function npmRegistry() {
    try {
        const u = new URL(execFileSync('npm', ['config', 'get', 'registry'], { encoding: 'utf8', timeout: 20_000 }).trim());
        return u;
    } catch (e) {
        return new URL('https://registry.npmjs.org/');
    }
}

describe('egress on: allow-list, pinned fixture names, 127.0.0.1/32 opened, test CA, EGRESS_MAX_MB=1', () => {
    let server; let client; let keysFile; let keyA; let keyB; let clientA; let clientB;
    const S = () => server;
    const sh = (code, extra = {}) => exec(client, { language: 'shell', code, ...extra });
    const py = (code, extra = {}) => exec(client, { language: 'python', code, ...extra });

    before(async () => {
        // API_KEYS_FILE lines `TENANT SHA256HEX_OF_KEY egress=...` next to the API_KEY (whose caller gets EGRESS_ALLOW)
        keysFile = join(base.dir, 'keys');
        keyA = randomSecret('key-a-');
        keyB = randomSecret('key-b-');
        const line = (tenant, key, egress) => `${tenant} ${createHash('sha256').update(key).digest('hex')} egress=${egress}\n`;
        writeFileSync(keysFile, line('a', keyA, `fixture.test:${P}`) + line('b', keyB, 'off'), { mode: 0o600 });
        server = await startServer({
            DATA_DIR: base.dataDir,
            WORKSPACE_ROOT: base.workspaceRoot('ws-main'),
            API_KEYS_FILE: keysFile,
            EGRESS: 'on',
            EGRESS_ALLOW: [`fixture.test:${P}`, `fixture.test:${PS}`, `other.test:${PS}`, `rebind.test:${P}`,
                `localhost:${P}`].join(','),
            EGRESS_ALLOW_CIDRS: '127.0.0.1/32',
            EGRESS_RESOLVE: 'fixture.test=127.0.0.1,other.test=127.0.0.1,rebind.test=127.0.0.2',
            EGRESS_CA_FILE: CA_FILE,
            EGRESS_MAX_MB: '1',
        });
        ({ client } = await server.connect());
        ({ client: clientA } = await server.connect({ apiKey: keyA }));
        ({ client: clientB } = await server.connect({ apiKey: keyB }));
    });

    after(async () => {
        for (const c of [client, clientA, clientB]) await c?.close().catch(() => {});
        await server?.stop();
    });

    test('runtime_info shows the caller\'s list and the proxy', withLog(S, async () => {
        const n = await networkInfo(client);
        assert.equal(n.enabled, true, JSON.stringify(n));
        assert.deepEqual(n.allow, [`fixture.test:${P}`, `fixture.test:${PS}`, `other.test:${PS}`, `rebind.test:${P}`,
            `localhost:${P}`]);
        assert.match(n.proxy, /127\.0\.0\.1:3128/);
    }));

    // --- allowed -----------------------------------------------------------------------------------------------

    test('shell: curl over http:// and https:// through the proxy gets "hello"; the records say allowed', withLog(S, async () => {
        const a = id(); const b = id();
        const r = await sh(`curl -sS http://fixture.test:${P}/hi?id=${a}; echo; curl -sS https://fixture.test:${PS}/hi?id=${b}; echo`);
        assert.equal(r.isError, false, show(r));
        assert.equal(r.sc.stdout, 'hello\nhello\n', show(r));
        assert.equal(r.sc.exitCode, 0);
        assertAllowed(record(r, 'fixture.test', P), 'http');
        assertAllowed(record(r, 'fixture.test', PS), 'https');
        assert.equal(hitsFor(a).length, 1, 'the HTTP fixture got the request');
        assert.equal(hitsFor(a)[0].proto, 'http');
        assert.equal(hitsFor(b).length, 1, 'the HTTPS fixture got the request');
        assert.equal(hitsFor(b)[0].proto, 'https');
        assert.ok(r.sc.network.bytesIn > 0 && r.sc.network.bytesOut > 0, show(r));
        assert.equal(r.sc.network.connectionsLeftOut, 0);
        assert.deepEqual(r.sc.network.allow, (await networkInfo(client)).allow, 'the run got the caller\'s whole list');
    }));

    test('python: requests.get and urllib.request.urlopen over HTTPS get "hello" (the test CA is trusted)', withLog(S, async () => {
        const a = id(); const b = id();
        const r = await py([
            'import os, requests, urllib.request',
            `print(requests.get("https://fixture.test:${PS}/hi?id=${a}", timeout=20).text)`,
            `print(urllib.request.urlopen("https://fixture.test:${PS}/hi?id=${b}", timeout=20).read().decode())`,
            'print(all(os.environ.get(k) for k in ("SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "NODE_EXTRA_CA_CERTS")))',
        ].join('\n'));
        assert.equal(r.isError, false, show(r));
        assert.equal(r.sc.stdout, 'hello\nhello\nTrue\n', show(r));
        const list = conns(r.sc);
        assert.equal(list.length, 2, show(r));
        for (const c of list) {
            assert.equal(c.host, 'fixture.test');
            assert.equal(c.port, PS);
            assertAllowed(c, 'python https');
        }
        assert.equal(hitsFor(a).length + hitsFor(b).length, 2);
    }));

    test('nodejs: fetch over HTTPS gets "hello" (Node 20 through the preloaded EnvHttpProxyAgent)', withLog(S, async () => {
        const a = id();
        const r = await exec(client, { language: 'nodejs', code: [
            '(async () => {',
            `  const res = await fetch("https://fixture.test:${PS}/hi?id=${a}");`,
            '  console.log(res.status, await res.text(), process.version);',
            '})().catch((e) => { console.error("FETCH FAILED", e, e.cause); process.exit(1); });',
        ].join('\n') });
        assert.equal(r.isError, false, show(r));
        assert.match(r.sc.stdout, /^200 hello v\d+/, show(r));
        assertAllowed(record(r, 'fixture.test', PS), 'node fetch');
        assert.equal(hitsFor(a).length, 1);
    }));

    // --- refused -----------------------------------------------------------------------------------------------

    test('a host not on the list: curl gets 403 whose body names the reason; record not_allowed; nothing sent', withLog(S, async () => {
        const a = id();
        const r = await sh(`curl -sS -w '\\nHTTP %{http_code}\\n' http://unlisted.test:${P}/hi?id=${a}`);
        assert.equal(r.isError, false, show(r));
        assert.match(r.sc.stdout, /HTTP 403/, show(r));
        assert.match(r.sc.stdout, /refused \(not_allowed\)/, show(r));
        assert.match(r.sc.stdout, new RegExp(`unlisted\\.test:${P} is not on this run's allow-list`), show(r));
        assertRefused(record(r, 'unlisted.test', P), 'not_allowed', 'unlisted host');
        assert.equal(hitsFor(a).length, 0, 'the fixture got nothing');
        // the text summary names the refusal too
        assert.ok(r.text.includes(`refused unlisted.test:${P} (not_allowed)`), `the text result names the refusal: ${r.text}`);
        // an allowed name on a port not on the list
        const b = id();
        const r2 = await sh(`curl -sS -o /dev/null -w 'HTTP %{http_code}\\n' https://other.test:${P}/hi?id=${b}; echo rc=$?`);
        assert.match(r2.sc.stdout, /rc=[1-9]/, 'a refused CONNECT fails curl');
        assertRefused(record(r2, 'other.test', P), 'not_allowed', 'listed name, other port');
        assert.equal(hitsFor(b).length, 0);
    }));

    test('a call narrowing its list gets only that: https outside it is refused', withLog(S, async () => {
        const a = id(); const b = id();
        const r = await sh(`curl -sS http://fixture.test:${P}/hi?id=${a}; echo; curl -sS https://fixture.test:${PS}/hi?id=${b}; echo rc=$?`,
            { network: [`fixture.test:${P}`] });
        assert.equal(r.isError, false, show(r));
        assert.deepEqual(r.sc.network.allow, [`fixture.test:${P}`]);
        assert.match(r.sc.stdout, /^hello\n/, show(r));
        assert.match(r.sc.stdout, /rc=[1-9]/, show(r));
        assertAllowed(record(r, 'fixture.test', P), 'narrowed: allowed');
        assertRefused(record(r, 'fixture.test', PS), 'not_allowed', 'narrowed: outside');
        assert.equal(hitsFor(a).length, 1);
        assert.equal(hitsFor(b).length, 0);
    }));

    test('a call widening its list (network: ["evil.test"]) is a tool error naming the pattern; nothing runs', withLog(S, async () => {
        const marker = id();
        const r = await sh(`echo ${marker}`, { network: ['evil.test'] });
        assert.equal(r.isError, true, show(r));
        assert.match(r.text, /evil\.test/, show(r));
        assert.match(r.text, /outside your allow-list/, show(r));
        assert.ok(!r.text.includes(`${marker}\n`), 'the code did not run');
        // a wildcard wider than a listed name, and a listed name on another port, widen too
        for (const bad of ['*.test', `fixture.test:${P + 1}`, 'fixture.test']) {
            const w = await sh('echo never', { network: [bad] });
            assert.equal(w.isError, true, `${bad}: ${show(w)}`);
            assert.ok(w.text.includes(`'${bad}'`), `${bad} named: ${w.text}`);
        }
    }));

    test('network: false: no proxy, curl fails, the fixture gets nothing, the result says no network', withLog(S, async () => {
        const a = id();
        const r = await sh(`env | grep -ci _proxy; curl -sS --max-time 5 http://fixture.test:${P}/hi?id=${a}; echo rc=$?`, { network: false });
        assert.equal(r.isError, false, show(r));
        assert.match(r.sc.stdout, /^0\n/, `no proxy variables: ${r.sc.stdout}`);
        assert.match(r.sc.stdout, /rc=[1-9]/, show(r));
        assert.deepEqual(r.sc.network.allow, []);
        assert.match(r.sc.network.note, /no network/);
        assert.equal(hitsFor(a).length, 0);
    }));

    test('an IP literal through the proxy: 403 ip_literal, nothing sent', withLog(S, async () => {
        const a = id();
        const r = await sh(`curl -sS --noproxy '' -x http://127.0.0.1:3128 -w '\\nHTTP %{http_code}\\n' http://127.0.0.1:${P}/hi?id=${a}`);
        assert.equal(r.isError, false, show(r));
        assert.match(r.sc.stdout, /HTTP 403/, show(r));
        assert.match(r.sc.stdout, /refused \(ip_literal\)/, show(r));
        assertRefused(record(r, '127.0.0.1', P), 'ip_literal', 'IP literal');
        assert.equal(hitsFor(a).length, 0);
    }));

    test('DNS rebinding: rebind.test is listed but resolves to 127.0.0.2 (loopback, not opened): refused', withLog(S, async () => {
        const a = id();
        const r = await sh(`curl -sS -w '\\nHTTP %{http_code}\\n' http://rebind.test:${P}/hi?id=${a}`);
        assert.match(r.sc.stdout, /HTTP 403/, show(r));
        assert.match(r.sc.stdout, /refused \(loopback\)/, show(r));
        const c = record(r, 'rebind.test', P);
        assertRefused(c, 'loopback', 'rebind');
        assert.match(c.message, /127\.0\.0\.2/);
        assert.equal(hitsFor(a).length, 0);
    }));

    test('TLS naming another host than CONNECT (SNI other.test in a fixture.test tunnel) is cut; same SNI works', withLog(S, async () => {
        const bad = id(); const good = id();
        const r = await py([
            'import json, os, socket, ssl',
            'ctx = ssl.create_default_context(cafile=os.environ["SSL_CERT_FILE"])',
            'def tunnel():',
            '    s = socket.create_connection(("127.0.0.1", 3128), timeout=15)',
            `    s.sendall(b"CONNECT fixture.test:${PS} HTTP/1.1\\r\\nHost: fixture.test:${PS}\\r\\n\\r\\n")`,
            '    head = b""',
            '    while b"\\r\\n\\r\\n" not in head:',
            '        c = s.recv(1)',
            '        if not c: break',
            '        head += c',
            '    return s, head.split(b"\\r\\n")[0].decode()',
            'out = {}',
            `for name, rid in (("other.test", "${bad}"), ("fixture.test", "${good}")):`,
            '    s, status = tunnel()',
            '    try:',
            '        t = ctx.wrap_socket(s, server_hostname=name)',
            '        t.sendall(("GET /hi?id=%s HTTP/1.0\\r\\nHost: %s\\r\\nConnection: close\\r\\n\\r\\n" % (rid, name)).encode())',
            '        data = b""',
            '        while True:',
            '            c = t.recv(4096)',
            '            if not c: break',
            '            data += c',
            '        out[name] = {"status": status, "body": data.split(b"\\r\\n\\r\\n", 1)[-1].decode()}',
            '    except (OSError, ssl.SSLError) as e:',
            '        out[name] = {"status": status, "error": type(e).__name__ + ": " + str(e)}',
            'print(json.dumps(out))',
        ].join('\n'));
        assert.equal(r.isError, false, show(r));
        const out = JSON.parse(r.sc.stdout);
        assert.match(out['other.test'].status, / 200 /, 'the tunnel itself was set up');
        assert.ok(out['other.test'].error, `the TLS handshake naming other.test failed: ${JSON.stringify(out)}`);
        assert.equal(out['fixture.test'].body, 'hello', `the same technique with the right SNI works: ${JSON.stringify(out)}`);
        const recs = conns(r.sc).filter((c) => c.host === 'fixture.test' && c.port === PS);
        assert.equal(recs.length, 2, show(r));
        const mismatch = recs.filter((c) => c.reason === 'sni_mismatch');
        assert.equal(mismatch.length, 1, show(r));
        assert.equal(mismatch[0].decision, 'refused');
        assert.match(mismatch[0].message, /other\.test/);
        assertAllowed(recs.find((c) => c.reason !== 'sni_mismatch'), 'same SNI');
        assert.equal(hitsFor(bad).length, 0, 'no request reached the fixture under the other name');
        assert.equal(hitsFor(good).length, 1);
    }));

    test('bypassing the proxy: a direct connect() to 127.0.0.1:P is refused (the sandbox loopback is its own)', withLog(S, async () => {
        const before = hits.length;
        const r = await py([
            'import socket',
            'for port in (' + P + ', ' + PS + '):',
            '    try:',
            '        socket.create_connection(("127.0.0.1", port), timeout=5); print("CONNECTED")',
            '    except ConnectionRefusedError as e:',
            '        print("refused")',
            '    except OSError as e:',
            '        print("other", type(e).__name__, e)',
            'try:',
            `    socket.create_connection(("fixture.test", ${P}), timeout=5); print("CONNECTED")`,
            'except OSError as e:',
            '    print("no name", type(e).__name__)',
        ].join('\n'));
        assert.equal(r.isError, false, show(r));
        assert.equal(r.sc.stdout, 'refused\nrefused\nno name gaierror\n', show(r));
        assert.equal(conns(r.sc).length, 0, 'nothing went through the proxy');
        await sleep(200);
        assert.equal(hits.length, before, 'the fixtures got nothing');
    }));

    test('UDP to the host\'s 127.0.0.1 never arrives; a raw socket is not allowed', withLog(S, async () => {
        const marker = id();
        // control: the listener does receive a datagram sent from here
        const ctl = createSocket('udp4');
        await new Promise((res, rej) => ctl.send(`control-${marker}`, UP, '127.0.0.1', (e) => (e ? rej(e) : res())));
        ctl.close();
        assert.ok(await until(() => udpGot.includes(`control-${marker}`), 2000), 'the UDP listener works');
        const r = await py([
            'import socket',
            's = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)',
            'for i in range(5):',
            '    try:',
            `        s.sendto(b"${marker}", ("127.0.0.1", ${UP}))`,
            '    except OSError as e:',
            '        print("send failed", e)',
            'print("sent")',
            'try:',
            '    socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP); print("RAW OPEN")',
            'except PermissionError as e:',
            '    print("raw: PermissionError")',
            'except OSError as e:',
            '    print("raw: other", type(e).__name__, e)',
        ].join('\n'));
        assert.equal(r.isError, false, show(r));
        assert.match(r.sc.stdout, /sent\n/, show(r));
        assert.match(r.sc.stdout, /raw: PermissionError\n/, show(r));
        await sleep(1000);
        assert.equal(udpGot.filter((m) => m === marker).length, 0, 'no datagram of the sandbox reached the host');
    }));

    test('one run cannot reach another run\'s proxy socket: only its own is in /run/codeexec, host paths are absent', withLog(S, async (t) => {
        const ac = new AbortController();
        t.after(() => ac.abort());
        let progressed = false;
        const runA = exec(client, { language: 'python', code: 'import time\nprint("A up", flush=True)\ntime.sleep(60)\n',
            timeout_ms: 60_000 }, { signal: ac.signal, onprogress: () => { progressed = true; } })
            .then((r) => ({ result: r }), (e) => ({ error: e }));
        assert.ok(await until(() => progressed, 30_000), 'run A started');
        const dir = join(base.dataDir, 'egress');
        const sockets = readdirSync(dir).filter((f) => f.endsWith('.sock')).map((f) => join(dir, f));
        assert.ok(sockets.length >= 1, `DATA_DIR/egress has sockets (run A's among them): ${sockets}`);
        const r = await py([
            'import json, os, socket',
            'print(json.dumps(sorted(os.listdir("/run/codeexec"))))',
            `for p in ${JSON.stringify(sockets)}:`,
            '    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)',
            '    try:',
            '        s.connect(p); print("CONNECTED", p)',
            '    except OSError as e:',
            '        print(type(e).__name__, e.errno)',
            'print(os.path.exists(' + JSON.stringify(dir) + '))',
        ].join('\n'));
        assert.equal(r.isError, false, show(r));
        const lines = r.sc.stdout.trim().split('\n');
        const listing = JSON.parse(lines[0]);
        assert.deepEqual(listing.filter((f) => f.endsWith('.sock')), ['egress.sock'], `only its own socket: ${listing}`);
        const tries = lines.slice(1, -1);
        assert.equal(tries.length, sockets.length);
        for (const l of tries) assert.equal(l, 'FileNotFoundError 2', `every host socket path is absent inside: ${r.sc.stdout}`);
        assert.equal(lines.at(-1), 'False', 'DATA_DIR/egress is not in the sandbox');
        ac.abort('done');
        await runA;
        assert.equal(await server.waitIdle(10_000), true);
    }));

    // --- tenants -----------------------------------------------------------------------------------------------

    test('tenants: a (egress=fixture.test:P) reaches only that; b (egress=off) has no network', withLog(S, async () => {
        const na = await networkInfo(clientA);
        assert.equal(na.enabled, true);
        assert.deepEqual(na.allow, [`fixture.test:${P}`]);
        const a1 = id(); const a2 = id();
        const ra = await exec(clientA, { language: 'shell',
            code: `curl -sS http://fixture.test:${P}/hi?id=${a1}; echo; curl -sS https://fixture.test:${PS}/hi?id=${a2}; echo rc=$?` });
        assert.equal(ra.isError, false, show(ra));
        assert.match(ra.sc.stdout, /^hello\n/, show(ra));
        assert.match(ra.sc.stdout, /rc=[1-9]/, 'the server\'s other entries are not tenant a\'s');
        assert.deepEqual(ra.sc.network.allow, [`fixture.test:${P}`]);
        assertAllowed(record(ra, 'fixture.test', P), 'tenant a');
        assertRefused(record(ra, 'fixture.test', PS), 'not_allowed', 'tenant a, https');
        assert.equal(hitsFor(a1).length, 1);
        assert.equal(hitsFor(a2).length, 0);
        const wa = await exec(clientA, { language: 'shell', code: 'echo never', network: [`fixture.test:${PS}`] });
        assert.equal(wa.isError, true, 'tenant a cannot widen to the server\'s list');
        assert.match(wa.text, new RegExp(`fixture\\.test:${PS}`));

        const nb = await networkInfo(clientB);
        assert.deepEqual(nb.allow, [], JSON.stringify(nb));
        assert.match(nb.note, /empty|no network/, JSON.stringify(nb));
        const b1 = id();
        const rb = await exec(clientB, { language: 'shell', code: `curl -sS --max-time 5 http://fixture.test:${P}/hi?id=${b1}; echo rc=$?` });
        assert.equal(rb.isError, false, show(rb));
        assert.match(rb.sc.stdout, /rc=[1-9]/, show(rb));
        assert.deepEqual(rb.sc.network.allow, []);
        assert.equal(hitsFor(b1).length, 0);
        const wb = await exec(clientB, { language: 'shell', code: 'echo never', network: [`fixture.test:${P}`] });
        assert.equal(wb.isError, true, show(wb));
        assert.match(wb.text, new RegExp(`fixture\\.test:${P}`), show(wb));
    }));

    // --- bounds ------------------------------------------------------------------------------------------------

    test('500 connections from one run: at most EGRESS_MAX_CONNECTIONS (32) get through, the rest 429; meanwhile another run\'s curl works',
        { timeout: 120_000 }, withLog(S, async (t) => {
            const CAP = 32;
            const floodCode = [
                'import json, selectors, socket, time',
                'socks, errs = [], 0',
                'for i in range(500):',
                '    try:',
                '        s = socket.create_connection(("127.0.0.1", 3128), timeout=10)',
                `        s.sendall(b"CONNECT fixture.test:${PS} HTTP/1.1\\r\\nHost: fixture.test:${PS}\\r\\n\\r\\n")`,
                '        socks.append(s)',
                '    except OSError as e:',
                '        errs += 1',
                'sel = selectors.DefaultSelector()',
                'for s in socks:',
                '    s.setblocking(False)',
                '    sel.register(s, selectors.EVENT_READ)',
                'codes, pending, end = {}, len(socks), time.time() + 30',
                'while pending and time.time() < end:',
                '    for key, _ in sel.select(timeout=1):',
                '        try:',
                '            data = key.fileobj.recv(200)',
                '            code = data.split(b" ")[1].decode() if data else "eof"',
                '        except OSError as e:',
                '            code = type(e).__name__',
                '        codes[code] = codes.get(code, 0) + 1',
                '        sel.unregister(key.fileobj)',
                '        pending -= 1',
                'codes["no answer"] = pending',
                'print(json.dumps({"codes": codes, "errs": errs, "opened": len(socks)}), flush=True)',
                'time.sleep(8)',
                'print("done")',
            ].join('\n');
            assert.ok(await until(() => httpsOpen === 0, 10_000), `no HTTPS fixture connection left from before (${httpsOpen})`);
            let floodDone = false;
            const flood = exec(client, { language: 'python', code: floodCode, timeout_ms: 90_000 })
                .finally(() => { floodDone = true; });
            // The flood holds its tunnels open at the HTTPS fixture: wait for the cap to be reached there.
            assert.ok(await until(() => httpsOpen >= CAP || floodDone, 60_000), `the flood got its tunnels (${httpsOpen} open)`);
            assert.ok(!floodDone, 'the flood still holds its connections');
            await sleep(300);
            assert.ok(httpsOpen <= CAP, `at most ${CAP} upstream connections at once (${httpsOpen})`);
            const b = id();
            const t0 = Date.now();
            const rb = await sh(`curl -sS https://fixture.test:${PS}/hi?id=${b}`);
            const took = Date.now() - t0;
            assert.equal(rb.isError, false, show(rb));
            assert.equal(rb.sc.stdout, 'hello', show(rb));
            assert.ok(took < 20_000, `another run's request is not held up (${took} ms)`);
            assert.ok(!floodDone, 'the second run finished while the flood held its connections');
            const r = await flood;
            assert.equal(r.isError, false, show(r));
            const first = JSON.parse(r.sc.stdout.split('\n')[0]);
            assert.match(r.sc.stdout, /done\n$/, show(r));
            const ok = first.codes['200'] ?? 0; const limited = first.codes['429'] ?? 0;
            assert.equal(first.opened, 500, `all 500 connections were opened: ${JSON.stringify(first)}`);
            assert.ok(ok >= 1 && ok <= CAP, `1..${CAP} tunnels allowed: ${JSON.stringify(first)}`);
            assert.ok(limited >= 1, `connections over the cap get 429: ${JSON.stringify(first)}`);
            const list = conns(r.sc);
            assert.equal(list.length, 100, 'the result lists at most 100 connections');
            assert.equal(list.length + r.sc.network.connectionsLeftOut, 500,
                `every connection is on the record (100 listed + connectionsLeftOut ${r.sc.network.connectionsLeftOut})`);
            const refused = list.filter((c) => c.decision === 'refused');
            assert.ok(refused.length >= 1 && refused.every((c) => c.reason === 'connection_limit'), show(r));
            assert.ok(list.filter((c) => c.decision === 'allowed').length <= CAP);
            // docs/network.md: "A refusal is an HTTP error (403, 429 for the connection cap ...) whose body says what and why".
            await t.test('every connection over the cap gets its 429 answer (none is just closed)', () => {
                    assert.deepEqual({ eof: first.codes.eof ?? 0, 429: limited, 'no answer': first.codes['no answer'] },
                        { eof: 0, 429: 500 - ok, 'no answer': 0 }, JSON.stringify(first));
                });
            assert.ok(await until(() => httpsOpen === 0, 5000), `the flood's tunnels are closed at its end (${httpsOpen} open)`);
        }));

    test('a timeout closes the run\'s open connections at once', withLog(S, async () => {
        const a = id();
        const r = await py([
            'import time, urllib.request',
            `r = urllib.request.urlopen("http://fixture.test:${P}/slow?id=${a}", timeout=30)`,
            'print("got", r.read(1), flush=True)',
            'time.sleep(60)',
        ].join('\n'), { timeout_ms: 3000 });
        const resultAt = Date.now();
        assert.equal(r.isError, false, show(r));
        assert.equal(r.sc.timedOut, true, show(r));
        assert.match(r.sc.stdout, /got b'x'/, show(r));
        const rec = slow.get(a);
        assert.ok(rec, 'the fixture got the /slow request');
        assert.ok(await until(() => rec.closedAt !== null, 5000), 'the fixture saw its connection closed within 5 s of the result');
        assert.ok(rec.closedAt - resultAt < 5000, `closed ${rec.closedAt - resultAt} ms after the result`);
        const c = record(r, 'fixture.test', P);
        assert.equal(c.decision, 'allowed');
        // the sandbox's end closes the relay (the proxy sees the close) or the run's end closes it: either at once
        assert.ok(['closed', 'run_ended'].includes(c.reason), JSON.stringify(c));
    }));

    test('a cancel closes the run\'s open connections at once', withLog(S, async (t) => {
        const a = id();
        const ac = new AbortController();
        t.after(() => ac.abort());
        const call = exec(client, { language: 'python', timeout_ms: 60_000, code: [
            'import time, urllib.request',
            `r = urllib.request.urlopen("http://fixture.test:${P}/slow?id=${a}", timeout=30)`,
            'print("got", r.read(1), flush=True)',
            'time.sleep(60)',
        ].join('\n') }, { signal: ac.signal }).then((r) => ({ result: r }), (e) => ({ error: e }));
        assert.ok(await until(() => slow.has(a), 30_000), 'the fixture got the /slow request');
        await sleep(300);
        assert.equal(slow.get(a).closedAt, null, 'the connection is open while the run runs');
        const cancelAt = Date.now();
        ac.abort('test cancels');
        const settled = await call;
        assert.ok(settled.error, 'the aborted call rejects on the client');
        assert.ok(await until(() => slow.get(a).closedAt !== null, 5000), 'the fixture saw its connection closed within 5 s of the cancel');
        assert.ok(slow.get(a).closedAt - cancelAt < 5000);
        assert.equal(await server.waitIdle(10_000), true);
    }));

    test('EGRESS_MAX_MB=1: a 3 MiB download ends early (byte_limit); a later connection of the run is refused', withLog(S, async () => {
        const a = id(); const b = id();
        const r = await sh([
            `curl -sS -o /work/big 'http://fixture.test:${P}/big?n=${3 << 20}&id=${a}'; echo rc=$?`,
            'wc -c < /work/big',
            `curl -sS -w '\\nHTTP %{http_code}\\n' http://fixture.test:${P}/hi?id=${b}`,
        ].join('\n'));
        assert.equal(r.isError, false, show(r));
        const [rc, size] = r.sc.stdout.split('\n');
        assert.match(rc, /rc=[1-9]/, `curl saw the transfer cut: ${r.sc.stdout}`);
        assert.ok(Number(size) < 3 << 20 && Number(size) <= (1 << 20) + 128 * 1024, `got ${size} bytes`);
        const recs = conns(r.sc);
        const big = recs.find((c) => c.reason === 'byte_limit' && c.decision === 'allowed');
        assert.ok(big, `the download's record says byte_limit: ${show(r)}`);
        assert.match(big.message, /EGRESS_MAX_MB/);
        assert.ok(big.bytesIn >= 1 << 20 && big.bytesIn < 3 << 20, JSON.stringify(big));
        assert.equal(hitsFor(a).length, 1);
        assert.match(r.sc.stdout, /HTTP 403/, show(r));
        assert.match(r.sc.stdout, /refused \(byte_limit\)/, show(r));
        assert.ok(recs.some((c) => c.decision === 'refused' && c.reason === 'byte_limit'), show(r));
        assert.equal(hitsFor(b).length, 0);
    }));

    // --- works alike -------------------------------------------------------------------------------------------

    test('warm pool: a warm python sandbox gets the run\'s policy and reaches fixture.test', withLog(S, async () => {
        assert.ok(await server.waitWarm('python', 1, 60_000), 'a warm python sandbox is ready');
        const served = async () => (await client.callTool({ name: 'runtime_info', arguments: {} })).structuredContent.warmPool.languages.python.served;
        const before = await served();
        const a = id();
        const r = await py(`import urllib.request\nprint(urllib.request.urlopen("https://fixture.test:${PS}/hi?id=${a}", timeout=20).read().decode())`,
            { network: [`fixture.test:${PS}`] });
        assert.equal(await served(), before + 1, 'the call was served warm');
        assert.equal(r.isError, false, show(r));
        assert.equal(r.sc.stdout, 'hello\n', show(r));
        assert.deepEqual(r.sc.network.allow, [`fixture.test:${PS}`]);
        assertAllowed(record(r, 'fixture.test', PS), 'warm');
        assert.equal(hitsFor(a).length, 1);
        // the next warm run without network gets none, although its sandbox carries a channel
        assert.ok(await server.waitWarm('python', 1, 60_000));
        const b = id();
        const before2 = await served();
        const r2 = await py(`import urllib.request\ntry:\n    urllib.request.urlopen("http://fixture.test:${P}/hi?id=${b}", timeout=5); print("REACHED")\nexcept Exception as e:\n    print("no network", type(e).__name__, e)`,
            { network: false });
        assert.equal(await served(), before2 + 1, 'served warm');
        assert.match(r2.sc.stdout, /^no network/, show(r2));
        assert.equal(hitsFor(b).length, 0);
        assert.deepEqual(r2.sc.network.allow, []);
        // A pooled sandbox was started with the proxy's variables and relay: a request of a run without network
        // meets the proxy, which refuses it (egress_off), where a cold run has no proxy at all.
        for (const c of conns(r2.sc)) assertRefused(c, 'egress_off', 'warm run without network');
    }));

    test('sessions: each call has its own network record; another network on a later call is refused', withLog(S, async () => {
        const name = `egress-${id()}`;
        const code = (rid) => `import urllib.request\nurllib.request.urlopen("http://fixture.test:${P}/hi?id=${rid}", timeout=20).read().decode()`;
        const a = id(); const b = id();
        const r1 = await exec(client, { language: 'python', session: name, code: code(a), network: [`fixture.test:${P}`] });
        assert.equal(r1.isError, false, show(r1));
        assert.equal(r1.sc.sessionCreated, true);
        assert.equal(r1.sc.result, "'hello'", show(r1));
        assert.deepEqual(r1.sc.network.allow, [`fixture.test:${P}`]);
        assert.equal(conns(r1.sc).length, 1, show(r1));
        assertAllowed(conns(r1.sc)[0], 'session call 1');
        const r2 = await exec(client, { language: 'python', session: name, code: code(b) });
        assert.equal(r2.isError, false, show(r2));
        assert.equal(r2.sc.sessionCreated, false);
        assert.equal(r2.sc.result, "'hello'", show(r2));
        assert.equal(conns(r2.sc).length, 1, `the second call lists its own connection only: ${show(r2)}`);
        assertAllowed(conns(r2.sc)[0], 'session call 2');
        assert.equal(hitsFor(a).length, 1);
        assert.equal(hitsFor(b).length, 1);
        let r3;
        try {
            r3 = await exec(client, { language: 'python', session: name, code: '1', network: [`fixture.test:${PS}`] });
        } catch (e) {
            r3 = { isError: true, text: e.message };
        }
        assert.equal(r3.isError, true, show(r3));
        assert.match(r3.text, /keeps the network access it was created with/, show(r3));
        await callTool(client, 'session_close', { session: name });
    }));

    test('workspaces: a run with a workspace and network saves the download there', withLog(S, async () => {
        const a = id();
        const r = await py([
            'import urllib.request',
            `data = urllib.request.urlopen("https://fixture.test:${PS}/hi?id=${a}", timeout=20).read()`,
            'open("hi.txt", "wb").write(data)',
            'print(len(data))',
        ].join('\n'), { workspace: 'egress-ws' });
        assert.equal(r.isError, false, show(r));
        assert.equal(r.sc.stdout, '5\n', show(r));
        assert.equal(r.sc.workspace, 'egress-ws');
        assert.deepEqual(r.sc.files.filter((f) => f.path === 'hi.txt').map((f) => [f.size, f.status]), [[5, 'created']], show(r));
        assertAllowed(record(r, 'fixture.test', PS), 'workspace run');
        const again = await sh('cat hi.txt', { workspace: 'egress-ws', network: false });
        assert.equal(again.sc.stdout, 'hello');
    }));
});

// ---------------------------------------------------------------------------------------------------------------
// 2. Egress on without 127.0.0.1 opened: loopback names are refused though listed. npm through the proxy.
// ---------------------------------------------------------------------------------------------------------------

describe('egress on, loopback not opened (no 127.0.0.1 in EGRESS_ALLOW_CIDRS); npm', () => {
    let server; let client;
    const S = () => server;
    const registry = npmRegistry();
    const sh = (code, extra = {}) => exec(client, { language: 'shell', code, ...extra });
    before(async () => {
        // Where this machine's resolver sends npm: a mirror may sit on a reserved or private address (here
        // registry.npmjs.org may resolve to 203.0.113.80), which the proxy refuses unless EGRESS_ALLOW_CIDRS opens
        // it (docs/network.md: on-prem mirrors). So the registry's own addresses are opened, loopback never: this server
        // shows loopback refused.
        const registryCidrs = (await lookup(registry.hostname, { all: true }).catch(() => []))
            .filter((a) => !/^127\./.test(a.address) && a.address !== '::1' && !a.address.startsWith('::ffff:127.'))
            .map((a) => `${a.address}/${a.family === 4 ? 32 : 128}`);
        server = await startServer({
            DATA_DIR: base.dataDir, WARM_POOL: 'off', EGRESS: 'on',
            EGRESS_ALLOW: [`localhost:${P}`, `fixture.test:${P}`, registry.port ? `${registry.hostname}:${registry.port}` : registry.hostname].join(','),
            EGRESS_RESOLVE: 'fixture.test=127.0.0.1',
            EGRESS_ALLOW_CIDRS: registryCidrs.join(','),
            EGRESS_CA_FILE: CA_FILE,
        });
        ({ client } = await server.connect());
    });
    after(async () => {
        await client?.close().catch(() => {});
        await server?.stop();
    });

    test('localhost and fixture.test (127.0.0.1) are listed but refused as loopback', withLog(S, async () => {
        const a = id(); const b = id();
        const r = await sh([
            `curl -sS --noproxy '' -x http://127.0.0.1:3128 -w '\\nHTTP %{http_code}\\n' http://localhost:${P}/hi?id=${a}`,
            `curl -sS -w '\\nHTTP %{http_code}\\n' http://fixture.test:${P}/hi?id=${b}`,
        ].join('\n'));
        assert.equal(r.isError, false, show(r));
        assert.equal(r.sc.stdout.match(/HTTP 403/g)?.length, 2, show(r));
        assert.equal(r.sc.stdout.match(/refused \(loopback\)/g)?.length, 2, show(r));
        assertRefused(record(r, 'localhost', P), 'loopback', 'localhost');
        assertRefused(record(r, 'fixture.test', P), 'loopback', 'fixture.test');
        assert.equal(hitsFor(a).length + hitsFor(b).length, 0, 'the fixture got nothing');
    }));

    // --- npm ---------------------------------------------------------------------------------------------------

    test('npm install through the proxy (the registry on the list)', { timeout: 150_000 }, withLog(S, async (t) => {
        try {
            execFileSync('npm', ['view', 'left-pad', 'version', `--registry=${registry.href}`],
                { encoding: 'utf8', timeout: 30_000, stdio: ['ignore', 'pipe', 'pipe'] });
        } catch (e) {
            t.skip(`the npm registry ${registry.href} is not reachable from this machine (npm view left-pad failed): ${String(e.stderr || e.message).split('\n')[0]}`);
            return;
        }
        const r = await sh([
            'cd /work',
            'npm install --no-audit --no-fund --loglevel=error left-pad@1.3.0 >/work/npm.log 2>&1 || { cat /work/npm.log; exit 1; }',
            'node -e "console.log(require(\'left-pad\')(\'x\', 3))"',
        ].join('\n'), { timeout_ms: 100_000, env: { HOME: '/work', npm_config_cache: '/work/.npm', npm_config_registry: registry.href } });
        assert.equal(r.isError, false, show(r));
        assert.equal(r.sc.exitCode, 0, show(r));
        assert.equal(r.sc.stdout, '  x\n', show(r));
        const list = conns(r.sc).filter((c) => c.host === registry.hostname);
        assert.ok(list.length >= 1 && list.every((c) => c.decision === 'allowed'), show(r));
    }));
});

// ---------------------------------------------------------------------------------------------------------------
// 3. EGRESS unset: off by default.
// ---------------------------------------------------------------------------------------------------------------

describe('egress off by default (EGRESS unset)', () => {
    let server; let client;
    const S = () => server;
    before(async () => {
        server = await startServer({ DATA_DIR: base.dataDir, WARM_POOL: 'off' });
        ({ client } = await server.connect());
    });
    after(async () => {
        await client?.close().catch(() => {});
        await server?.stop();
    });

    test('runtime_info says off; a call asking for network is a tool error; a plain run reaches nothing', withLog(S, async () => {
        const n = await networkInfo(client);
        assert.equal(n.enabled, false, JSON.stringify(n));
        assert.deepEqual(n.allow, []);
        assert.match(n.note, /off/);
        const w = await exec(client, { language: 'shell', code: 'echo never', network: ['fixture.test'] });
        assert.equal(w.isError, true, show(w));
        assert.match(w.text, /egress is off/, show(w));
        assert.match(w.text, /fixture\.test/, show(w));
        const a = id();
        const r = await exec(client, { language: 'shell',
            code: `env | grep -ci _proxy; curl -sS --max-time 5 http://fixture.test:${P}/hi?id=${a}; echo rc=$?; curl -sS --max-time 5 http://127.0.0.1:3128/; echo rc=$?` });
        assert.equal(r.isError, false, show(r));
        assert.match(r.sc.stdout, /^0\nrc=[1-9]\nrc=[1-9]\n$/, show(r));
        assert.deepEqual(r.sc.network.allow, []);
        assert.match(r.sc.network.note, /no network/);
        assert.equal(hitsFor(a).length, 0);
    }));
});
