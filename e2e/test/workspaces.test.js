// Issue #3 end to end: workspaces and files through the real jar, real HTTP, the official TypeScript MCP SDK
// client and fetch (raw node:http where a URL must reach the server exactly as written). Three servers, one
// after the other: two tenants (alice, bob) from an API_KEYS_FILE for the file tools, artifacts, REST, isolation
// and the traversal/symlink corpus; WORKSPACE_QUOTA_MB=2 for quota exhaustion; WORKSPACE_MAX_AGE_HOURS=1 with a
// restart for expiry.
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { request as httpRequest } from 'node:http';
import { createHash, randomBytes } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import { writeFileSync, existsSync, utimesSync, statSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { makeBase, keysAdd, keysAppend, startServer3, restClient, callTool } from '../lib/server3.js';

const PASSWD = readFileSync('/etc/passwd', 'utf8').split('\n')[0]; // "root:x:0:0:..." : must never leak
const MiB = 1024 * 1024;
const sha256 = (b) => createHash('sha256').update(b).digest('hex');

let base;
before(() => { base = makeBase(); });
after(() => base.remove());

/** A request whose target reaches the server byte for byte (fetch would resolve `..` and `%2e%2e` first). */
function raw(url, method, target, key, body) {
    const u = new URL(url);
    return new Promise((resolve, reject) => {
        const req = httpRequest({
            // A fresh connection each: the server may close one after refusing a request.
            host: u.hostname, port: u.port, method, path: target, agent: false,
            headers: { Authorization: `Bearer ${key}`, ...(body ? { 'Content-Type': 'application/octet-stream' } : {}) },
        }, (res) => {
            const chunks = [];
            res.on('data', (c) => chunks.push(c));
            res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, body: Buffer.concat(chunks).toString('latin1') }));
        });
        req.on('error', reject);
        req.end(body);
    });
}

/** Zip entries {name: content(latin1)} as Python's zipfile reads them (an independent zip reader). */
function zipEntries(buf) {
    const file = join(base.dir, `a-${randomBytes(4).toString('hex')}.zip`);
    writeFileSync(file, buf);
    const out = execFileSync('/usr/bin/python3', ['-c',
        'import zipfile,sys,json; z=zipfile.ZipFile(sys.argv[1]); assert z.testzip() is None; '
        + 'print(json.dumps({i.filename: z.read(i).decode("latin1") for i in z.infolist()}))', file], { encoding: 'utf8' });
    return JSON.parse(out);
}

const pngSignature = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);

