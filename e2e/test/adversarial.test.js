// Adversarial suite over MCP: hostile programs against the real jar. Every case asserts that the attack was
// contained AND that the server is still healthy and still runs a normal program afterwards. scripts/e2e.sh runs it
// twice: with the server as root, and with E2E_AS_USER=codeexec-e2e as a normal user (lib/user.js).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { spawn } from 'node:child_process';
import { startServer, exec, hostProcessesWith, looksLikeStackTrace, randomSecret, sleep } from '../lib/server.js';
import { AS_USER, ensureUser } from '../lib/user.js';

const SECRET = randomSecret('secret-token-');
const LIMITS = { MEMORY_LIMIT_MB: 256, MAX_OUTPUT_KB: 64, MAX_OUTPUT_DRAIN_MB: 16, MAX_PROCESSES: 64, MAX_DISK_MB: 64, MAX_BODY_MB: 1 };

let server;
let client;

before(async () => {
    const env = { SECRET_TOKEN: SECRET };
    for (const [k, v] of Object.entries(LIMITS)) env[k] = String(v);
    server = await startServer(env);
    ({ client } = await server.connect());
});

after(async () => {
    await client?.close().catch(() => {});
    await server?.stop();
});

const py = (code, extra = {}) => exec(client, { language: 'python', code, ...extra });
const sh = (code, extra = {}) => exec(client, { language: 'shell', code, ...extra });
const bash = (code, extra = {}) => exec(client, { language: 'bash', code, ...extra });

/** A test whose body attacks; afterwards the server must be alive, healthy and able to run code. */
function attack(name, body, timeout = 60_000) {
    test(name, { timeout }, async () => {
        try {
            await body();
        } catch (e) {
            e.message += `\n--- server log (tail) ---\n${server.log().slice(-3000)}`;
            throw e;
        }
        assert.ok(server.alive(), `server process still alive; log:\n${server.log().slice(-3000)}`);
        const h = await server.healthz();
        assert.equal(h.status, 200);
        assert.equal(h.body.status, 'ok', JSON.stringify(h.body));
        assert.equal(await server.waitIdle(8000), true, 'no run left running');
        const r = await py('print(6 * 7)');
        assert.equal(r.isError, false, r.text);
        assert.equal(r.sc.stdout, '42\n', 'a normal python run still works');
    });
}

// Shown without aiming at any address off this machine: the sandbox has no interface but lo and no route.
attack('network: no route to the outside, only lo exists', async () => {
    const r = await py([
        'print("routes", open("/proc/net/route").read().splitlines()[1:])',
        'print(open("/proc/net/dev").read())',
    ].join('\n'));
    assert.match(r.sc.stdout, /^routes \[\]\n/, r.sc.stdout);
    const ifaces = r.sc.stdout.split('\n').slice(3).map((l) => l.split(':')[0].trim()).filter(Boolean);
    assert.deepEqual(ifaces, ['lo'], 'only the loopback interface exists in the sandbox');
});

attack("network: the server's own port on 127.0.0.1 is unreachable", async () => {
    const r = await py([
        'import socket',
        's = socket.socket(); s.settimeout(3)',
        'try:',
        `    s.connect(("127.0.0.1", ${server.port})); print("CONNECTED")`,
        'except OSError as e:',
        '    print("BLOCKED", e.errno)',
    ].join('\n'));
    assert.match(r.sc.stdout, /^BLOCKED/, r.sc.stdout);
    const c = await sh(`curl -sS -m 3 http://127.0.0.1:${server.port}/healthz; echo "rc=$?"`);
    assert.doesNotMatch(c.sc.stdout, /"status"/, 'no healthz body came back');
    assert.match(c.sc.stdout, /rc=[1-9]/);
});

attack('secrets: API_KEY and SECRET_TOKEN are not in env or any /proc/*/environ', async () => {
    const r = await sh([
        'env',
        'cat /proc/self/environ 2>&1 | tr "\\0" "\\n"',
        'cat /proc/1/environ 2>&1 | tr "\\0" "\\n"',
        `cat /proc/${server.pid}/environ 2>&1 | tr "\\0" "\\n"`,
        'for f in /proc/[0-9]*/environ; do cat "$f" 2>/dev/null | tr "\\0" "\\n"; done',
        'echo END',
    ].join('\n'));
    assert.match(r.sc.stdout, /END/);
    assert.match(r.sc.stdout, /PATH=/, 'the probe did read an environment');
    for (const s of [server.apiKey, SECRET]) {
        assert.ok(!r.sc.stdout.includes(s), 'secret in stdout');
        assert.ok(!r.sc.stderr.includes(s), 'secret in stderr');
    }
    assert.doesNotMatch(r.sc.stdout, /API_KEY|SECRET_TOKEN/);
});

