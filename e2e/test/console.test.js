// Issue #5 end to end: the admin console at /admin in a real browser (Debian's Chromium, headless, driven by
// playwright-core) against the real jar. One server with an API_KEYS_FILE holding an admin key and two tenant
// keys (alice, bob). Every page is checked for console errors and CSP violations; screenshots of each page go to
// e2e/artifacts/console/ (look at them). The Packages page needs a package set in the store without internet: a
// tiny PEP 503 index in this process on 127.0.0.1 serves one wheel (tinyc 1.0, built here with python3's zipfile),
// started before the server, which pins pypi.test to 127.0.0.1 (EGRESS_RESOLVE) and opens 127.0.0.1/32 alone
// (EGRESS_ALLOW_CIDRS) while EGRESS stays off: installs reach the index through the proxy, runs reach nothing.
// The Chat page talks to the scripted model server (fixtures/model-server.js, OpenAI format) on 127.0.0.1, named by
// LLM_BASE_URL; the scripts of its cases decide each answer, and the test reads what the model received.
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { join } from 'node:path';
import { chromium } from 'playwright-core';
import { startModelServer, messagesOf, toolResultsOf } from '../fixtures/model-server.js';
import { makeBase, keysAdd, keysAppend, startServer3, restClient, callTool, sleep, REPO } from '../lib/server3.js';

const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';
// PLATFORM.md: without the networking flags Chromium floods the closed network with connection attempts.
const CHROMIUM_ARGS = ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync'];
const ARTIFACTS = join(REPO, 'e2e', 'artifacts', 'console');
// A 1×1 red PNG.
const PNG = Buffer.from('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==', 'base64');
// Chromium logs every failed fetch as a console error; a refused key is expected where a test provokes one.
const REFUSED_401 = /Failed to load resource: the server responded with a status of 401/;
// The model's key, known to the server only.
const MODEL_KEY = `sk-${createHash('sha256').update(String(Math.random())).digest('hex').slice(0, 32)}`;

// tinyc 1.0 as a wheel: a zip of tinyc/__init__.py and its dist-info (METADATA, WHEEL, RECORD with the hashes).
const TINYC_WHEEL = 'tinyc-1.0-py3-none-any.whl';
const TINYC_PY = String.raw`
import base64, hashlib, sys, zipfile
files = {
    "tinyc/__init__.py": 'X = "tinyc-ok"\n',
    "tinyc-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: tinyc\nVersion: 1.0\nSummary: console e2e\n",
    "tinyc-1.0.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: code-exec-e2e\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
}
def digest(b):
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(b).digest()).rstrip(b"=").decode()
record = "".join(f"{n},{digest(c.encode())},{len(c.encode())}\n" for n, c in files.items())
files["tinyc-1.0.dist-info/RECORD"] = record + "tinyc-1.0.dist-info/RECORD,,\n"
with zipfile.ZipFile(sys.argv[1], "w") as z:
    for n, c in files.items():
        info = zipfile.ZipInfo(n, date_time=(2020, 1, 1, 0, 0, 0))
        info.compress_type = zipfile.ZIP_DEFLATED
        info.external_attr = 0o644 << 16
        z.writestr(info, c)
`;

let base; let srv; let browser; let index; let model;
let adminKey; let aliceKey; let bobKey;

before(async () => {
    mkdirSync(ARTIFACTS, { recursive: true });
    base = makeBase();
    const keys = join(base.dir, 'keys');
    adminKey = keysAdd(keys, 'ops', true);
    aliceKey = keysAppend(keys, 'alice');
    bobKey = keysAppend(keys, 'bob');
    // First the index, so that the server can be told its port.
    index = await startTinyIndex(base.dir);
    model = await startModelServer();
    srv = await startServer3(base, {
        API_KEYS_FILE: keys, WORKSPACE_ROOT: base.workspaceRoot('ws'),
        PACKAGE_INDEX_PYTHON: `http://pypi.test:${index.port}/simple/`,
        EGRESS_RESOLVE: 'pypi.test=127.0.0.1',
        EGRESS_ALLOW_CIDRS: '127.0.0.1/32',
        LLM_PROVIDER: 'openai', LLM_BASE_URL: model.url, LLM_API_KEY: MODEL_KEY, LLM_MODEL: 'scripted-model',
        LLM_MAX_ROUNDS: '4',
    });
    browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: CHROMIUM_ARGS });
});

after(async () => {
    await browser?.close();
    await srv?.stop();
    await index?.stop();
    await model?.stop();
    base?.remove();
});

/**
 * A PEP 503 index on 127.0.0.1 (a free port) with one project, tinyc, whose one file is the wheel above (built in
 * `dir`). Returns { port, requests (the paths asked for), stop }.
 */
async function startTinyIndex(dir) {
    const file = join(dir, TINYC_WHEEL);
    execFileSync('python3', ['-c', TINYC_PY, file]);
    const wheel = readFileSync(file);
    const sha = createHash('sha256').update(wheel).digest('hex');
    const page = `<!DOCTYPE html>\n<html><body><a href="/files/${TINYC_WHEEL}#sha256=${sha}">${TINYC_WHEEL}</a></body></html>\n`;
    const requests = [];
    const server = createServer((req, res) => {
        const path = req.url.split('?')[0];
        requests.push(path);
        if (path === '/simple/tinyc/' || path === '/simple/tinyc') {
            res.writeHead(200, { 'Content-Type': 'text/html; charset=utf-8' }).end(page);
        } else if (path === `/files/${TINYC_WHEEL}`) {
            res.writeHead(200, { 'Content-Type': 'application/octet-stream', 'Content-Length': wheel.length }).end(wheel);
        } else {
            res.writeHead(404, { 'Content-Type': 'text/plain' }).end('not found\n');
        }
    });
    const port = await new Promise((res, rej) => {
        server.once('error', rej);
        server.listen(0, '127.0.0.1', () => res(server.address().port));
    });
    return {
        port, requests,
        stop: () => new Promise((res) => { server.closeAllConnections(); server.close(() => res()); }),
    };
}

/**
 * A fresh browser context (its own sessionStorage) and page on /admin/, recording console errors, uncaught
 * exceptions and CSP violations. `problems(allowed)` returns those not matching `allowed`.
 */
