// Issue #4, warm pool, end to end: the real jar, real HTTP, the official TypeScript MCP SDK client. Three servers,
// one after the other (2 cores): WARM_POOL=off for the cold reference results; the default pool
// (python=2,nodejs=1,typescript=1,shell=2,bash=2,c=1,go=1,java=1) with MEMORY_LIMIT_MB=128 and a WORKSPACE_ROOT; WARM_POOL=python=1 with
// WARM_PRELOAD_PYTHON=numpy. A call counts as warm only when the pool's `served` counter (runtime_info) went up
// by one for it, and the suite waits for a ready sandbox (/healthz) before each such call.
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, exec, sleep } from '../lib/server.js';
import { makeBase } from '../lib/server3.js';

const MEMORY_LIMIT_MB = 128;

let base;
before(() => { base = makeBase(); });
after(() => base.remove());

/**
 * The server picks a random `code_XXXXXXXX` file name per run; the rest of a result must match exactly, except
 * Node's internal stack frames below the user's (docs/interpreter-protocol.md: the warm runner starts the user's
 * module from the tick queue, so `Module._load` and friends are not on the stack): those lines are dropped.
 */
const norm = (s) => s.replace(/code_[0-9a-f]{8}/g, 'code_N').replace(/^ {4}at (?:.*\(node:internal\/[^)]*\)|node:internal\/\S+)\n/gm, '');
const visible = (sc) => ({ stdout: norm(sc.stdout), stderr: norm(sc.stderr), exitCode: sc.exitCode, outcome: sc.outcome });

/** Programs whose results a warm and a cold run must give alike: args, stdin, exceptions, exit codes, the file. */
const CORPUS = [
    { name: 'python args, stdin, __main__, argv, cwd, sys.path[0], open fds, stdio modes', language: 'python',
        args: ['a b', '-c', 'ünï'], stdin: 'line 1\nline 2\n', code: [
            'import os, sys',
            'print(sys.argv, __name__, __file__ == sys.argv[0], os.getcwd(), sys.path[0])',
            'print(repr(sys.stdin.read()))',
            'print(sorted(os.listdir("/proc/self/fd")))',
            'print(sys.stdin.isatty(), sys.stdout.isatty(), sys.stdout.encoding, sys.flags.dont_write_bytecode)',
            'print("to stderr", file=sys.stderr)',
        ].join('\n') },
    { name: 'python environment and limits', language: 'python', code: [
        'import os, resource, sys',
        'print(sorted(os.environ.items()))',
        'print([resource.getrlimit(r) for r in (resource.RLIMIT_NOFILE, resource.RLIMIT_NPROC, resource.RLIMIT_FSIZE)])',
        'print(os.getuid(), os.getgid(), os.getpid(), os.getppid())',
    ].join('\n') },
    { name: 'python uncaught exception: traceback and exit code 1', language: 'python', code: [
        'print("before")',
        'def inner(x):',
        '    return 1 / x',
        'inner(0)',
    ].join('\n') },
    { name: 'python syntax error', language: 'python', code: 'print("never")\nif True print(1)\n' },
    { name: 'python sys.exit(3) with stderr', language: 'python', code: 'import sys\nprint("out")\nsys.stderr.write("err\\n")\nsys.exit(3)\n' },
    { name: 'python os._exit skips buffers', language: 'python', code: 'import os, sys\nsys.stdout.write("kept\\n")\nos._exit(5)\n' },
    { name: 'python sys.exit with a message', language: 'python', code: 'raise SystemExit("fatal: stop")\n' },
    { name: 'python input() until EOF', language: 'python', stdin: 'x\ny', code: [
        'try:',
        '    while True: print("got", input())',
        'except EOFError:',
        '    print("eof")',
    ].join('\n') },
    { name: 'node args, stdin, module, filename', language: 'nodejs', args: ['one', 'two words'], stdin: 'in\n', code: [
        'const fs = require("fs");',
        'console.log(process.argv.slice(2), require.main === module, __filename, process.cwd());',
        'console.log(JSON.stringify(fs.readFileSync(0, "utf8")));',
        'console.error("to stderr");',
    ].join('\n') },
    { name: 'node uncaught error: stack and exit code 1', language: 'nodejs', code: [
        'function inner() { throw new Error("boom"); }',
        'inner();',
    ].join('\n') },
    { name: 'node process.exit(4), exitCode, rejected promise', language: 'nodejs', code: 'console.log("a");\nprocess.exitCode = 2;\nsetTimeout(() => process.exit(4), 10);\n' },
    { name: 'node unhandled rejection', language: 'nodejs', code: 'Promise.reject(new TypeError("nope"));\n' },
    // shell and bash: pooled as sandboxes whose init waits for the run's command (no warm interpreter)
    { name: 'shell args, stdin, file, fds, uid, exit code', language: 'shell', args: ['a b', 'c'], stdin: 'in 1\nin 2\n',
        code: 'echo "$0" "$#" "$1"; pwd; cat; ls /proc/self/fd; id -u; ls -l "$0" | cut -c1-10; env | sort; exit 3' },
    { name: 'typescript types, args, stdin, import, exit code', language: 'typescript', args: ['x y'], stdin: 'ts in',
        code: 'import { readFileSync } from "fs";\nconst n: number = 6 * 7;\nconsole.log(n, process.argv.slice(2), readFileSync(0, "utf8"), __filename);\nprocess.exitCode = 2;\n' },
    { name: 'typescript syntax error', language: 'typescript', code: 'const x: number = ;\n' },
    { name: 'bash stderr and a failing command', language: 'bash', code: 'echo "${BASH_VERSINFO[0]}" "$@"; echo err >&2; false' },
    { name: 'node environment', language: 'nodejs', code: 'console.log(Object.entries(process.env).sort());\nconsole.log(typeof require, typeof module, typeof exports, this === module.exports);\n' },
];

