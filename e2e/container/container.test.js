// The container image, run by scripts/container-test.sh with a published port, an API key and
// --security-opt systempaths=unconfined, driven from the host through the official MCP TypeScript SDK and the
// REST file API: the language runtimes the image promises, the sandbox's uid and network isolation inside a
// container, and a file round trip. What the sandbox could set up in the container (cgroups, late mounts) is
// printed as diagnostics for the report.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import { URL_BASE, auth, waitHealthy, connect, exec, tool } from './client.js';

let client;
before(async () => {
    const health = await waitHealthy();
    assert.equal(health.status, 'ok', `the sandbox must work in the container: ${JSON.stringify(health)}`);
    client = await connect();
});
after(async () => { await client?.close(); });

test('/healthz: ok, bwrap sandbox', async () => {
    const h = await (await fetch(`${URL_BASE}/healthz`)).json();
    assert.equal(h.status, 'ok');
    assert.equal(h.sandbox, 'bwrap');
});

test('the API key is required: /mcp and /api without it get 401', async () => {
    assert.equal((await fetch(`${URL_BASE}/api/workspaces`)).status, 401);
    const r = await fetch(`${URL_BASE}/mcp`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream' },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: {} }),
    });
    assert.equal(r.status, 401);
});

test('the admin console is in the image (built by the Dockerfile\'s build stage) and its script is served', async () => {
    const r = await fetch(`${URL_BASE}/admin/`);
    assert.equal(r.status, 200);
    const html = await r.text();
    assert.match(html, /<title>code-exec-mcp console<\/title>/);
    const src = html.match(/<script[^>]+src="([^"]+\.js)"/)?.[1];
    assert.ok(src, `a built script tag in ${html}`);
    const js = await fetch(new URL(src, `${URL_BASE}/admin/`));
    assert.equal(js.status, 200, src);
    assert.match(js.headers.get('content-type'), /javascript/);
});

test('runtime_info: every language available; what the sandbox has in the container', async (t) => {
    const info = await tool(client, 'runtime_info', {});
    assert.equal(info.isError, false);
    const langs = info.sc.languages;
    for (const id of ['python', 'nodejs', 'typescript', 'go', 'java', 'shell', 'c']) {
        assert.ok(langs[id], `language ${id} listed`);
        assert.equal(langs[id].available, true, `language ${id} available: ${JSON.stringify(langs[id])}`);
    }
    for (const name of ['git', 'curl', 'make', 'gcc', 'g++', 'jq', 'sqlite3', 'tar', 'zip', 'unzip']) {
        assert.equal(info.sc.tools[name]?.available, true, `tool ${name}: ${JSON.stringify(info.sc.tools?.[name])}`);
    }
    t.diagnostic(`languages: ${JSON.stringify(langs)}`);
    t.diagnostic(`sandbox: ${JSON.stringify(info.sc.sandbox)}`);
    t.diagnostic(`warmPool: ${JSON.stringify(info.sc.warmPool)}`);
    t.diagnostic(`limits: ${JSON.stringify(info.sc.limits)}`);
});

test('python with the data stack', async () => {
    const r = await exec(client, {
        language: 'python',
        code: 'import sys, numpy as np, pandas as pd, scipy, matplotlib\n'
            + 'print(sys.executable, int(np.arange(10).sum()), pd.DataFrame({"a": [1, 2]}).a.sum())',
    });
    assert.equal(r.isError, false, r.text);
    assert.equal(r.sc.exitCode, 0, r.sc.stderr);
    assert.equal(r.sc.stdout.trim(), '/usr/bin/python3 45 3');
});

test('nodejs and typescript', async () => {
    let r = await exec(client, { language: 'nodejs', code: 'console.log(process.version.startsWith("v"), [1, 2, 3].map((x) => x * 2).join(","))' });
    assert.equal(r.sc.exitCode, 0, r.sc.stderr);
    assert.equal(r.sc.stdout.trim(), 'true 2,4,6');
    r = await exec(client, { language: 'typescript', code: 'const n: number = 6 * 7;\nconsole.log(`ts ${n}`);' });
    assert.equal(r.sc.exitCode, 0, r.sc.stderr);
    assert.equal(r.sc.stdout.trim(), 'ts 42');
});

test('go 1.23', async () => {
    const r = await exec(client, {
        language: 'go',
        code: 'package main\n\nimport (\n\t"fmt"\n\t"runtime"\n)\n\nfunc main() { fmt.Println("go", runtime.Version()[:6], 6*7) }\n',
        timeout_ms: 120_000,
    });
    assert.equal(r.sc.exitCode, 0, r.sc.stderr);
    assert.equal(r.sc.stdout.trim(), 'go go1.23 42');
});

