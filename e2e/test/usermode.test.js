// Normal-user mode: the server started by an unprivileged user (as a desktop client starts it), over stdio and HTTP,
// with the official TypeScript SDK client and the MCP Inspector CLI, and the adversarial cases of that mode: the
// user's home, files and processes out of reach, no network, no secrets, fork bomb, memory hog, disk fill, output
// flood, timeouts without leftovers. Then unprivileged user namespaces switched off (in a user namespace of the
// test's own, fixtures/without-userns.py): the server refuses to run code, with the reason, never unsandboxed.
//
// Needs root to create the test user (useradd), to start processes as that user (runuser) and to map a namespace;
// the test command runs as root. Each server runs as that user with its defaults: state under
// ~/.local/share/code-exec-mcp.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, execFile, spawn } from 'node:child_process';
import { mkdtempSync, chmodSync, rmSync, existsSync, statSync, readFileSync, writeFileSync, readdirSync } from 'node:fs';
import { createServer } from 'node:net';
import { join, dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { JAR, JAVA, exec, freePort, randomSecret, sleep } from '../lib/server.js';
import { TEST_USER, ensureUser, asUserArgv, seedGoCache } from '../lib/user.js';
import { skipUnless } from '../lib/requires.js';

const E2E = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const NODE22 = join(E2E, 'node_modules', 'node', 'bin', 'node');
const INSPECTOR = join(E2E, 'node_modules', '@modelcontextprotocol', 'inspector', 'clients', 'launcher', 'build', 'index.js');
const SECRET = randomSecret('server-secret-');
const isRoot = process.getuid?.() === 0;

let dir; // readable by the test user: the Inspector's start script
let user;
let uid;
let home;
let USER;

/** The user's environment as a desktop client would give it: HOME, PATH, LANG, and what the test adds. */
function userEnv(extra = {}) {
    return { HOME: home, PATH: '/usr/local/bin:/usr/bin:/bin', LANG: 'C.UTF-8', SERVER_SECRET: SECRET, ...extra };
}

/** argv that starts `java -jar` as the test user with exactly `env`. */
function asUser(env) {
    return asUserArgv(user, JAVA, JAR, env);
}

async function stdioClient(extraEnv = {}, wrapper = []) {
    const [command, ...args] = [...wrapper, ...asUser(userEnv({ TRANSPORT: 'stdio', ...extraEnv }))];
    const transport = new StdioClientTransport({ command, args, env: { PATH: process.env.PATH }, stderr: 'pipe' });
    let stderr = '';
    transport.stderr?.on('data', (b) => { stderr += b.toString(); });
    const client = new Client({ name: 'code-exec-e2e-user', version: '0.1.0' }, { capabilities: {} });
    const errors = [];
    client.onerror = (e) => errors.push(String(e?.message ?? e));
    await client.connect(transport);
    return { client, transport, stderr: () => stderr, errors };
}

/** "pid args" of the test user's processes whose command line holds `marker`. */
function userProcessesWith(marker) {
    const out = [];
    for (const p of readdirSync('/proc')) {
        if (!/^\d+$/.test(p)) continue;
        try {
            if (statSync(`/proc/${p}`).uid !== uid) continue;
            const args = readFileSync(`/proc/${p}/cmdline`, 'utf8').split('\0').join(' ');
            if (args.includes(marker)) out.push(`${p} ${args}`);
        } catch {
            // ended meanwhile
        }
    }
    return out;
}

async function waitGone(marker, ms = 5000) {
    const end = Date.now() + ms;
    while (userProcessesWith(marker).length > 0 && Date.now() < end) await sleep(100);
    return userProcessesWith(marker);
}

const sh = (client, code, extra = {}) => exec(client, { language: 'bash', code, ...extra });

before(() => {
    if (!isRoot) return;
    user = ensureUser(TEST_USER);
    ({ uid, home, name: USER } = user);
    dir = mkdtempSync('/tmp/code-exec-e2e-user-');
    chmodSync(dir, 0o755);
    // a fresh data directory each run, with only the Go build cache of this run's other servers in it (building it
    // again would take minutes of CPU): the rest is what the server's defaults make, checked below
    const data = join(home, '.local', 'share', 'code-exec-mcp');
    rmSync(data, { recursive: true, force: true });
    seedGoCache(process.env.E2E_DATA_DIR, data);
    execFileSync('chown', ['-R', `${USER}:${USER}`, join(home, '.local')], { stdio: 'ignore' });
    writeFileSync(join(home, 'private.txt'), 'the user\'s own file\n', { mode: 0o600 });
    execFileSync('chown', [`${USER}:${USER}`, join(home, 'private.txt')]);
});

after(() => {
    if (dir) rmSync(dir, { recursive: true, force: true });
});

describe('a server started by a normal user, over stdio', { skip: skipUnless(isRoot, 'root, to create the test user') }, () => {
    let s;
    let victim; // a process of the user's own, outside any sandbox
    const victimMarker = `victim-${randomSecret('')}`;

    before(async () => {
        victim = spawn('/usr/sbin/runuser', ['-u', USER, '--', '/bin/bash', '-c', `exec -a ${victimMarker} sleep 600`],
            { stdio: 'ignore' });
        s = await stdioClient({ MEMORY_LIMIT_MB: '256', MAX_PROCESSES: '64', MAX_DISK_MB: '64' });
    });

    after(async () => {
        await s?.client.close();
        victim?.kill('SIGKILL');
        try {
            execFileSync('pkill', ['-KILL', '-f', victimMarker], { stdio: 'ignore' });
        } catch {
            // already gone
        }
    });

    test('it runs code in every tool, says which mode and which guarantees, and keeps its state under ~/.local/share', { timeout: 120_000 }, async () => {
        const info = (await s.client.callTool({ name: 'runtime_info', arguments: {} })).structuredContent;
        assert.equal(info.sandbox.mode, 'normal user', JSON.stringify(info.sandbox));
        assert.equal(info.sandbox.available, true, JSON.stringify(info.sandbox));
        assert.match(info.sandbox.limits.processes, /inside the sandbox's user namespace|pids\.max/);
        assert.match(info.sandbox.limits.memory, /watchdog|cgroup/);
        assert.match(info.sandbox.limits.perUserKernelLimits, /shared with the user's own processes/);
        const data = join(home, '.local', 'share', 'code-exec-mcp');
        assert.ok(existsSync(join(data, 'runtime')), `${data} filled by the server`);
        assert.equal(statSync(join(data, 'runtime')).uid, uid, 'owned by the user');

        for (const [language, code] of [['python', 'import os; print(6*7, os.getuid())'], ['nodejs', 'console.log(6*7, process.getuid())'],
            ['typescript', 'const n: number = 6 * 7; console.log(n, process.getuid())'], ['shell', 'echo 42 $(id -u)']]) {
            const r = await exec(s.client, { language, code });
            assert.equal(r.sc?.stdout, '42 65534\n', `${language}: ${r.text}`);
        }
        const w = await s.client.callTool({ name: 'write_file', arguments: { workspace: 'u1', path: 'in.txt', content: 'from the client' } });
        assert.notEqual(w.isError, true, JSON.stringify(w));
        const r = await exec(s.client, { language: 'python', workspace: 'u1',
            code: 'print(open("in.txt").read()); open("out.txt", "w").write("from the code")' });
        assert.equal(r.sc.stdout, 'from the client\n', r.text);
        const back = await s.client.callTool({ name: 'read_file', arguments: { workspace: 'u1', path: 'out.txt' } });
        assert.match(JSON.stringify(back), /from the code/);
        assert.ok(existsSync(join(data, 'workspaces')), 'workspaces under the data directory');
        const a = await exec(s.client, { language: 'python', session: 'n1', code: 'x = 20' });
        assert.notEqual(a.isError, true, a.text);
        const b = await exec(s.client, { language: 'python', session: 'n1', code: 'print(x + 22)' });
        assert.equal(b.sc.stdout, '42\n', b.text);
        assert.deepEqual(s.errors, []);
    });

    test('a user with more processes of their own than MAX_PROCESSES still runs code: only the run\'s count', { timeout: 60_000 }, async () => {
        const marker = `crowd-${randomSecret('')}`;
        const crowd = spawn('/usr/sbin/runuser', ['-u', USER, '--', '/bin/bash', '-c',
            `for i in $(seq 80); do (exec -a ${marker} sleep 120) & done; wait`], { stdio: 'ignore' });
        try {
            const end = Date.now() + 10_000;
            while (userProcessesWith(marker).length < 80 && Date.now() < end) await sleep(100);
            assert.ok(userProcessesWith(marker).length >= 80, 'the user runs 80 processes (MAX_PROCESSES is 64)');
            const r = await exec(s.client, { language: 'python', code: 'import subprocess; print(subprocess.run(["echo", "child"], capture_output=True, text=True).stdout.strip())' });
            assert.equal(r.sc.stdout, 'child\n', r.text);
        } finally {
            crowd.kill('SIGKILL');
            try {
                execFileSync('pkill', ['-KILL', '-f', marker], { stdio: 'ignore' });
            } catch {
                // gone
            }
        }
    });

    test('the user\'s home, files and other processes are out of reach', { timeout: 60_000 }, async () => {
        const victimPid = victim.pid; // runuser's pid; its child is the sleep
        const sleeper = Number(userProcessesWith(victimMarker)[0]?.split(' ')[0]);
        assert.ok(sleeper > 0, 'the user\'s own process is running');
        const r = await sh(s.client, [
            `ls -d /home ${home} /root 2>&1`,
            `cat ${home}/private.txt 2>&1`,
            `cat /etc/shadow 2>&1 | head -1`,
            `kill -9 ${sleeper} ${victimPid} 2>&1`,
            'ps -e -o pid= | wc -l',
            'true',
        ].join('; echo ---; '));
        const parts = r.sc.stdout.split('---\n');
        assert.match(parts[0], /No such file or directory/, 'no /home, no home directory, no /root');
        assert.doesNotMatch(parts[0], /^\/home\n/m);
        assert.match(parts[1], /No such file or directory/);
        assert.doesNotMatch(r.sc.stdout, /the user's own file/);
        assert.match(parts[2], /No such file|Permission denied|^$/);
        assert.match(parts[3], /No such process/);
        assert.ok(Number(parts[4].trim()) < 10, `only the sandbox's own processes: ${parts[4]}`);
        // ptrace of any pid: refused (seccomp), and the user's process is untouched
        const p = await exec(s.client, { language: 'python', code: [
            'import ctypes, os, signal',
            'libc = ctypes.CDLL(None, use_errno=True)',
            `print(libc.ptrace(16, ${sleeper}, 0, 0), ctypes.get_errno() != 0)`,
            // the marker is in this file, not in this process's command line
            'seen = [p for p in os.listdir("/proc") if p.isdigit() and p != str(os.getpid())',
            `        and "${victimMarker}" in open(f"/proc/{p}/cmdline", errors="replace").read()]`,
            'print("visible:", len(seen))',
            'try:',
            `    os.kill(${sleeper}, signal.SIGKILL); print("signalled")`,
            'except OSError as e:',
            '    print(type(e).__name__)',
        ].join('\n') });
        assert.equal(p.sc.stdout, '-1 True\nvisible: 0\nProcessLookupError\n', p.text);
        assert.ok(userProcessesWith(victimMarker).length > 0, 'the user\'s process still runs');
    });

    test('no network (not even the host\'s loopback) and none of the server\'s environment', { timeout: 60_000 }, async () => {
        let connections = 0;
        const listener = createServer((c) => { connections++; c.destroy(); });
        await new Promise((res) => listener.listen(0, '127.0.0.1', res));
        const port = listener.address().port;
        try {
            const r = await exec(s.client, { language: 'python', code: [
                'import socket, os',
                'try:',
                `    socket.create_connection(("127.0.0.1", ${port}), timeout=3); print("connected")`,
                'except OSError as e:',
                '    print("refused", type(e).__name__)',
                'print(sorted(os.listdir("/sys/class/net")) if os.path.exists("/sys/class/net") else "no sysfs")',
                `print(any("${SECRET}" in open(f"/proc/{p}/environ", errors="replace").read() for p in os.listdir("/proc") if p.isdigit() and os.access(f"/proc/{p}/environ", os.R_OK)))`,
                `print("${SECRET}" in str(os.environ))`,
            ].join('\n') });
            assert.match(r.sc.stdout, /^refused /, r.text);
            assert.match(r.sc.stdout, /\nFalse\nFalse\n$/, r.text);
            assert.equal(connections, 0);
        } finally {
            listener.close();
        }
    });

    test('fork bomb, memory hog, disk fill, output flood and timeout end within their limits and leave nothing running', { timeout: 180_000 }, async () => {
        const bomb = await sh(s.client, ':(){ :|:& };:; sleep 2; echo survived', { timeout_ms: 8000 });
        assert.notEqual(bomb.isError, true, bomb.text);
        assert.ok(['timeout', 'exited', 'killed'].includes(bomb.sc.outcome), bomb.text);
        assert.match(bomb.sc.stderr, /fork|retry|Resource temporarily unavailable/, 'forks were refused at the limit');
        // the user's own processes were not starved: the user can still start processes
        execFileSync('/usr/sbin/runuser', ['-u', USER, '--', '/bin/true']);

        const hog = await exec(s.client, { language: 'python', timeout_ms: 30_000, code: [
            'import os, time',
            'for i in range(8):',
            '    if os.fork() == 0:',
            '        b = bytearray(64 << 20)',
            '        for j in range(0, len(b), 4096): b[j] = 1',
            '        time.sleep(30); os._exit(0)',
            'for i in range(8): os.wait()',
            'print("all lived")',
        ].join('\n') });
        assert.equal(hog.sc.outcome, 'memory_limit', hog.text);
        assert.doesNotMatch(hog.sc.stdout, /all lived/);

        // both capped areas (the work area and /tmp, MAX_DISK_MB each): ENOSPC or the per-file size limit ends the
        // writes at 64 MiB, never the user's disk
        const fill = await sh(s.client, 'for f in big /tmp/big; do dd if=/dev/zero of=$f bs=1M count=200 2>/dev/null; done; stat -c %s big /tmp/big',
            { timeout_ms: 30_000 });
        const sizes = fill.sc.stdout.trim().split('\n').map(Number);
        assert.equal(sizes.length, 2, fill.text);
        for (const n of sizes) assert.ok(n > 0 && n <= 64 << 20, `capped at MAX_DISK_MB: ${fill.text}`);

        const flood = await sh(s.client, 'yes "flood flood flood flood"', { timeout_ms: 30_000 });
        assert.equal(flood.sc.truncated, true, flood.text);

        const marker = `leftover-${randomSecret('')}`;
        const slow = await sh(s.client, `(exec -a ${marker} sleep 60) & exec -a ${marker} sleep 60`, { timeout_ms: 1500 });
        assert.equal(slow.sc.outcome, 'timeout', slow.text);
        assert.deepEqual(await waitGone(marker), [], 'nothing of the run left on the host');
    });

    // Shared memory is memory (issue 35, finding 4: twelve unmapped memfds of 256 MiB held 3 GiB past a 512 MiB
    // limit, reported as a 4 MiB peak). Each run holds 280 to 384 MiB against its 256 MiB in pieces under every
    // per-process and per-file limit; the watchdog, reading the user's own sandboxes, counts them and kills the run.
    test('memory in memfds, shared mappings and tmpfs files counts against the memory limit', { timeout: 180_000 }, async () => {
        const prelude = ['import mmap, os, time', 'def touch(m):', '    for i in range(0, len(m), 4096): m[i] = 1'];
        const outlived = ['print("allocated", flush=True)', 'time.sleep(20)', 'print("outlived the watchdog")'];
        const hogs = {
            'memfds held open, never mapped': [
                'fds = [os.memfd_create("m%d" % i) for i in range(12)]',
                'for fd in fds: os.posix_fallocate(fd, 0, 32 << 20)'],
            'memfds mapped, their descriptors closed': [
                'maps = []',
                'for i in range(8):',
                '    fd = os.memfd_create("m%d" % i); os.ftruncate(fd, 48 << 20); m = mmap.mmap(fd, 48 << 20)',
                '    os.close(fd); touch(m); maps.append(m)'],
            'files in /dev/shm, /tmp and the working directory, and memfds': [
                'for d in ("/dev/shm", "/tmp", "."):',
                '    with open(d + "/fill", "wb") as f: f.write(b"x" * (60 << 20))',
                'fds = [os.memfd_create("m%d" % i) for i in range(2)]',
                'for fd in fds: os.posix_fallocate(fd, 0, 50 << 20)'],
        };
        for (const [what, lines] of Object.entries(hogs)) {
            const r = await exec(s.client, { language: 'python', timeout_ms: 30_000, code: [...prelude, ...lines, ...outlived].join('\n') });
            assert.equal(r.sc?.outcome, 'memory_limit', `${what}: ${r.text}`);
            assert.doesNotMatch(r.sc.stdout, /outlived/, what);
            assert.ok(r.sc.peakMemoryBytes > 256 * 1048576, `${what}: the peak counts it (${r.sc.peakMemoryBytes})`);
        }
        // under the limit: measured (it runs on for a few of the watchdog's passes, and its peak has the 128 MiB it
        // holds), and left alone
        const small = await exec(s.client, { language: 'python', timeout_ms: 30_000, code: [...prelude,
            'fd = os.memfd_create("m"); os.posix_fallocate(fd, 0, 64 << 20)',
            'a = mmap.mmap(-1, 32 << 20); touch(a)',
            'with open("/dev/shm/fill", "wb") as f: f.write(b"x" * (32 << 20))',
            'time.sleep(1)',
            'print("ok")'].join('\n') });
        assert.equal(small.sc?.outcome, 'exited', small.text);
        assert.equal(small.sc.stdout, 'ok\n', small.text);
        assert.ok(small.sc.peakMemoryBytes >= 128 * 2 ** 20, `the watchdog counted what it held: ${small.sc.peakMemoryBytes}`);
    });
});

describe('egress through the checking proxy, as a normal user', { skip: skipUnless(isRoot, 'root, to create the test user') }, () => {
    test('an allowed name reaches a loopback fixture through the proxy; a direct connection does not', { timeout: 120_000 }, async () => {
        const { createServer: createHttpServer } = await import('node:http');
        const hits = [];
        const fixture = createHttpServer((req, res) => { hits.push(req.url); res.end('fixture-body\n'); });
        await new Promise((res) => fixture.listen(0, '127.0.0.1', res));
        const port = fixture.address().port;
        let s;
        try {
            s = await stdioClient({ EGRESS: 'on', EGRESS_ALLOW: `fixture.test:${port}`, EGRESS_ALLOW_CIDRS: '127.0.0.1/32',
                EGRESS_RESOLVE: 'fixture.test=127.0.0.1' });
            const ok = await sh(s.client, `curl -s --max-time 10 http://fixture.test:${port}/via-proxy`, { network: [`fixture.test:${port}`] });
            assert.equal(ok.sc.stdout, 'fixture-body\n', ok.text);
            assert.equal(ok.sc.network.connections[0].decision, 'allowed', JSON.stringify(ok.sc.network));
            const direct = await sh(s.client, `curl -s --max-time 5 --noproxy '*' http://127.0.0.1:${port}/direct; echo "rc=$?"`,
                { network: [`fixture.test:${port}`] });
            assert.match(direct.sc.stdout, /rc=(7|28)/, direct.text);
            const other = await sh(s.client, `curl -s --max-time 5 http://localhost:${port}/not-listed; echo "rc=$?"`,
                { network: [`fixture.test:${port}`] });
            assert.doesNotMatch(other.sc.stdout, /fixture-body/, other.text);
            assert.deepEqual(hits, ['/via-proxy']);
        } finally {
            await s?.client.close();
            fixture.close();
        }
    });
});

describe('a server started by a normal user, over HTTP', { skip: skipUnless(isRoot, 'root, to create the test user') }, () => {
    let child;
    let log = '';
    let url;
    const apiKey = randomSecret('key-');

    before(async () => {
        const port = await freePort();
        const [command, ...args] = asUser(userEnv({ PORT: String(port), HOST: '127.0.0.1', API_KEY: apiKey }));
        child = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'] });
        child.stdout.on('data', (b) => { log += b; });
        child.stderr.on('data', (b) => { log += b; });
        const end = Date.now() + 60_000;
        for (;;) {
            try {
                const r = await fetch(`http://127.0.0.1:${port}/healthz`);
                if (r.status === 200) break;
            } catch {
                // not listening yet
            }
            if (Date.now() > end) throw new Error(`not healthy in 60 s:\n${log.slice(-3000)}`);
            await sleep(150);
        }
        url = `http://127.0.0.1:${port}/mcp`;
    });

    after(async () => {
        child?.kill('SIGTERM');
        await new Promise((res) => (child?.exitCode !== null ? res() : child.on('exit', res)));
    });

    test('the SDK client over Streamable HTTP: runs, workspaces, sessions', { timeout: 120_000 }, async () => {
        const client = new Client({ name: 'code-exec-e2e-user-http', version: '0.1.0' }, { capabilities: {} });
        await client.connect(new StreamableHTTPClientTransport(new URL(url),
            { requestInit: { headers: { Authorization: `Bearer ${apiKey}` } } }));
        try {
            const r = await exec(client, { language: 'python', code: 'import os; print(os.getuid(), 6*7)' });
            assert.equal(r.sc.stdout, '65534 42\n', `${r.text}\n${log.slice(-2000)}`);
            const n = await exec(client, { language: 'nodejs', code: 'console.log("node", 6*7)' });
            assert.equal(n.sc.stdout, 'node 42\n', n.text);
            await client.callTool({ name: 'write_file', arguments: { workspace: 'h1', path: 'a.txt', content: 'abc' } });
            const w = await exec(client, { language: 'shell', workspace: 'h1', code: 'cat a.txt; echo; ls | grep -v "^code_"' });
            assert.equal(w.sc.stdout, 'abc\na.txt\n', w.text);
            await exec(client, { language: 'nodejs', session: 'js1', code: 'globalThis.k = 41' });
            const k = await exec(client, { language: 'nodejs', session: 'js1', code: 'console.log(globalThis.k + 1)' });
            assert.equal(k.sc.stdout, '42\n', k.text);
        } finally {
            await client.close();
        }
    });
});

describe('the MCP Inspector CLI, starting the server as a normal user over stdio', { skip: skipUnless(isRoot, 'root, to create the test user') }, () => {
    test('tools/list and a python call', { timeout: 120_000 }, async () => {
        // the Inspector starts the server itself: through a script, so runuser's options are not the Inspector's
        const script = join(dir, 'start-as-user.sh');
        writeFileSync(script, `#!/bin/sh\nexec ${asUser(userEnv({ TRANSPORT: 'stdio' })).map((a) => `'${a}'`).join(' ')}\n`, { mode: 0o755 });
        const inspectorHome = mkdtempSync('/tmp/code-exec-e2e-inspector-user-');
        const inspector = (...args) => new Promise((res, rej) => {
            execFile(NODE22, [INSPECTOR, '--cli', script, ...args], { timeout: 90_000, env: { ...process.env, HOME: inspectorHome },
                maxBuffer: 4 << 20 }, (err, stdout, stderr) => (err ? rej(new Error(`${err.message}\n${stderr}\n${stdout}`)) : res(stdout)));
        });
        try {
            const list = await inspector('--method', 'tools/list');
            assert.match(list, /"execute_code"/);
            const call = await inspector('--method', 'tools/call', '--tool-name', 'execute_code',
                '--tool-arg', 'language=python', '--tool-arg', 'code=import os; print(40 + 2, os.getuid())');
            assert.match(call, /42 65534/);
        } finally {
            rmSync(inspectorHome, { recursive: true, force: true });
        }
    });
});

describe('a kernel without unprivileged user namespaces', { skip: skipUnless(isRoot, 'root, to make the user namespace') }, () => {
    test('the server starts, says why on stderr and in runtime_info, and refuses to run code', { timeout: 120_000 }, async () => {
        // user.max_user_namespaces = 0, set in a user namespace of the test's own (fixtures/without-userns.py): the
        // host's sysctl may not be writable even by root (a container host), and other servers keep theirs
        const s = await stdioClient({}, [join(E2E, 'fixtures', 'without-userns.py')]);
        try {
            const info = (await s.client.callTool({ name: 'runtime_info', arguments: {} })).structuredContent;
            assert.equal(info.sandbox.available, false, JSON.stringify(info.sandbox));
            assert.match(info.sandbox.unavailable, /user namespaces are switched off/);
            const r = await exec(s.client, { language: 'python', code: 'print("ran")' });
            assert.equal(r.isError, true, r.text);
            assert.match(r.text, /user namespaces are switched off/);
            assert.doesNotMatch(r.text, /\bran\b/);
            assert.match(s.stderr(), /user namespaces are switched off/, 'said at start, on stderr');
            assert.deepEqual(s.errors, [], 'stdout carried only MCP messages');
        } finally {
            await s.client.close();
        }
    });
});