describe('two tenants: files, artifacts, REST, isolation, traversal', () => {
    let srv; let alice; let bob; let aliceKey; let bobKey; let A; let B;
    const ALICE_X = `ALICE-SECRET-${randomBytes(6).toString('hex')}\n`;
    const BOB_X = `bob data ${randomBytes(6).toString('hex')}\n`;

    before(async () => {
        const keys = join(base.dir, 'keys');
        aliceKey = keysAdd(keys, 'alice');
        bobKey = keysAppend(keys, 'bob');
        srv = await startServer3(base, { API_KEYS_FILE: keys, WORKSPACE_ROOT: base.workspaceRoot('ws-tenants') });
        alice = await srv.connect(aliceKey);
        bob = await srv.connect(bobKey);
        A = restClient(srv.url, aliceKey);
        B = restClient(srv.url, bobKey);
    });
    after(async () => {
        await alice?.close();
        await bob?.close();
        await srv?.stop();
    });

    test('write_file → execute_code in the workspace → read_file and REST GET; files lists the output', async () => {
        let r = await callTool(alice, 'write_file', { workspace: 'w1', path: 'data.csv', content: 'a,b\n1,2\n3,4\n' });
        assert.equal(r.isError, false, r.text);
        r = await callTool(alice, 'write_file', { workspace: 'w1', path: 'main.py', content: 'print("users main")\n' });
        assert.equal(r.isError, false, r.text);
        r = await callTool(alice, 'execute_code', {
            language: 'python', workspace: 'w1', code: [
                'import csv, os',
                'rows = list(csv.DictReader(open("data.csv")))',
                'total = sum(int(x["a"]) + int(x["b"]) for x in rows)',
                'os.makedirs("out", exist_ok=True)',
                'open("out/result.txt", "w").write(f"sum={total}\\n")',
                'print(f"rows={len(rows)} sum={total}")',
            ].join('\n'),
        });
        assert.equal(r.isError, false, r.text);
        assert.equal(r.sc.exitCode, 0, r.text);
        assert.match(r.sc.stdout, /rows=2 sum=10/);
        assert.equal(r.sc.workspace, 'w1');
        const out = r.sc.files.find((f) => f.path === 'out/result.txt');
        assert.ok(out, `files should list out/result.txt: ${JSON.stringify(r.sc.files)}`);
        assert.equal(out.size, 'sum=10\n'.length);
        assert.equal(out.status, 'created');
        assert.match(out.mimeType, /^text\/plain/);
        assert.ok(!r.sc.files.some((f) => f.path === 'data.csv' || f.path === 'main.py'), 'unchanged inputs are not listed');

        r = await callTool(alice, 'read_file', { workspace: 'w1', path: 'out/result.txt' });
        assert.equal(r.isError, false, r.text);
        assert.equal(r.sc.content, 'sum=10\n');
        assert.equal(r.sc.encoding, 'text');
        const res = await A('GET', '/api/workspaces/w1/files/out/result.txt');
        assert.equal(res.status, 200);
        assert.equal(await res.text(), 'sum=10\n');

        // The run's own source file went elsewhere and is gone; the user's main.py is untouched.
        r = await callTool(alice, 'read_file', { workspace: 'w1', path: 'main.py' });
        assert.equal(r.sc.content, 'print("users main")\n');
        r = await callTool(alice, 'list_files', { workspace: 'w1', recursive: true });
        assert.deepEqual(r.sc.entries.map((e) => e.path).sort(), ['data.csv', 'main.py', 'out', 'out/result.txt']);
    });

    test('a matplotlib chart comes back as MCP image content and in files', async () => {
        const r = await callTool(alice, 'execute_code', {
            language: 'python', workspace: 'w1', code: [
                'import matplotlib',
                'matplotlib.use("Agg")',
                'import matplotlib.pyplot as plt',
                'plt.figure(figsize=(2, 1.5), dpi=50)',
                'plt.plot([1, 3, 2])',
                'plt.savefig("chart.png")',
                'print("saved")',
            ].join('\n'),
        });
        assert.equal(r.isError, false, r.text);
        assert.equal(r.sc.exitCode, 0, r.sc.stderr);
        const listed = r.sc.files.find((f) => f.path === 'chart.png');
        assert.ok(listed, JSON.stringify(r.sc.files));
        assert.equal(listed.mimeType, 'image/png');
        const images = r.raw.content.filter((c) => c.type === 'image');
        assert.equal(images.length, 1, JSON.stringify(r.raw.content.map((c) => c.type)));
        assert.equal(images[0].mimeType, 'image/png');
        const png = Buffer.from(images[0].data, 'base64');
        assert.deepEqual(png.subarray(0, 8), pngSignature);
        assert.equal(png.length, listed.size);
        const disk = Buffer.from(await (await A('GET', '/api/workspaces/w1/files/chart.png')).arrayBuffer());
        assert.ok(disk.equals(png), 'the image content is the file the run wrote');
    });

    test('multipart upload of 3 files into a directory; the tree lists them', async () => {
        const fd = new FormData();
        fd.append('f', new Blob(['alpha\n'], { type: 'text/plain' }), 'a.txt');
        fd.append('f', new Blob([Buffer.from([0, 1, 2, 255, 254])]), 'b.bin');
        fd.append('f', new Blob(['{"k": 1}'], { type: 'application/json' }), 'c.json');
        const res = await A('POST', '/api/workspaces/w1/files/up/dir/', { body: fd });
        const body = await res.json();
        assert.equal(res.status, 201, JSON.stringify(body));
        assert.deepEqual(body.files.map((f) => f.path).sort(), ['up/dir/a.txt', 'up/dir/b.bin', 'up/dir/c.json']);
        assert.equal(body.files.find((f) => f.path === 'up/dir/b.bin').sha256, sha256(Buffer.from([0, 1, 2, 255, 254])));

        const tree = await (await A('GET', '/api/workspaces/w1/tree?path=up/dir')).json();
        assert.deepEqual(tree.map((e) => [e.name, e.type, e.size]).sort(),
            [['a.txt', 'file', 6], ['b.bin', 'file', 5], ['c.json', 'file', 8]]);
        const b = Buffer.from(await (await A('GET', '/api/workspaces/w1/files/up/dir/b.bin')).arrayBuffer());
        assert.deepEqual([...b], [0, 1, 2, 255, 254]);
    });

    test('preview: text inline with nosniff and CSP; SVG and HTML stay attachments', async () => {
        const put = async (path, content) => {
            const res = await A('POST', `/api/workspaces/w1/files/${path}`, { body: content });
            assert.equal(res.status, 201, await res.text());
        };
        await put('view/note.txt', 'hello preview\n');
        await put('view/pic.svg', '<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>');
        await put('view/page.html', '<html><script>alert(1)</script></html>');

        let res = await A('GET', '/api/workspaces/w1/files/view/note.txt?preview=1');
        assert.equal(res.status, 200);
        assert.match(res.headers.get('content-disposition'), /^inline/);
        assert.match(res.headers.get('content-type'), /^text\/plain/);
        assert.equal(res.headers.get('x-content-type-options'), 'nosniff');
        const csp = res.headers.get('content-security-policy') || '';
        assert.match(csp, /default-src 'none'/);
        assert.match(csp, /\bsandbox\b/);
        assert.equal(await res.text(), 'hello preview\n');

        res = await A('GET', '/api/workspaces/w1/files/view/note.txt');
        assert.match(res.headers.get('content-disposition'), /^attachment/, 'no preview flag: attachment');
        await res.arrayBuffer();

        for (const p of ['view/pic.svg', 'view/page.html']) {
            res = await A('GET', `/api/workspaces/w1/files/${p}?preview=1`);
            assert.equal(res.status, 200);
            assert.match(res.headers.get('content-disposition'), /^attachment/, `${p} must stay an attachment`);
            assert.equal(res.headers.get('x-content-type-options'), 'nosniff');
            assert.match(res.headers.get('content-security-policy') || '', /default-src 'none'/);
            await res.arrayBuffer();
        }
    });

    test('archive: a zip of the workspace and of a subdirectory', async () => {
        let res = await A('GET', '/api/workspaces/w1/archive');
        assert.equal(res.status, 200);
        assert.equal(res.headers.get('content-type'), 'application/zip');
        let z = zipEntries(Buffer.from(await res.arrayBuffer()));
        for (const name of ['data.csv', 'main.py', 'out/result.txt', 'chart.png', 'up/dir/a.txt', 'up/dir/b.bin', 'view/note.txt']) {
            assert.ok(name in z, `${name} missing from ${Object.keys(z)}`);
        }
        assert.equal(z['out/result.txt'], 'sum=10\n');
        assert.equal(z['data.csv'], 'a,b\n1,2\n3,4\n');
        assert.ok(!Object.keys(z).some((n) => n.startsWith('code_')), 'no leftover source file');

        res = await A('GET', '/api/workspaces/w1/archive?path=up/dir');
        assert.equal(res.status, 200);
        z = zipEntries(Buffer.from(await res.arrayBuffer()));
        assert.deepEqual(Object.keys(z).sort(), ['a.txt', 'b.bin', 'c.json']);
        assert.equal(z['a.txt'], 'alpha\n');
    });

    test('100 MB raw upload streamed, download with identical SHA-256, bounded server memory', async () => {
        const size = 100 * MiB;
        const chunk = MiB;
        const hash = createHash('sha256');
        let first = null;
        let sent = 0;
        const body = new ReadableStream({
            pull(ctrl) {
                if (sent >= size) { ctrl.close(); return; }
                const b = randomBytes(chunk);
                if (!first) first = Buffer.from(b.subarray(0, 16));
                hash.update(b);
                sent += b.length;
                ctrl.enqueue(new Uint8Array(b.buffer, b.byteOffset, b.length));
            },
        });
        const reset = srv.resetPeak(); // the peak then belongs to this transfer, not to the server's start
        const before = srv.memory();
        let res = await A('POST', '/api/workspaces/big/files/blob.bin', { body, duplex: 'half' });
        const up = await res.json();
        assert.equal(res.status, 201, JSON.stringify(up));
        const want = hash.digest('hex');
        assert.equal(up.size, size);
        assert.equal(up.sha256, want);
        const afterUp = srv.memory();

        res = await A('GET', '/api/workspaces/big/files/blob.bin');
        assert.equal(res.status, 200);
        assert.equal(Number(res.headers.get('content-length')), size);
        const down = createHash('sha256');
        let got = 0;
        for await (const c of res.body) { down.update(c); got += c.length; }
        assert.equal(got, size);
        assert.equal(down.digest('hex'), want);
        const afterDown = srv.memory();

        res = await A('GET', '/api/workspaces/big/files/blob.bin', { headers: { Range: 'bytes=0-15' } });
        assert.equal(res.status, 206);
        assert.ok(Buffer.from(await res.arrayBuffer()).equals(first));

        const mb = (n) => (n / MiB).toFixed(1);
        console.log(`server peak RSS (VmHWM${reset ? ', reset before the transfer' : ''}): before ${mb(before.hwm)} MB, after upload ${mb(afterUp.hwm)} MB, `
            + `after download ${mb(afterDown.hwm)} MB; growth ${mb(afterDown.hwm - before.hwm)} MB `
            + `(VmRSS now ${mb(afterDown.rss)} MB) for a ${mb(size)} MB file`);
        // Tighter than the 200 MB asked for: a server holding the body once in memory would already fail.
        assert.ok(afterDown.hwm - before.hwm < 100 * MiB,
            `peak RSS grew by ${mb(afterDown.hwm - before.hwm)} MB over a 100 MB transfer`);
        res = await A('DELETE', '/api/workspaces/big');
        assert.equal(res.status, 204);
    });

    test('tenant isolation on every surface', async () => {
        // Same workspace name, two tenants, different content.
        assert.equal((await A('POST', '/api/workspaces/proj/files/x', { body: ALICE_X })).status, 201);
        assert.equal((await A('POST', '/api/workspaces/proj/files/only-alice.txt', { body: ALICE_X })).status, 201);
        const w = await callTool(bob, 'write_file', { workspace: 'proj', path: 'x', content: BOB_X });
        assert.equal(w.isError, false, w.text);

        const v = async (key) => (await fetch(`${srv.url}/api/auth/verify`, { headers: { Authorization: `Bearer ${key}` } }));
        assert.equal((await (await v(aliceKey)).json()).tenant, 'alice');
        assert.equal((await (await v(bobKey)).json()).tenant, 'bob');
        assert.equal((await v('not-a-key')).status, 401);
        assert.equal((await fetch(`${srv.url}/api/auth/verify`)).status, 401);
        // A tenant added to the keys file while the server runs is accepted without a restart.
        const carolKey = keysAdd(join(base.dir, 'keys'), 'carol');
        let carol = 0;
        for (let i = 0; i < 50 && carol !== 200; i++) {
            carol = (await v(carolKey)).status;
            if (carol !== 200) await new Promise((res) => setTimeout(res, 100));
        }
        assert.equal(carol, 200, 'keys file re-read on change');
        assert.equal((await (await v(carolKey)).json()).tenant, 'carol');
        assert.deepEqual(await (await restClient(srv.url, carolKey)('GET', '/api/workspaces')).json(), []);

        // Error messages may echo the path bob typed; alice's content must never appear.
        const noAlice = (s, where) => assert.ok(!String(s).includes('ALICE-SECRET'),
            `${where} leaked alice's data: ${String(s).slice(0, 300)}`);

        // MCP tools
        let r = await callTool(bob, 'list_files', { workspace: 'proj' });
        assert.deepEqual(r.sc.entries.map((e) => e.path), ['x']);
        r = await callTool(bob, 'read_file', { workspace: 'proj', path: 'x' });
        assert.equal(r.sc.content, BOB_X);
        r = await callTool(bob, 'read_file', { workspace: 'proj', path: 'only-alice.txt' });
        assert.equal(r.isError, true);
        assert.match(r.text, /not_found/);
        noAlice(r.text, 'read_file');
        r = await callTool(bob, 'read_file', { workspace: 'w1', path: 'data.csv' });
        assert.equal(r.isError, true, 'bob has no workspace w1');
        r = await callTool(bob, 'workspace_info', { workspace: 'proj' });
        assert.equal(r.isError, false, r.text);
        assert.equal(r.sc.name, 'proj');
        assert.equal(r.sc.files, 1, JSON.stringify(r.sc)); // alice's proj has 2
        assert.equal(r.sc.sizeBytes, BOB_X.length, JSON.stringify(r.sc));
        r = await callTool(bob, 'workspace_info', {});
        assert.deepEqual(r.sc.workspaces.map((x) => x.name), ['proj'], `bob sees only his own: ${JSON.stringify(r.sc)}`);
        r = await callTool(bob, 'workspace_info', { workspace: 'w1' });
        assert.equal(r.isError, true);
        r = await callTool(bob, 'execute_code', {
            language: 'bash', workspace: 'proj',
            code: 'cat x; ls -A; cat ../../alice/proj/x 2>&1; ls -A .. 2>&1; true',
        });
        assert.equal(r.isError, false, r.text);
        assert.ok(r.sc.stdout.startsWith(BOB_X), r.sc.stdout);
        noAlice(r.sc.stdout + r.sc.stderr, 'execute_code');
        assert.ok(!r.sc.stdout.includes('only-alice'), `bob's run sees alice's files: ${r.sc.stdout}`);

        // MCP resources, prompts, completions
        const rr = await bob.readResource({ uri: 'ws://proj/x' });
        assert.equal(rr.contents[0].text, BOB_X);
        await assert.rejects(bob.readResource({ uri: 'ws://proj/only-alice.txt' }), (e) => { noAlice(e.message, 'resource'); return true; });
        await assert.rejects(bob.readResource({ uri: 'ws://w1/data.csv' }));
        const p = await bob.getPrompt({ name: 'review-code', arguments: { workspace: 'proj', path: 'x' } });
        const ptext = JSON.stringify(p.messages);
        assert.ok(ptext.includes(BOB_X.trim()), ptext.slice(0, 300));
        noAlice(ptext, 'prompt');
        await assert.rejects(bob.getPrompt({ name: 'review-code', arguments: { workspace: 'proj', path: 'only-alice.txt' } }),
            (e) => { noAlice(e.message, 'prompt error'); return true; });
        await assert.rejects(bob.getPrompt({ name: 'review-code', arguments: { workspace: 'w1', path: 'data.csv' } }));
        let c = await bob.complete({ ref: { type: 'ref/prompt', name: 'review-code' }, argument: { name: 'workspace', value: '' } });
        assert.deepEqual(c.completion.values, ['proj']);
        c = await alice.complete({ ref: { type: 'ref/prompt', name: 'review-code' }, argument: { name: 'workspace', value: '' } });
        assert.ok(c.completion.values.includes('w1') && c.completion.values.includes('proj'), JSON.stringify(c));
        c = await bob.complete({ ref: { type: 'ref/prompt', name: 'review-code' }, argument: { name: 'path', value: '' },
            context: { arguments: { workspace: 'proj' } } });
        assert.deepEqual(c.completion.values, ['x']);
        c = await bob.complete({ ref: { type: 'ref/resource', uri: 'ws://{workspace}/{+path}' }, argument: { name: 'path', value: 'o' },
            context: { arguments: { workspace: 'proj' } } });
        assert.deepEqual(c.completion.values, []);
        c = await bob.complete({ ref: { type: 'ref/resource', uri: 'ws://{workspace}/{+path}' }, argument: { name: 'path', value: '' },
            context: { arguments: { workspace: 'w1' } } });
        assert.deepEqual(c.completion.values, [], 'no completion into alice-only workspace w1');

        // REST
        let res = await B('GET', '/api/workspaces/proj/tree');
        assert.deepEqual((await res.json()).map((e) => e.name), ['x']);
        res = await B('GET', '/api/workspaces/proj/files/x');
        assert.equal(await res.text(), BOB_X);
        res = await B('GET', '/api/workspaces/proj/files/only-alice.txt');
        assert.equal(res.status, 404);
        noAlice(await res.text(), 'REST GET');
        res = await B('DELETE', '/api/workspaces/proj/files/only-alice.txt');
        assert.equal(res.status, 404);
        res = await B('POST', '/api/workspaces/proj/rename', {
            headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ from: 'only-alice.txt', to: 'mine.txt' }),
        });
        assert.equal(res.status, 404);
        res = await B('GET', '/api/workspaces/proj/archive');
        assert.deepEqual(Object.keys(zipEntries(Buffer.from(await res.arrayBuffer()))), ['x']);
        res = await B('GET', '/api/workspaces');
        assert.deepEqual((await res.json()).map((e) => e.name), ['proj']);
        res = await B('GET', '/api/workspaces/w1');
        assert.equal(res.status, 404);
        res = await B('GET', '/api/workspaces/w1/files/data.csv');
        assert.equal(res.status, 404);
        res = await B('DELETE', '/api/workspaces/w1');
        assert.equal(res.status, 404);
        res = await B('DELETE', '/api/workspaces/w1/files/data.csv');
        assert.equal(res.status, 404);
        // bob deleting his own x leaves alice's x alone
        res = await B('DELETE', '/api/workspaces/proj/files/x');
        assert.equal(res.status, 204);
        // bob running in "w1" gets his own, empty w1
        r = await callTool(bob, 'execute_code', { language: 'bash', workspace: 'w1', code: 'ls -A; cat data.csv 2>&1; true' });
        assert.equal(r.isError, false, r.text);
        assert.ok(!r.sc.stdout.includes('1,2'), r.sc.stdout);
        assert.match(r.sc.stdout, /No such file/);

        // Alice's data is unchanged afterwards.
        assert.equal(await (await A('GET', '/api/workspaces/proj/files/x')).text(), ALICE_X);
        assert.equal(await (await A('GET', '/api/workspaces/proj/files/only-alice.txt')).text(), ALICE_X);
        assert.equal(await (await A('GET', '/api/workspaces/w1/files/data.csv')).text(), 'a,b\n1,2\n3,4\n');
        // Restore bob's x for the traversal test.
        assert.equal((await B('POST', '/api/workspaces/proj/files/x', { body: BOB_X })).status, 201);
    });

    test('traversal corpus over MCP and REST', async () => {
        // Reads aim at /etc/passwd. Writes, deletes and renames aim at canaries instead (the server runs as root:
        // a broken check must not cost the host its /etc/passwd): a file next to WORKSPACE_ROOT and bob's x.
        const canary = join(base.dir, 'canary.txt'); // WORKSPACE_ROOT/alice/proj/../../../canary.txt
        writeFileSync(canary, 'canary\n');
        const reads = ['../x', '/etc/passwd', 'a/../../b', '..', 'a\u0000b', '../../bob/proj/x', './../x', '../../../../../../etc/passwd'];
        const writes = ['../../../canary.txt', canary, 'a/../../../../canary.txt', '../../bob/proj/x', './../../bob/proj/x',
            'x\u0000/../../../canary.txt', '..'];
        const refused = (r, where) => {
            assert.equal(r.isError, true, `${where} should be refused: ${r.text}`);
            assert.ok(!r.text.includes(PASSWD) && !r.text.includes('bob data'), `${where} leaked: ${r.text.slice(0, 200)}`);
        };
        for (const path of reads) {
            const where = JSON.stringify(path);
            refused(await callTool(alice, 'read_file', { workspace: 'proj', path }), `read_file ${where}`);
            refused(await callTool(alice, 'list_files', { workspace: 'proj', path }), `list_files ${where}`);
            await assert.rejects(alice.getPrompt({ name: 'review-code', arguments: { workspace: 'proj', path } }), `prompt ${where}`);
        }
        for (const path of writes) {
            const where = JSON.stringify(path);
            refused(await callTool(alice, 'write_file', { workspace: 'proj', path, content: 'pwned' }), `write_file ${where}`);
            refused(await callTool(alice, 'delete_file', { workspace: 'proj', path, recursive: true }), `delete_file ${where}`);
        }
        for (const uri of ['ws://proj/../x', 'ws://proj/%2e%2e/x', 'ws://proj/%2F..%2F..%2Fetc%2Fpasswd', 'ws://proj/a%00b',
            'ws://../alice/proj/x', 'ws://proj//etc/passwd', 'ws://proj/../../bob/proj/x']) {
            await assert.rejects(alice.readResource({ uri }), (e) => !e.message.includes(PASSWD) && !e.message.includes('bob data'), uri);
        }
        for (const ws of ['..', 'a%2fb', '%2e%2e', '%2E%2E%2Fbob']) {
            const res = await raw(srv.url, 'GET', `/api/workspaces/${ws}/files/x`, aliceKey);
            assert.ok(res.status >= 400 && res.status < 500, `workspace ${ws}: ${res.status}`);
            assert.ok(!res.body.includes('bob data'));
        }
        const check = async (method, t) => {
            const res = await raw(srv.url, method, t, aliceKey, method === 'POST' ? 'pwned' : undefined)
                .catch((e) => assert.fail(`${method} ${t}: ${e.message}`));
            assert.ok(res.status >= 400 && res.status < 500, `${method} ${t}: ${res.status} ${res.body.slice(0, 200)}`);
            assert.ok(!res.body.includes(PASSWD) && !res.body.includes('bob data'), `${method} ${t} leaked`);
            assert.ok(!/\.java:\d+|at dev\.codeexec/.test(res.body), `${method} ${t}: stack trace`);
            const err = JSON.parse(res.body);
            assert.equal(typeof err.error, 'string', `${method} ${t}: REST error shape: ${res.body}`);
            assert.equal(typeof err.message, 'string');
        };
        const F = '/api/workspaces/proj/files/';
        for (const t of [`${F}../x`, `${F}%2e%2e/x`, `${F}%2E%2E%2Fx`, `${F}a/../../b`, `${F}a/%2e%2e/%2e%2e/bob/proj/x`,
            `${F}%2Fetc%2Fpasswd`, `${F}/etc/passwd`, `${F}..%2F..%2F..%2F..%2F..%2F..%2F..%2Fetc%2Fpasswd`, `${F}a%00b`, `${F}..%5cx`,
            '/api/workspaces/proj/tree?path=..', '/api/workspaces/proj/tree?path=%2Fetc', '/api/workspaces/proj/tree?path=a%2F..%2F..',
            '/api/workspaces/proj/archive?path=..', '/api/workspaces/proj/archive?path=%2Fetc',
            '/api/workspaces/proj/archive?path=..%2F..%2Fbob%2Fproj']) {
            await check('GET', t);
        }
        const enc = encodeURIComponent(canary);
        for (const t of [`${F}../../../canary.txt`, `${F}%2e%2e/%2e%2e/%2e%2e/canary.txt`, `${F}..%2F..%2F..%2Fcanary.txt`,
            `${F}${enc}`, `${F}/${canary.slice(1)}`, `${F}a/../../../../canary.txt`, `${F}../../bob/proj/x`,
            `${F}%2e%2e/%2e%2e/bob/proj/x`, `${F}x%00/../../../canary.txt`, `${F}..%5c..%5c..%5ccanary.txt`]) {
            await check('POST', t);
            await check('DELETE', t);
            await check('DELETE', `${t}?recursive=1`);
        }
        for (const [from, to] of [['../../bob/proj/x', 'stolen'], [canary, 'stolen'], ['../../../canary.txt', 'stolen'],
            ['x', '../../bob/proj/y'], ['x', '../x'], ['x', canary]]) {
            const res = await A('POST', '/api/workspaces/proj/rename', {
                headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ from, to }),
            });
            assert.equal(res.status, 400, `rename ${from} → ${to}`);
            assert.equal((await res.json()).error, 'bad_path');
        }
        // Nothing moved, nothing was written or deleted outside.
        assert.equal(readFileSync(canary, 'utf8'), 'canary\n');
        assert.equal(await (await B('GET', '/api/workspaces/proj/files/x')).text(), BOB_X);
        assert.equal(await (await A('GET', '/api/workspaces/proj/files/x')).text(), ALICE_X);
        assert.equal((await B('GET', '/api/workspaces/proj/files/y')).status, 404);
        assert.deepEqual((await (await A('GET', '/api/workspaces/proj/tree')).json()).map((e) => e.name).sort(), ['only-alice.txt', 'x']);
    });

    test('symlink swap race: user code swaps links in while every surface reads, many times concurrently', async () => {
        // renameat2(RENAME_EXCHANGE) swaps a regular file with a link to /etc/passwd, and a directory with a link to
        // /etc, atomically and as fast as it can, until the test writes "stop".
        const code = [
            'import ctypes, os, time',
            'libc = ctypes.CDLL(None, use_errno=True)',
            'def swap(a, b):',
            '    if libc.renameat2(-100, a.encode(), -100, b.encode(), 2) != 0: raise OSError(ctypes.get_errno(), a)',
            'open("f", "w").write("safe\\n"); os.symlink("/etc/passwd", "g")',
            'os.mkdir("d"); open("d/passwd", "w").write("safe\\n"); os.symlink("/etc", "e")',
            'open("ready", "w").close()',
            'n, end = 0, time.time() + 40',
            'while not os.path.exists("stop") and time.time() < end:',
            '    swap("f", "g"); swap("d", "e"); n += 1',
            'print("swaps", n)',
        ].join('\n');
        const run = callTool(alice, 'execute_code', { language: 'python', workspace: 'race', code, timeout_ms: 60_000 });
        for (let i = 0; i < 200; i++) {
            const res = await A('GET', '/api/workspaces/race/tree');
            if (res.status === 200 && (await res.json()).some((e) => e.name === 'ready')) break;
            await new Promise((r) => setTimeout(r, 100));
        }
        const seen = { ok: 0, refused: 0 };
        const leaks = [];
        const note = (where, status, body) => {
            if (body.includes(PASSWD) || body.includes('root:')) leaks.push(`${where}: ${body.slice(0, 80)}`);
            if (status === 200 && body === 'safe\n') seen.ok++;
            else seen.refused++;
        };
        const worker = async (i) => {
            const end = Date.now() + 4000;
            while (Date.now() < end) {
                const path = i % 2 ? 'f' : 'd/passwd';
                switch (i % 4) {
                    case 0: case 1: {
                        const res = await A('GET', `/api/workspaces/race/files/${path}`);
                        note(`GET ${path}`, res.status, await res.text());
                        break;
                    }
                    case 2: {
                        const r = await callTool(alice, 'read_file', { workspace: 'race', path: i % 8 < 4 ? 'f' : 'd/passwd' });
                        note('read_file', r.isError ? 400 : 200, r.isError ? r.text : r.sc.content);
                        break;
                    }
                    default: {
                        const r = await alice.readResource({ uri: 'ws://race/d/passwd' }).then(
                            (x) => [200, x.contents[0].text ?? ''], (e) => [400, e.message]);
                        note('resource', r[0], r[1]);
                        const z = zipEntries(Buffer.from(await (await A('GET', '/api/workspaces/race/archive')).arrayBuffer()));
                        for (const [n, v] of Object.entries(z)) if (v.includes('root:')) leaks.push(`archive ${n}`);
                    }
                }
            }
        };
        await Promise.all(Array.from({ length: 8 }, (_, i) => worker(i)));
        const stop = await callTool(alice, 'write_file', { workspace: 'race', path: 'stop', content: '' });
        assert.equal(stop.isError, false, stop.text);
        const r = await run;
        assert.equal(r.isError, false, r.text);
        const swaps = Number((r.sc.stdout.match(/swaps (\d+)/) || [])[1]);
        console.log(`swap race: ${swaps} swaps by user code; reads served ${seen.ok}, refused ${seen.refused}; leaks ${leaks.length}`);
        assert.ok(swaps > 0, `the swapper did not run: ${r.sc.stdout} ${r.sc.stderr}`);
        assert.deepEqual(leaks, []);
        assert.ok(seen.ok > 0 && seen.refused > 0, `both states should have been seen: ${JSON.stringify(seen)}`);
    });

    // Jetty refuses a %00 in the request target before ApiUriGuard sees it (the path is lost); its error handler
    // answers in the REST shape all the same.
    test('a NUL (%00) in a REST path gets the REST error shape', async () => {
        for (const method of ['GET', 'DELETE', 'POST']) {
            const res = await raw(srv.url, method, '/api/workspaces/proj/files/x%00.txt', aliceKey, method === 'POST' ? 'evil' : undefined);
            assert.equal(res.status, 400);
            assert.equal(JSON.parse(res.body).error, 'bad_path', `${method}: ${res.body}`);
        }
    });

    test('symlinks planted by user code are refused on every surface', async () => {
        let r = await callTool(alice, 'execute_code', {
            language: 'bash', workspace: 'proj',
            code: 'ln -s /etc/passwd link && ln -s /etc dirlink && ln -s ../../bob/proj other && mkdir -p d && ln -s /etc/passwd d/inner && echo planted',
        });
        assert.equal(r.isError, false, r.text);
        assert.match(r.sc.stdout, /planted/, r.sc.stderr);
        const lf = await callTool(alice, 'list_files', { workspace: 'proj' });
        const types = Object.fromEntries(lf.sc.entries.map((e) => [e.path, e.type]));
        assert.equal(types.link, 'symlink');
        assert.equal(types.other, 'symlink');

        const leaked = (s) => s.includes(PASSWD) || s.includes('bob data');
        for (const path of ['link', 'dirlink/passwd', 'other/x', 'd/inner', 'dirlink', 'other']) {
            r = await callTool(alice, 'read_file', { workspace: 'proj', path });
            assert.equal(r.isError, true, `read_file ${path}: ${r.text.slice(0, 200)}`);
            assert.ok(!leaked(r.text), `read_file ${path} leaked`);
            let res = await A('GET', `/api/workspaces/proj/files/${path}`);
            const body = await res.text();
            assert.ok(res.status >= 400 && res.status < 500, `REST GET ${path}: ${res.status}`);
            assert.ok(!leaked(body), `REST GET ${path} leaked`);
            await assert.rejects(alice.readResource({ uri: `ws://proj/${path}` }), (e) => !leaked(e.message), `resource ${path}`);
            await assert.rejects(alice.getPrompt({ name: 'review-code', arguments: { workspace: 'proj', path } }),
                (e) => !leaked(e.message), `prompt ${path}`);
            res = await A('GET', `/api/workspaces/proj/files/${path}?preview=1`, { headers: { Range: 'bytes=0-100' } });
            assert.ok(res.status >= 400 && !leaked(await res.text()), `ranged preview ${path}: ${res.status}`);
        }
        for (const path of ['dirlink', 'other', 'dirlink/ssh']) {
            r = await callTool(alice, 'list_files', { workspace: 'proj', path });
            assert.equal(r.isError, true, `list_files ${path}: ${r.text.slice(0, 200)}`);
            const res = await A('GET', `/api/workspaces/proj/tree?path=${path}`);
            assert.ok(res.status >= 400 && res.status < 500, `tree ${path}: ${res.status}`);
            const ar = await A('GET', `/api/workspaces/proj/archive?path=${path}`);
            assert.ok(ar.status >= 400 && ar.status < 500, `archive ${path}: ${ar.status}`);
            await ar.arrayBuffer();
        }
        r = await callTool(alice, 'list_files', { workspace: 'proj', recursive: true });
        assert.ok(!r.sc.entries.some((e) => e.path.startsWith('dirlink/') || e.path.startsWith('other/')), 'recursive listing followed a link');

        // Writes through a link to bob's workspace change nothing there.
        r = await callTool(alice, 'write_file', { workspace: 'proj', path: 'other/x', content: 'pwned' });
        assert.equal(r.isError, true, r.text);
        r = await callTool(alice, 'write_file', { workspace: 'proj', path: 'other/y', content: 'pwned' });
        assert.equal(r.isError, true, r.text);
        r = await callTool(alice, 'delete_file', { workspace: 'proj', path: 'other/x' });
        assert.equal(r.isError, true, r.text);
        let res = await A('POST', '/api/workspaces/proj/files/other/z', { body: 'pwned' });
        assert.ok(res.status >= 400 && res.status < 500, `REST upload through link: ${res.status}`);
        const fd = new FormData();
        fd.append('f', new Blob(['pwned']), 'm.txt');
        res = await A('POST', '/api/workspaces/proj/files/other/', { body: fd });
        assert.ok(res.status >= 400 && res.status < 500, `multipart through link: ${res.status}`);
        res = await A('DELETE', '/api/workspaces/proj/files/other/x');
        assert.ok(res.status >= 400 && res.status < 500, `REST delete through link: ${res.status}`);
        res = await A('POST', '/api/workspaces/proj/rename', {
            headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ from: 'other/x', to: 'stolen' }),
        });
        assert.ok(res.status >= 400 && res.status < 500, `rename through link: ${res.status}`);
        res = await A('POST', '/api/workspaces/proj/rename', {
            headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ from: 'x', to: 'other/x2' }),
        });
        assert.ok(res.status >= 400 && res.status < 500, `rename into a link: ${res.status}`);

        // The archive leaves links out.
        res = await A('GET', '/api/workspaces/proj/archive');
        const z = zipEntries(Buffer.from(await res.arrayBuffer()));
        assert.ok(!Object.keys(z).some((n) => ['link', 'dirlink', 'other', 'd/inner'].includes(n.replace(/\/$/, '')) || n.startsWith('dirlink/')),
            `archive has link entries: ${Object.keys(z)}`);
        assert.ok(!Object.values(z).some(leaked), 'archive carries linked content');
        // Completions do not descend into links.
        const c = await alice.complete({ ref: { type: 'ref/prompt', name: 'review-code' }, argument: { name: 'path', value: 'dirlink/' },
            context: { arguments: { workspace: 'proj' } } });
        assert.deepEqual(c.completion.values, []);

        assert.equal(await (await B('GET', '/api/workspaces/proj/files/x')).text(), BOB_X, "bob's file unchanged");
        assert.deepEqual((await (await B('GET', '/api/workspaces/proj/tree')).json()).map((e) => e.name), ['x']);

        // Deleting a link, even recursively, removes the link itself and never what it points to.
        res = await A('DELETE', '/api/workspaces/proj/files/other?recursive=1');
        assert.equal(res.status, 204, await res.text());
        r = await callTool(alice, 'delete_file', { workspace: 'proj', path: 'dirlink', recursive: true });
        assert.equal(r.isError, false, r.text);
        assert.ok(existsSync('/etc/passwd'));
        assert.equal(await (await B('GET', '/api/workspaces/proj/files/x')).text(), BOB_X, "bob's file survives the link's deletion");
        const names = (await (await A('GET', '/api/workspaces/proj/tree')).json()).map((e) => e.name);
        assert.ok(!names.includes('other') && !names.includes('dirlink') && names.includes('link'), JSON.stringify(names));
        assert.ok(srv.alive());
    });
});

