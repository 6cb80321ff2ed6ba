// Declared packages (execute_code's `packages`, session_reset's, the package store and its admin API) end to end:
// the real jar, real HTTP, the official TypeScript MCP SDK client, real pip and npm in the install sandboxes. The
// index and the registry are fixtures in this test process on 127.0.0.1 that build what they serve at start
// (fixtures/pypi-index.mjs: wheels of tiny projects; fixtures/npm-registry.mjs: tarballs, hostile postinstall
// scripts among them); the servers pin pypi.test and npm.test to 127.0.0.1 (EGRESS_RESOLVE) and open 127.0.0.1/32
// alone (EGRESS_ALLOW_CIDRS) while EGRESS stays off: installs reach the index through the proxy, runs reach nothing.
// Traffic rule: nothing here connects anywhere but this machine's loopback, except npm itself reaching its registry
// in the last part (skipped when the registry is unreachable), opened exactly as test/egress.test.js's npm case does.
//
// Three servers, one after the other:
//   1. the loopback index and registry, the default store and warm pool, a tenant key besides the admin's API_KEY:
//      installs, the store, spelling, extras, shadowing a preinstalled library, read-only entries, refusals, pip
//      errors, eight concurrent first requests, npm (require, import, TypeScript), hostile install scripts,
//      sessions, the admin API and the metrics;
//   2. limits: PACKAGE_STORE_MB=1 (eviction never takes an entry a session holds), INSTALL_DISK_MB=8 (a 30 MB
//      wheel), INSTALL_TIMEOUT_MS (an index page that never answers);
//   3. the real npm registry (left-pad@1.3.0): require, ESM import, TypeScript, a second run from the store.
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, chmodSync, rmSync, writeFileSync, existsSync } from 'node:fs';
import { createServer as createNetServer } from 'node:net';
import { createHash } from 'node:crypto';
import { lookup } from 'node:dns/promises';
import { join } from 'node:path';
import { startServer, exec, randomSecret, sleep, withLog } from '../lib/server.js';
import { makeBase, restClient, callTool } from '../lib/server3.js';
import { startPypiIndex } from '../fixtures/pypi-index.mjs';
import { startNpmRegistry } from '../fixtures/npm-registry.mjs';

// ---------------------------------------------------------------------------------------------------------------
// Fixtures: the index, the registry, a listener the hostile network script must not reach, places the hostile
// write and read scripts must not reach.
// ---------------------------------------------------------------------------------------------------------------

let base; // makeBase(): DATA_DIR (or E2E_DATA_DIR), a 0711 directory
let pypi; // fixtures/pypi-index.mjs
let reg; // fixtures/npm-registry.mjs
let listener; let LP; // evil-net's target: a TCP listener on 127.0.0.1:LP
const listenerSaw = []; // connections the listener accepted
let openDir; // a host directory everyone may write to, outside /tmp (no sandbox has a private mount there)
let secretFile; // a host file everyone may read (in a 0711 directory): no sandbox may see it

before(async () => {
    base = makeBase();
    pypi = await startPypiIndex();
    listener = createNetServer((s) => {
        listenerSaw.push(Date.now());
        s.destroy();
    });
    LP = await new Promise((res, rej) => {
        listener.once('error', rej);
        listener.listen(0, '127.0.0.1', () => res(listener.address().port));
    });
    openDir = mkdtempSync('/var/tmp/code-exec-e2e-open-');
    chmodSync(openDir, 0o777);
    secretFile = join(base.dir, `secret-${randomSecret('')}.txt`);
    writeFileSync(secretFile, `${randomSecret('SECRET-')}\n`, { mode: 0o644 });
    chmodSync(secretFile, 0o644);
    reg = await startNpmRegistry({
        writeTargets: [openDir],
        writeHostOnly: [base.dataDir, join(base.dataDir, 'packages'), base.dir],
        readTargets: [secretFile],
        netPort: LP,
    });
});

after(async () => {
    await pypi?.stop();
    await reg?.stop();
    await new Promise((res) => (listener ? listener.close(() => res()) : res()));
    if (openDir) rmSync(openDir, { recursive: true, force: true });
    base?.remove();
});

// ---------------------------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------------------------

const show = (r) => JSON.stringify({
    isError: r.isError, text: r.text?.slice(0, 2500), outcome: r.sc?.outcome, exitCode: r.sc?.exitCode,
    stdout: r.sc?.stdout?.slice(0, 1500), stderr: r.sc?.stderr?.slice(0, 2500), packages: r.sc?.packages,
    installMs: r.sc?.installMs,
}, null, 1);


/** Connects an SDK client; a failure carries the server's log tail (a hook's error has no withLog). */
async function connect(server, opts = {}) {
    try {
        return (await server.connect(opts)).client;
    } catch (e) {
        e.message += `\n--- server log (tail) ---\n${server.log().slice(-5000)}`;
        throw e;
    }
}

/** Waits until `cond()` is true (true) or `ms` passes (false). */
async function until(cond, ms, step = 100) {
    const end = Date.now() + ms;
    for (;;) {
        if (await cond()) return true;
        if (Date.now() > end) return false;
        await sleep(step);
    }
}

/** A run that must have succeeded: no tool error, exit 0. */
function ok(r, what = '') {
    assert.equal(r.isError, false, `${what} ${show(r)}`);
    assert.equal(r.sc?.outcome, 'exited', `${what} ${show(r)}`);
    assert.equal(r.sc.exitCode, 0, `${what} ${show(r)}`);
    return r;
}

/** A run whose install failed: outcome failed_to_start, the program never ran. */
function installFailed(r, what = '') {
    assert.ok(r.sc, `${what}: a result, not a tool error: ${show(r)}`);
    assert.equal(r.sc.outcome, 'failed_to_start', `${what}: ${show(r)}`);
    assert.doesNotMatch(r.sc.stdout ?? '', /must not run/, `${what}: the program did not run: ${show(r)}`);
    return r;
}

/** The hostile script's own report lines (what it tried, what stopped it), for the test's output. */
function scriptReport(t, r) {
    for (const l of (r.sc?.stderr ?? '').split('\n').filter((x) => /evil-\w+: /.test(x))) t.diagnostic(l.replace(/^npm error /, ''));
}