async function open(options = {}) {
    const context = await browser.newContext({ acceptDownloads: true, ...options });
    const page = await context.newPage();
    const errors = [];
    page.on('console', (m) => { if (m.type() === 'error') errors.push(`console: ${m.text()}`); });
    page.on('pageerror', (e) => errors.push(`pageerror: ${e.message}`));
    // Added through the DevTools protocol, so the page's own CSP does not apply to it.
    await page.addInitScript(() => {
        document.addEventListener('securitypolicyviolation', (e) => {
            console.error(`CSP violation: ${e.violatedDirective} ${e.blockedURI}`);
        });
    });
    await page.goto(`${srv.url}/admin/`);
    return {
        page, context, errors,
        problems: (allowed = null) => errors.filter((e) => !(allowed && allowed.test(e))),
        close: () => context.close(),
    };
}

async function login(page, key) {
    await page.getByTestId('login-key').fill(key);
    await page.getByTestId('login-submit').click();
}

async function loggedIn(key, options) {
    const s = await open(options);
    await login(s.page, key);
    await s.page.getByTestId('who').waitFor();
    return s;
}

const shot = (page, name) => page.screenshot({ path: join(ARTIFACTS, `${name}.png`), fullPage: true });

/** One run through POST /api/execute, its NDJSON read to the end; returns the parsed lines. */
async function runViaApi(key, code) {
    const r = await fetch(`${srv.url}/api/execute`, {
        method: 'POST',
        headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json' },
        body: JSON.stringify({ language: 'python', code }),
    });
    assert.equal(r.status, 200, await r.clone().text());
    return (await r.text()).split('\n').filter((l) => l.trim()).map((l) => JSON.parse(l));
}

