// compose.yaml brought up by docker-compose against podman's Docker-compatible socket (scripts/container-test.sh):
// the service is healthy with the compose file's own security options, runs code as uid 65534 over MCP, and keeps
// a workspace in the named volume.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { URL_BASE, auth, waitHealthy, connect, exec } from './client.js';

let client;
before(async () => {
    const health = await waitHealthy();
    assert.equal(health.status, 'ok', JSON.stringify(health));
    client = await connect();
});
after(async () => { await client?.close(); });

test('compose service: python run as uid 65534, a workspace file written by code and downloaded', async () => {
    const r = await exec(client, {
        language: 'python',
        workspace: 'compose',
        code: 'import os\nopen("hello.txt", "w").write("from compose\\n")\nprint(os.getuid(), os.getcwd() != "")',
    });
    assert.equal(r.sc.exitCode, 0, r.sc.stderr);
    assert.equal(r.sc.stdout.trim(), '65534 True');
    const d = await fetch(`${URL_BASE}/api/workspaces/compose/files/hello.txt`, { headers: auth });
    assert.equal(d.status, 200);
    assert.equal(await d.text(), 'from compose\n');
});
