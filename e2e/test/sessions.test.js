// Issue #4, stateful sessions, end to end: the real jar, real HTTP, the official TypeScript MCP SDK client. Two
// servers, one after the other: two tenants (alice, bob) from an API_KEYS_FILE with MEMORY_LIMIT_MB=128 for
// persistence, results, errors, isolation, reset/close, interrupt, memory death, figures, node and cancel
// (MAX_SESSIONS=16: alice keeps more than the default 8 open); then SESSION_IDLE_SECONDS=2 and MAX_SESSIONS=2 for
// expiry and the per-tenant limit. The warm pool is off on both:
// only session sandboxes run, so counting their processes says what a session left behind.
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { startServer, exec, sleep } from '../lib/server.js';
import { makeBase, keysAppend } from '../lib/server3.js';

const MEMORY_LIMIT_MB = 128;
const PNG = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);

let base;
before(() => { base = makeBase(); });
after(() => base.remove());

async function tool(client, name, args = {}) {
    const raw = await client.callTool({ name, arguments: args }, undefined, { timeout: 150_000 });
    const text = (raw.content || []).filter((c) => c.type === 'text').map((c) => c.text).join('\n');
    return { isError: raw.isError === true, sc: raw.structuredContent, text, raw };
}

/** One call in a session; asserts the call itself was accepted (a tool error is a failed test here). */
async function cell(client, session, code, extra = {}) {
    const r = await exec(client, { language: 'python', session, code, ...extra });
    assert.equal(r.isError, false, `tool error: ${r.text}`);
    assert.equal(r.sc.session, session);
    return r;
}

/** The interpreters (not their bwrap and shell parents) of this server's sessions. */
const interpreters = (server, lang = 'python') => server.sandboxProcesses(lang === 'python' ? 'session_python.py' : 'session_node.js')
    .filter((l) => new RegExp(`^\\s*\\d+ /usr/bin/${lang === 'python' ? 'python3' : 'node'} `).test(l));

async function until(fn, timeoutMs = 5000) {
    const end = Date.now() + timeoutMs;
    for (;;) {
        if (await fn()) return true;
        if (Date.now() > end) return false;
        await sleep(50);
    }
}