/** The warm-pool counters of one language, from runtime_info's structured content. */
async function poolInfo(client) {
    const r = await client.callTool({ name: 'runtime_info', arguments: {} });
    return r.structuredContent.warmPool;
}

/**
 * Runs `args` in a warm sandbox and proves it: waits (untimed) until /healthz shows one ready, then checks that
 * runtime_info's `served` went up by exactly one across the call.
 */
async function warmExec(server, client, args) {
    const language = args.language;
    assert.ok(await server.waitWarm(language, 1, 60_000), `a warm ${language} sandbox became ready`);
    const before = (await poolInfo(client)).languages[language].served;
    const r = await exec(client, args);
    const after = (await poolInfo(client)).languages[language].served;
    assert.equal(after, before + 1, `the call was served warm (served ${before} → ${after})`);
    return r;
}

const cold = {}; // corpus name → visible result of the WARM_POOL=off server

describe('reference: WARM_POOL=off', () => {
    let server; let client;
    before(async () => {
        server = await startServer({ WARM_POOL: 'off', MEMORY_LIMIT_MB: String(MEMORY_LIMIT_MB), DATA_DIR: base.dataDir });
        ({ client } = await server.connect());
    });
    after(async () => {
        await client?.close().catch(() => {});
        await server?.stop();
    });

    test('runtime_info and /healthz say the pool is off; the corpus runs cold', async () => {
        const info = await poolInfo(client);
        assert.equal(info.enabled, false);
        assert.match(info.reason, /off|empty/i);
        assert.deepEqual((await server.healthz()).body.warmPool ?? {}, {});
        for (const c of CORPUS) {
            const { name, ...args } = c;
            const r = await exec(client, args);
            assert.equal(r.isError, false, `${name}: ${r.text}`);
            cold[name] = visible(r.sc);
        }
        assert.equal(cold[CORPUS[2].name].exitCode, 1, 'the traceback case fails as it should');
        assert.match(cold[CORPUS[2].name].stderr, /ZeroDivisionError/);
        assert.equal(server.sandboxProcesses('warm_').length, 0, 'no warm sandbox with the pool off');
    });
});