/** The result came from an install made by this call. */
function installed(r, what = '') {
    assert.equal(typeof r.sc?.installMs, 'number', `${what}: installMs: ${show(r)}`);
    assert.ok(r.sc.installMs > 0, `${what}: installed by this call: ${show(r)}`);
}

/** The result came from the store. */
function fromStore(r, what = '') {
    assert.equal(r.sc?.installMs, 0, `${what}: from the store: ${show(r)}`);
}

/** The package store as the admin API shows it. */
async function store(server) {
    const res = await restClient(server.base, server.apiKey)('GET', '/api/admin/packages');
    assert.equal(res.status, 200, `GET /api/admin/packages: ${res.status}`);
    return res.json();
}

/** The entries whose resolved set is exactly `resolved`. */
const entriesResolving = (st, resolved) => st.entries.filter((e) => JSON.stringify(sortKeys(e.resolved)) === JSON.stringify(sortKeys(resolved)));
const sortKeys = (o) => Object.fromEntries(Object.entries(o ?? {}).sort(([a], [b]) => a.localeCompare(b)));

/** The one entry resolving exactly to `resolved` (asserts there is exactly one). */
function entryOf(st, resolved) {
    const list = entriesResolving(st, resolved);
    assert.equal(list.length, 1, `one store entry resolving to ${JSON.stringify(resolved)}: ${JSON.stringify(st.entries, null, 1)}`);
    return list[0];
}

/** /metrics (with the admin key) as text. */
async function metricsText(server) {
    const res = await fetch(`${server.base}/metrics`, { headers: { Authorization: `Bearer ${server.apiKey}` } });
    assert.equal(res.status, 200, 'GET /metrics');
    return res.text();
}

/** The value of a Prometheus series (summed over its labels), or null when the series is absent. */
function metric(text, name) {
    let found = false;
    let sum = 0;
    for (const line of text.split('\n')) {
        const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)/.exec(line);
        if (m && m[1] === name) {
            found = true;
            sum += Number(m[3]);
        }
    }
    return found ? sum : null;
}

const REFUSED_ERRNO = /^(EROFS|EACCES|EPERM)$/;

// ---------------------------------------------------------------------------------------------------------------
// 1. The loopback index and registry.
// ---------------------------------------------------------------------------------------------------------------

