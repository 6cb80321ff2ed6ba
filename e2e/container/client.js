// What the container tests share: the server's URL and key from the environment scripts/container-test.sh sets,
// waiting for /healthz, and a connected MCP SDK client. The server runs in a container, not as a child process.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

export const URL_BASE = process.env.CTEST_URL;
export const API_KEY = process.env.CTEST_API_KEY;
if (!URL_BASE || !API_KEY) throw new Error('CTEST_URL and CTEST_API_KEY must be set (scripts/container-test.sh does)');

export const auth = { Authorization: `Bearer ${API_KEY}` };
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** /healthz once it answers (the JVM and the sandbox self-test take a few seconds in a fresh container). */
export async function waitHealthy(timeoutMs = 120_000) {
    const end = Date.now() + timeoutMs;
    let last = '';
    while (Date.now() < end) {
        try {
            const r = await fetch(`${URL_BASE}/healthz`);
            if (r.ok) return await r.json();
            last = `HTTP ${r.status}`;
        } catch (e) {
            last = e.cause?.code || e.message;
        }
        await sleep(250);
    }
    throw new Error(`no /healthz from ${URL_BASE} within ${timeoutMs} ms (${last})`);
}

export async function connect() {
    const client = new Client({ name: 'code-exec-container-test', version: '0.1.0' }, { capabilities: {} });
    await client.connect(new StreamableHTTPClientTransport(new URL(`${URL_BASE}/mcp`), { requestInit: { headers: auth } }));
    return client;
}

/** execute_code; the SDK's 60 s default request timeout is raised: a first Go build may take a while. */
export async function exec(client, args) {
    const raw = await client.callTool({ name: 'execute_code', arguments: args }, undefined, { timeout: 150_000 });
    const text = (raw.content || []).filter((c) => c.type === 'text').map((c) => c.text).join('\n');
    return { isError: raw.isError === true, sc: raw.structuredContent, text };
}

export async function tool(client, name, args) {
    const raw = await client.callTool({ name, arguments: args });
    return { isError: raw.isError === true, sc: raw.structuredContent, text: (raw.content || []).map((c) => c.text).join('\n') };
}
