// End to end over stdio: the SDK spawns `java -jar target/code-exec-mcp.jar` with TRANSPORT=stdio, as a desktop
// client would. Anything the server wrote to stdout besides JSON-RPC would break the framing and fail these tests.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { JAR, JAVA, exec } from '../lib/server.js';
import { AS_USER, ensureUser, userDir, asUserArgv } from '../lib/user.js';

let client;
let transport;
let dataDir;
let stderr = '';
const transportErrors = [];

before(async () => {
    const user = AS_USER ? ensureUser(AS_USER) : null;
    dataDir = user ? userDir(user) : process.env.E2E_DATA_DIR || mkdtempSync(join(tmpdir(), 'code-exec-e2e-stdio-'));
    const env = { PATH: process.env.PATH, HOME: user?.home ?? process.env.HOME ?? '/root', LANG: 'C.UTF-8', TRANSPORT: 'stdio', DATA_DIR: dataDir };
    // as a desktop client starts it; with E2E_AS_USER, as that normal user
    const [command, ...args] = user ? asUserArgv(user, JAVA, JAR, env) : [JAVA, '-jar', JAR];
    transport = new StdioClientTransport({ command, args, env: user ? { PATH: process.env.PATH } : env, stderr: 'pipe' });
    transport.stderr?.on('data', (b) => { stderr += b.toString(); });
    client = new Client({ name: 'code-exec-e2e-stdio', version: '0.1.0' }, { capabilities: {} });
    client.onerror = (e) => transportErrors.push(String(e?.message ?? e));
    await client.connect(transport, { timeout: 60_000 });
});

after(async () => {
    await client?.close().catch(() => {});
    if (!process.env.E2E_DATA_DIR || AS_USER) rmSync(dataDir, { recursive: true, force: true });
});

test('initialize over stdio', () => {
    assert.ok(client.getServerVersion()?.name, `serverInfo present; server stderr:\n${stderr.slice(-2000)}`);
    assert.ok(client.getServerCapabilities()?.tools);
});

test('execute_code python hello over stdio', { timeout: 60_000 }, async () => {
    const r = await exec(client, { language: 'python', code: 'print("hello over stdio")' });
    assert.equal(r.isError, false, r.text);
    assert.equal(r.sc.stdout, 'hello over stdio\n');
    assert.equal(r.sc.exitCode, 0);
    assert.equal(r.sc.outcome, 'exited');
});

test('runtime_info over stdio', async () => {
    const raw = await client.callTool({ name: 'runtime_info', arguments: {} });
    assert.notEqual(raw.isError, true);
    const all = JSON.stringify(raw.structuredContent ?? {}) + (raw.content || []).map((c) => c.text || '').join('\n');
    assert.ok(all.includes('python'), all.slice(0, 500));
});

test('stdout carries only JSON-RPC (logs go to stderr)', () => {
    // A log line on stdout fails to parse as JSON-RPC and surfaces as a transport error in the SDK.
    assert.deepEqual(transportErrors, [], `server stderr:\n${stderr.slice(-2000)}`);
});
