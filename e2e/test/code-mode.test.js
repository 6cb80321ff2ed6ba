// Code mode end to end: sandboxed code calls the tools of upstream MCP servers that the operator configured
// (UPSTREAM_MCP_FILE), through the server, which holds the credentials. The real jar, real HTTP, the official
// TypeScript MCP SDK as the client, and two upstreams built with the same SDK (fixtures/upstream-mcp.mjs): one over
// Streamable HTTP on 127.0.0.1 that wants `Authorization: Bearer $FIXTURE_TOKEN`, one over stdio that starts only
// when the secret its config's `env` names reaches it. Traffic rule: nothing here connects anywhere but this
// machine's loopback.
//
// Two servers, one after the other:
//  1. the main one (default caps, the warm pool on, two tenants alice/bob from an API_KEYS_FILE): entries `fx` (the
//     HTTP fixture), `fx-stdio` (the stdio fixture, imported as fx_stdio), `narrow` (the HTTP fixture with
//     "tools": ["add", "echo"]) and `only-a` (the HTTP fixture for tenant alice only). Python, Node and TypeScript
//     runs, the documented HTTP endpoint, toolCalls, errors, credential secrecy, tenants, list_code_tools, cancel,
//     list_changed, a session, a workspace, the generated declarations under tsc.
//  2. small caps (CODE_TOOLS_MAX_CALLS=5, CODE_TOOLS_MAX_MB=1, CODE_TOOLS_CALL_TIMEOUT_MS=1000, WARM_POOL=off, so
//     cold runs) with `fx` and `down` (a closed loopback port): call_limit, byte_limit, timeout, upstream_unavailable;
//     and `inner`, a second instance of this server (its own API key, WARM_POOL=python=1, the same DATA_DIR) whose
//     execute_code the code calls. The inner server starts at the file's start, alongside the main one, so that it
//     adds (almost) no time; it is idle while the main server's cases run.
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync, readFileSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { startServer, exec, freePort, randomSecret, sleep, withLog } from '../lib/server.js';
import { makeBase, keysAppend, callTool } from '../lib/server3.js';
import { startUpstreamFixture, UPSTREAM_FIXTURE as FIXTURE } from '../lib/upstream.js';

const NODE = '/usr/bin/node';
const TSC = existsSync('/usr/bin/tsc') ? '/usr/bin/tsc' : 'tsc';
const FX_TOOLS = ['add', 'big', 'echo', 'enable_extra', 'fail', 'slow', 'whoami'];

// The secrets: random per run, given to the server's environment only (the upstream file names them as ${VAR}).
const HTTP_TOKEN = randomSecret('fxtok-');
const STDIO_TOKEN = randomSecret('stdiotok-');

let base;
let fx; // the HTTP fixture (lib/upstream.js)
let FXP; // its port
let STDIO_EVENTS; // the stdio fixture's event file (one JSON line per event)
const INNER_KEY = randomSecret('innerkey-'); // the inner server's API key: only the caps server's environment has it
let innerP; // the inner server (a promise: it starts alongside the main server)
const METRICS_TOKEN = randomSecret('metrics-'); // the main server's /metrics token

/** The main server's /metrics as text. */
async function metricsText(server) {
    const res = await fetch(`${server.base}/metrics`, { headers: { Authorization: `Bearer ${METRICS_TOKEN}` } });
    assert.equal(res.status, 200, 'GET /metrics');
    return res.text();
}

/** codeexec_tool_calls_total as {"server/tool/outcome": count}. */
function toolCallCounts(text) {
    const counts = {};
    for (const line of text.split('\n')) {
        if (!line.startsWith('codeexec_tool_calls_total{')) continue;
        const label = (k) => new RegExp(`${k}="([^"]*)"`).exec(line)?.[1];
        counts[`${label('server')}/${label('tool')}/${label('outcome')}`] = Number(line.split(/\s+/).pop());
    }
    return counts;
}

before(async () => {
    base = makeBase();
    innerP = startServer({
        API_KEY: INNER_KEY, DATA_DIR: base.dataDir, WORKSPACE_ROOT: base.workspaceRoot('ws-code-mode-inner'), WARM_POOL: 'python=1',
    });
    innerP.catch(() => {}); // awaited (and reported) where it is used
    STDIO_EVENTS = join(base.dir, 'stdio-events.jsonl');
    writeFileSync(STDIO_EVENTS, '', { mode: 0o644 });
    fx = await startUpstreamFixture(HTTP_TOKEN, NODE);
    FXP = fx.port;
});
after(async () => {
    fx?.stop();
    await (await innerP?.catch(() => null))?.stop();
    base?.remove();
});

// ---------------------------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------------------------

const fxUrl = () => `http://127.0.0.1:${FXP}/mcp`;
/** The HTTP fixture's events so far: {tool, event, at, args, via?}. */
const fxEvents = async () => (await fetch(`http://127.0.0.1:${FXP}/events`)).json();
/** The HTTP fixture's request counts: {authorized, rejected, sessions, open}. */
const fxStats = async () => (await fetch(`http://127.0.0.1:${FXP}/stats`)).json();
/** The stdio fixture's events so far. */
const stdioEvents = () => readFileSync(STDIO_EVENTS, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l));

/** A number no other case uses, to find one call among the fixtures' events. */
let uniq = 0;
const unique = (floor) => floor + (process.pid % 1000) * 10 + (++uniq);

async function until(fn, timeoutMs = 5000, step = 50) {
    const end = Date.now() + timeoutMs;
    for (;;) {
        if (await fn()) return true;
        if (Date.now() > end) return false;
        await sleep(step);
    }
}

const show = (r) => JSON.stringify({ isError: r.isError, text: r.text?.slice(0, 2500), toolCalls: r.sc?.toolCalls }, null, 1);

/** withLog with the HTTP fixture's stderr too. */
const withFixtureLog = (getServer, body) => withLog(getServer, body,
    () => (fx?.log() ? `\n--- HTTP fixture stderr (tail) ---\n${fx.log().slice(-1500)}` : ''));

/** The run's toolCalls.calls (asserts the structure is there). */
function calls(r) {
    assert.ok(r.sc?.toolCalls, `the result has toolCalls: ${show(r)}`);
    assert.ok(Array.isArray(r.sc.toolCalls.calls), show(r));
    assert.equal(typeof r.sc.toolCalls.callsLeftOut, 'number', show(r));
    for (const c of r.sc.toolCalls.calls) {
        assert.equal(typeof c.server, 'string');
        assert.equal(typeof c.tool, 'string');
        assert.equal(typeof c.ok, 'boolean');
        assert.equal(typeof c.ms, 'number');
        assert.equal(typeof c.bytesIn, 'number');
        assert.equal(typeof c.bytesOut, 'number');
        if (!c.ok) assert.equal(typeof c.reason, 'string', `a failed call names its reason: ${JSON.stringify(c)}`);
    }
    return r.sc.toolCalls.calls;
}

/** servers() may give the configured names or their module forms (- as _): compared as module names, sorted. */
const modules = (names) => names.map((n) => n.replace(/-/g, '_')).sort();

/** A record's server is the configured name; its module form (- as _) is accepted too. */
const sameServer = (got, name) => got === name || got === name.replace(/-/g, '_');

