// Secrets the sandbox never holds (issue 40) end to end: the real jar, the official TypeScript MCP SDK client, real
// programs (curl, Python requests, Node fetch) in bubblewrap sandboxes. The hosts the runs reach are fixtures in
// this test process on 127.0.0.1: a plain HTTP server that records every request's header fields, and an HTTPS
// server whose certificate comes from a throwaway CA made here with openssl (for api.e2e.test and other.e2e.test),
// echoing the Authorization it received. Traffic rule: nothing here connects anywhere but this machine's loopback.
//
// Two servers, one after the other, on one DATA_DIR (the second reuses the first's warmed Go cache):
//  1. credentialed API routes (docs/code-mode.md#credentialed-http-apis): UPSTREAM_MCP_FILE with only `httpApis`:
//     `fixture` (the HTTP fixture under /v1, `Authorization: Bearer ${E2E_API_TOKEN}` with the variable in the
//     server's environment only, tenant alice, GET/POST, /items/** and /echo); tenants alice and bob; EGRESS unset
//     (off: the server makes the call, the sandbox has no network).
//  2. placeholder secrets (docs/network.md#placeholder-secrets): EGRESS=on, the fixture names pinned to 127.0.0.1
//     (EGRESS_RESOLVE, EGRESS_ALLOW_CIDRS=127.0.0.1/32), EGRESS_SECRETS_FILE with E2E_SECRET (api.e2e.test, alice
//     only) and E2E_OTHER (other.e2e.test, every tenant), the throwaway CA as EGRESS_UPSTREAM_CA_FILE.
// The real values are random per test run and never printed: failure messages mask them.
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync, readFileSync } from 'node:fs';
import { createServer as createHttpServer } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startServer, exec, randomSecret, withLog } from '../lib/server.js';
import { makeBase, keysAppend, callTool } from '../lib/server3.js';

const API_TOKEN = randomSecret('e2e-api-token-'); // the route's credential: the first server's environment only
const SECRET_VALUE = randomSecret('e2e-secret-value-'); // E2E_SECRET's real value: the second server's environment only
const OTHER_VALUE = randomSecret('e2e-other-value-'); // E2E_OTHER's real value
const PLACEHOLDER = /^cxs_[0-9a-f]{40}$/;

let base;
let certDir;
let httpFixture; let httpsFixture;
let HP; // the plain HTTP fixture's port (the route's upstream; plain.e2e.test in part 2)
let SP; // the HTTPS fixture's port (api.e2e.test and other.e2e.test in part 2)
const httpHits = []; // every request the HTTP fixture got: { id, method, path, authorization, cookie, xCaller, bodyBytes, sentBytes }
const httpsHits = []; // every request the HTTPS fixture got: { id, host, path, authorization }

const httpFor = (id) => httpHits.filter((h) => h.id === id);
const httpsFor = (id) => httpsHits.filter((h) => h.id === id);
const id = () => randomSecret('r');
const conns = (r) => r.sc?.network?.connections ?? [];

/** Text for a failure message with every real value masked. */
function mask(s) {
    return String(s).replaceAll(API_TOKEN, '[API_TOKEN]').replaceAll(SECRET_VALUE, '[SECRET_VALUE]')
        .replaceAll(OTHER_VALUE, '[OTHER_VALUE]');
}

const show = (r) => mask(JSON.stringify({
    isError: r.isError, stdout: r.sc?.stdout?.slice(0, 3000), stderr: r.sc?.stderr?.slice(0, 1500), text: r.text?.slice(0, 1500),
    apiCalls: r.sc?.apiCalls, network: r.sc?.network,
}, null, 1));

/** Asserts that none of the real values is anywhere in `what` (the text names where, never the value). */
function assertNoValue(what, where) {
    const s = typeof what === 'string' ? what : JSON.stringify(what);
    for (const [name, v] of [['the API token', API_TOKEN], ['E2E_SECRET\'s value', SECRET_VALUE], ['E2E_OTHER\'s value', OTHER_VALUE]]) {
        assert.ok(!s.includes(v), `${name} is in ${where}: ${mask(s).slice(0, 3000)}`);
    }
}