describe('admin console', () => {
    test('the page loads without a key, under the strict CSP', async () => {
        const r = await fetch(`${srv.url}/admin/`);
        assert.equal(r.status, 200);
        const csp = r.headers.get('content-security-policy');
        assert.match(csp, /script-src 'self';/);
        assert.match(csp, /style-src 'self';/);
        const html = await r.text();
        assert.doesNotMatch(html, /<script(?![^>]*\bsrc=)[^>]*>/, 'no inline script');
        assert.doesNotMatch(html, /<style|style="/, 'no inline style');
        const script = html.match(/src="(\/admin\/assets\/[^"]+\.js)"/)[1];
        const js = await fetch(`${srv.url}${script}`);
        assert.equal(js.status, 200);
        assert.match(js.headers.get('cache-control'), /immutable/);
    });

    test('a bad key is refused; a good key logs in; logout forgets the key', async () => {
        const s = await open();
        await login(s.page, 'not-a-key');
        await s.page.getByTestId('login-error').waitFor();
        assert.match(await s.page.getByTestId('login-error').textContent(), /refused/);
        await shot(s.page, 'login-refused');
        assert.equal(await s.page.evaluate(() => sessionStorage.length), 0, 'a refused key is not kept');

        await login(s.page, adminKey);
        await s.page.getByTestId('who').waitFor();
        assert.match(await s.page.getByTestId('who').textContent(), /ops\s*admin/);
        // A reload keeps the session (sessionStorage), never localStorage.
        await s.page.reload();
        await s.page.getByTestId('who').waitFor();
        assert.equal(await s.page.evaluate(() => localStorage.length), 0);

        await s.page.getByTestId('logout').click();
        await s.page.getByTestId('login-form').waitFor();
        assert.equal(await s.page.evaluate(() => sessionStorage.length), 0);
        await s.page.reload();
        await s.page.getByTestId('login-form').waitFor();
        assert.deepEqual(s.problems(REFUSED_401), []);
        await s.close();
    });

    test('a key that stops working anywhere sends the user back to the login', async () => {
        const s = await open();
        await s.page.evaluate(() => sessionStorage.setItem('code-exec-mcp.key', 'revoked-key'));
        await s.page.goto(`${srv.url}/admin/executions`);
        await s.page.getByTestId('login-form').waitFor();
        assert.equal(await s.page.evaluate(() => sessionStorage.length), 0);
        assert.deepEqual(s.problems(REFUSED_401), []);
        await s.close();
    });

    test('the dashboard counts a run live, without a reload', async () => {
        const s = await loggedIn(adminKey);
        const total = s.page.getByTestId('stat-total');
        await total.waitFor();
        const before = Number(await total.textContent());
        const lines = await runViaApi(aliceKey, 'print("counted")');
        assert.equal(lines.at(-1).type, 'result');
        await s.page.waitForFunction((n) => Number(document.querySelector('[data-testid=stat-total]').textContent) === n,
            before + 1, { timeout: 15_000 });
        await s.page.getByText('python', { exact: true }).first().waitFor();
        await shot(s.page, 'dashboard');
        assert.deepEqual(s.problems(), []);
        await s.close();
    });

    test('playground: output streams in before the result; Stop cancels a run', async () => {
        const s = await loggedIn(aliceKey);
        await s.page.getByTestId('nav-playground').click();
        await s.page.getByTestId('play-language').selectOption('python');
        await s.page.getByTestId('play-code').fill(
            'import time\nprint("first-line", flush=True)\ntime.sleep(3)\nprint("second-line")\n');
        await s.page.getByTestId('play-run').click();
        const output = s.page.getByTestId('play-output');
        await s.page.waitForFunction(() => document.querySelector('[data-testid=play-output]').textContent.includes('first-line'),
            null, { timeout: 60_000 });
        // The moment the first line shows, the run has not finished: no second line and no result yet.
        assert.doesNotMatch(await output.textContent(), /second-line/);
        assert.equal(await s.page.getByTestId('play-result').count(), 0);
        await shot(s.page, 'playground-streaming');
        await s.page.getByTestId('play-outcome').waitFor({ timeout: 60_000 });
        assert.match(await s.page.getByTestId('play-outcome').textContent(), /exited with code 0/);
        assert.match(await output.textContent(), /first-line\s*second-line/);
        await shot(s.page, 'playground');

        await s.page.getByTestId('play-code').fill('import time\nprint("long", flush=True)\ntime.sleep(60)\n');
        await s.page.getByTestId('play-run').click();
        await s.page.waitForFunction(() => document.querySelector('[data-testid=play-output]').textContent.includes('long'),
            null, { timeout: 60_000 });
        await s.page.getByTestId('play-stop').click();
        await s.page.getByTestId('play-error').waitFor();
        assert.match(await s.page.getByTestId('play-error').textContent(), /Stopped/);
        // Closing the stream cancels the run on the server.
        assert.equal(await srv.alive(), true);
        const idle = await waitIdle(20_000);
        assert.equal(idle, true, 'the stopped run is still running on the server');
        assert.deepEqual(s.problems(), []);
        await s.close();
    });

    test('playground: a session keeps state between runs and shows its matplotlib figure', async () => {
        const s = await loggedIn(aliceKey);
        await s.page.getByTestId('nav-playground').click();
        await s.page.getByTestId('play-language').selectOption('python');
        await s.page.getByTestId('play-session').fill('plots');
        await s.page.getByTestId('play-code').fill('import matplotlib.pyplot as plt\nxs = [1, 4, 9]\n');
        await s.page.getByTestId('play-run').click();
        await s.page.getByTestId('play-outcome').waitFor({ timeout: 60_000 });
        await s.page.getByTestId('play-code').fill('plt.plot(xs)\nplt.show()\nlen(xs)\n');
        await s.page.getByTestId('play-run').click();
        await s.page.getByTestId('play-figures').locator('img').first().waitFor({ timeout: 60_000 });
        // The image really decoded (a broken data: URL has no natural size), and the final expression came back.
        const width = await s.page.getByTestId('play-figures').locator('img').first()
            .evaluate((img) => img.complete ? img.naturalWidth : 0);
        assert.ok(width > 100, `figure width ${width}`);
        await s.page.getByTestId('play-result').getByText('3', { exact: true }).waitFor();
        await shot(s.page, 'playground-figure');
        assert.deepEqual(s.problems(), []);
        await s.close();
    });

    test('playground: rich outputs of a session call render (HTML in a sandboxed frame, a PIL image) in order', async () => {
        const s = await loggedIn(aliceKey);
        await s.page.getByTestId('nav-playground').click();
        await s.page.getByTestId('play-language').selectOption('python');
        await s.page.getByTestId('play-session').fill('rich');
        await s.page.getByTestId('play-code').fill([
            'import pandas as pd',
            'from PIL import Image',
            'class R:',
            '    def _repr_html_(self): return "<b id=\'marker\'>bold</b><script>parent.document.title = \'pwned\'</script>"',
            'display(pd.DataFrame({"city": ["Oslo"], "n": [1]}), R())',
            'Image.new("RGB", (40, 20), "red")',
        ].join('\n'));
        await s.page.getByTestId('play-run').click();
        await s.page.getByTestId('play-rich').waitFor({ timeout: 60_000 });
        const frames = s.page.getByTestId('play-rich-html');
        assert.equal(await frames.count(), 2, 'the DataFrame and R as HTML');
        for (let i = 0; i < 2; i++) assert.equal(await frames.nth(i).getAttribute('sandbox'), '', 'no scripts, no same origin');
        await s.page.frameLocator('[data-testid=play-rich-html] >> nth=0').locator('td', { hasText: 'Oslo' }).waitFor();
        await s.page.frameLocator('[data-testid=play-rich-html] >> nth=1').locator('#marker').waitFor();
        const width = await s.page.getByTestId('play-rich').locator('img').first().evaluate((img) => img.complete ? img.naturalWidth : 0);
        assert.equal(width, 40, 'the PIL image decoded');
        assert.notEqual(await s.page.title(), 'pwned', 'the output\'s script did not run');
        await shot(s.page, 'playground-rich-outputs');
        await s.close();
    });

    test('executions: filter by code, open a run, see its code and output', async () => {
        await runViaApi(aliceKey, 'print("needle-" + "in-haystack")');
        const s = await loggedIn(adminKey);
        await s.page.getByTestId('nav-executions').click();
        await s.page.getByTestId('exec-row').first().waitFor();
        await s.page.getByTestId('filter-q').fill('needle-');
        await s.page.waitForFunction(() => document.querySelectorAll('[data-testid=exec-row]').length === 1);
        await s.page.getByTestId('exec-row').first().click();
        await s.page.getByTestId('exec-stdout').waitFor();
        assert.match(await s.page.getByTestId('exec-stdout').textContent(), /needle-in-haystack/);
        assert.match(await s.page.getByTestId('exec-code').textContent(), /print\("needle-" \+ "in-haystack"\)/);
        assert.ok(await s.page.locator('[data-testid=exec-code] .hljs-string').count() > 0, 'code is highlighted');
        await shot(s.page, 'executions');

        await s.page.getByTestId('filter-q').fill('');
        await s.page.getByTestId('filter-outcome').selectOption('cancelled');
        await s.page.waitForFunction(() => [...document.querySelectorAll('[data-testid=exec-row]')]
            .every((r) => r.textContent.includes('cancelled')));
        assert.deepEqual(s.problems(), []);
        await s.close();
    });

    test('workspaces: upload (input and drop), browse, preview, rename, download, zip, delete', async () => {
        const alice = restClient(srv.url, aliceKey);
        const nested = await alice('POST', '/api/workspaces/proj/files/src/util.py', { body: 'def helper():\n    return 42\n' });
        assert.equal(nested.status, 201);
        const s = await loggedIn(aliceKey);
        const { page } = s;
        await page.getByTestId('nav-workspaces').click();
        await page.getByTestId('ws-row').filter({ hasText: 'proj' }).click();
        await page.locator('[data-testid=ws-entry][data-name=src]').waitFor();

        // Upload through the file input: a program and an image.
        await page.getByTestId('ws-upload').setInputFiles([
            { name: 'hello.py', mimeType: 'text/x-python', buffer: Buffer.from('def main():\n    print("hello")\n') },
            { name: 'pic.png', mimeType: 'image/png', buffer: PNG },
        ]);
        await page.locator('[data-testid=ws-entry][data-name="hello.py"]').waitFor();
        await page.locator('[data-testid=ws-entry][data-name="pic.png"]').waitFor();

        // A bigger upload shows a progress bar while its body goes out (recorded by an observer: it is brief here).
        await page.evaluate(() => {
            window.progressSeen = [];
            new MutationObserver(() => {
                const p = document.querySelector('[data-testid=ws-progress]');
                if (p) window.progressSeen.push(Number(p.value));
            }).observe(document.body, { subtree: true, childList: true, attributes: true, attributeFilter: ['value'] });
        });
        const big = Buffer.alloc(24 * 1024 * 1024, 7);
        await page.getByTestId('ws-upload').setInputFiles([{ name: 'big.bin', mimeType: 'application/octet-stream', buffer: big }]);
        await page.locator('[data-testid=ws-entry][data-name="big.bin"]').waitFor({ timeout: 60_000 });
        const seen = await page.evaluate(() => window.progressSeen);
        assert.ok(seen.length > 0, 'the progress bar was shown');
        assert.ok(seen.every((v) => v >= 0 && v <= 1), `progress values ${seen}`);
        assert.equal(await page.getByTestId('ws-progress').count(), 0, 'the bar is gone after the upload');
        const bigInfo = (await alice('HEAD', '/api/workspaces/proj/files/big.bin')).headers.get('content-length');
        assert.equal(Number(bigInfo), big.length);
        await alice('DELETE', '/api/workspaces/proj/files/big.bin');

        // Drag and drop: a DataTransfer with a file, dropped on the browser panel.
        const dt = await page.evaluateHandle(() => {
            const d = new DataTransfer();
            d.items.add(new File(['dropped content\n'], 'dropped.txt', { type: 'text/plain' }));
            return d;
        });
        await page.getByTestId('ws-browser').dispatchEvent('drop', { dataTransfer: dt });
        await page.locator('[data-testid=ws-entry][data-name="dropped.txt"]').waitFor();
        let r = await alice('GET', '/api/workspaces/proj/files/dropped.txt');
        assert.equal(await r.text(), 'dropped content\n');

        // Browse into src/ and back.
        await page.locator('[data-testid=ws-entry][data-name=src] a').click();
        await page.locator('[data-testid=ws-entry][data-name="util.py"]').waitFor();
        await page.getByTestId('ws-crumbs').getByText('proj').click();
        await page.locator('[data-testid=ws-entry][data-name="hello.py"]').waitFor();

        // Preview: highlighted text, and an image through a blob: URL.
        await page.locator('[data-testid=ws-entry][data-name="hello.py"] [data-testid=ws-open]').click();
        await page.getByTestId('ws-preview-text').waitFor();
        assert.match(await page.getByTestId('ws-preview-text').textContent(), /def main\(\):/);
        assert.ok(await page.locator('[data-testid=ws-preview-text] .hljs-keyword').count() > 0, 'highlighted');
        await shot(page, 'workspaces-preview-text');
        await page.locator('[data-testid=ws-entry][data-name="pic.png"] [data-testid=ws-open]').click();
        const img = page.getByTestId('ws-preview-image');
        await img.waitFor();
        await page.waitForFunction(() => document.querySelector('[data-testid=ws-preview-image]').naturalWidth === 1);
        assert.match(await img.getAttribute('src'), /^blob:/);
        await shot(page, 'workspaces');

        // Rename hello.py → renamed.py.
        await page.locator('[data-testid=ws-entry][data-name="hello.py"] [data-testid=ws-rename]').click();
        await page.getByTestId('ws-rename-input').fill('renamed.py');
        await page.getByTestId('ws-rename-save').click();
        await page.locator('[data-testid=ws-entry][data-name="renamed.py"]').waitFor();
        assert.equal(await page.locator('[data-testid=ws-entry][data-name="hello.py"]').count(), 0);
        r = await alice('GET', '/api/workspaces/proj/files/renamed.py');
        assert.equal(r.status, 200);

        // A rename onto an existing file is refused by the server, and the page says why.
        await page.locator('[data-testid=ws-entry][data-name="dropped.txt"] [data-testid=ws-rename]').click();
        await page.getByTestId('ws-rename-input').fill('src/util.py');
        await page.getByTestId('ws-rename-save').click();
        await page.getByTestId('ws-failure').waitFor();
        assert.match(await page.getByTestId('ws-failure').textContent(), /^Rename: .*exists/i);
        r = await alice('GET', '/api/workspaces/proj/files/src/util.py');
        assert.equal(await r.text(), 'def helper():\n    return 42\n', 'the refused rename changed nothing');

        // Download the file, then the whole workspace as a zip.
        let wait = page.waitForEvent('download');
        await page.locator('[data-testid=ws-entry][data-name="renamed.py"] [data-testid=ws-download]').click();
        let download = await wait;
        assert.equal(download.suggestedFilename(), 'renamed.py');
        assert.equal(readFileSync(await download.path(), 'utf8'), 'def main():\n    print("hello")\n');
        wait = page.waitForEvent('download');
        await page.getByTestId('ws-zip').click();
        download = await wait;
        assert.equal(download.suggestedFilename(), 'proj.zip');
        const zip = readFileSync(await download.path());
        assert.equal(zip.subarray(0, 2).toString('latin1'), 'PK');
        assert.ok(zip.includes(Buffer.from('src/util.py')), 'the zip holds the nested file');

        // Delete (after the confirm dialog).
        page.once('dialog', (d) => d.accept());
        await page.locator('[data-testid=ws-entry][data-name="renamed.py"] [data-testid=ws-remove]').click();
        await page.locator('[data-testid=ws-entry][data-name="renamed.py"]').waitFor({ state: 'detached' });
        r = await alice('GET', '/api/workspaces/proj/files/renamed.py');
        assert.equal(r.status, 404);
        assert.deepEqual(s.problems(/Failed to load resource: the server responded with a status of 409/), []);
        await s.close();
    });

    test('a tenant sees only its own workspaces; the admin sees and browses every tenant', async () => {
        const bob = restClient(srv.url, bobKey);
        assert.equal((await bob('POST', '/api/workspaces/bobonly/files/secret.txt', { body: 'bob secret\n' })).status, 201);
        await runViaApi(aliceKey, 'print("alice ran this")');
        assert.equal((await restClient(srv.url, aliceKey)('POST', '/api/workspaces/aliceonly/files/a.txt',
            { body: 'alice\n' })).status, 201);

        const a = await loggedIn(aliceKey);
        await a.page.getByTestId('nav-workspaces').click();
        await a.page.getByTestId('ws-row').filter({ hasText: 'aliceonly' }).waitFor();
        const aliceRows = await a.page.getByTestId('ws-row').allTextContents();
        assert.ok(!aliceRows.some((t) => t.includes('bobonly')), `alice sees bob's workspace: ${aliceRows}`);
        assert.deepEqual(a.problems(), []);
        await a.close();

        // Bob has run nothing: his dashboard and his executions say so, though alice has run code by now.
        const b = await loggedIn(bobKey);
        await b.page.getByTestId('stat-total').waitFor();
        assert.match(await b.page.getByTestId('dash-scope').textContent(), /tenant bob/);
        assert.equal(await b.page.getByTestId('stat-total').textContent(), '0');
        await b.page.getByTestId('nav-executions').click();
        await b.page.getByTestId('exec-count').filter({ hasText: '0 runs' }).waitFor();
        assert.equal(await b.page.getByTestId('exec-row').count(), 0);
        await b.page.getByTestId('nav-workspaces').click();
        await b.page.getByTestId('ws-row').filter({ hasText: 'bobonly' }).waitFor();
        assert.deepEqual((await b.page.getByTestId('ws-row').allTextContents()).filter((t) => /aliceonly|proj/.test(t)), []);
        assert.deepEqual(b.problems(), []);
        await b.close();

        const s = await loggedIn(adminKey);
        // The admin's dashboard narrowed to one tenant counts only that tenant's runs.
        const aliceStats = await (await restClient(srv.url, adminKey)('GET', '/api/admin/stats?tenant=alice')).json();
        assert.ok(aliceStats.executions.total >= 1);
        await s.page.getByTestId('dash-tenant').fill('alice');
        await s.page.getByTestId('dash-scope').filter({ hasText: 'tenant alice' }).waitFor({ timeout: 10_000 });
        assert.equal(Number(await s.page.getByTestId('stat-total').textContent()), aliceStats.executions.total);
        await s.page.getByTestId('dash-tenant').fill('bob');
        await s.page.getByTestId('dash-scope').filter({ hasText: 'tenant bob' }).waitFor({ timeout: 10_000 });
        assert.equal(await s.page.getByTestId('stat-total').textContent(), '0');
        await s.page.getByTestId('nav-workspaces').click();
        const bobRow = s.page.getByTestId('ws-row').filter({ hasText: 'bobonly' });
        await bobRow.waitFor();
        assert.match(await bobRow.textContent(), /bob/);
        await s.page.getByTestId('ws-row').filter({ hasText: 'aliceonly' }).waitFor();
        await bobRow.click();
        await s.page.locator('[data-testid=ws-entry][data-name="secret.txt"] [data-testid=ws-open]').click();
        await s.page.getByTestId('ws-preview-text').waitFor();
        assert.match(await s.page.getByTestId('ws-preview-text').textContent(), /bob secret/);
        await shot(s.page, 'workspaces-admin');
        assert.deepEqual(s.problems(), []);
        await s.close();
    });

    test('jobs: a job started over REST is listed, its output streams in live, and it ends exited', async () => {
        const s = await loggedIn(adminKey);
        const { page } = s;
        await page.getByTestId('nav-jobs').click();
        await page.getByTestId('jobs-table').waitFor();
        // Started once the page is open, so that the page sees it run: a line, then two more over 3 s.
        const job = await startJob(aliceKey, 'import sys, time\nprint("tick-1", flush=True)\n'
            + 'print("to-stderr", file=sys.stderr, flush=True)\ntime.sleep(1.5)\nprint("tick-2", flush=True)\n'
            + 'time.sleep(1.5)\nprint("tick-3", flush=True)\n');
        await page.getByTestId('jobs-refresh').click();
        const row = page.locator(`[data-testid=job-row][data-job="${job}"]`);
        await row.waitFor();
        assert.equal(await row.getByTestId('job-tenant').textContent(), 'alice', 'an admin sees the tenant');
        await row.click();
        await page.waitForFunction(() => document.querySelector('[data-testid=job-stdout]')?.textContent.includes('tick-1'),
            null, { timeout: 30_000 });
        // The first line is there while the job still runs: the tail is live, not read once it ended.
        assert.doesNotMatch(await page.getByTestId('job-stdout').textContent(), /tick-3/);
        assert.equal(await page.getByTestId('job-status').textContent(), 'running');
        await page.getByTestId('job-cancel').waitFor();
        await shot(page, 'jobs-running');
        await page.getByTestId('job-status').filter({ hasText: /^exited$/ }).waitFor({ timeout: 30_000 });
        assert.equal(await page.getByTestId('job-stdout').textContent(), 'tick-1\ntick-2\ntick-3\n', 'each byte once');
        assert.equal(await page.getByTestId('job-stderr').textContent(), 'to-stderr\n');
        assert.equal(await page.getByTestId('job-exit-code').textContent(), '0');
        assert.equal(await page.getByTestId('job-cancel').count(), 0, 'no Cancel once it ended');
        await row.getByTestId('job-row-status').filter({ hasText: 'exited (0)' }).waitFor();
        // The address names the job: a reload opens it again.
        assert.ok(page.url().endsWith(`/admin/jobs/${job}`), page.url());
        await page.reload();
        await page.getByTestId('job-status').filter({ hasText: /^exited$/ }).waitFor();
        await page.waitForFunction(() => document.querySelector('[data-testid=job-stdout]')?.textContent.includes('tick-3'));
        // Download fetches the log with the key and saves it.
        const wait = page.waitForEvent('download');
        await page.getByTestId('job-download-stdout').click();
        const download = await wait;
        assert.equal(download.suggestedFilename(), `${job}-stdout.txt`);
        assert.equal(readFileSync(await download.path(), 'utf8'), 'tick-1\ntick-2\ntick-3\n');
        await shot(page, 'jobs');
        assert.deepEqual(s.problems(), []);
        await s.close();
    });

    test('jobs: Cancel asks first, then cancels a running job, which shows cancelled', async () => {
        const job = await startJob(aliceKey, 'import time\nprint("sleeping", flush=True)\ntime.sleep(120)\n');
        const s = await loggedIn(aliceKey);
        const { page } = s;
        await page.getByTestId('nav-jobs').click();
        const row = page.locator(`[data-testid=job-row][data-job="${job}"]`);
        await row.waitFor();
        assert.equal(await page.getByTestId('job-tenant').count(), 0, 'a tenant key has no tenant column');
        await row.click();
        await page.waitForFunction(() => document.querySelector('[data-testid=job-stdout]')?.textContent.includes('sleeping'),
            null, { timeout: 30_000 });
        const alice = restClient(srv.url, aliceKey);
        // A dismissed confirmation cancels nothing (confirm() answers before the click handler goes on).
        const dismissed = new Promise((res) => page.once('dialog', (d) => d.dismiss().then(res)));
        await page.getByTestId('job-cancel').click();
        await dismissed;
        assert.equal((await (await alice('GET', `/api/jobs/${job}`)).json()).status, 'running');
        page.once('dialog', (d) => d.accept());
        await page.getByTestId('job-cancel').click();
        await page.getByTestId('job-status').filter({ hasText: /^cancelled$/ }).waitFor({ timeout: 30_000 });
        await row.getByTestId('job-row-status').filter({ hasText: /^cancelled$/ }).waitFor();
        assert.equal((await (await alice('GET', `/api/jobs/${job}`)).json()).status, 'cancelled');
        await shot(page, 'jobs-cancelled');
        assert.deepEqual(s.problems(), []);
        await s.close();
    });

    test('narrow screen (390 px): no sideways scrolling, the menu opens, every page renders', async () => {
        const s = await loggedIn(adminKey, { viewport: { width: 390, height: 844 }, isMobile: true, hasTouch: true });
        const { page } = s;
        const overflow = () => page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
        await page.getByTestId('stat-total').waitFor();
        assert.ok(await overflow() <= 0, `dashboard is ${await overflow()} px too wide`);
        await shot(page, 'narrow-dashboard');
        for (const id of ['executions', 'jobs', 'workspaces', 'packages', 'playground', 'chat']) {
            assert.equal(await page.getByTestId(`nav-${id}`).isVisible(), false, 'the menu starts closed');
            await page.getByRole('button', { name: 'Menu' }).click();
            await page.getByTestId(`nav-${id}`).click();
            await page.locator('main h2').filter({ hasText: new RegExp(id, 'i') }).waitFor();
            await page.waitForLoadState('networkidle');
            assert.ok(await overflow() <= 0, `${id} is ${await overflow()} px too wide`);
            await shot(page, `narrow-${id}`);
            if (id === 'workspaces') {
                await page.getByTestId('ws-row').filter({ hasText: 'proj' }).click();
                await page.locator('[data-testid=ws-entry][data-name="pic.png"] [data-testid=ws-open]').click();
                await page.getByTestId('ws-preview-image').waitFor();
                assert.ok(await overflow() <= 0, `the file browser is ${await overflow()} px too wide`);
                await shot(page, 'narrow-workspace-browser');
            }
        }
        assert.deepEqual(s.problems(), []);
        await s.close();
    });
});

