// The upstream MCP fixture of code mode (e2e/fixtures/upstream-mcp.mjs) over Streamable HTTP on 127.0.0.1, for the
// tests and the benchmark: started with its bearer token, resolved once it printed its port.
import { spawn } from 'node:child_process';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export const UPSTREAM_FIXTURE = resolve(dirname(fileURLToPath(import.meta.url)), '..', 'fixtures', 'upstream-mcp.mjs');

/**
 * Starts the fixture with `token` (FIXTURE_TOKEN) and resolves with { proc, port, url, log(), stop() }; `log()` is the
 * tail of its stderr. Rejects when it exits or prints no port within 15 s.
 */
export function startUpstreamFixture(token, node = '/usr/bin/node') {
    const proc = spawn(node, [UPSTREAM_FIXTURE, '--http'], {
        env: { PATH: process.env.PATH, FIXTURE_TOKEN: token }, stdio: ['ignore', 'pipe', 'pipe'],
    });
    let log = '';
    proc.stderr.on('data', (b) => { log = (log + b).slice(-20_000); });
    return new Promise((res, rej) => {
        let out = '';
        const timer = setTimeout(() => rej(new Error(`the upstream fixture did not print its port: ${log}`)), 15_000);
        proc.stdout.on('data', (b) => {
            out += b;
            const m = /^(\{.*\})\n/.exec(out);
            if (m) {
                clearTimeout(timer);
                const { port } = JSON.parse(m[1]);
                res({ proc, port, url: `http://127.0.0.1:${port}/mcp`, log: () => log, stop: () => proc.kill('SIGTERM') });
            }
        });
        proc.on('exit', (code) => {
            clearTimeout(timer);
            rej(new Error(`the upstream fixture exited (${code}): ${log}`));
        });
    });
}