/** A run that exited 0, with nothing of a real value in its result. */
async function run(client, args) {
    const r = await exec(client, args);
    assert.equal(r.isError, false, show(r));
    assert.equal(r.sc.exitCode, 0, show(r));
    assertNoValue(r.raw, 'the tool result');
    return r;
}

function makeCerts(dir) {
    const o = (...args) => execFileSync('openssl', args, { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] });
    writeFileSync(join(dir, 'ca.cnf'), 'basicConstraints=critical,CA:TRUE\nkeyUsage=critical,keyCertSign,cRLSign\nsubjectKeyIdentifier=hash\n');
    writeFileSync(join(dir, 'srv.cnf'), [
        'subjectAltName=DNS:api.e2e.test,DNS:other.e2e.test', 'basicConstraints=critical,CA:FALSE',
        'keyUsage=critical,digitalSignature,keyEncipherment', 'extendedKeyUsage=serverAuth',
        'subjectKeyIdentifier=hash', 'authorityKeyIdentifier=keyid,issuer', '',
    ].join('\n'));
    o('req', '-new', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'ca.key', '-out', 'ca.csr', '-subj', '/CN=code-exec-mcp e2e secrets test CA');
    o('x509', '-req', '-in', 'ca.csr', '-signkey', 'ca.key', '-out', 'ca.pem', '-days', '2', '-extfile', 'ca.cnf');
    o('req', '-new', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'srv.key', '-out', 'srv.csr', '-subj', '/CN=api.e2e.test');
    o('x509', '-req', '-in', 'srv.csr', '-CA', 'ca.pem', '-CAkey', 'ca.key', '-CAcreateserial', '-out', 'srv.pem',
        '-days', '2', '-extfile', 'srv.cnf');
}

/** The HTTP fixture: records the request, answers JSON; /v1/echo answers with the Authorization it received. */
function httpHandler(req, res) {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
        const u = new URL(req.url, 'http://fixture');
        const hit = {
            id: u.searchParams.get('id'), method: req.method, path: u.pathname, authorization: req.headers.authorization,
            cookie: req.headers.cookie, xCaller: req.headers['x-caller'], bodyBytes: Buffer.concat(chunks).length,
        };
        const answer = u.pathname === '/v1/echo'
            ? { authorization: req.headers.authorization ?? null }
            : { method: req.method, path: u.pathname, id: hit.id, bodyBytes: hit.bodyBytes };
        const body = Buffer.from(JSON.stringify(answer));
        hit.sentBytes = body.length;
        httpHits.push(hit);
        res.writeHead(200, { 'Content-Type': 'application/json', 'Content-Length': String(body.length) });
        res.end(body);
    });
}

/** The HTTPS fixture: records the request, echoes the Authorization it got in a header and in the body. */
function httpsHandler(req, res) {
    const u = new URL(req.url, 'https://fixture');
    const auth = req.headers.authorization ?? '';
    httpsHits.push({ id: u.searchParams.get('id'), host: req.headers.host, path: u.pathname, authorization: auth });
    req.resume();
    res.writeHead(200, { 'Content-Type': 'text/plain', 'X-Echo': auth });
    res.end(`you sent ${auth}\n`);
}

const listen = (srv) => new Promise((res, rej) => {
    srv.once('error', rej);
    srv.listen(0, '127.0.0.1', () => res(srv.address().port));
});

before(async () => {
    base = makeBase();
    certDir = mkdtempSync(join(tmpdir(), 'code-exec-secrets-certs-'));
    makeCerts(certDir);
    httpFixture = createHttpServer(httpHandler);
    httpsFixture = createHttpsServer({ key: readFileSync(join(certDir, 'srv.key')), cert: readFileSync(join(certDir, 'srv.pem')) },
        httpsHandler);
    HP = await listen(httpFixture);
    SP = await listen(httpsFixture);
});

after(async () => {
    for (const s of [httpFixture, httpsFixture]) {
        s?.closeAllConnections?.();
        await new Promise((res) => (s ? s.close(() => res()) : res()));
    }
    if (certDir) rmSync(certDir, { recursive: true, force: true });
    base?.remove();
});

// ---------------------------------------------------------------------------------------------------------------
// 1. Credentialed API routes, EGRESS off
// ---------------------------------------------------------------------------------------------------------------