/** Runs python and parses the last stdout line as JSON; asserts the run exited 0. */
async function pyJson(client, code, extra = {}) {
    const r = await exec(client, { language: 'python', code, ...extra });
    assert.equal(r.isError, false, show(r));
    assert.equal(r.sc.exitCode, 0, show(r));
    const lines = r.sc.stdout.trim().split('\n');
    return { r, out: JSON.parse(lines.at(-1)) };
}

async function nodeJson(client, code, extra = {}, language = 'nodejs') {
    const r = await exec(client, { language, code, ...extra });
    assert.equal(r.isError, false, show(r));
    assert.equal(r.sc.exitCode, 0, show(r));
    const lines = r.sc.stdout.trim().split('\n');
    return { r, out: JSON.parse(lines.at(-1)) };
}

/** Python helpers for the documented endpoint ($CODE_TOOLS_URL), no proxy. */
const PY_ENDPOINT = `
import json, os, urllib.request, urllib.error
U = os.environ["CODE_TOOLS_URL"]
_op = urllib.request.build_opener(urllib.request.ProxyHandler({}))
def get(path):
    with _op.open(U + path, timeout=60) as r:
        return r.status, r.read().decode()
def post(body, raw=False):
    data = body if raw else json.dumps(body).encode()
    req = urllib.request.Request(U + "/call", data=data, headers={"Content-Type": "application/json"}, method="POST")
    try:
        with _op.open(req, timeout=60) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        b = e.read()
        try:
            return e.code, json.loads(b)
        except Exception:
            return e.code, b.decode(errors="replace")
def call(server, tool, arguments):
    return post({"server": server, "tool": tool, "arguments": arguments})
`;

/** Writes an UPSTREAM_MCP_FILE into the base dir and returns its path. */
function upstreamFile(name, mcpServers) {
    const p = join(base.dir, name);
    writeFileSync(p, JSON.stringify({ mcpServers }, null, 2), { mode: 0o600 });
    return p;
}

// ---------------------------------------------------------------------------------------------------------------
// 1. The main server
// ---------------------------------------------------------------------------------------------------------------