describe('quota: WORKSPACE_QUOTA_MB=2', () => {
    let srv; let client; let api;
    const key = `k-${randomBytes(12).toString('hex')}`;
    before(async () => {
        srv = await startServer3(base, { API_KEY: key, WORKSPACE_QUOTA_MB: '2', WORKSPACE_ROOT: base.workspaceRoot('ws-quota') });
        client = await srv.connect(key);
        api = restClient(srv.url, key);
    });
    after(async () => {
        await client?.close();
        await srv?.stop();
    });

    test('REST upload over the quota: 507 quota_exceeded, the old file unchanged', async () => {
        const old = randomBytes(100 * 1024);
        let res = await api('POST', '/api/workspaces/q/files/keep.bin', { body: old });
        assert.equal(res.status, 201, await res.text());
        res = await api('POST', '/api/workspaces/q/files/keep.bin', { body: randomBytes(3 * MiB) });
        assert.equal(res.status, 507);
        const err = await res.json();
        assert.equal(err.error, 'quota_exceeded');
        assert.equal(typeof err.message, 'string');
        res = await api('GET', '/api/workspaces/q/files/keep.bin');
        assert.ok(Buffer.from(await res.arrayBuffer()).equals(old), 'the old file is unchanged');
        res = await api('POST', '/api/workspaces/q/files/other.bin', { body: randomBytes(3 * MiB) });
        assert.equal(res.status, 507);
        await res.arrayBuffer();
        // Multipart: all or nothing against the quota.
        const fd = new FormData();
        fd.append('f', new Blob([randomBytes(1200 * 1024)]), 'p1.bin');
        fd.append('f', new Blob([randomBytes(1200 * 1024)]), 'p2.bin');
        res = await api('POST', '/api/workspaces/q/files/parts/', { body: fd });
        assert.equal(res.status, 507);
        assert.equal((await res.json()).error, 'quota_exceeded');
        // MCP write_file too.
        const w = await callTool(client, 'write_file', { workspace: 'q', path: 'w.bin', content: randomBytes(2 * MiB).toString('base64'), encoding: 'base64' });
        assert.equal(w.isError, true, w.text);
        assert.match(w.text, /quota_exceeded/);
        assert.deepEqual((await (await api('GET', '/api/workspaces/q/tree')).json()).map((e) => e.name), ['keep.bin']);
    });

    test('code writing past the quota gets EFBIG (errno 27), not silent truncation', async () => {
        const r = await callTool(client, 'execute_code', {
            language: 'python', workspace: 'q', code: [
                'import os',
                'try:',
                '    with open("big.bin", "wb") as f:',
                '        f.write(b"x" * (3 * 1024 * 1024))',
                '    print("WROTE", os.path.getsize("big.bin"))',
                'except OSError as e:',
                '    print("ERRNO", e.errno, e.strerror)',
            ].join('\n'),
        });
        assert.equal(r.isError, false, r.text);
        assert.match(r.sc.stdout, /ERRNO 27 File too large/, `stdout: ${r.sc.stdout} stderr: ${r.sc.stderr}`);
        const info = await (await api('GET', '/api/workspaces/q')).json();
        assert.ok(info.size <= 2 * MiB, `workspace size ${info.size} over the 2 MB quota`);
    });
});