test('user code runs as uid 65534, never as root; the server itself is root in the container', async () => {
    const r = await exec(client, { language: 'shell', code: 'id -u; id -g; cat /proc/self/status | grep -E "^(Uid|Gid):"' });
    assert.equal(r.sc.exitCode, 0, r.sc.stderr);
    const [uid, gid] = r.sc.stdout.trim().split('\n');
    assert.equal(uid, '65534');
    assert.equal(gid, '65534');
    assert.notEqual(uid, '0');
    // Real, effective, saved and filesystem uid inside the sandbox's own user namespace all 65534.
    assert.match(r.sc.stdout, /^Uid:\s+65534\s+65534\s+65534\s+65534$/m);
    const container = process.env.CTEST_CONTAINER;
    if (container) {
        // The server (java, under tini as pid 1) is root: it needs that for cgroups and to drop each run to 65534.
        const uids = execFileSync('podman', ['exec', container, 'ps', '-C', 'java', '-o', 'uid='], { encoding: 'utf8' });
        assert.equal(uids.trim(), '0');
    }
});

// Shown without aiming at any address off this machine: only lo and no route at all (so no host, no DNS server and
// nothing beyond is reachable), and the server's own port on the sandbox's loopback is not the server.
test('no network from user code: only lo, no route, not the server itself', async () => {
    const r = await exec(client, {
        language: 'python',
        code: [
            'import os, socket',
            'print("ifaces", sorted(l.split(":")[0].strip() for l in open("/proc/net/dev").readlines()[2:]))',
            'print("routes", open("/proc/net/route").read().splitlines()[1:])',
            's = socket.socket(); s.settimeout(3)',
            'try:',
            '    s.connect(("127.0.0.1", 8080)); print("CONNECTED")',
            'except OSError as e:',
            '    print("blocked", type(e).__name__)',
        ].join('\n'),
    });
    assert.equal(r.sc.exitCode, 0, r.sc.stderr);
    assert.match(r.sc.stdout, /^ifaces \['lo'\]$/m);
    assert.match(r.sc.stdout, /^routes \[\]$/m);
    assert.doesNotMatch(r.sc.stdout, /CONNECTED/);
    assert.match(r.sc.stdout, /^blocked /m);
});

test('REST upload, a run in the workspace reading and writing files, REST download', async () => {
    const ws = `ctest-${randomBytes(4).toString('hex')}`;
    const data = randomBytes(300_000);
    const sha = createHash('sha256').update(data).digest('hex');
    let r = await fetch(`${URL_BASE}/api/workspaces/${ws}/files/in/data.bin`, {
        method: 'POST', headers: { ...auth, 'Content-Type': 'application/octet-stream' }, body: data,
    });
    assert.equal(r.status, 201, await r.clone().text());
    const up = await r.json();
    assert.equal(up.size, data.length);
    assert.equal(up.sha256, sha);

    const run = await exec(client, {
        language: 'python',
        workspace: ws,
        code: 'import hashlib, os\nb = open("in/data.bin", "rb").read()\nprint(hashlib.sha256(b).hexdigest())\n'
            + 'os.makedirs("out", exist_ok=True)\nopen("out/reversed.bin", "wb").write(b[::-1])\n',
    });
    assert.equal(run.sc.exitCode, 0, run.sc.stderr);
    assert.equal(run.sc.stdout.trim(), sha, 'the run sees the uploaded bytes');
    assert.ok(run.sc.files.some((f) => f.path === 'out/reversed.bin'), JSON.stringify(run.sc.files));

    r = await fetch(`${URL_BASE}/api/workspaces/${ws}/files/in/data.bin`, { headers: auth });
    assert.equal(r.status, 200);
    assert.ok(Buffer.from(await r.arrayBuffer()).equals(data), 'download equals upload');
    r = await fetch(`${URL_BASE}/api/workspaces/${ws}/files/out/reversed.bin`, { headers: auth });
    assert.equal(r.status, 200);
    assert.ok(Buffer.from(await r.arrayBuffer()).equals(Buffer.from(data).reverse()), 'the file the run wrote');

    assert.equal((await fetch(`${URL_BASE}/api/workspaces/${ws}`, { method: 'DELETE', headers: auth })).status, 204);
});

test('limits hold in the container: a memory hog and a fork bomb are stopped, the server stays healthy', async () => {
    let r = await exec(client, {
        language: 'python',
        code: 'b = []\nwhile True: b.append(bytearray(64 << 20))\n',
        timeout_ms: 60_000,
    });
    assert.notEqual(r.sc.exitCode, 0);
    // With writable cgroups the run's memory cgroup kills it (memory_limit); in a default container the cgroup
    // mount is read-only and RLIMIT_AS makes the allocation fail instead (MemoryError).
    assert.ok(r.sc.outcome === 'memory_limit' || /MemoryError/.test(r.sc.stderr),
        `memory stopped by a limit: ${r.sc.outcome} ${r.sc.stderr.slice(-200)}`);
    r = await exec(client, {
        language: 'shell',
        code: 'n=0; while [ $n -lt 2000 ]; do sleep 30 & n=$((n+1)); done 2>/dev/null; echo started $n',
        timeout_ms: 20_000,
    });
    assert.doesNotMatch(r.sc.stdout, /started 2000/, 'the process limit stops a fork loop');
    assert.equal((await (await fetch(`${URL_BASE}/healthz`)).json()).status, 'ok');
});