attack('host processes: the sandbox sees only its own few pids, not the server JVM', async () => {
    const r = await sh('ps aux 2>&1; echo ---; ls /proc | grep -E "^[0-9]+$" | wc -l; echo ---; ls -d /proc/' + server.pid + ' 2>&1');
    const [psOut, count, pidProbe] = r.sc.stdout.split('---\n');
    assert.doesNotMatch(psOut, /java|code-exec-mcp\.jar/, psOut);
    assert.ok(Number(count.trim()) <= 10, `pids visible: ${count.trim()}`);
    assert.match(pidProbe, /No such file/, `server pid ${server.pid} not visible: ${pidProbe}`);
});

attack('/etc/shadow cannot be read', async () => {
    const r = await sh('cat /etc/shadow; echo "rc=$?"; head -c 200 /etc/shadow 2>&1');
    assert.match(r.sc.stdout, /rc=[1-9]/);
    assert.doesNotMatch(r.sc.stdout, /root:/);
});

attack('writing outside the run directory fails and leaves the host untouched', async () => {
    const name = randomSecret('e2e-probe-');
    const dirs = ['/usr', '/etc', '', '/var', '/usr/local/bin', '/opt'];
    const r = await sh(dirs.map((d) => `if echo x > ${d}/${name} 2>/dev/null; then echo "WROTE ${d}/"; else echo "DENIED ${d}/"; fi`).join('\n')
        + `\necho x > ./${name} && echo "CWD_OK"`);
    for (const d of dirs) assert.match(r.sc.stdout, new RegExp(`DENIED ${d}/`), r.sc.stdout);
    assert.doesNotMatch(r.sc.stdout, /WROTE/);
    assert.match(r.sc.stdout, /CWD_OK/, 'the run directory itself is writable');
    for (const d of dirs) assert.equal(existsSync(`${d}/${name}`), false, `host ${d}/${name} absent`);
});

attack('kill -9 -1 only kills the sandbox, not a host process of the same uid', async () => {
    // A host process running as the sandbox uid is the one kill(-1) could reach if the pid namespace leaked.
    const marker = randomSecret('host-victim-');
    // As a normal user (E2E_AS_USER) that is the user's own process: sandboxes run as that user's uid.
    const who = AS_USER ? ensureUser(AS_USER) : { uid: 65534, gid: 65534 };
    const victim = spawn('setpriv', [`--reuid=${who.uid}`, `--regid=${who.gid}`, '--clear-groups', 'bash', '-c', `exec -a ${marker} sleep 60`],
        { stdio: 'ignore' });
    try {
        for (let i = 0; i < 50 && hostProcessesWith(marker).length === 0; i++) await sleep(50);
        assert.equal(hostProcessesWith(marker).length, 1, `host victim is running as uid ${who.uid}`);
        const r = await bash('sleep 30 & kill -9 -1; echo "after kill"', { timeout_ms: 10_000 });
        assert.equal(r.isError, false, r.text);
        assert.notEqual(r.sc.outcome, 'timeout', 'the run ended on its own');
        assert.equal(hostProcessesWith(marker).length, 1, `the host process of uid ${who.uid} survived`);
    } finally {
        victim.kill('SIGKILL');
    }
});

attack('ptrace is refused (TRACEME and attaching to pid 1)', async () => {
    const r = await py([
        'import ctypes, os',
        'libc = ctypes.CDLL(None, use_errno=True)',
        'libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]',
        'pid = os.fork()',
        'if pid == 0:',
        '    rc = libc.ptrace(0, 0, None, None)',
        '    print("TRACEME", rc, ctypes.get_errno(), flush=True)',
        '    os._exit(0)',
        'os.waitpid(pid, 0)',
        'rc = libc.ptrace(16, 1, None, None)',
        'print("ATTACH", rc, ctypes.get_errno(), flush=True)',
    ].join('\n'));
    assert.match(r.sc.stdout, /TRACEME -1 \d+/, r.sc.stdout + r.sc.stderr);
    assert.match(r.sc.stdout, /ATTACH -1 \d+/, r.sc.stdout + r.sc.stderr);
});