describe('credentialed API routes: httpApis "fixture" for alice (GET/POST, /items/** and /echo), EGRESS off', () => {
    let server; let alice; let bob;
    const S = () => server;
    const FIXTURE_API = () => ({
        name: 'fixture', description: 'The test\'s recording fixture', url: `http://127.0.0.1:${HP}/v1`,
        route: 'http://127.0.0.1:3128/apis/fixture', methods: ['GET', 'POST'], paths: ['/items/**', '/echo'],
    });

    before(async () => {
        const keys = join(base.dir, 'keys-routes');
        const aliceKey = keysAppend(keys, 'alice');
        const bobKey = keysAppend(keys, 'bob');
        const file = join(base.dir, 'upstream-routes.json');
        writeFileSync(file, JSON.stringify({
            httpApis: {
                fixture: {
                    url: `http://127.0.0.1:${HP}/v1`, headers: { Authorization: 'Bearer ${E2E_API_TOKEN}' }, tenants: ['alice'],
                    methods: ['GET', 'POST'], paths: ['/items/**', '/echo'], description: 'The test\'s recording fixture',
                },
            },
        }, null, 2), { mode: 0o600 });
        server = await startServer({
            API_KEY: '', API_KEYS_FILE: keys, DATA_DIR: base.dataDir, WARM_POOL: 'off', UPSTREAM_MCP_FILE: file,
            E2E_API_TOKEN: API_TOKEN,
        });
        alice = (await server.connect({ apiKey: aliceKey })).client;
        bob = (await server.connect({ apiKey: bobKey })).client;
    });
    after(async () => {
        await alice?.close().catch(() => {});
        await bob?.close().catch(() => {});
        await server?.stop();
    });

    /** The run's apiCalls without `ms` (asserted to be a number), in order. */
    function apiCalls(r) {
        assert.ok(Array.isArray(r.sc?.apiCalls), `the result has apiCalls: ${show(r)}`);
        assert.equal(r.sc.apiCallsLeftOut, 0, show(r));
        return r.sc.apiCalls.map(({ ms, ...rest }) => {
            assert.equal(typeof ms, 'number', show(r));
            assert.ok(ms >= 0, show(r));
            return rest;
        });
    }

    /** The one request the fixture got for `rid`, which carried the configured header and not the caller's own. */
    function hitWithToken(rid, what) {
        const hits = httpFor(rid);
        assert.equal(hits.length, 1, `${what}: the fixture got one request: ${mask(JSON.stringify(httpHits.slice(-5)))}`);
        const h = hits[0];
        assert.ok(h.authorization === `Bearer ${API_TOKEN}`,
            `${what}: the fixture got the configured Authorization, not ${mask(h.authorization)}`);
        assert.equal(h.cookie, undefined, `${what}: the caller's Cookie is dropped`);
        return h;
    }

    test('bash: curl "$CODE_APIS_URL/fixture/items/42" reaches the fixture with the configured Authorization (the caller\'s own and its Cookie dropped); apiCalls records it', withLog(S, async () => {
        const rid = id();
        const r = await run(alice, { language: 'bash', code: [
            'echo "url=$CODE_APIS_URL"',
            `curl -sS -H "Authorization: Bearer callers-own" -H "Cookie: session=callers-cookie" -H "X-Caller: kept" "$CODE_APIS_URL/fixture/items/42?id=${rid}"; echo`,
        ].join('\n') });
        const [urlLine, body] = r.sc.stdout.trim().split('\n');
        assert.equal(urlLine, 'url=http://127.0.0.1:3128/apis', show(r));
        assert.deepEqual(JSON.parse(body), { method: 'GET', path: '/v1/items/42', id: rid, bodyBytes: 0 }, show(r));
        const h = hitWithToken(rid, 'curl');
        assert.equal(h.xCaller, 'kept', 'the caller\'s other fields go on');
        assert.deepEqual(apiCalls(r), [{ api: 'fixture', method: 'GET', path: '/items/42', status: 200, bytesIn: h.sentBytes, bytesOut: 0 }], show(r));
    }));

    test('python: requests.get and requests.post through CODE_APIS_URL reach the fixture with the configured Authorization; apiCalls counts the bytes', withLog(S, async () => {
        const a = id(); const b = id();
        const r = await run(alice, { language: 'python', code: `
import json, os, requests
base = os.environ["CODE_APIS_URL"] + "/fixture"
g = requests.get(base + "/items/7", params={"id": "${a}"}, headers={"Authorization": "Bearer callers-own"}, timeout=30)
p = requests.post(base + "/items/new?id=${b}", json={"name": "widget", "tags": ["a", "b"]}, cookies={"s": "callers-cookie"}, timeout=30)
print(json.dumps({"get": [g.status_code, g.json()], "post": [p.status_code, p.json()], "sent": len(p.request.body)}))
` });
        const out = JSON.parse(r.sc.stdout.trim().split('\n').at(-1));
        assert.deepEqual(out.get, [200, { method: 'GET', path: '/v1/items/7', id: a, bodyBytes: 0 }], show(r));
        assert.deepEqual(out.post, [200, { method: 'POST', path: '/v1/items/new', id: b, bodyBytes: out.sent }], show(r));
        const hg = hitWithToken(a, 'requests.get');
        const hp = hitWithToken(b, 'requests.post');
        assert.deepEqual(apiCalls(r), [
            { api: 'fixture', method: 'GET', path: '/items/7', status: 200, bytesIn: hg.sentBytes, bytesOut: 0 },
            { api: 'fixture', method: 'POST', path: '/items/new', status: 200, bytesIn: hp.sentBytes, bytesOut: out.sent },
        ], show(r));
    }));

    test('node: fetch through CODE_APIS_URL (GET and POST) reaches the fixture with the configured Authorization; apiCalls records both', withLog(S, async () => {
        const a = id(); const b = id();
        const r = await run(alice, { language: 'nodejs', code: `
(async () => {
  const base = process.env.CODE_APIS_URL + "/fixture";
  const g = await fetch(base + "/items/9?id=${a}", { headers: { Authorization: "Bearer callers-own" } });
  const body = JSON.stringify({ n: 1 });
  const p = await fetch(base + "/items?id=${b}", { method: "POST", body, headers: { "Content-Type": "application/json" } });
  console.log(JSON.stringify({ get: [g.status, await g.json()], post: [p.status, await p.json()], sent: body.length }));
})().catch((e) => { console.error("FETCH FAILED", e, e.cause); process.exit(1); });
` });
        const out = JSON.parse(r.sc.stdout.trim().split('\n').at(-1));
        assert.deepEqual(out.get, [200, { method: 'GET', path: '/v1/items/9', id: a, bodyBytes: 0 }], show(r));
        assert.deepEqual(out.post, [200, { method: 'POST', path: '/v1/items', id: b, bodyBytes: out.sent }], show(r));
        const hg = hitWithToken(a, 'fetch GET');
        const hp = hitWithToken(b, 'fetch POST');
        assert.deepEqual(apiCalls(r), [
            { api: 'fixture', method: 'GET', path: '/items/9', status: 200, bytesIn: hg.sentBytes, bytesOut: 0 },
            { api: 'fixture', method: 'POST', path: '/items', status: 200, bytesIn: hp.sentBytes, bytesOut: out.sent },
        ], show(r));
    }));

    test('the token is in neither env, /proc/self/environ nor the output: an API that echoes it shows [redacted]; EGRESS is off (the run reaches no host)', withLog(S, async () => {
        const rid = id(); const direct = id(); const proxied = id();
        const r = await run(alice, { language: 'bash', code: [
            // cat's own environ (a redirect would open the shell's, which reads as empty once tr is exec'd)
            'env', 'echo ---', 'cat /proc/self/environ | tr "\\0" "\\n"', 'echo ---',
            `curl -sS "$CODE_APIS_URL/fixture/echo?id=${rid}"; echo`, 'echo ---',
            // egress is off: the fixture's own address is not reachable from the sandbox, and the run's proxy (the
            // channel the routes travel) refuses every host
            `curl -sS --max-time 10 "http://127.0.0.1:${HP}/v1/items/1?id=${direct}" >/dev/null 2>&1; echo "direct rc=$?"`,
            `curl -sS --max-time 10 -w '\\nHTTP %{http_code}\\n' "http://api.e2e.test:${HP}/v1/items/1?id=${proxied}"`,
        ].join('\n') });
        const [env, environ, echo, egress] = r.sc.stdout.split('---\n');
        assertNoValue(r.sc.stdout, 'the program\'s output');
        for (const [what, text] of [['env', env], ['/proc/self/environ', environ]]) {
            const names = text.split('\n').filter(Boolean).map((l) => l.split('=')[0]);
            assert.ok(names.includes('CODE_APIS_URL'), `${what} has CODE_APIS_URL: ${names} ${show(r)}`);
            assert.ok(!names.includes('E2E_API_TOKEN'), `${what} has no E2E_API_TOKEN: ${names}`);
        }
        hitWithToken(rid, 'echo');
        assert.deepEqual(JSON.parse(echo.trim()), { authorization: '[redacted]' }, show(r));
        assert.match(egress, /^direct rc=[1-9]\d*$/m, show(r));
        assert.match(egress, /^HTTP 403$/m, show(r));
        assert.equal(httpFor(direct).length + httpFor(proxied).length, 0, 'the fixture got nothing but the route\'s call');
        assert.deepEqual(r.sc.network.allow, [], show(r));
        assert.deepEqual(conns(r).map((c) => [c.host, c.decision, c.reason]), [['api.e2e.test', 'refused', 'egress_off']], show(r));
        const info = await alice.callTool({ name: 'runtime_info', arguments: {} });
        assert.equal(info.structuredContent.network.enabled, false, JSON.stringify(info.structuredContent.network));
    }));

    test('list_code_tools and code-exec://info list the API for alice and not for bob; bob\'s call is refused 403 not_allowed and reaches nothing', withLog(S, async () => {
        const la = await callTool(alice, 'list_code_tools', {});
        assert.equal(la.isError, false, la.text);
        assert.deepEqual(la.sc.apis, [FIXTURE_API()], JSON.stringify(la.sc));
        assert.deepEqual(la.sc.servers, [], JSON.stringify(la.sc));
        const lb = await callTool(bob, 'list_code_tools', {});
        assert.equal(lb.isError, false, lb.text);
        assert.deepEqual(lb.sc.apis, [], JSON.stringify(lb.sc));
        const info = async (client) => JSON.parse((await client.readResource({ uri: 'code-exec://info' })).contents[0].text);
        const ia = await info(alice);
        const ib = await info(bob);
        assert.deepEqual(ia.apis, [FIXTURE_API()], JSON.stringify(ia.apis));
        assert.deepEqual(ib.apis, [], JSON.stringify(ib.apis));
        assertNoValue([la.raw, lb.raw, ia, ib], 'the listings');

        const rid = id();
        const r = await run(bob, { language: 'bash', code: `curl -sS -w '\\nHTTP %{http_code}\\n' "$CODE_APIS_URL/fixture/items/1?id=${rid}"` });
        const [body, status] = r.sc.stdout.trim().split('\n');
        assert.equal(status, 'HTTP 403', show(r));
        assert.deepEqual(JSON.parse(body), { error: 'no API \'fixture\' for this caller (it may call none)', reason: 'not_allowed' }, show(r));
        assert.equal(httpFor(rid).length, 0, 'the fixture got nothing from bob');
        assert.deepEqual(r.sc.apiCalls.map((c) => [c.api, c.method, c.path, c.status, c.bytesIn]), [['fixture', 'GET', '/items/1', 403, 0]], show(r));
    }));

    test('a method or a path off the allow-lists is refused 403 not_allowed naming the lists, a ".." segment 400 bad_request; nothing reaches the fixture', withLog(S, async () => {
        const a = id(); const b = id(); const c = id();
        const curl = (args) => `curl -sS --path-as-is -w '\\nHTTP %{http_code}\\n' ${args}; echo`;
        const r = await run(alice, { language: 'bash', code: [
            curl(`-X DELETE "$CODE_APIS_URL/fixture/items/1?id=${a}"`),
            curl(`"$CODE_APIS_URL/fixture/admin?id=${b}"`),
            curl(`"$CODE_APIS_URL/fixture/items/../admin?id=${c}"`),
        ].join('\n') });
        const answers = r.sc.stdout.trim().split('\n').filter(Boolean);
        assert.equal(answers.length, 6, show(r));
        const got = [0, 2, 4].map((i) => [answers[i + 1], JSON.parse(answers[i])]);
        assert.deepEqual(got[0], ['HTTP 403', { error: 'DELETE is not allowed on API fixture (allowed: GET, POST)', reason: 'not_allowed' }], show(r));
        assert.deepEqual(got[1], ['HTTP 403', { error: 'the path /admin is not allowed on API fixture (allowed: /items/**, /echo)', reason: 'not_allowed' }], show(r));
        assert.equal(got[2][0], 'HTTP 400', show(r));
        assert.equal(got[2][1].reason, 'bad_request', show(r));
        assert.match(got[2][1].error, /'\.\.' segment/, show(r));
        assert.equal(httpFor(a).length + httpFor(b).length + httpFor(c).length, 0, 'the fixture got nothing');
        assert.deepEqual(r.sc.apiCalls.map((x) => [x.method, x.status, x.bytesIn]), [['DELETE', 403, 0], ['GET', 403, 0], ['GET', 400, 0]], show(r));
    }));
});