describe('packages page (admin only)', () => {
    // Chromium logs the 409 of a Remove refused while a session holds the set; the page shows it (tested below).
    const REFUSED_409 = /Failed to load resource: the server responded with a status of 409/;
    const admin = () => restClient(srv.url, adminKey);
    /** GET /api/admin/packages with the admin key. */
    async function store() {
        const r = await admin()('GET', '/api/admin/packages');
        assert.equal(r.status, 200, await r.clone().text());
        return r.json();
    }
    /** Waits until `cond()` is true (true) or `ms` passes (false). */
    async function until(cond, ms) {
        const end = Date.now() + ms;
        for (;;) {
            if (await cond()) return true;
            if (Date.now() > end) return false;
            await sleep(200);
        }
    }
    const text = async (locator) => (await locator.textContent()).replace(/\s+/g, ' ').trim();

    test('packages: the empty store shows the empty state and the counts; a tenant key has no Packages page', async () => {
        // The store lives in DATA_DIR, which scripts/e2e.sh shares between the files of a run: remove what an earlier
        // file may have left (nothing runs now, so nothing is in use).
        const cleared = await admin()('DELETE', '/api/admin/packages');
        assert.equal(cleared.status, 200, await cleared.clone().text());
        const st = await store();
        assert.deepEqual(st.entries, []);
        assert.equal(st.maxBytes, 4096 * 1024 * 1024, 'the default PACKAGE_STORE_MB');

        const s = await loggedIn(adminKey);
        const { page } = s;
        await page.getByTestId('nav-packages').click();
        await page.locator('main h2').filter({ hasText: 'Packages' }).waitFor();
        await page.getByTestId('pkg-empty').waitFor();
        assert.equal(await text(page.getByTestId('pkg-empty')),
            'No package sets installed yet: runs install them when they declare packages.');
        assert.equal(await page.getByTestId('pkg-row').count(), 0);
        // Nothing has declared packages on this server yet: every count is 0, and the size is 0 of the 4 GiB default.
        for (const k of ['installs', 'failures', 'hits', 'misses', 'evictions']) {
            assert.equal(await text(page.getByTestId(`pkg-${k}`)), String(st.counts[k]), k);
            assert.equal(st.counts[k], 0, `${k}: ${JSON.stringify(st.counts)}`);
        }
        assert.equal(await text(page.getByTestId('pkg-size')), '0 B of 4.0 GB');
        await page.getByTestId('pkg-size-bar').waitFor();
        assert.equal(await page.getByTestId('pkg-clear').isDisabled(), true, 'nothing to clear');
        await shot(page, 'packages-empty');
        assert.deepEqual(s.problems(), []);
        await s.close();

        // A tenant key: no Packages in the nav; the address itself says the page is for an admin, and asks nothing
        // of the server (which answers a tenant key 403).
        assert.equal((await restClient(srv.url, aliceKey)('GET', '/api/admin/packages')).status, 403);
        const a = await loggedIn(aliceKey);
        await a.page.getByTestId('nav-workspaces').waitFor();
        assert.equal(await a.page.getByTestId('nav-packages').count(), 0, 'a tenant sees no Packages page');
        await a.page.goto(`${srv.url}/admin/packages`);
        await a.page.getByTestId('pkg-unavailable').waitFor();
        assert.match(await a.page.getByTestId('pkg-unavailable').textContent(), /Only an admin key/);
        assert.equal(await a.page.getByTestId('pkg-table').count(), 0);
        assert.deepEqual(a.problems(), []);
        await a.close();
    });

    test('packages: a server without a store (404) shows the server\'s message', async () => {
        // This server has a store; the browser is given the answer a PACKAGES=off server (or a gateway) gives.
        const s = await loggedIn(adminKey);
        const { page } = s;
        const message = 'this server has no package store (PACKAGES=off, or a sandbox other than bwrap)';
        await page.route('**/api/admin/packages', (route) => route.fulfill({
            status: 404, contentType: 'application/json', body: JSON.stringify({ error: 'not_found', message }),
        }));
        await page.getByTestId('nav-packages').click();
        await page.getByTestId('pkg-unavailable').waitFor();
        assert.equal(await text(page.getByTestId('pkg-unavailable')), `The package store is not available: ${message}`);
        assert.equal(await page.getByTestId('pkg-table').count(), 0);
        assert.equal(await page.getByTestId('pkg-clear').count(), 0);
        await shot(page, 'packages-unavailable');
        assert.deepEqual(s.problems(/Failed to load resource: the server responded with a status of 404/), []);
        await s.close();
    });

    test('packages: an installed set shows its row; in use it stays (409 shown); Clear unused and Remove confirm first', { timeout: 300_000 }, async () => {
        const client = await srv.connect(adminKey);
        const hold = 'pkgs-console';
        let s;
        try {
            // tinyc==1.0 from the loopback index: installed once, the run imports it.
            const first = await callTool(client, 'execute_code',
                { language: 'python', code: 'import tinyc; print(tinyc.X)', packages: ['tinyc==1.0'] });
            assert.equal(first.isError, false, `${first.text}\n${srv.log().slice(-4000)}`);
            assert.equal(first.sc.stdout, 'tinyc-ok\n', JSON.stringify(first.sc));
            assert.deepEqual(first.sc.packages, { tinyc: '1.0' }, JSON.stringify(first.sc));
            assert.ok(index.requests.includes('/simple/tinyc/'), `the index was asked: ${index.requests}`);
            assert.ok(await until(async () => (await store()).entries.every((e) => e.inUse === 0), 15_000),
                'the ended run no longer holds its entry');
            let st = await store();
            assert.equal(st.entries.length, 1, JSON.stringify(st));
            const pinned = st.entries[0];

            s = await loggedIn(adminKey);
            const { page } = s;
            await page.getByTestId('nav-packages').click();
            const row = page.locator(`[data-testid=pkg-row][data-key="${pinned.key}"]`);
            await row.waitFor();
            assert.equal(await page.getByTestId('pkg-row').count(), 1);
            assert.equal(await page.getByTestId('pkg-empty').count(), 0);
            assert.equal(await text(row.locator('td').first()), 'pip');
            assert.match(await text(row.getByTestId('pkg-specs')), /^tinyc==1\.0$/i);
            assert.equal(await text(row.getByTestId('pkg-resolved')), 'tinyc 1.0');
            assert.equal(await row.getByTestId('pkg-in-use').count(), 0);
            assert.equal(await row.getByTestId('pkg-remove').isDisabled(), false);
            assert.equal(await text(page.getByTestId('pkg-installs')), String(st.counts.installs));
            assert.equal(st.counts.installs, 1, JSON.stringify(st.counts));
            assert.equal(await text(page.getByTestId('pkg-misses')), String(st.counts.misses));
            assert.equal(await text(page.getByTestId('pkg-hits')), String(st.counts.hits));
            assert.match(await text(page.getByTestId('pkg-size')), /^[\d.]+ (B|KB|MB) of 4\.0 GB$/);
            assert.notEqual(await text(page.getByTestId('pkg-size')), '0 B of 4.0 GB');
            await shot(page, 'packages');

            // A session takes the set after the page was loaded: Remove on the stale row is refused with 409, the
            // page says why and, reloaded, marks the row in use with its Remove disabled.
            const held = await callTool(client, 'execute_code',
                { language: 'python', code: 'import tinyc\nv = tinyc.X\nprint(v)', packages: ['tinyc==1.0'], session: hold });
            assert.equal(held.isError, false, held.text);
            assert.equal(held.sc.stdout, 'tinyc-ok\n', JSON.stringify(held.sc));
            assert.ok((await store()).entries.find((e) => e.key === pinned.key).inUse > 0, 'the session holds the set');
            page.once('dialog', (d) => d.accept());
            await row.getByTestId('pkg-remove').click();
            await page.getByTestId('pkg-failure').waitFor();
            assert.match(await text(page.getByTestId('pkg-failure')), /^Remove tinyc==1\.0: a run or session is using this entry/i);
            await row.getByTestId('pkg-in-use').waitFor();
            assert.equal(await row.getByTestId('pkg-remove').isDisabled(), true, 'Remove is disabled while in use');
            assert.equal((await store()).entries.length, 1, 'the refused Remove removed nothing');

            // A second set (tinyc unpinned: another request, another entry), idle: Clear unused takes it, keeps the held one.
            const loose = await callTool(client, 'execute_code',
                { language: 'python', code: 'import tinyc; print(tinyc.X)', packages: ['tinyc'] });
            assert.equal(loose.isError, false, loose.text);
            assert.ok(await until(async () => (await store()).entries.filter((e) => e.inUse === 0).length === 1, 15_000),
                'the unpinned set is idle');
            await page.getByTestId('pkg-refresh').click();
            await page.waitForFunction(() => document.querySelectorAll('[data-testid=pkg-row]').length === 2);
            await shot(page, 'packages-in-use');
            page.once('dialog', (d) => d.dismiss());
            await page.getByTestId('pkg-clear').click();
            await sleep(500);
            assert.equal(await page.getByTestId('pkg-row').count(), 2, 'a dismissed confirmation clears nothing');
            assert.equal((await store()).entries.length, 2);
            page.once('dialog', (d) => d.accept());
            await page.getByTestId('pkg-clear').click();
            await page.getByTestId('pkg-message').waitFor();
            assert.equal(await text(page.getByTestId('pkg-message')), 'Removed 1 package set; kept 1 package set in use.');
            await page.waitForFunction(() => document.querySelectorAll('[data-testid=pkg-row]').length === 1);
            await row.waitFor();
            st = await store();
            assert.deepEqual(st.entries.map((e) => e.key), [pinned.key], JSON.stringify(st));

            // The session gone, the set is free: Remove (confirmed) takes it out of the store.
            const closed = await callTool(client, 'session_close', { session: hold });
            assert.equal(closed.isError, false, closed.text);
            assert.ok(await until(async () => (await store()).entries.every((e) => e.inUse === 0), 15_000),
                'the closed session no longer holds the set');
            await page.getByTestId('pkg-refresh').click();
            await page.waitForFunction(() => !document.querySelector('[data-testid=pkg-in-use]'));
            assert.equal(await row.getByTestId('pkg-remove').isDisabled(), false);
            page.once('dialog', (d) => d.accept());
            await row.getByTestId('pkg-remove').click();
            await row.waitFor({ state: 'detached' });
            await page.getByTestId('pkg-empty').waitFor();
            assert.equal(await text(page.getByTestId('pkg-message')), 'Removed tinyc==1.0.');
            assert.equal(await text(page.getByTestId('pkg-size')), '0 B of 4.0 GB');
            assert.deepEqual((await store()).entries, []);
            await shot(page, 'packages-removed');
            assert.deepEqual(s.problems(REFUSED_409), []);
        } finally {
            await s?.close();
            await callTool(client, 'session_close', { session: hold }).catch(() => {});
            await client.close().catch(() => {});
        }
    });
});