attack('nested namespaces: unshare -Ur is refused', async () => {
    const r = await sh('unshare -Ur true; echo "rc=$?"; unshare -n true; echo "rc2=$?"');
    assert.match(r.sc.stdout, /rc=[1-9]/, r.sc.stdout + r.sc.stderr);
    assert.match(r.sc.stdout, /rc2=[1-9]/, r.sc.stdout + r.sc.stderr);
});

attack(`fork bomb is contained by MAX_PROCESSES=${LIMITS.MAX_PROCESSES}`, async () => {
    // bash: dash refuses ':' as a function name. The script lives on for 2 s while the bomb runs into the limit.
    const r = await bash(':(){ :|:& };:\nsleep 2\necho alive', { timeout_ms: 5000 });
    assert.equal(r.isError, false, r.text);
    assert.ok(['exited', 'timeout'].includes(r.sc.outcome), r.sc.outcome);
    assert.match(r.sc.stderr, /fork: (retry: )?Resource temporarily unavailable/, 'forks were refused by the process limit');
    assert.ok(r.sc.durationMs >= 1500, `the bomb ran (${r.sc.durationMs} ms)`);
}, 90_000);

attack(`process count is limited by MAX_PROCESSES=${LIMITS.MAX_PROCESSES}`, async () => {
    const r = await py([
        'import os, time',
        'kids = []',
        'for i in range(400):',
        '    try:',
        '        pid = os.fork()',
        '    except OSError as e:',
        '        break',
        '    if pid == 0:',
        '        time.sleep(5); os._exit(0)',
        '    kids.append(pid)',
        'print("FORKED", len(kids), flush=True)',
        'for k in kids: os.kill(k, 9)',
    ].join('\n'), { timeout_ms: 20_000 });
    const m = /FORKED (\d+)/.exec(r.sc.stdout);
    assert.ok(m, r.sc.stdout + r.sc.stderr);
    assert.ok(Number(m[1]) < LIMITS.MAX_PROCESSES, `forked ${m[1]} children`);
    assert.ok(Number(m[1]) >= 5, `forking works at all (${m[1]})`);
});

attack(`memory hog past MEMORY_LIMIT_MB=${LIMITS.MEMORY_LIMIT_MB} ends with outcome memory_limit`, async () => {
    const r = await py('chunks = []\nwhile True:\n    chunks.append(b"\\x01" * (16 << 20))\n', { timeout_ms: 30_000 });
    assert.equal(r.isError, false, r.text);
    assert.equal(r.sc.outcome, 'memory_limit', JSON.stringify({ outcome: r.sc.outcome, exit: r.sc.exitCode, stderr: r.sc.stderr.slice(-500) }));
    assert.match(r.sc.stderr, /memory/i);
    // A cgroup stops the run at its limit; a normal user's server has the watchdog, which sees the run every 10 ms
    // once it is over half its limit: this loop allocates a few 16 MB chunks in between (docs/desktop.md: what each mode holds).
    const slackMb = AS_USER ? 96 : 16;
    if (r.sc.peakMemoryBytes !== undefined) assert.ok(r.sc.peakMemoryBytes <= (LIMITS.MEMORY_LIMIT_MB + slackMb) * 1048576, `peak ${r.sc.peakMemoryBytes}`);
});

attack('an 8 GiB allocation fails cleanly', async () => {
    const r = await py('try:\n    x = b"\\x01" * (8 << 30)\n    print("ALLOCATED", len(x))\nexcept MemoryError:\n    print("MemoryError")\n', { timeout_ms: 30_000 });
    assert.equal(r.isError, false, r.text);
    assert.doesNotMatch(r.sc.stdout, /ALLOCATED/);
    assert.ok(r.sc.outcome === 'memory_limit' || /MemoryError/.test(r.sc.stdout + r.sc.stderr),
        `outcome ${r.sc.outcome}, stdout ${r.sc.stdout}, stderr ${r.sc.stderr.slice(-300)}`);
});