// ---------------------------------------------------------------------------------------------------------------
// 2. Placeholder secrets, EGRESS on
// ---------------------------------------------------------------------------------------------------------------

describe('placeholder secrets: E2E_SECRET for api.e2e.test (alice), E2E_OTHER for other.e2e.test (everyone), EGRESS on', () => {
    let server; let alice; let bob;
    const S = () => server;
    const ALLOW = () => [`api.e2e.test:${SP}`, `other.e2e.test:${SP}`, `plain.e2e.test:${HP}`];
    const placeholders = []; // every E2E_SECRET placeholder a run printed

    before(async () => {
        const keys = join(base.dir, 'keys-secrets');
        const aliceKey = keysAppend(keys, 'alice');
        const bobKey = keysAppend(keys, 'bob');
        const secrets = join(base.dir, 'secrets.json');
        writeFileSync(secrets, JSON.stringify({
            E2E_SECRET: { value: '${E2E_SECRET}', hosts: [`api.e2e.test:${SP}`], tenants: ['alice'], description: 'the test API' },
            E2E_OTHER: { value: '${E2E_OTHER}', hosts: [`other.e2e.test:${SP}`] },
        }, null, 2), { mode: 0o600 });
        server = await startServer({
            API_KEY: '', API_KEYS_FILE: keys, DATA_DIR: base.dataDir, WARM_POOL: 'off',
            EGRESS: 'on', EGRESS_ALLOW: ALLOW().join(','), EGRESS_ALLOW_CIDRS: '127.0.0.1/32',
            EGRESS_RESOLVE: 'api.e2e.test=127.0.0.1,other.e2e.test=127.0.0.1,plain.e2e.test=127.0.0.1',
            EGRESS_SECRETS_FILE: secrets, EGRESS_UPSTREAM_CA_FILE: join(certDir, 'ca.pem'),
            E2E_SECRET: SECRET_VALUE, E2E_OTHER: OTHER_VALUE,
        });
        alice = (await server.connect({ apiKey: aliceKey })).client;
        bob = (await server.connect({ apiKey: bobKey })).client;
    });
    after(async () => {
        await alice?.close().catch(() => {});
        await bob?.close().catch(() => {});
        await server?.stop();
    });

    /** The one HTTPS request the fixture got for `rid`, which carried `expected` (compared without printing it). */
    function httpsHit(rid, expected, what) {
        const hits = httpsFor(rid);
        assert.equal(hits.length, 1, `${what}: the fixture got one request: ${mask(JSON.stringify(httpsHits.slice(-5)))}`);
        assert.ok(hits[0].authorization === expected, `${what}: the fixture got the real value, not ${mask(hits[0].authorization)}`);
        return hits[0];
    }

    /** The placeholder a run printed as `token=...`. */
    function printedToken(r) {
        const line = r.sc.stdout.split('\n').find((l) => l.startsWith('token='));
        assert.ok(line, show(r));
        const token = line.slice('token='.length);
        assert.match(token, PLACEHOLDER, show(r));
        placeholders.push(token);
        return token;
    }

    test('curl with "Bearer $E2E_SECRET" (network: [api.e2e.test]) reaches the fixture with the real value, reads back only the cxs_ placeholder; the record names the secret', withLog(S, async () => {
        const rid = id();
        const r = await run(alice, { language: 'bash', network: [`api.e2e.test:${SP}`], code: [
            'echo "token=$E2E_SECRET"',
            'echo "other=${E2E_OTHER-unset}"',
            `curl -sS -D - -H "Authorization: Bearer $E2E_SECRET" "https://api.e2e.test:${SP}/hello?id=${rid}"`,
        ].join('\n') });
        const token = printedToken(r);
        assert.match(r.sc.stdout, /^other=unset$/m, `a run whose list does not reach other.e2e.test gets no E2E_OTHER: ${show(r)}`);
        httpsHit(rid, `Bearer ${SECRET_VALUE}`, 'curl');
        assert.ok(r.sc.stdout.includes(`you sent Bearer ${token}\n`), `the echoed body holds the placeholder: ${show(r)}`);
        assert.ok(r.sc.stdout.toLowerCase().includes(`x-echo: bearer ${token}`), `the echoed header holds the placeholder: ${show(r)}`);
        const recs = conns(r).filter((c) => c.host === 'api.e2e.test' && c.port === SP);
        assert.equal(recs.length, 1, show(r));
        assert.equal(recs[0].decision, 'allowed', show(r));
        assert.deepEqual(recs[0].secrets, ['E2E_SECRET'], show(r));
        assert.deepEqual(r.sc.network.allow, [`api.e2e.test:${SP}`], show(r));
    }));

    test('python requests (one kept-alive session) reads the placeholder from os.environ; each request reaches the fixture with the value; a new placeholder per run', withLog(S, async () => {
        const a = id(); const b = id();
        const r = await run(alice, { language: 'python', code: `
import os, requests
print("token=" + os.environ["E2E_SECRET"])
s = requests.Session()
for rid in ("${a}", "${b}"):
    res = s.get("https://api.e2e.test:${SP}/py?id=" + rid, headers={"Authorization": "token " + os.environ["E2E_SECRET"]}, timeout=30)
    print(res.status_code, res.headers["X-Echo"], res.text.strip())
` });
        const token = printedToken(r);
        for (const rid of [a, b]) httpsHit(rid, `token ${SECRET_VALUE}`, 'requests');
        const lines = r.sc.stdout.trim().split('\n').slice(1);
        assert.deepEqual(lines, [`200 token ${token} you sent token ${token}`, `200 token ${token} you sent token ${token}`], show(r));
        assert.equal(new Set(placeholders).size, placeholders.length, `each run has its own placeholder: ${placeholders}`);
        const recs = conns(r).filter((c) => c.host === 'api.e2e.test');
        assert.ok(recs.length >= 1 && recs.every((c) => c.decision === 'allowed' && c.secrets?.[0] === 'E2E_SECRET'), show(r));
    }));

    test('the placeholder sent to another allowed host is refused 403 naming the secret, never its value: another secret\'s host over https, a plain http:// host', withLog(S, async () => {
        const a = id(); const b = id(); const okOther = id(); const okPlain = id();
        const curl = (args) => `curl -sS -w '\\nHTTP %{http_code}\\n' ${args}`;
        const r = await run(alice, { language: 'bash', code: [
            curl(`-H "Authorization: Bearer $E2E_SECRET" "https://other.e2e.test:${SP}/x?id=${a}"`),
            curl(`-H "Authorization: Bearer $E2E_SECRET" "http://plain.e2e.test:${HP}/x?id=${b}"`),
            // the controls: both hosts are allowed, other.e2e.test with its own secret
            curl(`-H "Authorization: Bearer $E2E_OTHER" "https://other.e2e.test:${SP}/x?id=${okOther}"`),
            curl(`"http://plain.e2e.test:${HP}/x?id=${okPlain}"`),
        ].join('\n') });
        const statuses = r.sc.stdout.match(/^HTTP \d+$/gm);
        assert.deepEqual(statuses, ['HTTP 403', 'HTTP 403', 'HTTP 200', 'HTTP 200'], show(r));
        const refusals = r.sc.stdout.split(/^HTTP \d+$/m).slice(0, 2);
        assert.match(refusals[0], /secret_not_allowed/, show(r));
        assert.match(refusals[0], new RegExp(`the placeholder of E2E_SECRET may only be sent to api\\.e2e\\.test:${SP}, not to other\\.e2e\\.test`), show(r));
        assert.match(refusals[1], /secret_not_allowed/, show(r));
        assert.match(refusals[1], new RegExp(`the placeholder of E2E_SECRET may only be sent to api\\.e2e\\.test:${SP} over https, not in a plain http:// request`), show(r));
        assert.equal(httpsFor(a).length, 0, 'other.e2e.test got nothing with E2E_SECRET\'s placeholder');
        assert.equal(httpFor(b).length, 0, 'plain.e2e.test got nothing with E2E_SECRET\'s placeholder');
        httpsHit(okOther, `Bearer ${OTHER_VALUE}`, 'E2E_OTHER on its own host');
        assert.equal(httpFor(okPlain).length, 1, 'plain.e2e.test is reachable without a placeholder');
        const refused = conns(r).filter((c) => c.reason === 'secret_not_allowed');
        assert.deepEqual(refused.map((c) => [c.host, c.port, c.decision]).sort(),
            [['other.e2e.test', SP, 'refused'], ['plain.e2e.test', HP, 'refused']], show(r));
        for (const c of refused) assert.match(c.message, /E2E_SECRET/, show(r));
        const other = conns(r).filter((c) => c.host === 'other.e2e.test' && c.decision === 'allowed');
        assert.deepEqual(other.map((c) => c.secrets), [['E2E_OTHER']], show(r));
    }));

    test('a tenant the secret is not for gets no variable (bob: E2E_OTHER only); a run whose list reaches neither host gets neither', withLog(S, async () => {
        const names = (r) => r.sc.stdout.split('\n').filter(Boolean).map((l) => l.split('=')[0]);
        const rb = await run(bob, { language: 'bash', code: 'env' });
        assert.ok(!names(rb).includes('E2E_SECRET'), `bob gets no E2E_SECRET: ${names(rb)}`);
        assert.ok(names(rb).includes('E2E_OTHER'), `bob gets E2E_OTHER (a secret for every tenant): ${names(rb)}`);
        assert.match(rb.sc.stdout, /^E2E_OTHER=cxs_[0-9a-f]{40}$/m, show(rb));
        assert.deepEqual(rb.sc.network.allow, ALLOW(), show(rb));
        const ra = await run(alice, { language: 'bash', network: [`plain.e2e.test:${HP}`], code: 'env' });
        assert.ok(!names(ra).includes('E2E_SECRET') && !names(ra).includes('E2E_OTHER'),
            `alice with a list reaching neither host gets no placeholder: ${names(ra)}`);
        assert.ok(names(ra).includes('HTTPS_PROXY'), `the run has egress: ${names(ra)}`);
    }));

    test('runtime_info and code-exec://info list the secrets each tenant\'s runs get (name, description, hosts), never a value', withLog(S, async () => {
        const listed = async (client) => {
            const ri = await callTool(client, 'runtime_info', {});
            assert.equal(ri.isError, false, ri.text);
            const info = JSON.parse((await client.readResource({ uri: 'code-exec://info' })).contents[0].text);
            assert.deepEqual(info.network.secrets, ri.sc.network.secrets, 'the resource and the tool list the same');
            for (const text of [ri.text, JSON.stringify(info)]) {
                assert.ok(!text.includes(SECRET_VALUE) && !text.includes(OTHER_VALUE), 'no value is listed');
                assert.doesNotMatch(text, /cxs_[0-9a-f]{40}/, 'no placeholder is listed');
            }
            return ri.sc.network.secrets.map((x) => x.name).sort();
        };
        const ri = await callTool(alice, 'runtime_info', {});
        const mine = ri.sc.network.secrets.find((x) => x.name === 'E2E_SECRET');
        assert.deepEqual(mine, { name: 'E2E_SECRET', description: 'the test API', hosts: [`api.e2e.test:${SP}`] },
            JSON.stringify(ri.sc.network.secrets));
        assert.deepEqual(await listed(alice), ['E2E_OTHER', 'E2E_SECRET']);
        assert.deepEqual(await listed(bob), ['E2E_OTHER'], 'bob is not listed the secret he never gets');
    }));
});