describe('code mode: main server (HTTP and stdio upstreams, two tenants, default caps, warm pool)', () => {
    let server; let alice; let bob;
    const S = () => server;

    before(async () => {
        const keys = join(base.dir, 'keys');
        const aliceKey = keysAppend(keys, 'alice');
        const bobKey = keysAppend(keys, 'bob');
        const file = upstreamFile('upstream-main.json', {
            fx: { url: fxUrl(), headers: { Authorization: 'Bearer ${FIXTURE_TOKEN}' }, description: 'Fixture over HTTP' },
            'fx-stdio': {
                command: NODE, args: [FIXTURE, '--stdio'],
                env: { FIXTURE_TOKEN: '${STDIO_TOKEN}', FIXTURE_EXPECT: STDIO_TOKEN, FIXTURE_EVENTS: STDIO_EVENTS },
            },
            narrow: { url: fxUrl(), headers: { Authorization: 'Bearer ${FIXTURE_TOKEN}' }, tools: ['add', 'echo'] },
            'only-a': { url: fxUrl(), headers: { Authorization: 'Bearer ${FIXTURE_TOKEN}' }, tenants: ['alice'] },
        });
        server = await startServer({
            API_KEY: '', API_KEYS_FILE: keys, DATA_DIR: base.dataDir, WORKSPACE_ROOT: base.workspaceRoot('ws-code-mode'),
            UPSTREAM_MCP_FILE: file, FIXTURE_TOKEN: HTTP_TOKEN, STDIO_TOKEN, METRICS_TOKEN,
        });
        alice = (await server.connect({ apiKey: aliceKey })).client;
        bob = (await server.connect({ apiKey: bobKey })).client;
        await innerP.catch(() => {}); // its start-up work is over before the cases run (the caps block reports a failure)
    });
    after(async () => {
        await alice?.close().catch(() => {});
        await bob?.close().catch(() => {});
        await server?.stop();
    });

    test('python: a loop over add, echo (both upstreams) and big, filtered and summarised; toolCalls match', withFixtureLog(S, async () => {
        const { r, out } = await pyJson(alice, `
import json, mcp_tools
from mcp_tools import fx_stdio
sums = [mcp_tools.fx.add(a=i, b=100)["sum"] for i in range(6)]
even = [s for s in sums if s % 2 == 0]
echoes = [fx_stdio.echo(text=w, times=2) for w in ("a", "bb", "ccc")]
big = mcp_tools.fx.big(kb=64)
print(json.dumps({"sums": sums, "even": even, "echoes": echoes, "big": [len(big), set(big) == {"x"}],
                  "servers": sorted(mcp_tools.servers())}))
`);
        assert.deepEqual(out.sums, [100, 101, 102, 103, 104, 105]);
        assert.deepEqual(out.even, [100, 102, 104]);
        assert.deepEqual(out.echoes, ['aa', 'bbbb', 'cccccc']);
        assert.deepEqual(out.big, [65536, true]);
        assert.deepEqual(modules(out.servers), ['fx', 'fx_stdio', 'narrow', 'only_a'], `servers() lists the servers: ${out.servers}`);
        const cs = calls(r);
        assert.equal(cs.length, 10, show(r));
        assert.equal(r.sc.toolCalls.callsLeftOut, 0);
        assert.ok(cs.every((c) => c.ok), show(r));
        assert.deepEqual(cs.map((c) => c.tool), [...Array(6).fill('add'), 'echo', 'echo', 'echo', 'big']);
        assert.ok(cs.slice(0, 6).every((c) => sameServer(c.server, 'fx')), show(r));
        assert.ok(cs.slice(6, 9).every((c) => sameServer(c.server, 'fx-stdio')), show(r));
        const bigRec = cs[9];
        assert.ok(bigRec.bytesIn >= 65536 && bigRec.bytesIn < 65536 + 16384, `big's bytesIn counts its result: ${JSON.stringify(bigRec)}`);
        assert.ok(bigRec.bytesOut > 0 && bigRec.bytesOut < 1024, `big's bytesOut counts its arguments: ${JSON.stringify(bigRec)}`);
        // the upstreams really got the calls
        const ev = await fxEvents();
        for (let i = 0; i < 6; i++) {
            assert.ok(ev.some((e) => e.tool === 'add' && e.event === 'end' && e.args.a === i && e.args.b === 100), `add(${i}) reached the fixture`);
        }
        assert.ok(stdioEvents().some((e) => e.tool === 'echo' && e.args.text === 'ccc'), 'echo reached the stdio fixture');
    }));

    test('node: the same loop with require("mcp-tools"); toolCalls match', withFixtureLog(S, async () => {
        const { r, out } = await nodeJson(alice, `
const { fx, fx_stdio, McpToolError } = require("mcp-tools");
(async () => {
  const sums = [];
  for (let i = 0; i < 5; i++) sums.push((await fx.add({ a: i, b: 200 })).sum);
  const echoes = [];
  for (const w of ["a", "bb"]) echoes.push(await fx_stdio.echo({ text: w, times: 3 }));
  const big = await fx.big({ kb: 32 });
  console.log(JSON.stringify({ sums, odd: sums.filter((s) => s % 2 === 1), echoes, bigLen: big.length,
    errClass: typeof McpToolError }));
})().catch((e) => { console.error("FAILED", e); process.exit(1); });
`);
        assert.deepEqual(out.sums, [200, 201, 202, 203, 204]);
        assert.deepEqual(out.odd, [201, 203]);
        assert.deepEqual(out.echoes, ['aaa', 'bbbbbb']);
        assert.equal(out.bigLen, 32 * 1024);
        assert.equal(out.errClass, 'function');
        const cs = calls(r);
        assert.deepEqual(cs.map((c) => [c.tool, c.ok]), [
            ['add', true], ['add', true], ['add', true], ['add', true], ['add', true], ['echo', true], ['echo', true], ['big', true]],
        show(r));
        assert.ok(sameServer(cs[5].server, 'fx-stdio') && sameServer(cs[0].server, 'fx'), show(r));
    }));

    test('return values: structuredContent when the tool has one, else its text (python, node, typescript)', withFixtureLog(S, async () => {
        const { out: p } = await pyJson(alice, `
import json, mcp_tools
a = mcp_tools.fx.add(a=1.5, b=2)
e = mcp_tools.fx.echo(text="hi")
print(json.dumps({"add": a, "addType": type(a).__name__, "echo": e, "echoType": type(e).__name__}))
`);
        assert.deepEqual(p, { add: { sum: 3.5 }, addType: 'dict', echo: 'hi', echoType: 'str' });
        const { out: n } = await nodeJson(alice, `
const { fx } = require("mcp-tools");
(async () => {
  const a = await fx.add({ a: 1, b: 2 });
  const e = await fx.echo({ text: "yo", times: 2 });
  console.log(JSON.stringify({ add: a, addType: typeof a, echo: e, echoType: typeof e }));
})().catch((e) => { console.error("FAILED", e); process.exit(1); });
`);
        assert.deepEqual(n, { add: { sum: 3 }, addType: 'object', echo: 'yoyo', echoType: 'string' });
        const { out: t, r } = await nodeJson(alice, `
import { fx, fx_stdio } from "mcp-tools";
async function main(): Promise<void> {
  const a = await fx.add({ a: 20, b: 22 });
  const e = await fx_stdio.echo({ text: "ts" });
  console.log(JSON.stringify({ sum: a.sum, echo: e }));
}
main().catch((e) => { console.error("FAILED", e); process.exit(1); });
`, {}, 'typescript');
        assert.deepEqual(t, { sum: 42, echo: 'ts' });
        assert.equal(calls(r).length, 2, show(r));
    }));

    test('fail: McpToolError with server, tool, reason tool_error and the upstream\'s message (python, node)', withFixtureLog(S, async () => {
        const { r, out } = await pyJson(alice, `
import json, mcp_tools
try:
    mcp_tools.fx.fail(message="upstream says no: 42")
    print(json.dumps({"raised": False}))
except mcp_tools.McpToolError as e:
    print(json.dumps({"raised": True, "server": e.server, "tool": e.tool, "reason": e.reason, "msg": str(e),
                      "isException": isinstance(e, Exception)}))
`);
        assert.equal(out.raised, true, JSON.stringify(out));
        assert.ok(sameServer(out.server, 'fx'), JSON.stringify(out));
        assert.equal(out.tool, 'fail');
        assert.equal(out.reason, 'tool_error');
        assert.ok(out.msg.includes('upstream says no: 42'), JSON.stringify(out));
        assert.equal(out.isException, true);
        const cs = calls(r);
        assert.equal(cs.length, 1);
        assert.equal(cs[0].ok, false);
        assert.equal(cs[0].reason, 'tool_error');
        const { out: n } = await nodeJson(alice, `
const { fx_stdio, McpToolError } = require("mcp-tools");
(async () => {
  try {
    await fx_stdio.fail({ message: "stdio upstream refuses" });
    console.log(JSON.stringify({ rejected: false }));
  } catch (e) {
    console.log(JSON.stringify({ rejected: true, isMcp: e instanceof McpToolError, isError: e instanceof Error,
      server: e.server, tool: e.tool, reason: e.reason, msg: e.message }));
  }
})();
`);
        assert.equal(n.rejected, true, JSON.stringify(n));
        assert.equal(n.isMcp, true);
        assert.equal(n.isError, true);
        assert.ok(sameServer(n.server, 'fx-stdio'), JSON.stringify(n));
        assert.equal(n.tool, 'fail');
        assert.equal(n.reason, 'tool_error');
        assert.ok(n.msg.includes('stdio upstream refuses'), JSON.stringify(n));
    }));

    test('on the record: /metrics counts calls by server, tool and outcome; the audit log has a tool_call line per call', withFixtureLog(S, async () => {
        const before = toolCallCounts(await metricsText(server));
        const logFrom = server.log().length;
        const { r, out } = await pyJson(alice, `
import json, mcp_tools
a = [mcp_tools.fx.add(a=1, b=i)["sum"] for i in range(3)]
try:
    mcp_tools.fx.fail(message="for the record")
except mcp_tools.McpToolError as e:
    a.append(e.reason)
print(json.dumps(a))
`);
        assert.deepEqual(out, [1, 2, 3, 'tool_error']);
        const after = toolCallCounts(await metricsText(server));
        const delta = (k) => (after[k] ?? 0) - (before[k] ?? 0);
        assert.equal(delta('fx/add/ok'), 3, `add counted ok 3 times: ${JSON.stringify(after)}`);
        assert.equal(delta('fx/fail/tool_error'), 1, `fail counted as tool_error once: ${JSON.stringify(after)}`);
        assert.equal(calls(r).length, 4, show(r));
        const lines = server.log().slice(logFrom).split('\n').filter((l) => l.includes('tool_call') && l.includes('server=fx '));
        const adds = lines.filter((l) => l.includes('tool=add ok=true'));
        const fails = lines.filter((l) => l.includes('tool=fail ok=false reason=tool_error'));
        assert.ok(adds.length >= 3 && fails.length >= 1, `tool_call audit lines for 3 adds and 1 fail:\n${lines.join('\n')}`);
        assert.ok(lines.every((l) => l.includes('tenant=alice')), lines.join('\n'));
    }));

    test('the documented endpoint: GET /servers and POST /call, results and every error reason', withFixtureLog(S, async () => {
        const { out } = await pyJson(alice, `${PY_ENDPOINT}
res = {"url": U}
st, body = get("/servers")
res["servers"] = [st, json.loads(body)]
res["add"] = call("fx", "add", {"a": 2, "b": 5})
res["echo"] = call("fx-stdio", "echo", {"text": "e"})
res["fail"] = call("fx", "fail", {"message": "via endpoint"})
res["unknownTool"] = call("fx", "no_such_tool", {})
res["unknownServer"] = call("no-such-server", "add", {"a": 1, "b": 1})
res["narrowed"] = call("narrow", "big", {"kb": 1})
res["badJson"] = post(b"{not json", raw=True)
print(json.dumps(res))
`);
        assert.equal(out.url, 'http://127.0.0.1:3128/code-tools/v1');
        const [st, sv] = out.servers;
        assert.equal(st, 200);
        const byName = Object.fromEntries(sv.servers.map((s) => [s.name, s]));
        assert.deepEqual(Object.keys(byName).sort(), ['fx', 'fx-stdio', 'narrow', 'only-a']);
        assert.equal(byName['fx-stdio'].module, 'fx_stdio');
        assert.equal(byName.fx.module, 'fx');
        assert.equal(byName.fx.description, 'Fixture over HTTP');
        assert.deepEqual(byName.fx.tools.map((t) => t.name).sort(), FX_TOOLS);
        const add = byName.fx.tools.find((t) => t.name === 'add');
        assert.equal(add.description, 'Adds two numbers.');
        assert.deepEqual(Object.keys(add.inputSchema.properties).sort(), ['a', 'b']);
        assert.deepEqual(byName.narrow.tools.map((t) => t.name).sort(), ['add', 'echo'], 'narrow lists only its "tools"');
        assert.deepEqual(out.add, [200, { result: { sum: 7 }, structured: true }]);
        assert.deepEqual(out.echo, [200, { result: 'e', structured: false }]);
        assert.equal(out.fail[0], 422);
        assert.equal(out.fail[1].reason, 'tool_error');
        assert.ok(out.fail[1].error.includes('via endpoint'), JSON.stringify(out.fail));
        assert.equal(out.unknownTool[0], 404);
        assert.equal(out.unknownTool[1].reason, 'unknown_tool');
        assert.match(out.unknownTool[1].error, /no_such_tool/);
        assert.ok([403, 404].includes(out.unknownServer[0]), JSON.stringify(out.unknownServer));
        assert.match(out.unknownServer[1].error, /no-such-server/);
        assert.equal(out.narrowed[0], 403, JSON.stringify(out.narrowed));
        assert.equal(out.narrowed[1].reason, 'not_allowed');
        assert.match(out.narrowed[1].error, /big/);
        assert.equal(out.badJson[0], 400, JSON.stringify(out.badJson));
        assert.equal(out.badJson[1].reason, 'bad_request');
    }));

    test('credentials stay on the server: not in env, files, /proc, process memory or /servers; the upstreams still get them', withFixtureLog(S, async () => {
        const statsBefore = await fxStats();
        const hex = (s) => Buffer.from(s).toString('hex'); // the code never holds a token literally
        const { r, out } = await pyJson(alice, `
import glob, json, os, subprocess, mcp_tools
${PY_ENDPOINT}
toks = [bytes.fromhex(h).decode() for h in ${JSON.stringify([hex(HTTP_TOKEN), hex(STDIO_TOKEN)])}]
res = {}
res["whoami"] = [mcp_tools.fx.whoami(), mcp_tools.fx_stdio.whoami()]
env_out = subprocess.run(["env"], capture_output=True, text=True).stdout
res["inEnv"] = any(t in env_out for t in toks) or any(t in v for v in os.environ.values() for t in toks)
res["envNames"] = sorted(os.environ)
st, body = get("/servers")
res["inServers"] = [st, any(t in body for t in toks)]
node_mod = subprocess.run(["node", "-e", "console.log(require.resolve('mcp-tools'))"], capture_output=True, text=True).stdout.strip()
roots = ["/etc", "/run", "/tmp", os.getcwd(), os.path.dirname(mcp_tools.__file__)] + ([os.path.dirname(node_mod)] if node_mod else [])
roots += glob.glob("/proc/[0-9]*/environ") + glob.glob("/proc/[0-9]*/cmdline")
g = subprocess.run(["timeout", "25", "grep", "-rsl", "-D", "skip", "-F", "-f", "-", *roots],
                   input="\\n".join(toks) + "\\n", capture_output=True, text=True)
res["grep"] = {"rc": g.returncode, "files": g.stdout.split(), "roots": len(roots), "nodeMod": node_mod}
# control: the same grep finds a marker planted in /tmp, so an empty answer means something
open("/tmp/planted-marker.txt", "w").write("".join(reversed("rekram-detnalp")))
c = subprocess.run(["timeout", "25", "grep", "-rsl", "-D", "skip", "-F", "-f", "-", "/tmp"],
                   input="".join(reversed("rekram-detnalp")) + "\\n", capture_output=True, text=True)
res["control"] = c.stdout.split()
# memory: a child process makes calls through both upstreams; this one (which holds the tokens to look for) then reads
# the child's memory, region by region, and looks for them; a string the child does hold is the control
child = subprocess.Popen(["python3", "-c", "import mcp_tools, sys, time\\nmcp_tools.fx.whoami(); mcp_tools.fx_stdio.whoami()\\n"
                          "mcp_tools.fx.add(a=1, b=2)\\nprint('child-ready', flush=True)\\ntime.sleep(60)"], stdout=subprocess.PIPE)
child.stdout.readline()
found, control, regions = [], False, 0
with open("/proc/%d/maps" % child.pid) as maps, open("/proc/%d/mem" % child.pid, "rb", 0) as mem:
    for line in maps:
        addr, perms = line.split()[:2]
        if not perms.startswith("r"):
            continue
        lo, hi = (int(x, 16) for x in addr.split("-"))
        try:
            mem.seek(lo)
            chunk = mem.read(min(hi - lo, 256 << 20))
        except (OSError, ValueError, OverflowError):
            continue
        regions += 1
        found += [i for i, t in enumerate(toks) if t.encode() in chunk]
        control = control or b"child-ready" in chunk
child.kill()
res["memory"] = {"found": found, "control": control, "regions": regions}
print(json.dumps(res))
`, { timeout_ms: 60_000 });
        assert.deepEqual(out.whoami, ['authorized', 'stdio'], 'the HTTP upstream saw the right header; the stdio one started (its env had the secret)');
        assert.equal(out.inEnv, false, `no token in the sandbox environment: ${out.envNames}`);
        assert.ok(!out.envNames.some((n) => /FIXTURE|STDIO_TOKEN|UPSTREAM_MCP_FILE/.test(n)), `no server variable leaks: ${out.envNames}`);
        assert.deepEqual(out.inServers, [200, false]);
        assert.ok(out.control.includes('/tmp/planted-marker.txt'), `the grep control works: ${JSON.stringify(out.control)}`);
        assert.notEqual(out.grep.rc, 124, `the grep finished within its 25 s: ${JSON.stringify(out.grep)}`);
        assert.deepEqual(out.grep.files, [], `no file readable in the sandbox holds a token: ${JSON.stringify(out.grep)}`);
        assert.ok(out.grep.roots > 6, JSON.stringify(out.grep));
        assert.ok(out.memory.control && out.memory.regions > 5, `the memory scan reads the child's memory: ${JSON.stringify(out.memory)}`);
        assert.deepEqual(out.memory.found, [], 'no token in the memory of a process that called both upstreams');
        for (const t of [HTTP_TOKEN, STDIO_TOKEN]) {
            assert.ok(!JSON.stringify(r.raw).includes(t), 'no token in the execute_code result');
        }
        const statsAfter = await fxStats();
        assert.equal(statsAfter.rejected, statsBefore.rejected, 'every request of the server to the HTTP upstream carried the token');
        assert.ok(statsAfter.authorized > statsBefore.authorized);
    }));

    test('tenants: bob does not see only-a (servers(), /servers, list_code_tools); his call is not_allowed naming it', withFixtureLog(S, async () => {
        const code = `${PY_ENDPOINT}
import mcp_tools
def attr():
    try:
        return getattr(mcp_tools, "only_a") is not None
    except AttributeError:
        return False
    except mcp_tools.McpToolError as e:
        return e.reason
st, body = get("/servers")
print(json.dumps({"servers": sorted(mcp_tools.servers()), "endpoint": sorted(s["name"] for s in json.loads(body)["servers"]),
                  "call": call("only-a", "add", {"a": 1, "b": 2}), "attr": attr()}))
`;
        const { out: a } = await pyJson(alice, code);
        assert.deepEqual(modules(a.servers), ['fx', 'fx_stdio', 'narrow', 'only_a']);
        assert.deepEqual(a.endpoint, ['fx', 'fx-stdio', 'narrow', 'only-a']);
        assert.deepEqual(a.call, [200, { result: { sum: 3 }, structured: true }]);
        assert.equal(a.attr, true);
        const { out: b, r } = await pyJson(bob, code);
        assert.deepEqual(modules(b.servers), ['fx', 'fx_stdio', 'narrow']);
        assert.deepEqual(b.endpoint, ['fx', 'fx-stdio', 'narrow']);
        assert.equal(b.call[0], 403, JSON.stringify(b.call));
        assert.equal(b.call[1].reason, 'not_allowed');
        assert.match(b.call[1].error, /only-a/);
        assert.ok(b.attr === false || b.attr === 'not_allowed', `bob's mcp_tools has no usable only_a: ${JSON.stringify(b.attr)}`);
        const rec = calls(r).find((c) => c.tool === 'add');
        if (rec) assert.deepEqual([rec.ok, rec.reason], [false, 'not_allowed'], show(r));
        const lb = await callTool(bob, 'list_code_tools', {});
        assert.equal(lb.isError, false, lb.text);
        assert.deepEqual(lb.sc.servers.map((s) => s.name).sort(), ['fx', 'fx-stdio', 'narrow']);
        const lbs = await callTool(bob, 'list_code_tools', { server: 'only-a' });
        assert.equal(lbs.isError, true, lbs.text);
        assert.match(lbs.text, /only-a/);
        // node: the same refusal as an McpToolError
        const { out: n } = await nodeJson(bob, `
const { McpToolError } = require("mcp-tools");
(async () => {
  const r = await fetch(process.env.CODE_TOOLS_URL + "/call", { method: "POST", headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ server: "only-a", tool: "add", arguments: { a: 1, b: 1 } }) });
  console.log(JSON.stringify({ status: r.status, body: await r.json(), mod: Object.keys(require("mcp-tools")).includes("only_a") }));
})();
`);
        assert.equal(n.status, 403);
        assert.equal(n.body.reason, 'not_allowed');
        assert.equal(n.mod, false, 'the node module has no only_a for bob');
    }));

    test('"tools" narrows a server: narrow has add and echo only; big is not_allowed naming it', withFixtureLog(S, async () => {
        const { r, out } = await pyJson(alice, `
import json, mcp_tools
res = {"add": mcp_tools.narrow.add(a=1, b=1)}
try:
    res["hasBig"] = hasattr(mcp_tools.narrow, "big")
except mcp_tools.McpToolError as e:
    res["hasBig"] = e.reason
try:
    mcp_tools.narrow.big(kb=1)
    res["big"] = "no error"
except AttributeError as e:
    res["big"] = ["AttributeError", str(e)]
except mcp_tools.McpToolError as e:
    res["big"] = [e.reason, str(e)]
print(json.dumps(res))
`);
        assert.deepEqual(out.add, { sum: 2 });
        assert.ok(out.hasBig === false || out.hasBig === 'not_allowed', JSON.stringify(out));
        assert.ok(Array.isArray(out.big), JSON.stringify(out));
        assert.match(out.big[1], /big/, JSON.stringify(out));
        if (out.big[0] !== 'AttributeError') assert.equal(out.big[0], 'not_allowed');
        assert.ok(calls(r).filter((c) => c.ok).length === 1, show(r));
        const l = await callTool(alice, 'list_code_tools', { server: 'narrow' });
        assert.equal(l.isError, false, l.text);
        assert.deepEqual(l.sc.tools.map((t) => t.name).sort(), ['add', 'echo']);
        const lt = await callTool(alice, 'list_code_tools', { server: 'narrow', tool: 'big' });
        assert.equal(lt.isError, true, lt.text);
        assert.match(lt.text, /big/);
    }));

    test('list_code_tools: servers, then one server\'s tools, then one tool\'s schema and signatures; unknown names are errors', withFixtureLog(S, async () => {
        const tools = await alice.listTools();
        const lct = tools.tools.find((t) => t.name === 'list_code_tools');
        assert.ok(lct, 'list_code_tools is listed');
        assert.ok(lct.inputSchema.properties.server && lct.inputSchema.properties.tool, JSON.stringify(lct.inputSchema));
        const all = await callTool(alice, 'list_code_tools', {});
        assert.equal(all.isError, false, all.text);
        const byName = Object.fromEntries(all.sc.servers.map((s) => [s.name, s]));
        assert.deepEqual(Object.keys(byName).sort(), ['fx', 'fx-stdio', 'narrow', 'only-a']);
        assert.equal(byName.fx.tools, FX_TOOLS.length);
        assert.equal(byName['fx-stdio'].tools, FX_TOOLS.length);
        assert.equal(byName.narrow.tools, 2);
        assert.equal(byName['fx-stdio'].module, 'fx_stdio');
        assert.equal(byName.fx.description, 'Fixture over HTTP');
        const one = await callTool(alice, 'list_code_tools', { server: 'fx-stdio' });
        assert.equal(one.isError, false, one.text);
        assert.equal(one.sc.server, 'fx-stdio');
        assert.deepEqual(one.sc.tools.map((t) => t.name).sort(), FX_TOOLS);
        assert.equal(one.sc.tools.find((t) => t.name === 'big').description, 'Returns exactly kb*1024 x characters.');
        const t = await callTool(alice, 'list_code_tools', { server: 'fx', tool: 'echo' });
        assert.equal(t.isError, false, t.text);
        assert.equal(t.sc.server, 'fx');
        assert.equal(t.sc.tool, 'echo');
        assert.match(t.sc.description, /Echoes text/);
        assert.deepEqual(Object.keys(t.sc.inputSchema.properties).sort(), ['text', 'times']);
        assert.deepEqual(t.sc.inputSchema.required, ['text']);
        assert.match(t.sc.python, /echo\(/);
        assert.match(t.sc.python, /text/);
        assert.match(t.sc.python, /times/);
        assert.match(t.sc.typescript, /echo/);
        assert.match(t.sc.typescript, /text\s*:\s*string/);
        assert.match(t.sc.typescript, /times\?\s*:\s*number/);
        for (const [args, name] of [[{ server: 'nope' }, 'nope'], [{ server: 'fx', tool: 'nope_tool' }, 'nope_tool'],
            [{ server: 'nope', tool: 'add' }, 'nope']]) {
            const e = await callTool(alice, 'list_code_tools', args);
            assert.equal(e.isError, true, `${JSON.stringify(args)}: ${e.text}`);
            assert.ok(e.text.includes(name), `${JSON.stringify(args)} names ${name}: ${e.text}`);
        }
        // the same answers as resources: listed, and read through the templates
        const listed = await alice.listResources();
        assert.ok(listed.resources.some((r) => r.uri === 'code-tools://servers'), JSON.stringify(listed.resources.map((r) => r.uri)));
        const templates = (await alice.listResourceTemplates()).resourceTemplates.map((x) => x.uriTemplate);
        assert.ok(templates.includes('code-tools://servers/{server}') && templates.includes('code-tools://servers/{server}/{tool}'),
            JSON.stringify(templates));
        const read = async (uri) => JSON.parse((await alice.readResource({ uri })).contents[0].text);
        assert.deepEqual((await read('code-tools://servers')).servers.map((x) => x.name).sort(), ['fx', 'fx-stdio', 'narrow', 'only-a']);
        assert.deepEqual((await read('code-tools://servers/narrow')).tools.map((x) => x.name).sort(), ['add', 'echo']);
        assert.match((await read('code-tools://servers/fx/echo')).typescript, /text\s*:\s*string/);
        const bobServers = (await bob.readResource({ uri: 'code-tools://servers' })).contents[0].text;
        assert.ok(!bobServers.includes('only-a'), `bob's resource does not list only-a: ${bobServers}`);
        await assert.rejects(bob.readResource({ uri: 'code-tools://servers/only-a' }), /not found|-32002/i);
    }));

    test('CODE_TOOLS_CALL_TIMEOUT_MS default: a call is not cut at 1 s (slow 1500 ms returns)', withFixtureLog(S, async () => {
        const { out } = await pyJson(alice, 'import json, mcp_tools\nprint(json.dumps(mcp_tools.fx.slow(ms=1500)))');
        assert.equal(out, 'slept');
    }));

    test('the run\'s timeout (timeout_ms 1500) cancels its pending calls on both upstreams (node, concurrent calls)', withFixtureLog(S, async () => {
        const ms = unique(20_000);
        const started = Date.now();
        const r = await exec(alice, { language: 'nodejs', timeout_ms: 1500, code: `
const { fx, fx_stdio } = require("mcp-tools");
console.log("calling");
Promise.all([fx.slow({ ms: ${ms} }), fx_stdio.slow({ ms: ${ms} })]).then((v) => console.log("RETURNED", v));
setTimeout(() => {}, 60000); // the run lasts until its timeout whatever the library does with its sockets
` });
        assert.equal(r.isError, false, show(r));
        assert.equal(r.sc.timedOut, true, show(r));
        assert.ok(Date.now() - started < 10_000, 'the run ended at its timeout');
        assert.ok(!r.sc.stdout.includes('RETURNED'), show(r));
        const seen = (list, event) => list.some((e) => e.tool === 'slow' && e.args.ms === ms && e.event === event);
        assert.ok(await until(async () => seen(await fxEvents(), 'cancelled'), 5000),
            `the HTTP upstream saw the call cancelled: ${JSON.stringify((await fxEvents()).filter((e) => e.args?.ms === ms))}`);
        assert.ok(await until(() => seen(stdioEvents(), 'cancelled'), 5000),
            `the stdio upstream saw the call cancelled: ${JSON.stringify(stdioEvents().filter((e) => e.args?.ms === ms))}`);
        assert.ok(!seen(await fxEvents(), 'end') && !seen(stdioEvents(), 'end'));
    }));

    test('a client cancel (SDK AbortSignal) of the run cancels its pending call upstream', withFixtureLog(S, async (t) => {
        const ms = unique(30_000);
        const ac = new AbortController();
        t.after(() => ac.abort());
        const call = exec(alice, { language: 'python', timeout_ms: 60_000,
            code: `import mcp_tools\nprint("calling", flush=True)\nmcp_tools.fx.slow(ms=${ms})\nprint("RETURNED")` },
        { signal: ac.signal }).then((r) => ({ result: r }), (e) => ({ error: e }));
        let early = null;
        call.then((v) => { early = v; });
        const has = async (event) => (await fxEvents()).some((e) => e.tool === 'slow' && e.args.ms === ms && e.event === event);
        assert.ok(await until(async () => early !== null || await has('start'), 30_000), 'the call reached the upstream');
        assert.equal(early, null, `the run ended before its call reached the upstream: ${early?.result ? show(early.result) : early?.error}`);
        await sleep(200);
        assert.equal(await has('cancelled'), false);
        const cancelAt = Date.now();
        ac.abort('test cancels');
        const settled = await call;
        assert.ok(settled.error, 'the aborted call rejects on the client');
        assert.ok(await until(() => has('cancelled'), 5000), 'the upstream saw its call cancelled within 5 s of the cancel');
        const ev = (await fxEvents()).find((e) => e.tool === 'slow' && e.args.ms === ms && e.event === 'cancelled');
        assert.ok(ev.at - cancelAt < 5000);
        assert.equal(await server.waitIdle(10_000), true);
    }));

    test('python session: tools across two cells; each call has its own toolCalls', withFixtureLog(S, async () => {
        const name = `cm-${randomSecret('s')}`;
        const r1 = await exec(alice, { language: 'python', session: name,
            code: 'import mcp_tools\nx = mcp_tools.fx.add(a=1, b=2)["sum"]\nx' });
        assert.equal(r1.isError, false, show(r1));
        assert.equal(r1.sc.sessionCreated, true);
        assert.equal(r1.sc.result, '3', show(r1));
        assert.deepEqual(calls(r1).map((c) => [c.tool, c.ok]), [['add', true]]);
        const r2 = await exec(alice, { language: 'python', session: name,
            code: 'y = mcp_tools.fx.add(a=x, b=10)["sum"]\nmcp_tools.fx_stdio.echo(text=str(y), times=2)' });
        assert.equal(r2.isError, false, show(r2));
        assert.equal(r2.sc.sessionCreated, false);
        assert.equal(r2.sc.result, "'1313'", show(r2));
        const cs = calls(r2);
        assert.deepEqual(cs.map((c) => [c.tool, c.ok]), [['add', true], ['echo', true]], 'the second cell lists its own calls only');
        assert.ok(sameServer(cs[1].server, 'fx-stdio'));
        await callTool(alice, 'session_close', { session: name });
    }));

    test('warm pool and workspace runs have the tools too', withFixtureLog(S, async () => {
        assert.ok(await server.waitWarm('python', 1, 60_000), 'a warm python sandbox is ready');
        const served = async () => (await alice.callTool({ name: 'runtime_info', arguments: {} })).structuredContent.warmPool.languages.python.served;
        const before = await served();
        const { out } = await pyJson(alice, 'import json, mcp_tools\nprint(json.dumps(mcp_tools.fx.add(a=5, b=5)))');
        assert.equal(await served(), before + 1, 'the call was served warm');
        assert.deepEqual(out, { sum: 10 });
        const w = await exec(alice, { language: 'python', workspace: 'cm-ws',
            code: 'import mcp_tools\nopen("sum.txt", "w").write(str(mcp_tools.fx.add(a=40, b=2)["sum"]))\nprint("ok")' });
        assert.equal(w.isError, false, show(w));
        assert.equal(w.sc.stdout, 'ok\n', show(w));
        assert.equal(calls(w).length, 1);
        const f = await callTool(alice, 'read_file', { workspace: 'cm-ws', path: 'sum.txt' });
        assert.match(f.text, /42/);
    }));

    test('typescript: the generated declarations type-check a right call and reject a wrong argument type (tsc)', withFixtureLog(S, async () => {
        const { out } = await nodeJson(alice, `
const fs = require("fs");
const p = require.resolve("mcp-tools");
const d = p.replace(/index\\.js$/, "index.d.ts");
console.log(JSON.stringify({ p, dts: fs.readFileSync(d, "utf8") }));
`);
        assert.match(out.p, /index\.js$/, out.p);
        const dts = out.dts;
        assert.match(dts, /fx_stdio/);
        assert.match(dts, /McpToolError/);
        const dir = join(base.dir, 'tsc');
        mkdirSync(join(dir, 'node_modules', 'mcp-tools'), { recursive: true });
        writeFileSync(join(dir, 'node_modules', 'mcp-tools', 'index.d.ts'), dts);
        writeFileSync(join(dir, 'node_modules', 'mcp-tools', 'package.json'), JSON.stringify({ name: 'mcp-tools', types: 'index.d.ts' }));
        const ambient = /declare\s+module\s+["']mcp-tools["']/.test(dts);
        const files = ambient ? [join(dir, 'node_modules', 'mcp-tools', 'index.d.ts')] : [];
        writeFileSync(join(dir, 'good.ts'), `
import { fx, fx_stdio, McpToolError } from "mcp-tools";
async function main(): Promise<void> {
  const r = await fx.add({ a: 1, b: 2 });
  const s: number = r.sum;
  const e: string = await fx_stdio.echo({ text: "hi", times: 2 });
  const e2: string = await fx.echo({ text: "once" });
  try { await fx.fail({ message: "x" }); } catch (err) { if (err instanceof McpToolError) console.log(err.server, err.tool, err.reason); }
  console.log(s, e, e2);
}
main();
`);
        writeFileSync(join(dir, 'bad.ts'), `
import { fx } from "mcp-tools";
async function main(): Promise<void> {
  await fx.add({ a: "one", b: 2 });
}
main();
`);
        const tsc = (file) => {
            try {
                const stdout = execFileSync(TSC, ['--noEmit', '--strict', '--target', 'es2022', '--module', 'commonjs',
                    '--moduleResolution', 'node', '--lib', 'es2022,dom', ...files, join(dir, file)],
                { cwd: dir, encoding: 'utf8', timeout: 60_000 });
                return { rc: 0, out: stdout };
            } catch (e) {
                return { rc: e.status, out: `${e.stdout}${e.stderr}` };
            }
        };
        const good = tsc('good.ts');
        assert.equal(good.rc, 0, `good.ts type-checks against the declarations:\n${good.out}\n--- index.d.ts ---\n${dts.slice(0, 3000)}`);
        const bad = tsc('bad.ts');
        assert.notEqual(bad.rc, 0, `bad.ts must not type-check:\n${bad.out}`);
        assert.match(bad.out, /bad\.ts\(4,/, bad.out);
        assert.match(bad.out, /error TS\d+/, bad.out);
        assert.match(bad.out, /string/, bad.out);
    }));

    test('enable_extra: the upstream\'s list_changed is followed; a later run sees and calls extra', withFixtureLog(S, async () => {
        const before = await callTool(alice, 'list_code_tools', { server: 'fx' });
        assert.ok(!before.sc.tools.some((t) => t.name === 'extra'), 'no extra yet');
        const { out } = await pyJson(alice, 'import json, mcp_tools\nprint(json.dumps(mcp_tools.fx.enable_extra()))');
        assert.equal(out, 'enabled');
        assert.ok(await until(async () => (await callTool(alice, 'list_code_tools', { server: 'fx' })).sc.tools.some((t) => t.name === 'extra'), 10_000, 200),
            'list_code_tools shows extra after the notification');
        const { r, out: o2 } = await pyJson(alice, 'import json, mcp_tools\nprint(json.dumps(mcp_tools.fx.extra()))');
        assert.equal(o2, 'extra');
        assert.deepEqual(calls(r).map((c) => [c.tool, c.ok]), [['extra', true]]);
        const { out: o3 } = await nodeJson(alice, `
const { fx } = require("mcp-tools");
fx.extra({}).then((v) => console.log(JSON.stringify(v)));
`);
        assert.equal(o3, 'extra');
        // narrow's explicit list is not widened by the new tool
        const n = await callTool(alice, 'list_code_tools', { server: 'narrow' });
        assert.deepEqual(n.sc.tools.map((t) => t.name).sort(), ['add', 'echo']);
    }));
});

// ---------------------------------------------------------------------------------------------------------------
// 2. Small caps: CODE_TOOLS_MAX_CALLS=5, CODE_TOOLS_MAX_MB=1, CODE_TOOLS_CALL_TIMEOUT_MS=1000; a down upstream
// ---------------------------------------------------------------------------------------------------------------

describe('code mode: caps (MAX_CALLS=5, MAX_MB=1, CALL_TIMEOUT_MS=1000), a down upstream, cold runs; this server as an upstream', () => {
    let server; let client; let inner;
    const S = () => server;

    before(async () => {
        const closed = await freePort(); // nothing listens there
        inner = await innerP;
        const file = upstreamFile('upstream-caps.json', {
            fx: { url: fxUrl(), headers: { Authorization: 'Bearer ${FIXTURE_TOKEN}' } },
            down: { url: `http://127.0.0.1:${closed}/mcp` },
            inner: { url: inner.url, headers: { Authorization: 'Bearer ${INNER_KEY}' }, description: 'Another code-exec-mcp' },
        });
        server = await startServer({
            DATA_DIR: base.dataDir, WARM_POOL: 'off', WORKSPACE_ROOT: base.workspaceRoot('ws-code-mode-caps'),
            UPSTREAM_MCP_FILE: file, FIXTURE_TOKEN: HTTP_TOKEN, INNER_KEY,
            CODE_TOOLS_MAX_CALLS: '5', CODE_TOOLS_MAX_MB: '1', CODE_TOOLS_CALL_TIMEOUT_MS: '1000',
        });
        ({ client } = await server.connect());
    });
    after(async () => {
        await client?.close().catch(() => {});
        await server?.stop();
    });

    test('CODE_TOOLS_MAX_CALLS=5: a loop of 10 calls fails from the 6th with call_limit and a clear message; the upstream got 5', withFixtureLog(S, async () => {
        const marker = unique(70_000);
        const { r, out } = await pyJson(client, `
import json, mcp_tools
got = []
for i in range(10):
    try:
        got.append(["ok", mcp_tools.fx.add(a=${marker}, b=i)["sum"] - ${marker}])
    except mcp_tools.McpToolError as e:
        got.append([e.reason, str(e)])
print(json.dumps(got))
`);
        assert.deepEqual(out.slice(0, 5), [['ok', 0], ['ok', 1], ['ok', 2], ['ok', 3], ['ok', 4]], JSON.stringify(out));
        for (const g of out.slice(5)) {
            assert.equal(g[0], 'call_limit', JSON.stringify(out));
            assert.match(g[1], /\b5\b/, `the message names the limit: ${g[1]}`);
            assert.match(g[1], /CODE_TOOLS_MAX_CALLS|limit/i, g[1]);
        }
        const cs = calls(r);
        assert.equal(cs.filter((c) => c.ok).length, 5, show(r));
        assert.ok(cs.filter((c) => !c.ok).every((c) => c.reason === 'call_limit'), show(r));
        const ev = (await fxEvents()).filter((e) => e.tool === 'add' && e.event === 'start' && e.args.a === marker);
        assert.equal(ev.length, 5, 'the upstream got exactly 5 calls');
        // a new run starts with a fresh budget; the endpoint says 429 call_limit
        const { out: o2 } = await pyJson(client, `${PY_ENDPOINT}
print(json.dumps([call("fx", "echo", {"text": str(i)}) for i in range(6)]))
`);
        assert.deepEqual(o2.slice(0, 5).map((x) => x[0]), [200, 200, 200, 200, 200], JSON.stringify(o2));
        assert.equal(o2[5][0], 429);
        assert.equal(o2[5][1].reason, 'call_limit');
    }));

    test('CODE_TOOLS_MAX_MB=1: a result past the run\'s byte budget is byte_limit (python and the endpoint)', withFixtureLog(S, async () => {
        const { r, out } = await pyJson(client, `
import json, mcp_tools
res = {"first": len(mcp_tools.fx.big(kb=256))}
try:
    v = mcp_tools.fx.big(kb=2048)
    res["second"] = ["ok", len(v)]
except mcp_tools.McpToolError as e:
    res["second"] = [e.reason, str(e), e.server, e.tool]
print(json.dumps(res))
`);
        assert.equal(out.first, 256 * 1024);
        assert.equal(out.second[0], 'byte_limit', JSON.stringify(out).slice(0, 500));
        assert.match(out.second[1], /CODE_TOOLS_MAX_MB|MB|limit/i);
        assert.deepEqual(out.second.slice(2), ['fx', 'big']);
        const cs = calls(r);
        assert.deepEqual(cs.map((c) => [c.tool, c.ok, c.reason ?? null]), [['big', true, null], ['big', false, 'byte_limit']], show(r));
        const { out: o2 } = await pyJson(client, `${PY_ENDPOINT}
s, b = call("fx", "big", {"kb": 1500})
print(json.dumps([s, b if s != 200 else "ok"]))
`);
        assert.equal(o2[0], 429, JSON.stringify(o2));
        assert.equal(o2[1].reason, 'byte_limit');
        // arguments count too: a 1.5 MiB argument is refused as well
        const { out: o3 } = await pyJson(client, `
import json, mcp_tools
try:
    mcp_tools.fx.echo(text="y" * (1536 * 1024))
    print(json.dumps("ok"))
except mcp_tools.McpToolError as e:
    print(json.dumps(e.reason))
`);
        assert.equal(o3, 'byte_limit');
    }));

    test('CODE_TOOLS_CALL_TIMEOUT_MS=1000: slow(5000) is a timeout within 1-3 s and the upstream sees the cancel', withFixtureLog(S, async () => {
        const ms = unique(5000);
        const { r, out } = await pyJson(client, `
import json, time, mcp_tools
t = time.monotonic()
try:
    mcp_tools.fx.slow(ms=${ms})
    res = ["returned"]
except mcp_tools.McpToolError as e:
    res = [e.reason, str(e)]
res.append(time.monotonic() - t)
print(json.dumps(res))
`);
        assert.equal(out[0], 'timeout', JSON.stringify(out));
        assert.ok(out[2] >= 0.8 && out[2] <= 3.0, `the call ended after ${out[2]} s`);
        assert.deepEqual(calls(r).map((c) => [c.tool, c.ok, c.reason]), [['slow', false, 'timeout']]);
        const has = async (event) => (await fxEvents()).some((e) => e.tool === 'slow' && e.args.ms === ms && e.event === event);
        assert.ok(await until(() => has('cancelled'), 5000), 'the upstream saw the call cancelled');
        assert.equal(await has('end'), false);
        // the endpoint: 504 timeout
        const ms2 = unique(5000);
        const { out: o2 } = await pyJson(client, `${PY_ENDPOINT}
print(json.dumps(call("fx", "slow", {"ms": ${ms2}})))
`);
        assert.equal(o2[0], 504, JSON.stringify(o2));
        assert.equal(o2[1].reason, 'timeout');
    }));

    test('an upstream that is down: upstream_unavailable within the call timeout; the other server still works', withFixtureLog(S, async () => {
        const { r, out } = await pyJson(client, `${PY_ENDPOINT}
import time, mcp_tools
t = time.monotonic()
res = {"endpoint": call("down", "add", {"a": 1, "b": 1})}
res["s"] = time.monotonic() - t
res["fx"] = mcp_tools.fx.add(a=1, b=1)
print(json.dumps(res))
`);
        assert.equal(out.endpoint[0], 502, JSON.stringify(out));
        assert.equal(out.endpoint[1].reason, 'upstream_unavailable');
        assert.match(out.endpoint[1].error, /down/);
        assert.ok(out.s < 3.0, `answered in ${out.s} s`);
        assert.deepEqual(out.fx, { sum: 2 });
        const rec = calls(r).find((c) => sameServer(c.server, 'down'));
        if (rec) assert.deepEqual([rec.ok, rec.reason], [false, 'upstream_unavailable']);
        const l = await callTool(client, 'list_code_tools', {});
        assert.equal(l.isError, false, `list_code_tools still answers with a server down: ${l.text}`);
        assert.ok(l.sc.servers.some((s) => s.name === 'fx'), l.text);
    }));

    test('a second instance of this server as an upstream: its execute_code called from python and node; the key stays out', withFixtureLog(S, async () => {
        const hex = Buffer.from(INNER_KEY).toString('hex'); // the code never holds the key literally
        const { r, out } = await pyJson(client, `
import json, os, subprocess, mcp_tools
key = bytes.fromhex("${hex}").decode()
res = mcp_tools.inner.execute_code(language="python", code="print(6*7)")
env_out = subprocess.run(["env"], capture_output=True, text=True).stdout
print(json.dumps({"type": type(res).__name__, "res": res, "inEnv": key in env_out or any(key in v for v in os.environ.values()),
                  "envNames": sorted(os.environ), "tools": sorted(t for t in dir(mcp_tools.inner) if not t.startswith("_"))}))
`);
        assert.equal(out.type, 'dict', JSON.stringify(out));
        assert.equal(out.res.stdout, '42\n', JSON.stringify(out.res));
        assert.equal(out.res.exitCode, 0, JSON.stringify(out.res));
        assert.equal(out.res.language, 'python', JSON.stringify(out.res));
        assert.ok(out.tools.includes('execute_code'), JSON.stringify(out.tools));
        assert.equal(out.inEnv, false, `the inner key is not in the sandbox environment: ${out.envNames}`);
        assert.ok(!out.envNames.includes('INNER_KEY'), JSON.stringify(out.envNames));
        const cs = calls(r);
        assert.deepEqual(cs.map((c) => [c.server, c.tool, c.ok]), [['inner', 'execute_code', true]], show(r));
        assert.ok(cs[0].bytesIn > 0 && cs[0].bytesOut > 0, show(r));
        assert.ok(!JSON.stringify(r.raw).includes(INNER_KEY), 'no key in the execute_code result');

        const { r: rn, out: n } = await nodeJson(client, `
const { inner } = require("mcp-tools");
(async () => {
  const res = await inner.execute_code({ language: "shell", code: "echo hi" });
  console.log(JSON.stringify({ type: typeof res, res }));
})().catch((e) => { console.error("FAILED", e); process.exit(1); });
`);
        assert.equal(n.type, 'object', JSON.stringify(n));
        assert.equal(n.res.stdout, 'hi\n', JSON.stringify(n.res));
        assert.equal(n.res.exitCode, 0, JSON.stringify(n.res));
        assert.deepEqual(calls(rn).map((c) => [c.server, c.tool, c.ok]), [['inner', 'execute_code', true]], show(rn));
        const l = await callTool(client, 'list_code_tools', { server: 'inner' });
        assert.equal(l.isError, false, l.text);
        assert.ok(l.sc.tools.some((t) => t.name === 'execute_code'), l.text);
    }));
});