describe('default pool (python=2,nodejs=1,typescript=1,shell=2,bash=2,c=1,go=1,java=1), MEMORY_LIMIT_MB=128, workspaces', () => {
    let server; let client;
    before(async () => {
        server = await startServer({ MEMORY_LIMIT_MB: String(MEMORY_LIMIT_MB), DATA_DIR: base.dataDir,
            WORKSPACE_ROOT: base.workspaceRoot('ws-warm') });
        ({ client } = await server.connect());
    });
    after(async () => {
        await client?.close().catch(() => {});
        await server?.stop();
    });

    test('runtime_info and /healthz show the pool levels; they reach their targets', async () => {
        assert.ok(await server.waitWarm('python', 2, 60_000), 'python pool full');
        assert.ok(await server.waitWarm('nodejs', 1, 60_000), 'nodejs pool full');
        assert.ok(await server.waitWarm('typescript', 1, 60_000), 'typescript pool full');
        assert.ok(await server.waitWarm('shell', 2, 60_000), 'shell pool full');
        assert.ok(await server.waitWarm('bash', 2, 60_000), 'bash pool full');
        for (const lang of ['c', 'go', 'java']) assert.ok(await server.waitWarm(lang, 1, 60_000), `${lang} pool full`);
        const h = (await server.healthz()).body.warmPool;
        assert.deepEqual(h, { python: { ready: 2, target: 2 }, nodejs: { ready: 1, target: 1 },
            typescript: { ready: 1, target: 1 }, shell: { ready: 2, target: 2 }, bash: { ready: 2, target: 2 },
            c: { ready: 1, target: 1 }, go: { ready: 1, target: 1 }, java: { ready: 1, target: 1 } });
        const info = await poolInfo(client);
        assert.equal(info.enabled, true);
        assert.equal(info.workspaces, true);
        assert.deepEqual(info.preloadPython, []);
        for (const [lang, target] of [['python', 2], ['nodejs', 1]]) {
            const l = info.languages[lang];
            assert.equal(l.target, target);
            assert.equal(l.ready, target);
            assert.equal(l.failed, 0, JSON.stringify(l));
            assert.ok(l.started >= target, JSON.stringify(l));
            assert.ok(l.lastStartMs > 0, JSON.stringify(l));
            for (const k of ['starting', 'served', 'missed']) assert.equal(typeof l[k], 'number', k);
        }
        // The sandboxes are there as processes of sandbox uids, one interpreter per ready entry.
        assert.equal(server.sandboxProcesses('warm_python.py').filter((l) => /^\s*\d+ \/usr\/bin\/python3 /.test(l)).length, 2);
        // TypeScript's runs on the Node that strips types where install-deps.sh put it (docs/tools.md)
        const nodes = server.sandboxProcesses('warm_node.js')
            .filter((l) => /^\s*\d+ (\/usr\/bin\/node|\/usr\/local\/lib\/code-exec\/node\/bin\/node) /.test(l));
        assert.equal(nodes.filter((l) => !l.includes('--typescript')).length, 1, nodes.join('\n'));
        assert.equal(nodes.filter((l) => l.includes('--typescript')).length, 1, nodes.join('\n'));
    });

    for (const c of CORPUS) {
        test(`warm = cold: ${c.name}`, async () => {
            assert.ok(cold[c.name], 'the reference server ran it');
            const { name, ...args } = c;
            const r = await warmExec(server, client, args);
            assert.equal(r.isError, false, r.text);
            assert.deepEqual(visible(r.sc), cold[c.name]);
        });
    }

    test('a run that takes no warm sandbox (extra env) still works cold and leaves `served` alone', async () => {
        await server.waitWarm('python', 1);
        const before = (await poolInfo(client)).languages.python.served;
        const r = await exec(client, { language: 'python', code: 'import os; print(os.environ["X"])', env: { X: 'cold' } });
        assert.equal(r.sc.stdout, 'cold\n');
        assert.equal((await poolInfo(client)).languages.python.served, before);
    });

    test('python: nothing passes from one warm run to the next (modules, builtins, files, env, sys.path, seeds)', async () => {
        // What a fresh sandbox has in /tmp (a DATA_DIR below /tmp shows as its read-only runtime mount point).
        const fresh = await warmExec(server, client, { language: 'python', code: 'import os\nprint(os.listdir("/tmp"), os.listdir("/dev/shm"))' });
        const a = await warmExec(server, client, { language: 'python', code: [
            'import builtins, json, os, random, sys, fractions',
            'builtins.LEAK = "builtin"',
            'json.LEAK = "module attribute"',
            'json.dumps = lambda *a, **k: "patched"',
            'sys.modules["leaky_module"] = fractions',
            'sys.path.insert(0, "/tmp/leak-path")',
            'os.environ["LEAK_ENV"] = "1"',
            'for p in ("/work/leak.txt", "/tmp/leak.txt", "/dev/shm/leak.txt"): open(p, "w").write("leak")',
            'os.mkdir("/tmp/leak-dir")',
            'import atexit; atexit.register(lambda: open("/tmp/atexit.txt", "w").write("x"))',
            'print(random.random(), os.urandom(8).hex())',
        ].join('\n') });
        assert.equal(a.sc.exitCode, 0, a.sc.stderr);
        const b = await warmExec(server, client, { language: 'python', code: [
            'import builtins, json, os, random, sys',
            'print(hasattr(builtins, "LEAK"), hasattr(json, "LEAK"), json.dumps(1), "leaky_module" in sys.modules,',
            '      "fractions" in sys.modules, "/tmp/leak-path" in sys.path, "LEAK_ENV" in os.environ)',
            'print(sorted(os.listdir(".")) == [os.path.basename(__file__)], os.listdir("/tmp"), os.listdir("/dev/shm"))',
            'print(random.random(), os.urandom(8).hex())',
        ].join('\n') });
        assert.equal(b.sc.exitCode, 0, b.sc.stderr);
        const lines = b.sc.stdout.split('\n');
        assert.equal(lines[0], 'False False 1 False False False False');
        assert.equal(`${lines[1]}\n`, `True ${fresh.sc.stdout}`);
        assert.notEqual(lines[2], a.sc.stdout.trim(), 'random numbers differ between warm runs');
        assert.notEqual(lines[2].split(' ')[0], a.sc.stdout.split(' ')[0], 'random.random() differs');
    });

    test('node: nothing passes from one warm run to the next (globals, prototypes, require cache, files, env)', async () => {
        const fresh = await warmExec(server, client, { language: 'nodejs', code: 'const fs = require("fs");\nconsole.log(fs.readdirSync("/tmp"), fs.readdirSync("/dev/shm"))' });
        const a = await warmExec(server, client, { language: 'nodejs', code: [
            'const fs = require("fs"), path = require("path");',
            'globalThis.LEAK = 1;',
            'Object.prototype.polluted = "yes";',
            'Array.prototype.push = function () { return -1; };',
            'path.join = () => "patched";',
            'process.env.LEAK_ENV = "1";',
            'for (const p of ["/work/leak.txt", "/tmp/leak.txt", "/dev/shm/leak.txt"]) fs.writeFileSync(p, "leak");',
            'console.log(Math.random(), require("crypto").randomBytes(8).toString("hex"));',
        ].join('\n') });
        assert.equal(a.sc.exitCode, 0, a.sc.stderr);
        const b = await warmExec(server, client, { language: 'nodejs', code: [
            'const fs = require("fs"), path = require("path");',
            'const arr = []; arr.push(1);',
            'console.log(typeof LEAK, ({}).polluted, arr.length, path.join("a", "b"), process.env.LEAK_ENV);',
            'console.log(fs.readdirSync(".").length, fs.readdirSync("/tmp"), fs.readdirSync("/dev/shm"));',
            'console.log(Math.random(), require("crypto").randomBytes(8).toString("hex"));',
        ].join('\n') });
        assert.equal(b.sc.exitCode, 0, b.sc.stderr);
        const lines = b.sc.stdout.split('\n');
        assert.equal(lines[0], 'undefined undefined 1 a/b undefined');
        assert.equal(`${lines[1]}\n`, `1 ${fresh.sc.stdout}`);
        assert.notEqual(lines[2].split(' ')[0], a.sc.stdout.split(' ')[0], 'Math.random() differs');
    });

    test('the control channel is not reachable from user code (fds 8/9 closed, also in a child process)', async () => {
        const p = await warmExec(server, client, { language: 'python', code: [
            'import os, subprocess',
            'def is_open(fd):',
            '    try: os.fstat(fd); return True',
            '    except OSError: return False',
            'print([fd for fd in range(3, 256) if is_open(fd)])',
            'print(subprocess.run(["ls", "/proc/self/fd"], capture_output=True, text=True).stdout.split())',
        ].join('\n') });
        assert.equal(p.sc.stdout.split('\n')[0], '[]', p.sc.stdout);
        assert.equal(p.sc.stdout.split('\n')[1], "['0', '1', '2', '3']", p.sc.stdout);
        const n = await warmExec(server, client, { language: 'nodejs', code: [
            'const fs = require("fs");',
            'const open = (fd) => { try { fs.fstatSync(fd); return true; } catch { return false; } };',
            'console.log(open(8), open(9));',
            'console.log(require("child_process").execFileSync("ls", ["/proc/self/fd"]).toString().split("\\n").filter(Boolean));',
        ].join('\n') });
        assert.equal(n.sc.stdout.split('\n')[0], 'false false', n.sc.stdout);
        assert.equal(n.sc.stdout.split('\n')[1], "[ '0', '1', '2', '3' ]", n.sc.stdout);
    });

    test('user stdin reaches a warm run: python input()/read, node readFileSync(0); no stdin reads EOF', async () => {
        let r = await warmExec(server, client, { language: 'python', stdin: 'alice\n42\nrest of it\n',
            code: 'import sys\nname = input()\nn = int(input())\nprint(name, n * 2, repr(sys.stdin.read()))' });
        assert.equal(r.sc.stdout, "alice 84 'rest of it\\n'\n");
        r = await warmExec(server, client, { language: 'python', code: 'import sys\nprint(repr(sys.stdin.read()))' });
        assert.equal(r.sc.stdout, "''\n", 'no stdin: EOF at once, not the control channel');
        r = await warmExec(server, client, { language: 'nodejs', stdin: 'x'.repeat(100_000),
            code: 'console.log(require("fs").readFileSync(0, "utf8").length)' });
        assert.equal(r.sc.stdout, '100000\n');
    });

    test('timeout holds in a warm run (and counts from the code, not from the pre-start)', async () => {
        const r = await warmExec(server, client, { language: 'python', code: 'print("start", flush=True)\nwhile True:\n    pass\n', timeout_ms: 1500 });
        assert.equal(r.sc.outcome, 'timeout', JSON.stringify(r.sc));
        assert.equal(r.sc.timedOut, true);
        assert.equal(r.sc.stdout, 'start\n');
        assert.ok(r.sc.durationMs >= 1400 && r.sc.durationMs < 10_000, `durationMs ${r.sc.durationMs}`);
        const n = await warmExec(server, client, { language: 'nodejs', code: 'for (;;) {}', timeout_ms: 1500 });
        assert.equal(n.sc.outcome, 'timeout', JSON.stringify(n.sc));
    });

    test(`memory limit (MEMORY_LIMIT_MB=${MEMORY_LIMIT_MB}) holds in a warm run`, async () => {
        const r = await warmExec(server, client, { language: 'python', code: [
            'chunks = []',
            'for i in range(64):',
            '    chunks.append(bytearray(16 * 1024 * 1024))',
            '    print(i, flush=True)',
        ].join('\n') });
        assert.equal(r.sc.outcome, 'memory_limit', JSON.stringify({ o: r.sc.outcome, e: r.sc.stderr.slice(-300) }));
        const lines = r.sc.stdout.trim().split('\n');
        assert.ok(lines.length < MEMORY_LIMIT_MB / 16, `stopped before ${MEMORY_LIMIT_MB} MiB: ${lines.length} chunks`);
        assert.ok(r.sc.peakMemoryBytes <= (MEMORY_LIMIT_MB + 8) * 1024 * 1024, `peak ${r.sc.peakMemoryBytes}`);
        const n = await warmExec(server, client, { language: 'nodejs',
            code: 'const a = []; for (;;) a.push(Buffer.alloc(16 * 1024 * 1024, 1));' });
        assert.ok(['memory_limit', 'exited', 'killed_by_signal'].includes(n.sc.outcome), n.sc.outcome);
        assert.notEqual(n.sc.exitCode, 0, 'the node hog did not finish');
        assert.ok(n.sc.peakMemoryBytes <= (MEMORY_LIMIT_MB + 8) * 1024 * 1024, `peak ${n.sc.peakMemoryBytes}`);
    });

    test('a warm run in a workspace reads and writes its files, and the result lists them', async () => {
        let r = await exec(client, { language: 'python', workspace: 'w1', env: { COLD: '1' },
            code: 'open("input.txt", "w").write("21\\n")' });
        assert.equal(r.sc.exitCode, 0, r.sc.stderr);
        r = await warmExec(server, client, { language: 'python', workspace: 'w1', code: [
            'import os',
            'n = int(open("input.txt").read())',
            'os.makedirs("out", exist_ok=True)',
            'open("out/answer.txt", "w").write(f"{n * 2}\\n")',
            'print(os.getcwd(), sorted(os.listdir(".")))',
        ].join('\n') });
        assert.equal(r.sc.exitCode, 0, r.sc.stderr);
        assert.equal(r.sc.workspace, 'w1');
        // As in a cold workspace run, the code file sits next to the workspace's files while it runs.
        assert.equal(norm(r.sc.stdout), "/work ['code_N.py', 'input.txt', 'out']\n");
        const listed = r.sc.files.find((f) => f.path === 'out/answer.txt');
        assert.ok(listed, JSON.stringify(r.sc.files));
        assert.equal(listed.status, 'created');
        assert.equal(listed.size, 3);
        r = await client.callTool({ name: 'read_file', arguments: { workspace: 'w1', path: 'out/answer.txt' } });
        assert.equal(r.structuredContent.content, '42\n');
        // The next warm stateless run sees none of the workspace.
        const s = await warmExec(server, client, { language: 'python', code: 'import os\nprint(len(os.listdir(".")))' });
        assert.equal(s.sc.stdout, '1\n');
        const n = await warmExec(server, client, { language: 'nodejs', workspace: 'w1',
            code: 'console.log(require("fs").readFileSync("out/answer.txt", "utf8").trim())' });
        assert.equal(n.sc.stdout, '42\n');
    });

    test('a burst larger than the pool: every run succeeds, the extra ones run cold (missed)', async () => {
        await server.waitWarm('python', 2);
        const before = (await poolInfo(client)).languages.python;
        const rs = await Promise.all(Array.from({ length: 4 }, (_, i) => exec(client, { language: 'python', code: `print(${i})` })));
        rs.forEach((r, i) => assert.equal(r.sc.stdout, `${i}\n`));
        const after = (await poolInfo(client)).languages.python;
        assert.equal((after.served - before.served) + (after.missed - before.missed), 4, JSON.stringify({ before, after }));
        assert.ok(after.served - before.served >= 1);
    });

    test('after the server stops, none of its sandbox processes remain', async () => {
        await server.waitWarm('python', 2);
        assert.ok(server.sandboxProcesses('warm_').length >= 3, 'warm sandboxes exist while the server runs');
        await server.stop();
        let left = server.sandboxProcesses('warm_');
        for (let i = 0; i < 20 && left.length; i++) {
            await sleep(100);
            left = server.sandboxProcesses('warm_');
        }
        assert.deepEqual(left, []);
    });
});