attack(`disk fill in the work dir and /tmp hits ENOSPC at MAX_DISK_MB=${LIMITS.MAX_DISK_MB}`, async () => {
    // Files of 8 MB each (below any per-file size limit) until the filesystem is full, in both writable areas.
    const fill = (dir) => [
        'i=0',
        'while [ $i -lt 100 ]; do',
        `  if dd if=/dev/zero of=${dir}/f$i bs=1M count=8 2>&1 | grep -q "No space left"; then break; fi`,
        '  i=$((i+1))',
        'done',
        `echo "${dir}: files=$i used=$(du -sm ${dir} | cut -f1)MB"`,
    ].join('\n');
    const r = await sh([
        fill('.'),
        'ls ./f* >/dev/null && echo listed',
        fill('/tmp'),
        // One big file as well: ENOSPC or a per-file size limit (SIGXFSZ) ends it, never the host disk.
        'rm -f ./f*; dd if=/dev/zero of=./big bs=1M count=4096 2>&1 | tail -n 1; echo "big=$(du -sm ./big | cut -f1)MB"',
    ].join('\n'), { timeout_ms: 30_000 });
    assert.equal(r.sc.outcome, 'exited', r.sc.stderr);
    const work = /\.: files=(\d+) used=(\d+)MB/.exec(r.sc.stdout);
    const tmp = /\/tmp: files=(\d+) used=(\d+)MB/.exec(r.sc.stdout);
    assert.ok(work && tmp, r.sc.stdout + r.sc.stderr);
    for (const m of [work, tmp]) {
        assert.ok(Number(m[1]) < 100, `a write hit ENOSPC (${m[0]})`);
        assert.ok(Number(m[2]) <= LIMITS.MAX_DISK_MB + 1, `usage capped (${m[0]}; du rounds up)`);
        assert.ok(Number(m[2]) >= LIMITS.MAX_DISK_MB / 2, `the area really is ${LIMITS.MAX_DISK_MB} MB (${m[0]})`);
    }
    const big = /big=(\d+)MB/.exec(r.sc.stdout);
    assert.ok(big && Number(big[1]) <= LIMITS.MAX_DISK_MB + 1, r.sc.stdout);
});

attack(`infinite stdout ends with output_limit at MAX_OUTPUT_DRAIN_MB=${LIMITS.MAX_OUTPUT_DRAIN_MB}, head and tail kept`, async () => {
    const r = await py('while True:\n    print("x" * 1000)\n', { timeout_ms: 30_000 });
    assert.equal(r.sc.outcome, 'output_limit');
    assert.equal(r.sc.truncated, true);
    assert.ok(r.sc.stdout.length <= LIMITS.MAX_OUTPUT_KB * 1024 + 64, `stdout ${r.sc.stdout.length} chars`);
    // the tail ends where the program was killed: after a line, or inside one (print writes the x's and the newline
    // separately, and a write can stop part-way on a full pipe)
    assert.match(r.sc.stdout, /^x+\n[\s\S]*\[\.\.\. \d+ bytes left out \.\.\.\]\n[\s\S]*x+\n?$/);
    assert.ok(r.sc.stderr.endsWith(`[terminated] output limit: more than ${LIMITS.MAX_OUTPUT_DRAIN_MB} MB of output\n`), r.sc.stderr);
});

attack('a stderr flood ends with output_limit and truncated', async () => {
    const r = await sh('yes "err err err err err err err err" >&2', { timeout_ms: 30_000 });
    assert.equal(r.sc.outcome, 'output_limit');
    assert.equal(r.sc.truncated, true);
    assert.ok(r.sc.stderr.length <= LIMITS.MAX_OUTPUT_KB * 1024 + 512, `stderr ${r.sc.stderr.length} chars`);
});

attack('5 MB on stderr and then a last line: the program runs on, exits 0, and the result has the head and the tail', async () => {
    const r = await py('import sys\nsys.stderr.write("start\\n" + "e" * 5_000_000 + "\\nlast words\\n")\nprint("fine")\n',
        { timeout_ms: 30_000 });
    assert.equal(r.sc.outcome, 'exited', r.sc.stderr.slice(-300));
    assert.equal(r.sc.exitCode, 0);
    assert.equal(r.sc.stdout, 'fine\n');
    assert.equal(r.sc.truncated, true);
    assert.ok(r.sc.stderr.startsWith('start\neee'), r.sc.stderr.slice(0, 100));
    assert.ok(r.sc.stderr.endsWith('eee\nlast words\n'), r.sc.stderr.slice(-100));
    assert.match(r.sc.stderr, /\[\.\.\. \d+ bytes left out \.\.\.\]/);
});