/** Starts a python background job through POST /api/jobs (202); returns its id. */
async function startJob(key, code) {
    const r = await restClient(srv.url, key)('POST', '/api/jobs', {
        headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ language: 'python', code }),
    });
    assert.equal(r.status, 202, await r.clone().text());
    return (await r.json()).job;
}

describe('chat page (scripted model)', () => {
    const code = 'print("chart-" + "ready")\nprint(6 * 7)\n';

    test('chat: a message streams its answer; the execute_code call expands to its code and output; rounds and tokens show', async () => {
        model.reset();
        model.script([
            { toolCalls: [{ name: 'execute_code', arguments: { language: 'python', code } }], usage: { input: 300, output: 40 } },
            // A model's text may hold markup: the page must show it as text.
            { text: 'The script printed <b>chart-ready</b> and 42. Done.', usage: { input: 500, output: 60 } },
        ]);
        const s = await loggedIn(aliceKey);
        const { page } = s;
        await page.getByTestId('nav-chat').click();
        await page.getByTestId('chat-none').waitFor();
        await page.getByTestId('chat-mode').selectOption('code');
        await page.getByTestId('chat-message').fill('Run a tiny script, please.');
        await page.getByTestId('chat-message').press('Enter');

        const answer = page.getByTestId('chat-text').filter({ hasText: 'Done.' });
        await answer.waitFor({ timeout: 90_000 });
        assert.equal(await answer.textContent(), 'The script printed <b>chart-ready</b> and 42. Done.');
        assert.equal(await page.locator('[data-testid=chat-text] b').count(), 0, 'the model\'s markup is not rendered');
        await page.getByTestId('chat-meta').waitFor();
        assert.match(await page.getByTestId('chat-rounds').textContent(), /^2 rounds$/);
        assert.match(await page.getByTestId('chat-tokens').textContent(), /^800 in \/ 100 out tokens$/);

        const call = page.locator('[data-testid=chat-tool-call][data-tool=execute_code]');
        assert.equal(await call.count(), 1);
        assert.equal(await call.getByTestId('chat-tool-code').isVisible(), false, 'a tool call starts folded');
        await call.getByTestId('chat-tool-summary').click();
        assert.equal(await call.getByTestId('chat-tool-code').textContent(), code);
        assert.ok(await call.locator('[data-testid=chat-tool-code] .hljs-string').count() > 0, 'the code is highlighted');
        assert.match(await call.getByTestId('chat-tool-output').textContent(), /chart-ready\s+42/);
        assert.equal(await call.getByTestId('chat-tool-error').count(), 0);
        assert.match(await call.getByTestId('chat-tool-ms').textContent(), /\d+(\.\d+)? m?s/);
        // The conversation is listed now, in code mode.
        await page.getByTestId('chat-conv').first().waitFor();
        assert.match(await page.getByTestId('chat-conv').first().textContent(), /code/);
        await shot(page, 'chat');

        // What the model received: the user's message with the configured key, then the program's real output.
        assert.equal(model.requests.length, 2);
        assert.equal(model.requests[0].apiKey, MODEL_KEY);
        assert.deepEqual(messagesOf(model.requests[0]).filter((m) => m.role === 'user').map((m) => m.text),
            ['Run a tiny script, please.']);
        const results = toolResultsOf(model.requests[1]);
        assert.equal(results.length, 1);
        assert.match(results[0].text, /chart-ready\s+42/);
        assert.deepEqual(s.problems(), []);
        await s.close();
    });

    test('chat: a model error is shown with its reason; Retry answers the same message', async () => {
        model.reset();
        // LangChain4j may retry a 500 on its own: every request past the script is a 500 too (the fixture's rule).
        model.script([{ status: 500, body: { error: { message: 'scripted outage', type: 'server_error' } } }]);
        const s = await loggedIn(aliceKey);
        const { page } = s;
        await page.getByTestId('nav-chat').click();
        await page.getByTestId('chat-new').click();
        await page.getByTestId('chat-message').fill('Are you there?');
        await page.getByTestId('chat-send').click();
        await page.getByTestId('chat-error').waitFor({ timeout: 60_000 });
        assert.equal(await page.getByTestId('chat-error-reason').textContent(), 'model_error');
        await shot(page, 'chat-error');

        const sent = model.requests.length;
        model.script([{ text: 'Yes, here now.' }]);
        await page.getByTestId('chat-retry').click();
        await page.getByTestId('chat-text').filter({ hasText: 'Yes, here now.' }).waitFor({ timeout: 60_000 });
        assert.equal(await page.getByTestId('chat-error').count(), 0);
        assert.equal(await page.getByTestId('chat-user').count(), 1, 'the retry answers the same message, not a new one');
        const retried = model.requests.slice(sent);
        assert.ok(retried.length >= 1);
        assert.deepEqual(messagesOf(retried.at(-1)).filter((m) => m.role === 'user').map((m) => m.text), ['Are you there?']);
        // Chromium logs a failed request's status; an error event inside a 200 stream logs nothing.
        assert.deepEqual(s.problems(/status of 5\d\d/), []);
        await s.close();
    });
});

async function waitIdle(timeoutMs) {
    const end = Date.now() + timeoutMs;
    for (;;) {
        const h = await (await fetch(`${srv.url}/healthz`)).json();
        if (h.running === 0) return true;
        if (Date.now() > end) return false;
        await new Promise((res) => setTimeout(res, 200));
    }
}