describe('WARM_POOL=python=1, WARM_PRELOAD_PYTHON=numpy', () => {
    let server; let client;
    before(async () => {
        server = await startServer({ WARM_POOL: 'python=1', WARM_PRELOAD_PYTHON: 'numpy', DATA_DIR: base.dataDir });
        ({ client } = await server.connect());
    });
    after(async () => {
        await client?.close().catch(() => {});
        await server?.stop();
    });

    test('numpy is already imported when a warm run starts; a cold run starts without it', async () => {
        const info = await poolInfo(client);
        assert.deepEqual(info.preloadPython, ['numpy']);
        assert.deepEqual(Object.keys(info.languages), ['python']);
        const code = 'import sys\nprint("numpy" in sys.modules)\nimport numpy as np\nprint(int(np.arange(10).sum()))';
        const w = await warmExec(server, client, { language: 'python', code });
        assert.equal(w.sc.stdout, 'True\n45\n', w.sc.stderr);
        const c = await exec(client, { language: 'python', code, env: { FORCE_COLD: '1' } });
        assert.equal(c.sc.stdout, 'False\n45\n', c.sc.stderr);
        // Preloaded, but fresh: a module attribute changed in one warm run is back in the next.
        await warmExec(server, client, { language: 'python', code: 'import numpy\nnumpy.LEAK = 1\nnumpy.pi = 3' });
        const n = await warmExec(server, client, { language: 'python', code: 'import numpy\nprint(hasattr(numpy, "LEAK"), numpy.pi)' });
        assert.equal(n.sc.stdout, 'False 3.141592653589793\n');
        assert.deepEqual((await server.healthz()).body.warmPool.python.target, 1);
    });
});
