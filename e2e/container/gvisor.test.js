// The same image with SANDBOX=gvisor (scripts/container-test.sh adds --cap-add SYS_ADMIN): code runs in gVisor's
// user-space kernel, without network, and the server reports the gVisor sandbox.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { waitHealthy, connect, exec } from './client.js';

let client;
before(async () => {
    const health = await waitHealthy();
    assert.equal(health.status, 'ok', JSON.stringify(health));
    assert.equal(health.sandbox, 'gvisor');
    client = await connect();
});
after(async () => { await client?.close(); });

test('SANDBOX=gvisor in the container: python runs on gVisor\'s kernel, without network', async () => {
    const r = await exec(client, {
        language: 'python',
        // no network shown without aiming at any address off this machine: no route at all
        code: 'print(open("/proc/version").read().split()[2])\n'
            + 'print("blocked" if not open("/proc/net/route").read().splitlines()[1:] else "ROUTES")\n',
    });
    assert.equal(r.isError, false, r.text);
    assert.equal(r.sc.sandbox, 'gvisor');
    assert.equal(r.sc.exitCode, 0, r.sc.stderr);
    // gVisor reports its own fixed kernel version, not the host's.
    const [kernel, net] = r.sc.stdout.trim().split('\n');
    assert.equal(kernel, '4.4.0');
    assert.equal(net, 'blocked');
});
