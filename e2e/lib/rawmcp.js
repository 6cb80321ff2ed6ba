// A minimal MCP client over raw fetch (one JSON-RPC session, JSON or SSE responses) for the benchmarks (bench.js,
// cluster-bench.js), where the client's own overhead must stay small next to what is measured. The tests use the
// official SDK instead.
export class RawSession {
    constructor(url, apiKey) {
        this.url = url;
        this.headers = { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream', Authorization: `Bearer ${apiKey}` };
        this.nextId = 1;
    }

    async open() {
        const init = await this.post({ jsonrpc: '2.0', id: this.nextId++, method: 'initialize',
            params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'bench', version: '1' } } }, true);
        this.headers['Mcp-Protocol-Version'] = init.result.protocolVersion;
        await this.post({ jsonrpc: '2.0', method: 'notifications/initialized' });
        return this;
    }

    async post(message, captureSession = false) {
        const r = await fetch(this.url, { method: 'POST', headers: this.headers, body: JSON.stringify(message) });
        if (captureSession) this.headers['Mcp-Session-Id'] = r.headers.get('mcp-session-id');
        if (message.id === undefined) {
            await r.arrayBuffer();
            if (r.status >= 300) throw new Error(`notification got HTTP ${r.status}`);
            return null;
        }
        const text = await r.text();
        if (r.status !== 200) throw new Error(`HTTP ${r.status}: ${text.slice(0, 300)}`);
        if ((r.headers.get('content-type') || '').includes('text/event-stream')) {
            for (const line of text.split('\n')) {
                if (!line.startsWith('data:')) continue;
                const msg = JSON.parse(line.slice(5));
                if (msg.id === message.id) return msg;
            }
            throw new Error(`no response for id ${message.id} in SSE body`);
        }
        return JSON.parse(text);
    }

    /** execute_code; throws unless the run exited 0 with `expect` on stdout (null: any). Returns structuredContent. */
    async execute(language, code, { env, session, expect = 'hello' } = {}) {
        const args = { language, code };
        if (env) args.env = env;
        if (session) args.session = session;
        const res = await this.post({ jsonrpc: '2.0', id: this.nextId++, method: 'tools/call',
            params: { name: 'execute_code', arguments: args } });
        const sc = res.result?.structuredContent;
        if (res.error || res.result?.isError || !sc || sc.exitCode !== 0 || (expect !== null && sc.stdout.trim() !== expect))
            throw new Error(`unexpected result: ${JSON.stringify(res).slice(0, 500)}`);
        return sc;
    }

    /** Any tool (or `tools/list`); throws on a JSON-RPC error, returns the result. */
    async call(name, args = {}) {
        const res = await this.post({ jsonrpc: '2.0', id: this.nextId++, method: name === 'tools/list' ? name : 'tools/call',
            params: name === 'tools/list' ? {} : { name, arguments: args } });
        if (res.error) throw new Error(`${name}: ${JSON.stringify(res.error)}`);
        return res.result;
    }
}