describe('two tenants, MEMORY_LIMIT_MB=128', () => {
    let server; let alice; let bob;
    before(async () => {
        const keys = join(base.dir, 'keys');
        const aliceKey = keysAppend(keys, 'alice');
        const bobKey = keysAppend(keys, 'bob');
        server = await startServer({ API_KEY: '', API_KEYS_FILE: keys, WARM_POOL: 'off', DATA_DIR: base.dataDir, MAX_SESSIONS: '16',
            MEMORY_LIMIT_MB: String(MEMORY_LIMIT_MB), WORKSPACE_ROOT: base.workspaceRoot('ws-sessions') });
        alice = (await server.connect({ apiKey: aliceKey })).client;
        bob = (await server.connect({ apiKey: bobKey })).client;
    });
    after(async () => {
        await alice?.close().catch(() => {});
        await bob?.close().catch(() => {});
        await server?.stop();
    });

    test('the session tools are listed, and execute_code has a session argument', async () => {
        const { tools } = await alice.listTools();
        const names = tools.map((t) => t.name);
        for (const n of ['session_list', 'session_reset', 'session_close']) assert.ok(names.includes(n), n);
        const exe = tools.find((t) => t.name === 'execute_code');
        assert.equal(exe.inputSchema.properties.session.type, 'string');
        for (const k of ['session', 'result']) assert.ok(exe.outputSchema.properties[k], `output schema has ${k}`);
    });

    test('python: variables, imports and functions persist across calls; the final expression is the result', async () => {
        let r = await cell(alice, 'nb', 'import math\nx = 41\ndef f(y):\n    return y + 1\n');
        assert.equal(r.sc.exitCode, 0, r.sc.stderr);
        assert.equal(r.sc.sessionCreated, true);
        assert.equal(r.sc.result ?? null, null, 'no final expression, no result');
        r = await cell(alice, 'nb', 'print(f(x), math.floor(math.pi))\nf(x)');
        assert.equal(r.sc.sessionCreated, false);
        assert.equal(r.sc.stdout, '42 3\n');
        assert.equal(r.sc.result, '42');
        assert.match(r.text, /42/);
        r = await cell(alice, 'nb', 'x += 1\n{"x": x, "s": "a" * 3}');
        assert.equal(r.sc.result, "{'x': 42, 's': 'aaa'}", 'repr() of the value');
        r = await cell(alice, 'nb', 'None');
        assert.equal(r.sc.result ?? null, null, 'None gives no result');
        r = await cell(alice, 'nb', 'x');
        assert.equal(r.sc.result, '42');
    });

    test('an error keeps the state from before it (exception and syntax error)', async () => {
        let r = await cell(alice, 'err', 'y = 5\nz = 1 / 0\n');
        assert.equal(r.sc.exitCode, 1);
        assert.match(r.sc.stderr, /ZeroDivisionError: division by zero/);
        assert.doesNotMatch(r.sc.stderr, /session_python|codeexec/, 'no runner frames in the traceback');
        r = await cell(alice, 'err', 'def broken(:\n');
        assert.equal(r.sc.exitCode, 1);
        assert.match(r.sc.stderr, /SyntaxError/);
        r = await cell(alice, 'err', '(y, "z" in globals())');
        assert.equal(r.sc.exitCode, 0);
        assert.equal(r.sc.result, '(5, False)');
        assert.equal(r.sc.sessionCreated, false);
    });

    test('notebook habits through the SDK: indented cells, executionCount, a structured error, !cmd, %cd, ;, tasks before an await', async () => {
        let r = await cell(alice, 'habits', '    a = 40\n    if a:\n        b = a + 2\n    b');
        assert.equal(r.sc.result, '42', r.sc.stderr);
        assert.equal(r.sc.executionCount, 1);
        r = await cell(alice, 'habits', 'xyz');
        assert.equal(r.sc.executionCount, 2);
        assert.deepEqual({ name: r.sc.error?.name, value: r.sc.error?.value }, { name: 'NameError', value: "name 'xyz' is not defined" });
        assert.match(r.sc.error.traceback, /<cell 2>/);
        assert.doesNotMatch(r.sc.error.traceback, /session_python|codeexec/);
        r = await cell(alice, 'habits', '!echo from-the-shell\n%cd /tmp\nb;');
        assert.equal(r.sc.stdout, 'from-the-shell\n/tmp\n', r.sc.stderr);
        assert.equal(r.sc.result ?? null, null, 'a trailing ; hides the value');
        r = await cell(alice, 'habits', 'import asyncio\nt = asyncio.create_task(asyncio.sleep(0.01, result=42))\nawait t');
        assert.equal(r.sc.result, '42', r.sc.stderr);
        assert.equal(r.sc.stderr, '');
        r = await cell(alice, 'habits-js', 'null.x', { language: 'nodejs' });
        assert.equal(r.sc.executionCount, 1);
        assert.equal(r.sc.error?.name, 'TypeError', JSON.stringify(r.sc));
        // the later tests count this tenant's sessions
        for (const session of ['habits', 'habits-js']) assert.notEqual((await tool(alice, 'session_close', { session })).isError, true);
    });

    test('two sessions of one tenant are isolated; the same name of two tenants reaches two sessions', async () => {
        await cell(alice, 'iso-a', 'secret = "alice-a"');
        let r = await cell(alice, 'iso-b', '"secret" in globals()');
        assert.equal(r.sc.result, 'False');
        await cell(alice, 'shared', 'secret = "alice-shared"');
        r = await cell(bob, 'shared', '"secret" in globals()');
        assert.equal(r.sc.sessionCreated, true, 'bob got a new session of his own');
        assert.equal(r.sc.result, 'False');
        await cell(bob, 'shared', 'secret = "bob-shared"');
        r = await cell(alice, 'shared', 'secret');
        assert.equal(r.sc.result, "'alice-shared'");
        // Bob sees, resets and closes only his own.
        const bl = (await tool(bob, 'session_list')).sc.sessions.map((s) => s.name);
        assert.deepEqual(bl, ['shared']);
        assert.equal((await tool(bob, 'session_reset', { session: 'iso-a' })).isError, true);
        assert.equal((await tool(bob, 'session_close', { session: 'nb' })).isError, true);
        r = await cell(alice, 'nb', 'x');
        assert.equal(r.sc.result, '42', "alice's session survived bob's attempts");
    });

    test('session_list shows name, language, workspace, created, lastUsed, memory, calls', async () => {
        let r = await cell(alice, 'in-ws', 'open("made-by-session.txt", "w").write("hi")\n', { workspace: 'w1' });
        assert.equal(r.sc.exitCode, 0, r.sc.stderr);
        assert.equal(r.sc.workspace, 'w1');
        assert.ok(r.sc.files.some((f) => f.path === 'made-by-session.txt'), JSON.stringify(r.sc.files));
        r = await tool(alice, 'read_file', { workspace: 'w1', path: 'made-by-session.txt' });
        assert.equal(r.sc.content, 'hi');
        const list = (await tool(alice, 'session_list')).sc.sessions;
        const byName = Object.fromEntries(list.map((s) => [s.name, s]));
        assert.deepEqual(Object.keys(byName).sort(), ['err', 'in-ws', 'iso-a', 'iso-b', 'nb', 'shared']);
        const nb = byName.nb;
        assert.equal(nb.language, 'python');
        assert.equal(nb.workspace, undefined);
        assert.equal(byName['in-ws'].workspace, 'w1');
        assert.ok(nb.calls >= 6, JSON.stringify(nb));
        assert.equal(nb.busy, false);
        assert.ok(Date.parse(nb.created) <= Date.parse(nb.lastUsed), JSON.stringify(nb));
        assert.ok(Math.abs(Date.now() - Date.parse(nb.lastUsed)) < 120_000, JSON.stringify(nb));
        assert.ok(nb.memoryBytes > 1024 * 1024 && nb.memoryBytes < MEMORY_LIMIT_MB * 1024 * 1024, JSON.stringify(nb));
        assert.equal(interpreters(server).length, 7, 'one interpreter per session (alice 6, bob 1)');
    });

    test('session_reset: same name, empty state; unknown name is not_found', async () => {
        await cell(alice, 'iso-a', 'import json\nkept = 1');
        const r = await tool(alice, 'session_reset', { session: 'iso-a' });
        assert.equal(r.isError, false, r.text);
        assert.deepEqual(r.sc, { session: 'iso-a', reset: true });
        const c = await cell(alice, 'iso-a', '("kept" in globals(), "secret" in globals(), "json" in dir())');
        assert.equal(c.sc.result, '(False, False, False)');
        const u = await tool(alice, 'session_reset', { session: 'no-such' });
        assert.equal(u.isError, true);
        assert.match(u.text, /not_found|no session/);
    });

    test('session_close: gone from the list, its processes end, the name starts afresh', async () => {
        const before = interpreters(server).length;
        const r = await tool(alice, 'session_close', { session: 'iso-b' });
        assert.equal(r.isError, false, r.text);
        assert.deepEqual(r.sc, { session: 'iso-b', closed: true });
        assert.ok(!(await tool(alice, 'session_list')).sc.sessions.some((s) => s.name === 'iso-b'));
        assert.ok(await until(() => interpreters(server).length === before - 1), `interpreters ${interpreters(server).length}, was ${before}`);
        const c = await cell(alice, 'iso-b', '"secret" in globals()');
        assert.equal(c.sc.sessionCreated, true);
        assert.equal((await tool(alice, 'session_close', { session: 'iso-b' })).isError, false);
        assert.equal((await tool(alice, 'session_close', { session: 'iso-b' })).isError, true, 'closing twice: not_found');
    });

    test('a timed-out call is interrupted and the session keeps its state', async () => {
        await cell(alice, 'loop', 'x = 7');
        const t0 = Date.now();
        const r = await cell(alice, 'loop', 'print("spinning", flush=True)\nwhile True:\n    pass\n', { timeout_ms: 1500 });
        assert.equal(r.sc.outcome, 'timeout', JSON.stringify(r.sc));
        assert.equal(r.sc.timedOut, true);
        assert.equal(r.sc.stdout, 'spinning\n');
        assert.match(r.sc.stderr, /KeyboardInterrupt/);
        assert.match(r.sc.stderr, /session kept its state/);
        assert.ok(Date.now() - t0 < 8000, 'interrupted, not left to run');
        const c = await cell(alice, 'loop', 'x')
        assert.equal(c.sc.result, '7');
        assert.equal(c.sc.sessionCreated, false);
    });

    test('a call that ignores the interrupt is killed after the grace; the result says so; the next call starts afresh', async () => {
        await cell(alice, 'stubborn', 'x = 1');
        const r = await cell(alice, 'stubborn', 'import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n    pass\n', { timeout_ms: 1000 });
        assert.equal(r.sc.outcome, 'timeout');
        assert.match(r.sc.stderr, /session was killed/);
        const c = await cell(alice, 'stubborn', '"x" in globals()');
        assert.equal(c.sc.sessionCreated, true);
        assert.equal(c.sc.result, 'False');
    });

    test(`a session killed by its memory limit (${MEMORY_LIMIT_MB} MB) reports it; the next call starts a new session`, async () => {
        await cell(alice, 'hog', 'x = 1');
        const r = await cell(alice, 'hog', [
            'chunks = []',
            'for i in range(64):',
            '    chunks.append(b"x" * (16 << 20))',
            '    print(i, flush=True)',
        ].join('\n'), { timeout_ms: 30_000 });
        assert.equal(r.sc.outcome, 'memory_limit', JSON.stringify({ o: r.sc.outcome, e: r.sc.stderr.slice(-400) }));
        assert.match(r.sc.stderr, new RegExp(`memory limit ${MEMORY_LIMIT_MB} MB`));
        assert.match(r.sc.stderr, /session was killed/);
        assert.ok(r.sc.stdout.trim().split('\n').length < MEMORY_LIMIT_MB / 16);
        const c = await cell(alice, 'hog', '"x" in globals()');
        assert.equal(c.sc.sessionCreated, true);
        assert.equal(c.sc.result, 'False');
    });

    test('work left running in a session by its own code (docs/sessions.md, "Long work") goes on between calls', async () => {
        const started = await cell(alice, 'longwork', [
            'import subprocess',
            'p = subprocess.Popen(["/bin/sh", "-c", "for i in 1 2 3; do echo step $i; sleep 0.5; done"], stdout=open("steps.log", "w"))',
            '"started"',
        ].join('\n'));
        assert.equal(started.sc.result, "'started'");
        const running = await cell(alice, 'longwork', 'p.poll() is None');
        assert.equal(running.sc.result, 'True', 'the process outlived the call that started it');
        await sleep(2500);
        const done = await cell(alice, 'longwork', '(p.poll(), open("steps.log").read())');
        assert.equal(done.sc.result, "(0, 'step 1\\nstep 2\\nstep 3\\n')", JSON.stringify(done.sc));
    });

    test('a session that dies between calls (a background thread past the memory limit) says so on the next call', async () => {
        await cell(alice, 'bg', 'x = 1');
        const r = await cell(alice, 'bg', [
            'import threading, time',
            'def hog():',
            '    time.sleep(0.3)',
            '    chunks = []',
            '    while True:',
            '        chunks.append(b"x" * (16 << 20))',
            'threading.Thread(target=hog, daemon=True).start()',
            '"started"',
        ].join('\n'));
        assert.equal(r.sc.result, "'started'");
        await sleep(2000); // the thread reaches the limit within a few hundred ms of its start
        const t0 = Date.now();
        const dead = await exec(alice, { language: 'python', session: 'bg', code: 'print("must not run")' });
        assert.ok(Date.now() - t0 < 10_000, 'answered at once, no hang');
        assert.equal(dead.isError, false, dead.text);
        assert.equal(dead.sc.stdout, '', 'the code of the call after the death did not run');
        assert.equal(dead.sc.outcome, 'failed_to_start', JSON.stringify(dead.sc));
        assert.match(dead.sc.stderr, /memory|died|killed|ended/i);
        const c = await cell(alice, 'bg', '"x" in globals()');
        assert.equal(c.sc.sessionCreated, true);
        assert.equal(c.sc.result, 'False');
    });

    test('figures: plt.show() and a figure left open come back as PNG image content', async () => {
        const r = await cell(alice, 'plots', [
            'import matplotlib.pyplot as plt',
            'plt.figure(figsize=(2, 1.5), dpi=50)',
            'plt.plot([1, 3, 2])',
            'plt.show()',
            'fig = plt.figure(figsize=(2, 1.5), dpi=50)',
            'plt.bar([1, 2], [3, 4])',
            'print("drawn")',
        ].join('\n'), { timeout_ms: 60_000 });
        assert.equal(r.sc.exitCode, 0, r.sc.stderr);
        assert.equal(r.sc.stdout, 'drawn\n');
        const images = r.raw.content.filter((c) => c.type === 'image');
        assert.equal(images.length, 2, JSON.stringify(r.raw.content.map((c) => c.type)));
        for (const img of images) {
            assert.equal(img.mimeType, 'image/png');
            assert.deepEqual(Buffer.from(img.data, 'base64').subarray(0, 8), PNG);
        }
        assert.equal(r.sc.figures.length, 2);
        assert.ok(r.sc.figures.every((f) => f.mimeType === 'image/png' && f.shown === true && f.size > 100), JSON.stringify(r.sc.figures));
        // Shown figures are closed: the next call has none of them.
        const n = await cell(alice, 'plots', 'len(plt.get_fignums())');
        assert.equal(n.sc.result, '0');
        assert.equal(n.raw.content.filter((c) => c.type === 'image').length, 0);
    });

    test('node: state persists across calls; the final expression is the result', async () => {
        const js = (code) => exec(alice, { language: 'nodejs', session: 'js', code });
        let r = await js('var a = 40;\nfunction g(v) { return v + 2; }\nglobalThis.obj = { k: [1, 2] };\nconst os = require("os");');
        assert.equal(r.isError, false, r.text);
        assert.equal(r.sc.exitCode, 0, r.sc.stderr);
        assert.equal(r.sc.sessionCreated, true);
        r = await js('console.log(typeof os.cpus);\ng(a)');
        assert.equal(r.sc.stdout, 'function\n');
        assert.equal(r.sc.result, '42');
        r = await js('obj');
        assert.equal(r.sc.result, '{ k: [ 1, 2 ] }');
        r = await js('throw new Error("bad")');
        assert.equal(r.sc.exitCode, 1);
        assert.match(r.sc.stderr, /Error: bad/);
        r = await js('await new Promise((res) => setTimeout(() => res(a + 1), 10))');
        assert.equal(r.sc.result, '41', 'top-level await, state still there');
        assert.equal(interpreters(server, 'nodejs').length, 1);
    });

    test('node: a timed-out call is terminated and the session keeps its state', async () => {
        let r = await exec(alice, { language: 'nodejs', session: 'js-loop', code: 'var keep = 5;' });
        assert.equal(r.sc.exitCode, 0, r.sc.stderr);
        r = await exec(alice, { language: 'nodejs', session: 'js-loop', code: 'for (;;) {}', timeout_ms: 1500 });
        assert.equal(r.sc.outcome, 'timeout', JSON.stringify(r.sc));
        assert.match(r.sc.stderr, /session kept its state/);
        r = await exec(alice, { language: 'nodejs', session: 'js-loop', code: 'keep' });
        assert.equal(r.sc.result, '5');
        assert.equal(r.sc.sessionCreated, false);
    });

    test('rich outputs through the SDK: a DataFrame, display() of several objects in order, _repr_html_, a PIL image, a figure; the readable summary', async () => {
        const r = await cell(alice, 'rich', [
            'import pandas as pd, matplotlib.pyplot as plt',
            'from PIL import Image',
            'class Card:',
            '    def _repr_html_(self): return "<div class=card>hello</div>"',
            'df = pd.DataFrame({"city": ["Oslo", "Lima"], "n": [3, 4]})',
            'display(df, Card(), {"text/markdown": "**done**"}, raw=False)',
            'display({"text/markdown": "**done**"}, raw=True)',
            'plt.plot([1, 2]); plt.show()',
            'Image.new("RGB", (5, 5), "green")',
        ].join('\n'));
        assert.equal(r.sc.exitCode, 0, r.sc.stderr);
        assert.deepEqual(r.sc.outputs.map((o) => o.kind), ['display', 'display', 'display', 'display', 'result']);
        assert.match(r.sc.outputs[0].data['text/html'], /<table[\s\S]*Oslo/);
        assert.equal(r.sc.outputs[1].data['text/html'], '<div class=card>hello</div>');
        assert.equal(r.sc.outputs[2].data['text/html'], undefined, 'a plain dict is shown as a dict');
        assert.equal(r.sc.outputs[3].data['text/markdown'], '**done**');
        assert.deepEqual({ mime: r.sc.outputs[4].image?.mimeType, shown: r.sc.outputs[4].image?.shown }, { mime: 'image/png', shown: true });
        assert.equal(r.sc.figures.length, 1, 'the matplotlib figure stays a figure');
        const images = r.raw.content.filter((c) => c.type === 'image');
        assert.equal(images.length, 2, 'the PIL image, then the figure');
        for (const i of images) assert.ok(Buffer.from(i.data, 'base64').subarray(0, 8).equals(PNG));
        assert.match(r.text, /--- display 1 ---\n   city  n\n0  Oslo  3\n1  Lima  4/, 'a model sees the DataFrame as a table');
        assert.match(r.text, /--- display 2 ---\n<__main__\.Card object at 0x[0-9a-f]+>\n\(text\/html\) <div class=card>hello<\/div>/);
        assert.match(r.text, /--- display 4 ---\n\*\*done\*\*/);
        assert.doesNotMatch(r.text, /iVBOR/, 'no base64 in the text');
        assert.notEqual((await tool(alice, 'session_close', { session: 'rich' })).isError, true);
    });

    test('node and typescript sessions are a REPL; a bash session keeps its shell (issue 22)', async () => {
        const run = async (language, session, code) => {
            const r = await exec(alice, { language, session, code });
            assert.equal(r.isError, false, r.text);
            return r;
        };
        let r = await run('nodejs', 'repl', 'import { readFileSync } from "fs";\nimport * as paths from "node:path";\nlet k = 1;\nconst d = await Promise.resolve(40);');
        assert.equal(r.sc.exitCode, 0, r.sc.stderr);
        r = await run('nodejs', 'repl', 'let k = 2;\n[typeof readFileSync, paths.basename("/a/b.txt"), d + k]');
        assert.equal(r.sc.result, "[ 'function', 'b.txt', 42 ]", r.sc.stderr);
        r = await run('nodejs', 'repl', '"Hello World!"');
        assert.equal(r.sc.result, 'Hello World!', 'a string reads as text');
        r = await run('nodejs', 'repl', 'function f() { return missing; }\nf()');
        assert.equal(r.sc.executionCount, 4);
        assert.deepEqual({ name: r.sc.error?.name, value: r.sc.error?.value }, { name: 'ReferenceError', value: 'missing is not defined' });
        assert.match(r.sc.error.traceback, /at f \(<cell-4>:1:/);
        assert.doesNotMatch(r.sc.error.traceback, /session_node|node:inspector|node:vm/);

        r = await run('typescript', 'ts-repl', 'interface P { name: string }\nconst p: P = { name: "typed" };\np.name.length');
        assert.equal(r.sc.result, '5', r.sc.stderr);
        assert.equal(r.sc.sessionCreated, true);
        r = await run('typescript', 'ts-repl', 'const p: P = { name: "again" };\np.name');
        assert.equal(r.sc.result, 'again', 'declared again, the interface still known to the next cell is erased');

        r = await run('bash', 'sh', 'cd /tmp && mkdir -p here && cd here\nGREETING=hi\nsay() { echo "$GREETING from $(pwd)"; }');
        assert.equal(r.sc.exitCode, 0, r.sc.stderr);
        r = await run('bash', 'sh', 'say; false');
        assert.equal(r.sc.stdout, 'hi from /tmp/here\n');
        assert.equal(r.sc.exitCode, 1, 'the status of the call');
        for (const session of ['repl', 'ts-repl', 'sh']) assert.notEqual((await tool(alice, 'session_close', { session })).isError, true);
    });

    test('cancel through the SDK AbortSignal interrupts the call; the session survives', async () => {
        await cell(alice, 'cancel', 'x = 3');
        const ac = new AbortController();
        const call = alice.callTool({ name: 'execute_code', arguments: { language: 'python', session: 'cancel',
            code: 'import time\nprint("waiting", flush=True)\nwhile True:\n    time.sleep(0.05)\n', timeout_ms: 60_000 } },
        undefined, { signal: ac.signal, timeout: 150_000 }).then((r) => ({ r }), (e) => ({ e }));
        assert.ok(await until(async () => (await tool(alice, 'session_list')).sc.sessions.find((s) => s.name === 'cancel')?.busy, 10_000),
            'the call is running');
        const t0 = Date.now();
        ac.abort('user cancelled');
        const done = await call;
        assert.ok(done.e, 'the SDK rejects the aborted call');
        assert.ok(await until(async () => (await tool(alice, 'session_list')).sc.sessions.find((s) => s.name === 'cancel')?.busy === false, 5000),
            'the call stopped in the session');
        assert.ok(Date.now() - t0 < 5000);
        assert.equal(await server.waitIdle(5000), true, '/healthz running back to 0');
        const r = await cell(alice, 'cancel', 'x');
        assert.equal(r.sc.result, '3');
        assert.equal(r.sc.sessionCreated, false);
    });

    test('env on the creating call is the interpreter environment (python and node); a different env later is refused', async () => {
        let r = await cell(alice, 'env-py', 'import os\nos.environ["GREETING"]', { env: { GREETING: 'hello' } });
        assert.equal(r.sc.result, "'hello'", r.sc.stderr);
        r = await cell(alice, 'env-py', 'import subprocess\nsubprocess.run(["sh", "-c", "echo $GREETING"], capture_output=True, text=True).stdout');
        assert.equal(r.sc.result, "'hello\\n'", 'what the interpreter starts sees it too');
        const other = await exec(alice, { language: 'python', session: 'env-py', code: '1', env: { GREETING: 'other' } });
        assert.equal(other.isError, true);
        assert.match(other.text, /env/);
        r = await exec(alice, { language: 'nodejs', session: 'env-js', code: 'process.env.GREETING', env: { GREETING: 'from node' } });
        assert.equal(r.sc.result, 'from node', r.sc.stderr);
        for (const session of ['env-py', 'env-js']) assert.notEqual((await tool(alice, 'session_close', { session })).isError, true);
    });

    test('refused clearly: a session in another language, with args, or with env', async () => {
        for (const args of [
            { language: 'shell', session: 'sh1', code: 'echo hi' },
            { language: 'go', session: 'go1', code: 'package main\nfunc main() {}\n' },
            { language: 'python', session: 'nb', code: 'print(1)', args: ['a'] },
            { language: 'python', session: 'nb', code: 'print(1)', env: { A: '1' } },
        ]) {
            const r = await exec(alice, args);
            assert.equal(r.isError, true, `${JSON.stringify(args)} → ${r.text}`);
            assert.match(r.text, /session/i);
        }
    });

    test('after session_close of every session and after the server stops, no session process remains', async () => {
        for (const c of [alice, bob]) {
            for (const s of (await tool(c, 'session_list')).sc.sessions) {
                assert.equal((await tool(c, 'session_close', { session: s.name })).isError, false);
            }
            assert.deepEqual((await tool(c, 'session_list')).sc.sessions, []);
        }
        assert.ok(await until(() => server.sandboxProcesses('session_').length === 0), server.sandboxProcesses('session_').join('\n'));
        await cell(alice, 'last', 'x = 1');
        assert.equal(interpreters(server).length, 1);
        await server.stop();
        assert.ok(await until(() => server.sandboxProcesses('session_').length === 0, 3000), server.sandboxProcesses('session_').join('\n'));
    });
});

describe('SESSION_IDLE_SECONDS=2, MAX_SESSIONS=2', () => {
    let server; let client;
    before(async () => {
        server = await startServer({ WARM_POOL: 'off', SESSION_IDLE_SECONDS: '2', MAX_SESSIONS: '2', DATA_DIR: base.dataDir });
        ({ client } = await server.connect());
    });
    after(async () => {
        await client?.close().catch(() => {});
        await server?.stop();
    });

    test('MAX_SESSIONS=2: a third session is refused with a message naming the limit; closing one makes room', async () => {
        await cell(client, 'm1', 'a = 1');
        await cell(client, 'm2', 'a = 2');
        const r = await exec(client, { language: 'python', session: 'm3', code: 'a = 3' });
        const refused = r.isError || r.sc?.outcome === 'failed_to_start';
        assert.ok(refused, JSON.stringify(r.sc ?? r.text));
        assert.match(r.text + (r.sc?.stderr ?? ''), /MAX_SESSIONS/);
        const ok = await cell(client, 'm1', 'a');
        assert.equal(ok.sc.result, '1', 'existing sessions still work at the limit');
        assert.equal((await tool(client, 'session_close', { session: 'm2' })).isError, false);
        const c = await cell(client, 'm3', 'a = 3\na');
        assert.equal(c.sc.result, '3');
        assert.deepEqual((await tool(client, 'session_list')).sc.sessions.map((s) => s.name).sort(), ['m1', 'm3']);
        for (const n of ['m1', 'm3']) assert.equal((await tool(client, 'session_close', { session: n })).isError, false);
    });

    test('SESSION_IDLE_SECONDS=2: an idle session ends, its processes go, the next call starts afresh', async () => {
        await cell(client, 'idle', 'v = 99');
        assert.ok(interpreters(server).length >= 1);
        assert.ok(await until(async () => (await tool(client, 'session_list')).sc.sessions.length === 0, 10_000),
            'every session expired');
        assert.ok(await until(() => server.sandboxProcesses('session_').length === 0, 3000), server.sandboxProcesses('session_').join('\n'));
        const r = await cell(client, 'idle', '"v" in globals()');
        assert.equal(r.sc.sessionCreated, true);
        assert.equal(r.sc.result, 'False');
    });

    test('a session in use does not expire while its calls keep coming', async () => {
        await cell(client, 'busy', 'n = 0');
        for (let i = 0; i < 4; i++) {
            await sleep(1000);
            const r = await cell(client, 'busy', 'n += 1\nn');
            assert.equal(r.sc.result, String(i + 1));
        }
    });
});
