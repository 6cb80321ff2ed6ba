// The MCP Inspector's CLI mode (`inspector --cli <url> --method ...`) as a second, independent client.
// The Inspector needs Node >= 22.19: it runs on the Node 22 that `npm ci` put under node_modules/node.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startServer } from '../lib/server.js';

const E2E = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const NODE22 = join(E2E, 'node_modules', 'node', 'bin', 'node');
const INSPECTOR = join(E2E, 'node_modules', '@modelcontextprotocol', 'inspector', 'clients', 'launcher', 'build', 'index.js');

let server;
let home;

before(async () => {
    server = await startServer();
    home = mkdtempSync(join(tmpdir(), 'code-exec-e2e-inspector-'));
});

after(async () => {
    await server?.stop();
    rmSync(home, { recursive: true, force: true });
});

function inspector(...args) {
    // HOME is a temp dir: the CLI keeps its catalog and state under HOME, and must not touch the real one.
    const argv = [INSPECTOR, '--cli', server.url, '--transport', 'http',
        '--header', `Authorization: Bearer ${server.apiKey}`, ...args];
    return new Promise((res, rej) => {
        execFile(NODE22, argv, { timeout: 60_000, env: { ...process.env, HOME: home }, maxBuffer: 4 << 20 }, (err, stdout, stderr) => {
            if (err) rej(new Error(`inspector ${args.join(' ')} failed: ${err.message}\n${stderr}\n${stdout}`));
            else res({ stdout, stderr });
        });
    });
}

/** The CLI prints one JSON document (pretty-printed) on stdout. */
function parseJson(stdout) {
    const start = stdout.indexOf('{');
    assert.ok(start >= 0, stdout);
    return JSON.parse(stdout.slice(start));
}

test('inspector --cli tools/list sees execute_code and runtime_info', { timeout: 90_000 }, async () => {
    const { stdout } = await inspector('--method', 'tools/list');
    const out = parseJson(stdout);
    const names = out.tools.map((t) => t.name);
    assert.ok(names.includes('execute_code'), names.join(','));
    assert.ok(names.includes('runtime_info'), names.join(','));
});

test('inspector --cli tools/call runs python', { timeout: 90_000 }, async () => {
    const { stdout } = await inspector('--method', 'tools/call', '--tool-name', 'execute_code',
        '--tool-arg', 'language=python', '--tool-arg', 'code=print(40 + 2)');
    const out = parseJson(stdout);
    assert.notEqual(out.isError, true, stdout);
    assert.equal(out.structuredContent.stdout, '42\n');
    assert.equal(out.structuredContent.exitCode, 0);
});