describe('declared packages: a loopback PEP 503 index and npm registry (EGRESS off, 127.0.0.1/32 opened for installs)', () => {
    let server; let client; let alice; let aliceKey;
    let metrics0; // /metrics before any install
    const S = () => server;
    const py = (code, packages, extra = {}) => exec(client, { language: 'python', code, ...(packages ? { packages } : {}), ...extra });
    const js = (code, packages, extra = {}) => exec(client, { language: 'nodejs', code, ...(packages ? { packages } : {}), ...extra });
    const wheel = (name, v) => pypi.wheel(name, v).file;

    before(async () => {
        const keysFile = join(base.dir, 'keys-main');
        aliceKey = randomSecret('key-alice-');
        writeFileSync(keysFile, `alice ${createHash('sha256').update(aliceKey).digest('hex')}\n`, { mode: 0o600 });
        server = await startServer({
            DATA_DIR: base.dataDir,
            API_KEYS_FILE: keysFile, // alice, a tenant without admin rights, next to API_KEY's admin
            PACKAGE_INDEX_PYTHON: pypi.urlFor('pypi.test'),
            PACKAGE_REGISTRY_NPM: reg.urlFor('npm.test'),
            EGRESS_RESOLVE: 'pypi.test=127.0.0.1,npm.test=127.0.0.1',
            EGRESS_ALLOW_CIDRS: '127.0.0.1/32',
        });
        client = await connect(server);
        alice = await connect(server, { apiKey: aliceKey });
        metrics0 = await metricsText(server);
    });
    after(async () => {
        for (const c of [client, alice]) await c?.close().catch(() => {});
        await server?.stop();
    });

    test('tools/list: execute_code and session_reset take packages; the output schema has packages and installMs', withLog(S, async () => {
        const { tools } = await client.listTools();
        const exe = tools.find((t) => t.name === 'execute_code');
        assert.equal(exe.inputSchema.properties.packages?.type, 'array', JSON.stringify(exe.inputSchema.properties.packages));
        assert.equal(exe.inputSchema.properties.packages.items?.type, 'string');
        assert.ok(exe.outputSchema.properties.packages, 'output schema: packages');
        assert.ok(exe.outputSchema.properties.installMs, 'output schema: installMs');
        const reset = tools.find((t) => t.name === 'session_reset');
        assert.equal(reset.inputSchema.properties.packages?.type, 'array', JSON.stringify(reset.inputSchema));
    }));

    // --- pip -----------------------------------------------------------------------------------------------------

    test('pip: the first run with tinylib==1.0 installs it (installMs > 0) and imports it; the run itself reaches no network', { timeout: 120_000 }, withLog(S, async () => {
        const idx0 = pypi.requests.length;
        const probe = `/probe-${randomSecret('')}`;
        const r = ok(await py([
            'import tinylib',
            'print(tinylib.VERSION, tinylib.greet("e2e"))',
            'import urllib.error, urllib.request',
            'reached = 0',
            `for url in ["http://pypi.test:${pypi.port}${probe}", "http://127.0.0.1:${pypi.port}${probe}"]:`,
            '    try:',
            '        urllib.request.urlopen(url, timeout=5)',
            '        reached += 1',
            '    except urllib.error.HTTPError:',
            '        reached += 1',
            '    except Exception:',
            '        pass',
            'print("network: reached" if reached else "network: none")',
        ].join('\n'), ['tinylib==1.0']));
        assert.equal(r.sc.stdout, '1.0 tinylib 1.0 greets e2e\nnetwork: none\n', show(r));
        assert.deepEqual(r.sc.packages, { tinylib: '1.0' }, show(r));
        installed(r);
        const seen = pypi.requests.slice(idx0).map((q) => q.path);
        assert.ok(seen.includes('/simple/tinylib/'), `the index page was fetched: ${seen}`);
        assert.equal(seen.filter((p) => p === `/files/${wheel('tinylib', '1.0')}`).length, 1, `the 1.0 wheel once: ${seen}`);
        assert.ok(!seen.includes(`/files/${wheel('tinylib', '2.0')}`), `not the 2.0 wheel: ${seen}`);
        assert.ok(!seen.includes(probe), `the run's own request never reached the index: ${seen}`);
        assert.ok(pypi.requests.slice(idx0).every((q) => q.host === `pypi.test:${pypi.port}`),
            `the installer asked for the configured name: ${JSON.stringify(pypi.requests.slice(idx0))}`);
    }));

    test('pip: the same set again comes from the store (installMs 0) and the index sees no request', { timeout: 60_000 }, withLog(S, async () => {
        const idx0 = pypi.requests.length;
        const r = ok(await py('import tinylib\nprint(tinylib.VERSION)', ['tinylib==1.0']));
        assert.equal(r.sc.stdout, '1.0\n');
        assert.deepEqual(r.sc.packages, { tinylib: '1.0' });
        fromStore(r);
        assert.deepEqual(pypi.requests.slice(idx0), [], 'no request to the index');
    }));

    test('pip: tinylib==2.0 (which needs tinydep) gets its own entry; tinylib==1.0 still sees 1.0 beside it', { timeout: 120_000 }, withLog(S, async () => {
        const idx0 = pypi.requests.length;
        const r2 = ok(await py('import tinylib, tinydep\nprint(tinylib.VERSION, tinylib.DEP, tinydep.DEP_VERSION)', ['tinylib==2.0']));
        assert.equal(r2.sc.stdout, '2.0 1.0 1.0\n', show(r2));
        assert.deepEqual(r2.sc.packages, { tinydep: '1.0', tinylib: '2.0' }, show(r2));
        installed(r2);
        const seen = pypi.requests.slice(idx0).map((q) => q.path);
        assert.ok(seen.includes(`/files/${wheel('tinylib', '2.0')}`) && seen.includes(`/files/${wheel('tinydep', '1.0')}`), `${seen}`);
        const r1 = ok(await py('import tinylib\nprint(tinylib.VERSION)\ntry:\n    import tinydep\n    print("tinydep too")\nexcept ImportError:\n    print("no tinydep")', ['tinylib==1.0']));
        assert.equal(r1.sc.stdout, '1.0\nno tinydep\n', `the 1.0 set is unchanged: ${show(r1)}`);
        fromStore(r1);
        const st = await store(server);
        const e1 = entryOf(st, { tinylib: '1.0' });
        const e2 = entryOf(st, { tinydep: '1.0', tinylib: '2.0' });
        assert.notEqual(e1.key, e2.key);
        assert.equal(e1.ecosystem, 'pip');
        assert.equal(e2.ecosystem, 'pip');
    }));

    test('pip: another spelling of the same set ("TinyLib == 1.0", " tinylib==1.0 ") is the same entry', { timeout: 60_000 }, withLog(S, async () => {
        const idx0 = pypi.requests.length;
        for (const spec of ['TinyLib == 1.0', ' tinylib==1.0 ', 'TINYLIB==1.0']) {
            const r = ok(await py('import tinylib\nprint(tinylib.VERSION)', [spec]), spec);
            assert.equal(r.sc.stdout, '1.0\n', `${spec}: ${show(r)}`);
            assert.deepEqual(r.sc.packages, { tinylib: '1.0' }, spec);
            fromStore(r, spec);
        }
        assert.deepEqual(pypi.requests.slice(idx0), [], 'no request to the index');
        assert.equal(entriesResolving(await store(server), { tinylib: '1.0' }).length, 1, 'still one entry for tinylib 1.0');
    }));

    test('pip: extras ("tinyext[fast]==1.0") bring the extra\'s dependency', { timeout: 120_000 }, withLog(S, async () => {
        const r = ok(await py('import tinyext, tinydep\nprint(tinyext.VERSION, tinydep.DEP_VERSION)', ['tinyext[fast]==1.0']));
        assert.equal(r.sc.stdout, '1.0 1.0\n', show(r));
        assert.deepEqual(r.sc.packages, { tinydep: '1.0', tinyext: '1.0' }, show(r));
        installed(r);
    }));

    test('pip: a declared package comes ahead of the preinstalled one (pyyaml==99.0 over Debian\'s PyYAML); its site dir is ahead of dist-packages in sys.path', { timeout: 120_000 }, withLog(S, async () => {
        const code = [
            'import os, sys',
            'try:',
            '    import yaml',
            '    print(yaml.__version__)',
            '    site = os.path.dirname(os.path.dirname(os.path.abspath(yaml.__file__)))',
            'except ImportError:',
            '    print("no yaml")',
            '    site = None',
            'dist = [p for p in sys.path if p.endswith("-packages") and p != site]',
            'print("ahead" if site in sys.path and dist and all(sys.path.index(site) < sys.path.index(d) for d in dist) else "not ahead", site)',
        ].join('\n');
        const plain = ok(await py(code));
        const preinstalled = plain.sc.stdout.split('\n')[0];
        assert.notEqual(preinstalled, '99.0-fixture', `without packages: the machine's own (${preinstalled})`);
        const r = ok(await py(code, ['pyyaml==99.0']));
        const [version, order] = r.sc.stdout.split('\n');
        assert.equal(version, '99.0-fixture', `the declared one wins: ${show(r)}`);
        assert.match(order, /^ahead \//, `the set's site directory is ahead of every *-packages directory: ${show(r)}`);
        assert.deepEqual(r.sc.packages, { pyyaml: '99.0' }, 'names pip-normalised (PyYAML → pyyaml)');
        if (preinstalled === 'no yaml') process.stderr.write('packages.test: PyYAML is not preinstalled here: only the order was shown\n');
    }));

    test('pip: user code cannot change a store entry (write, append, chmod, remove, rename, plant a .pth); the next run imports the original', { timeout: 60_000 }, withLog(S, async () => {
        const r = ok(await py([
            'import errno, os, tinylib',
            'd = os.path.dirname(os.path.abspath(tinylib.__file__))',
            'site = os.path.dirname(d)',
            'tries = [',
            '    ("write", lambda: open(os.path.join(d, "evil.py"), "w").write("x")),',
            '    ("append", lambda: open(tinylib.__file__, "a").write("\\nVERSION = \\"hacked\\"\\n")),',
            '    ("chmod-dir", lambda: os.chmod(d, 0o777)),',
            '    ("chmod-file", lambda: os.chmod(tinylib.__file__, 0o666)),',
            '    ("remove", lambda: os.remove(tinylib.__file__)),',
            '    ("rename", lambda: os.rename(d, d + "-moved")),',
            '    ("pth", lambda: open(os.path.join(site, "planted.pth"), "w").write("import os\\n")),',
            '    ("mkdir", lambda: os.mkdir(os.path.join(site, "newpkg"))),',
            ']',
            'for what, f in tries:',
            '    try:',
            '        f()',
            '        print(what, "DONE")',
            '    except OSError as e:',
            '        print(what, errno.errorcode.get(e.errno, e.errno))',
        ].join('\n'), ['tinylib==1.0']));
        const lines = r.sc.stdout.trim().split('\n');
        assert.equal(lines.length, 8, show(r));
        for (const l of lines) {
            const [what, how] = l.split(' ');
            assert.match(how, REFUSED_ERRNO, `${what} was refused: ${show(r)}`);
        }
        const again = ok(await py([
            'import os, tinylib',
            'd = os.path.dirname(os.path.abspath(tinylib.__file__))',
            'print(tinylib.VERSION, sorted(n for n in os.listdir(d) if not n.startswith("__pycache__")))',
            'print(sorted(n for n in os.listdir(os.path.dirname(d)) if n.endswith(".pth") or n == "newpkg"))',
        ].join('\n'), ['tinylib==1.0']));
        assert.equal(again.sc.stdout, "1.0 ['__init__.py']\n[]\n", show(again));
    }));

    test('a run without packages sees none of them, and its result has no packages or installMs', { timeout: 60_000 }, withLog(S, async () => {
        const r = ok(await py('try:\n    import tinylib\n    print("found")\nexcept ImportError:\n    print("absent")'));
        assert.equal(r.sc.stdout, 'absent\n');
        assert.ok(!('packages' in r.sc) && !('installMs' in r.sc), JSON.stringify(Object.keys(r.sc)));
        const j = ok(await js('try { require("nice-pkg"); console.log("found"); } catch (e) { console.log(e.code); }'));
        assert.equal(j.sc.stdout, 'MODULE_NOT_FOUND\n');
    }));

    test('pip: a package the index does not have fails the run (failed_to_start, pip\'s message); nothing is stored, so the next call tries again', { timeout: 120_000 }, withLog(S, async () => {
        const c0 = (await store(server)).counts;
        const seen0 = pypi.seen('/simple/nosuchpkg/');
        for (let i = 0; i < 2; i++) {
            const r = installFailed(await py('print("must not run")', ['nosuchpkg==1.0']), `attempt ${i + 1}`);
            assert.match(r.sc.stderr, /No matching distribution found for nosuchpkg/, show(r));
        }
        assert.equal(pypi.seen('/simple/nosuchpkg/') - seen0, 2, 'each call asked the index again');
        const st = await store(server);
        assert.equal(st.entries.filter((e) => JSON.stringify(e.specs).includes('nosuchpkg')).length, 0, 'no entry');
        assert.equal(st.counts.failures - c0.failures, 2, `two failures counted: ${JSON.stringify(st.counts)}`);
        assert.equal(st.counts.installs, c0.installs, 'no install counted');
    }));

    test('pip: an unsatisfiable constraint (tinylib>=9) fails with pip\'s message naming the versions there are', { timeout: 120_000 }, withLog(S, async () => {
        const r = installFailed(await py('print("must not run")', ['tinylib>=9']));
        assert.match(r.sc.stderr, /Could not find a version that satisfies the requirement tinylib>=9/, show(r));
        assert.match(r.sc.stderr, /from versions: 1\.0, 2\.0/, show(r));
    }));

    test('refused before anything is installed: URLs, paths, VCS references, options, markers (pip and npm); packages with shell or bash', { timeout: 60_000 }, withLog(S, async () => {
        const idx0 = pypi.requests.length;
        const reg0 = reg.requests.length;
        const pip = ['tinylib @ https://example.invalid/tinylib-1.0-py3-none-any.whl', '--index-url=http://example.invalid/simple/',
            '-e tinylib', '--extra-index-url http://x', 'git+https://example.invalid/tinylib.git', './tinylib',
            '/tmp/tinylib-1.0-py3-none-any.whl', 'https://example.invalid/tinylib.whl', 'tinylib==1.0; python_version > "3"',
            'file:///etc/passwd'];
        for (const spec of pip) {
            const r = await py('print("must not run")', ['tinydep==1.0', spec]);
            assert.equal(r.isError, true, `${spec}: ${show(r)}`);
            assert.match(r.text, /package '.*' refused: /, `${spec}: ${show(r)}`);
            assert.doesNotMatch(r.text, /must not run/);
        }
        const npm = ['left-pad@git+https://example.invalid/x.git', 'github:user/repo', 'user/repo', 'npm:left-pad@1.3.0',
            'file:../x', './x', 'https://example.invalid/x.tgz', '--registry=http://example.invalid/', 'x.tgz'];
        for (const spec of npm) {
            const r = await js('console.log("must not run")', ['nice-pkg@1.0.0', spec]);
            assert.equal(r.isError, true, `${spec}: ${show(r)}`);
            assert.match(r.text, /package '.*' refused: /, `${spec}: ${show(r)}`);
        }
        for (const language of ['shell', 'bash']) {
            const r = await exec(client, { language, code: 'echo must not run', packages: ['tinylib==1.0'] });
            assert.equal(r.isError, true, `${language}: ${show(r)}`);
            assert.match(r.text, /packages/, `${language}: the error says packages are not for it: ${show(r)}`);
            assert.doesNotMatch(r.text, /must not run/);
        }
        assert.deepEqual(pypi.requests.slice(idx0), [], 'the index saw nothing');
        assert.deepEqual(reg.requests.slice(reg0), [], 'the registry saw nothing');
    }));

    test('eight concurrent first requests for one set: all succeed, one install (one download, one installs count)', { timeout: 150_000 }, withLog(S, async () => {
        const c0 = (await store(server)).counts;
        const file = `/files/${wheel('tinyconc', '1.0')}`;
        assert.equal(pypi.fetched(wheel('tinyconc', '1.0')), 0, 'not fetched before');
        const rs = await Promise.all(Array.from({ length: 8 }, (_, i) => py(`import tinyconc\nprint(${i}, tinyconc.VERSION)`, ['tinyconc==1.0'])));
        rs.forEach((r, i) => {
            ok(r, `call ${i}`);
            assert.equal(r.sc.stdout, `${i} 1.0\n`, show(r));
            assert.deepEqual(r.sc.packages, { tinyconc: '1.0' });
        });
        assert.equal(rs.filter((r) => r.sc.installMs > 0).length, 1, `exactly one call installed: ${rs.map((r) => r.sc.installMs)}`);
        assert.equal(pypi.requests.filter((q) => q.path === file).length, 1, 'the index served the wheel once');
        const c1 = (await store(server)).counts;
        assert.equal(c1.installs - c0.installs, 1, `one install counted: ${JSON.stringify(c0)} → ${JSON.stringify(c1)}`);
        assert.equal(c1.misses - c0.misses, 1, `one miss: ${JSON.stringify(c0)} → ${JSON.stringify(c1)}`);
        assert.equal(c1.hits - c0.hits, 7, `seven hits: ${JSON.stringify(c0)} → ${JSON.stringify(c1)}`);
    }));

    // --- npm (the loopback registry) -----------------------------------------------------------------------------

    test('npm: nice-pkg (and its dependency) by require in nodejs; again from the store; the registry saw the configured name', { timeout: 120_000 }, withLog(S, async () => {
        const reg0 = reg.requests.length;
        const r = ok(await js('const nice = require("nice-pkg");\nconsole.log(nice.hello("cjs"), nice.dep, nice.version);', ['nice-pkg@1.0.0']));
        assert.equal(r.sc.stdout, 'nice cjs nice-dep 1.0.0 1.0.0\n', show(r));
        assert.deepEqual(r.sc.packages, { 'nice-dep': '1.0.0', 'nice-pkg': '1.0.0' }, show(r));
        installed(r);
        assert.equal(reg.tarballFetches('nice-pkg'), 1);
        assert.equal(reg.tarballFetches('nice-dep'), 1);
        assert.ok(reg.requests.slice(reg0).every((q) => q.host === `npm.test:${reg.port}`), JSON.stringify(reg.requests.slice(reg0)));
        const reg1 = reg.requests.length;
        const again = ok(await js('console.log(require("nice-pkg").hello("again"))', ['nice-pkg@1.0.0']));
        assert.equal(again.sc.stdout, 'nice again\n');
        fromStore(again);
        assert.deepEqual(reg.requests.slice(reg1), [], 'no request to the registry');
        const e = entryOf(await store(server), { 'nice-dep': '1.0.0', 'nice-pkg': '1.0.0' });
        assert.equal(e.ecosystem, 'npm', JSON.stringify(e));
        assert.ok(e.specs.some((s) => /nice-pkg/.test(s)), JSON.stringify(e));
    }));

    test('npm: ESM import in nodejs resolves the package\'s "import" entry; TypeScript imports it too', { timeout: 120_000 }, withLog(S, async () => {
        const esm = ok(await js('import nice, { hello, esm } from "nice-pkg";\nconsole.log(hello("esm"), esm, nice.version);', ['nice-pkg@1.0.0']));
        assert.equal(esm.sc.stdout, 'nice esm true 1.0.0\n', show(esm));
        assert.deepEqual(esm.sc.packages, { 'nice-dep': '1.0.0', 'nice-pkg': '1.0.0' });
        const ts = ok(await exec(client, { language: 'typescript', packages: ['nice-pkg@1.0.0'],
            code: 'import nice from "nice-pkg";\nconst s: string = nice.hello("ts");\nconsole.log(s, nice.dep);\n' }));
        assert.equal(ts.sc.stdout, 'nice ts nice-dep 1.0.0\n', show(ts));
        assert.deepEqual(ts.sc.packages, { 'nice-dep': '1.0.0', 'nice-pkg': '1.0.0' });
        const plainTs = ok(await exec(client, { language: 'typescript', code: 'const n: number = 2;\nconsole.log(n * 21);\n' }));
        assert.equal(plainTs.sc.stdout, '42\n', 'TypeScript without packages still works');
    }));

    test('npm: a postinstall that writes outside its install fails the install; nothing was written anywhere', { timeout: 120_000 }, withLog(S, async (t) => {
        const r = installFailed(await js('console.log("must not run")', ['evil-write@1.0.0']));
        scriptReport(t, r);
        assert.match(r.sc.stderr, /evil-write: blocked /, `the script ran and was stopped: ${show(r)}`);
        assert.doesNotMatch(r.sc.stderr, /evil-write: WROTE/, show(r));
        for (const d of [openDir, base.dataDir, join(base.dataDir, 'packages'), base.dir, '/usr/lib', '/etc', '/']) {
            assert.equal(existsSync(join(d, reg.marker)), false, `no ${join(d, reg.marker)} on the host`);
        }
        assert.equal((await store(server)).entries.filter((e) => JSON.stringify(e.specs).includes('evil-')).length, 0, 'nothing stored');
    }));

    test('npm: a postinstall that reads /etc/shadow or a host file fails the install', { timeout: 120_000 }, withLog(S, async (t) => {
        const r = installFailed(await js('console.log("must not run")', ['evil-read@1.0.0']));
        scriptReport(t, r);
        assert.match(r.sc.stderr, /evil-read: blocked \/etc\/shadow/, show(r));
        assert.doesNotMatch(r.sc.stderr, /evil-read: READ/, show(r));
        assert.doesNotMatch(r.sc.stderr + r.text, /SECRET-/, 'the secret is nowhere in the result');
    }));

    test('npm: a postinstall that connects elsewhere (directly, or through the proxy to another port) fails the install; the listener saw nothing', { timeout: 120_000 }, withLog(S, async (t) => {
        const saw0 = listenerSaw.length;
        const r = installFailed(await js('console.log("must not run")', ['evil-net@1.0.0']));
        scriptReport(t, r);
        assert.match(r.sc.stderr, /evil-net: direct 127\.0\.0\.1:\d+: (blocked|timeout)/, show(r));
        assert.doesNotMatch(r.sc.stderr, /CONNECTED/, show(r));
        assert.equal(listenerSaw.length - saw0, 0, 'no connection reached the listener');
        assert.equal((await store(server)).entries.filter((e) => JSON.stringify(e.specs).includes('evil-')).length, 0, 'nothing stored');
    }));

    // --- sessions ------------------------------------------------------------------------------------------------

    test('sessions: created with a set; calls without packages use it; another set is refused naming session_reset; session_reset with packages switches', { timeout: 150_000 }, withLog(S, async () => {
        const name = `pk-${randomSecret('')}`.slice(0, 20);
        const first = ok(await py('import tinylib\nv = tinylib.VERSION\nprint(v)', ['tinylib==1.0'], { session: name }));
        assert.equal(first.sc.stdout, '1.0\n', show(first));
        assert.deepEqual(first.sc.packages, { tinylib: '1.0' }, show(first));
        const second = ok(await py('print(v, tinylib.greet("again"))', undefined, { session: name }));
        assert.equal(second.sc.stdout, '1.0 tinylib 1.0 greets again\n', `state and the set kept: ${show(second)}`);
        const same = ok(await py('print(v)', ['tinylib==1.0'], { session: name }));
        assert.equal(same.sc.stdout, '1.0\n', `the same set again is accepted: ${show(same)}`);
        const other = await py('print("must not run")', ['tinylib==2.0'], { session: name });
        assert.equal(other.isError, true, show(other));
        assert.match(other.text, /session_reset/, show(other));
        const still = ok(await py('print(v)', undefined, { session: name }));
        assert.equal(still.sc.stdout, '1.0\n', `the refused call changed nothing: ${show(still)}`);
        const reset = await callTool(client, 'session_reset', { session: name, packages: ['tinylib==2.0'] });
        assert.equal(reset.isError, false, JSON.stringify(reset));
        const fresh = ok(await py('import tinylib\nprint(tinylib.VERSION, tinylib.DEP)\nprint("v" in globals())', undefined, { session: name }));
        assert.equal(fresh.sc.stdout, '2.0 1.0\nFalse\n', `a fresh interpreter with the new set: ${show(fresh)}`);
        await callTool(client, 'session_close', { session: name });
    }));

    test('sessions: a nodejs session with nice-pkg', { timeout: 120_000 }, withLog(S, async () => {
        const name = `pkjs-${randomSecret('')}`.slice(0, 20);
        const a = ok(await js('var nice = require("nice-pkg"); nice.hello("s1")', ['nice-pkg@1.0.0'], { session: name }));
        assert.deepEqual(a.sc.packages, { 'nice-dep': '1.0.0', 'nice-pkg': '1.0.0' }, show(a));
        const b = ok(await js('console.log(nice.hello("s2"), require("nice-dep").dep)', undefined, { session: name }));
        assert.equal(b.sc.stdout, 'nice s2 nice-dep 1.0.0\n', show(b));
        await callTool(client, 'session_close', { session: name });
    }));

    // --- admin API and metrics (last: it clears the store) -----------------------------------------------------

    test('admin: the store\'s entries and counts; only an admin key; DELETE one (404 unknown, 409 in use); DELETE all keeps what is in use; metrics moved', { timeout: 150_000 }, withLog(S, async () => {
        const adminRest = restClient(server.base, server.apiKey);
        const aliceRest = restClient(server.base, aliceKey);
        assert.equal((await aliceRest('GET', '/api/admin/packages')).status, 403, 'a tenant key may not list the store');
        assert.equal((await aliceRest('DELETE', '/api/admin/packages')).status, 403, 'a tenant key may not clear the store');

        let st = await store(server);
        for (const e of st.entries) {
            assert.equal(typeof e.key, 'string', JSON.stringify(e));
            assert.ok(['pip', 'npm'].includes(e.ecosystem), JSON.stringify(e));
            assert.ok(Array.isArray(e.specs) && e.specs.length > 0, JSON.stringify(e));
            assert.equal(typeof e.resolved, 'object', JSON.stringify(e));
            assert.ok(e.bytes > 0, JSON.stringify(e));
            assert.ok(!Number.isNaN(Date.parse(e.created)) && !Number.isNaN(Date.parse(e.lastUsed)), JSON.stringify(e));
            assert.equal(typeof e.inUse, 'number', JSON.stringify(e));
        }
        assert.equal(entryOf(st, { tinylib: '1.0' }).ecosystem, 'pip');
        assert.ok(entryOf(st, { tinylib: '1.0' }).specs.some((s) => /tinylib/i.test(s)));
        for (const k of ['installs', 'failures', 'hits', 'misses', 'evictions', 'bytes']) {
            assert.equal(typeof st.counts[k], 'number', `counts.${k}: ${JSON.stringify(st.counts)}`);
        }
        // installed at least: tinylib 1.0, 2.0, tinyext, pyyaml, tinyconc (pip). Failed at least: nosuchpkg x2, >=9.
        assert.ok(st.counts.installs >= 5, JSON.stringify(st.counts));
        assert.ok(st.counts.failures >= 3, JSON.stringify(st.counts));
        assert.ok(st.counts.hits >= 10, JSON.stringify(st.counts));
        assert.equal(st.counts.bytes, st.entries.reduce((a, e) => a + e.bytes, 0), 'counts.bytes is the entries\' sum');

        // metrics: present, moved since the server started, and the same figures as the admin API
        const m = await metricsText(server);
        st = await store(server);
        for (const [name, k] of [['codeexec_package_installs_total', 'installs'], ['codeexec_package_store_hits_total', 'hits'],
            ['codeexec_package_store_misses_total', 'misses'], ['codeexec_package_store_evictions_total', 'evictions'],
            ['codeexec_package_store_bytes', 'bytes']]) {
            assert.notEqual(metric(m, name), null, `${name} is exported`);
            assert.equal(metric(m, name), st.counts[k], `${name} = counts.${k}`);
        }
        for (const name of ['codeexec_package_installs_total', 'codeexec_package_store_hits_total', 'codeexec_package_store_misses_total']) {
            assert.ok(metric(m, name) > (metric(metrics0, name) ?? 0), `${name} moved: ${metric(metrics0, name)} → ${metric(m, name)}`);
        }

        // DELETE one not in use: gone, and the next run installs it again
        const ext = entryOf(st, { tinydep: '1.0', tinyext: '1.0' });
        assert.equal(ext.inUse, 0);
        const del = await adminRest('DELETE', `/api/admin/packages/${encodeURIComponent(ext.key)}`);
        assert.equal(del.status, 200, await del.text());
        assert.equal((await store(server)).entries.some((e) => e.key === ext.key), false, 'gone from the list');
        const fetched0 = pypi.fetched(wheel('tinyext', '1.0'));
        const again = ok(await py('import tinyext\nprint(tinyext.VERSION)', ['tinyext[fast]==1.0']));
        installed(again, 'installed again after its removal');
        assert.equal(pypi.fetched(wheel('tinyext', '1.0')) - fetched0, 1, 'fetched from the index again');
        assert.equal((await adminRest('DELETE', '/api/admin/packages/pip-00000000000000000000000000000000')).status, 404, 'unknown key');

        // an entry a session holds: 409 alone, kept by DELETE all
        const hold = `hold-${randomSecret('')}`.slice(0, 20);
        ok(await py('import tinydep\nprint(tinydep.DEP_VERSION)', ['tinydep==1.0'], { session: hold }));
        st = await store(server);
        const held = entryOf(st, { tinydep: '1.0' });
        assert.ok(held.inUse > 0, `the session holds its entry: ${JSON.stringify(held)}`);
        assert.equal((await adminRest('DELETE', `/api/admin/packages/${encodeURIComponent(held.key)}`)).status, 409, 'in use');
        const all = await adminRest('DELETE', '/api/admin/packages');
        assert.equal(all.status, 200);
        const allBody = await all.json();
        assert.ok(allBody.removed >= 5 && allBody.kept >= 1, JSON.stringify(allBody));
        st = await store(server);
        assert.ok(st.entries.some((e) => e.key === held.key), 'the held entry is kept');
        assert.ok(st.entries.every((e) => e.inUse > 0), `only entries in use are left: ${JSON.stringify(st.entries)}`);
        assert.equal(allBody.kept, st.entries.length, JSON.stringify(allBody));
        const inSession = ok(await py('import tinydep\nprint(tinydep.DEP_VERSION)', undefined, { session: hold }));
        assert.equal(inSession.sc.stdout, '1.0\n', 'the session still imports from its entry');

        // the session gone, the entry is free and can be removed
        await callTool(client, 'session_close', { session: hold });
        assert.ok(await until(async () => (await store(server)).entries.find((e) => e.key === held.key)?.inUse === 0, 15_000),
            'the closed session no longer holds its entry');
        assert.equal((await adminRest('DELETE', `/api/admin/packages/${encodeURIComponent(held.key)}`)).status, 200);
        const tl = ok(await py('import tinylib\nprint(tinylib.VERSION)', ['tinylib==1.0']));
        installed(tl, 'after DELETE all, tinylib==1.0 installs again');
    }));
});

// ---------------------------------------------------------------------------------------------------------------
// 2. Limits: a 1 MB store, an 8 MB install disk cap, a short install time limit.
// ---------------------------------------------------------------------------------------------------------------

describe('limits: PACKAGE_STORE_MB=1, INSTALL_DISK_MB=8, INSTALL_TIMEOUT_MS=15000', () => {
    let server; let client;
    const S = () => server;
    const py = (code, packages, extra = {}) => exec(client, { language: 'python', code, ...(packages ? { packages } : {}), ...extra });

    before(async () => {
        server = await startServer({
            DATA_DIR: base.dataDir, WARM_POOL: 'off',
            PACKAGE_INDEX_PYTHON: pypi.urlFor('pypi.test'),
            EGRESS_RESOLVE: 'pypi.test=127.0.0.1',
            EGRESS_ALLOW_CIDRS: '127.0.0.1/32',
            PACKAGE_STORE_MB: '1',
            INSTALL_DISK_MB: '8',
            INSTALL_TIMEOUT_MS: '15000',
        });
        client = await connect(server);
    });
    after(async () => {
        await client?.close().catch(() => {});
        await server?.stop();
    });

    test('eviction never removes an entry in use: a session holds fatlib 1.0 while 2.0 and 3.0 (600 KiB each) come and go', { timeout: 150_000 }, withLog(S, async () => {
        const name = `fat-${randomSecret('')}`.slice(0, 20);
        const blob = 'import fatlib, os\nprint(fatlib.VERSION, os.path.getsize(os.path.join(os.path.dirname(fatlib.__file__), "blob.bin")))';
        const s1 = ok(await py(blob, ['fatlib==1.0'], { session: name }));
        assert.equal(s1.sc.stdout, `1.0 ${600 * 1024}\n`, show(s1));
        installed(s1);
        const e0 = (await store(server)).counts.evictions;
        const r2 = ok(await py(blob, ['fatlib==2.0']));
        assert.equal(r2.sc.stdout, `2.0 ${600 * 1024}\n`, show(r2));
        const r3 = ok(await py(blob, ['fatlib==3.0']));
        assert.equal(r3.sc.stdout, `3.0 ${600 * 1024}\n`, show(r3));
        const st = await store(server);
        const v1 = entriesResolving(st, { fatlib: '1.0' });
        assert.equal(v1.length, 1, `the held entry is still there: ${JSON.stringify(st, null, 1)}`);
        assert.ok(v1[0].inUse > 0, JSON.stringify(v1[0]));
        assert.equal(entriesResolving(st, { fatlib: '2.0' }).length, 0, `2.0 was evicted: ${JSON.stringify(st, null, 1)}`);
        assert.ok(st.counts.evictions > e0, `evictions counted: ${JSON.stringify(st.counts)}`);
        const s2 = ok(await py(blob, undefined, { session: name }));
        assert.equal(s2.sc.stdout, `1.0 ${600 * 1024}\n`, `the session still imports its entry: ${show(s2)}`);
        const again = ok(await py(blob, ['fatlib==2.0']));
        installed(again, 'the evicted set installs again');
        assert.ok(entriesResolving(await store(server), { fatlib: '1.0' }).length === 1, 'still held, still there');
        await callTool(client, 'session_close', { session: name });
    }));

    test('INSTALL_DISK_MB=8: a 30 MB wheel stops the install (failed_to_start, a message about the cap); nothing stored', { timeout: 150_000 }, withLog(S, async (t) => {
        const c0 = (await store(server)).counts;
        const r = installFailed(await py('print("must not run")', ['bigwheel==1.0']));
        t.diagnostic(`stderr: ${r.sc.stderr.split('\n')[0]}`);
        assert.match(r.sc.stderr, /INSTALL_DISK_MB|disk/i, show(r));
        const st = await store(server);
        assert.equal(entriesResolving(st, { bigwheel: '1.0' }).length, 0, 'no entry');
        assert.equal(st.counts.failures - c0.failures, 1, JSON.stringify(st.counts));
        assert.ok(pypi.fetched(wheel('bigwheel', '1.0')) >= 1, 'the install did start fetching it');
        const plain = ok(await py('print("fine")'));
        assert.equal(plain.sc.stdout, 'fine\n', 'the server still runs code');
    }));

    test('INSTALL_TIMEOUT_MS: an index page that never answers stops the install (failed_to_start, the time limit named); its connection is closed', { timeout: 150_000 }, withLog(S, async (t) => {
        const seen0 = pypi.seen('/simple/stallpkg/');
        const r = installFailed(await py('print("must not run")', ['stallpkg==1.0']));
        t.diagnostic(`stderr: ${r.sc.stderr.split('\n')[0]}`);
        assert.match(r.sc.stderr, /INSTALL_TIMEOUT_MS|time limit|took longer/i, show(r));
        assert.ok(pypi.seen('/simple/stallpkg/') > seen0, 'the installer asked for the page');
        assert.ok(await until(() => pypi.stalledNow() === 0, 20_000), 'the stopped installer\'s connection was closed');
        const tl = ok(await py('import tinylib\nprint(tinylib.VERSION)', ['tinylib==1.0']));
        assert.equal(tl.sc.stdout, '1.0\n', 'installs still work');
    }));

    function wheel(name, v) {
        return pypi.wheel(name, v).file;
    }
});

// ---------------------------------------------------------------------------------------------------------------
// 3. The real npm registry (as test/egress.test.js's npm case reaches it).
// ---------------------------------------------------------------------------------------------------------------

/** The npm registry this machine's npm uses (read from its config: no traffic). */
function npmRegistry() {
    try {
        return new URL(execFileSync('npm', ['config', 'get', 'registry'], { encoding: 'utf8', timeout: 20_000 }).trim());
    } catch (e) {
        return new URL('https://registry.npmjs.org/');
    }
}

/** The CA file this machine's npm trusts (a TLS-inspecting proxy's CA sits there), or null. */
function npmCafile() {
    try {
        const f = execFileSync('npm', ['config', 'get', 'cafile'], { encoding: 'utf8', timeout: 20_000 }).trim();
        return f && f !== 'null' && f !== 'undefined' && existsSync(f) ? f : null;
    } catch (e) {
        return null;
    }
}

describe('the real npm registry: left-pad@1.3.0', () => {
    let server; let client;
    let unreachable = null; // why the registry cannot be reached from here, or null
    const S = () => server;
    const registry = npmRegistry();
    const run = (language, code, packages) => exec(client, { language, code, ...(packages ? { packages } : {}) });

    before(async () => {
        try {
            execFileSync('npm', ['view', 'left-pad', 'version', `--registry=${registry.href}`],
                { encoding: 'utf8', timeout: 30_000, stdio: ['ignore', 'pipe', 'pipe'] });
        } catch (e) {
            unreachable = `the npm registry ${registry.href} is not reachable from this machine (npm view left-pad failed): ${String(e.stderr || e.message).split('\n')[0]}`;
            return;
        }
        // Where this machine's resolver sends npm: a mirror may sit on a reserved or private address (here
        // registry.npmjs.org may resolve to 203.0.113.80), which the proxy refuses unless EGRESS_ALLOW_CIDRS opens it.
        const registryCidrs = (await lookup(registry.hostname, { all: true }).catch(() => []))
            .filter((a) => !/^127\./.test(a.address) && a.address !== '::1' && !a.address.startsWith('::ffff:127.'))
            .map((a) => `${a.address}/${a.family === 4 ? 32 : 128}`);
        const cafile = npmCafile();
        server = await startServer({
            DATA_DIR: base.dataDir, WARM_POOL: 'off',
            PACKAGE_REGISTRY_NPM: registry.href,
            EGRESS_ALLOW_CIDRS: registryCidrs.join(','),
            // the CA this machine's npm trusts (a TLS-inspecting proxy's), as an operator behind one would set it
            ...(cafile ? { EGRESS_CA_FILE: cafile } : {}),
        });
        client = await connect(server);
    });
    after(async () => {
        await client?.close().catch(() => {});
        await server?.stop();
    });

    test('nodejs require: installed once, then from the store; an ESM import; TypeScript', { timeout: 240_000 }, withLog(S, async (t) => {
        if (unreachable) {
            t.skip(unreachable);
            return;
        }
        const r = ok(await run('nodejs', 'console.log(JSON.stringify(require("left-pad")("x", 3)))', ['left-pad@1.3.0']));
        assert.equal(r.sc.stdout, '"  x"\n', show(r));
        assert.deepEqual(r.sc.packages, { 'left-pad': '1.3.0' }, show(r));
        installed(r);
        const again = ok(await run('nodejs', 'console.log(JSON.stringify(require("left-pad")("y", 2)))', ['left-pad@1.3.0']));
        assert.equal(again.sc.stdout, '" y"\n', show(again));
        fromStore(again);
        const esm = ok(await run('nodejs', 'import leftPad from "left-pad";\nconsole.log(JSON.stringify(leftPad("e", 4)));', ['left-pad@1.3.0']));
        assert.equal(esm.sc.stdout, '"   e"\n', show(esm));
        fromStore(esm);
        const ts = ok(await run('typescript', 'import leftPad from "left-pad";\nconst s: string = leftPad("t", 3);\nconsole.log(JSON.stringify(s));\n', ['left-pad@1.3.0']));
        assert.equal(ts.sc.stdout, '"  t"\n', show(ts));
        assert.deepEqual(ts.sc.packages, { 'left-pad': '1.3.0' });
    }));
});