attack('background processes do not outlive the run', async () => {
    const marker = randomSecret('bg-');
    // Each sleeper carries the marker in its argv (via exec -a) so we find exactly ours among the host processes of sandbox uids.
    const r = await bash([
        `(exec -a "${marker}-a" sleep 300 &)`,
        `(setsid bash -c 'exec -a "${marker}-b" sleep 300' &)`,
        `nohup bash -c 'exec -a "${marker}-c" sleep 300' >/dev/null 2>&1 &`,
        'disown -a',
        // Wait (up to 5 s on a loaded machine) until all three are up, then end the run with them still running.
        `for i in $(seq 50); do n=$(ps -eo args | grep -c "^${marker}"); [ "$n" -ge 3 ] && break; sleep 0.1; done`,
        'echo "$n"',
    ].join('\n'), { timeout_ms: 10_000 });
    assert.equal(r.sc.outcome, 'exited', r.sc.stderr);
    assert.equal(r.sc.stdout.trim(), '3', 'the three sleepers were running inside the run');
    for (let i = 0; i < 30 && hostProcessesWith(marker).length; i++) await sleep(100);
    assert.deepEqual(hostProcessesWith(marker), [], 'no sleeper remains on the host');
});

attack('a busy loop past the timeout ends with outcome timeout', async () => {
    const r = await py('while True:\n    pass\n', { timeout_ms: 2000 });
    assert.equal(r.isError, false);
    assert.equal(r.sc.outcome, 'timeout');
    assert.equal(r.sc.timedOut, true);
    assert.ok(r.sc.durationMs >= 1900 && r.sc.durationMs < 15_000, `durationMs ${r.sc.durationMs}`);
});

attack('a sleep past the timeout ends with outcome timeout', async () => {
    const r = await sh('echo before; sleep 60; echo after', { timeout_ms: 1500 });
    assert.equal(r.sc.outcome, 'timeout');
    assert.equal(r.sc.timedOut, true);
    assert.equal(r.sc.stdout, 'before\n', 'output before the kill is kept');
});

attack('binary output (bytes 0..255) comes back as valid text', async () => {
    const r = await py('import sys\nsys.stdout.buffer.write(bytes(range(256)) * 4)\n');
    assert.equal(r.sc.outcome, 'exited');
    assert.equal(typeof r.sc.stdout, 'string');
    const printable = Array.from({ length: 95 }, (_, i) => String.fromCharCode(32 + i)).join('');
    assert.ok(r.sc.stdout.includes(printable), 'the ASCII part survives intact');
    assert.equal(Buffer.from(r.sc.stdout, 'utf8').toString('utf8'), r.sc.stdout, 'round-trips as UTF-8');
});

attack('an unknown language is a clear tool error', async () => {
    const r = await exec(client, { language: 'brainfuck', code: '+[]' });
    assert.equal(r.isError, true);
    assert.match(r.text, /language/i);
    assert.ok(!looksLikeStackTrace(r.text), r.text);
});

attack(`an oversized request (> MAX_BODY_MB=${LIMITS.MAX_BODY_MB}) gets 413`, async () => {
    const { transport } = await server.connect();
    const big = 'x'.repeat((LIMITS.MAX_BODY_MB + 1) * 1024 * 1024);
    const body = JSON.stringify({ jsonrpc: '2.0', id: 99, method: 'tools/call', params: { name: 'execute_code', arguments: { language: 'python', code: `# ${big}` } } });
    const r = await fetch(server.url, {
        method: 'POST',
        headers: {
            'Content-Type': 'application/json', Accept: 'application/json, text/event-stream',
            Authorization: `Bearer ${server.apiKey}`, 'Mcp-Session-Id': transport.sessionId, 'Mcp-Protocol-Version': '2025-06-18',
        },
        body,
    });
    const text = await r.text();
    assert.equal(r.status, 413);
    assert.ok(!looksLikeStackTrace(text), text.slice(0, 500));
    await transport.close();
});