describe('expiry: WORKSPACE_MAX_AGE_HOURS=1', () => {
    let srv;
    const key = `k-${randomBytes(12).toString('hex')}`;
    let root;
    after(async () => { await srv?.stop(); });

    test('a workspace idle for 2 hours is removed at start; a fresh one stays', async () => {
        root = base.workspaceRoot('ws-expiry');
        const env = { API_KEY: key, WORKSPACE_MAX_AGE_HOURS: '1', WORKSPACE_ROOT: root, MAX_UPLOAD_MB: '1' };
        srv = await startServer3(base, env);
        let api = restClient(srv.url, key);
        for (const ws of ['old', 'fresh']) {
            const res = await api('POST', `/api/workspaces/${ws}/files/a.txt`, { body: ws });
            assert.equal(res.status, 201);
        }
        // (MAX_UPLOAD_MB=1 on this server) an upload over the limit: 413, nothing stored.
        const big = await api('POST', '/api/workspaces/fresh/files/big.bin', { body: randomBytes(MiB + 1) });
        assert.equal(big.status, 413);
        assert.equal((await big.json()).error, 'too_large');
        assert.equal((await api('GET', '/api/workspaces/fresh/files/big.bin')).status, 404);
        await srv.stop();
        const oldDir = join(root, 'default', 'old');
        assert.ok(existsSync(oldDir), `workspace directory expected at ${oldDir}`);
        const past = new Date(Date.now() - 2 * 3600 * 1000);
        utimesSync(oldDir, past, past);
        assert.ok(statSync(oldDir).mtimeMs < Date.now() - 3600 * 1000);

        srv = await startServer3(base, env);
        api = restClient(srv.url, key);
        let names = [];
        for (let i = 0; i < 50; i++) {
            names = (await (await api('GET', '/api/workspaces')).json()).map((e) => e.name);
            if (!names.includes('old')) break;
            await new Promise((r) => setTimeout(r, 200));
        }
        assert.deepEqual(names, ['fresh']);
        assert.ok(!existsSync(oldDir), 'the expired directory is gone from disk');
        assert.equal(await (await api('GET', '/api/workspaces/fresh/files/a.txt')).text(), 'fresh');
    });
});
