// Benchmark of port previews (docs/previews.md): what the preview listener costs a small page, against the same page
// fetched inside the sandbox. One machine, one freshly started server (WARM_POOL=off, PREVIEW_PORT=0), one bash
// session that runs the page's server in the background: Python's ThreadingHTTPServer on 127.0.0.1 with HTTP/1.1
// keep-alive (TCP_NODELAY, head and body in one write), a 1 KiB page. Then, at each concurrency (1 and 8):
//   preview: N GETs of the page through the preview URL from this process, a keep-alive client (http.Agent with
//            keepAlive and as many sockets as workers), each worker on its own connection;
//   inside:  the same N GETs by a Python program in the same session (one thread and one keep-alive
//            http.client.HTTPConnection per worker), timed inside the sandbox (its start excluded);
// and, at concurrency 1 only, both sides again with a new connection per request (Connection: close), which shows
// what opening a connection costs on each side (through the preview: the listener's connect to init's unix socket
// and init's connect to the port). Sides alternate in rounds so that machine drift hits both alike; untimed warm-up
// requests come first on each side. Reports requests/s and p50/p95 latency of every side and the ratios (latency:
// preview / inside, throughput: inside / preview).
// Environment (defaults): BENCH_PREVIEWS_REQUESTS (2000 per side and concurrency), BENCH_PREVIEWS_ROUNDS (2: each
// side's requests in that many alternating rounds), BENCH_PREVIEWS_WARMUP (200 untimed requests per side),
// BENCH_PREVIEWS_CONCURRENCY (1,8), BENCH_JSON (write the figures there too), CODE_EXEC_JAR (the jar under test;
// default target/code-exec-mcp.jar).
import { Agent, request } from 'node:http';
import { loadavg, cpus } from 'node:os';
import { startServer, sleep } from '../lib/server.js';
import { RawSession } from '../lib/rawmcp.js';
import { summary, throughput, timeIt, fmt, writeJson } from './measure.js';

const N = Number(process.env.BENCH_PREVIEWS_REQUESTS || 2000);
const ROUNDS = Number(process.env.BENCH_PREVIEWS_ROUNDS || 2);
const WARMUP = Number(process.env.BENCH_PREVIEWS_WARMUP ?? 200);
const CONCURRENCY = (process.env.BENCH_PREVIEWS_CONCURRENCY || '1,8').split(',').map(Number);
const PORT = 8000;
const SESSION = 'bench';
const PAGE_BYTES = 1024;

/** The page's server: one thread per connection, HTTP/1.1 keep-alive, one write per response, a listen backlog of 128
 * (the default 5 overflows when 8 connections open at once), no access log. */
const SERVER_PY = String.raw`
import sys
from http.server import ThreadingHTTPServer, BaseHTTPRequestHandler
HEAD = b'<!doctype html><title>bench</title><p>'
PAGE = HEAD + b'x' * (int(sys.argv[2]) - len(HEAD))
class Page(BaseHTTPRequestHandler):
    protocol_version = 'HTTP/1.1'
    disable_nagle_algorithm = True
    wbufsize = -1
    def do_GET(self):
        self.send_response(200)
        self.send_header('Content-Type', 'text/html')
        self.send_header('Content-Length', str(len(PAGE)))
        self.end_headers()
        self.wfile.write(PAGE)
    def log_message(self, *args):
        pass
ThreadingHTTPServer.daemon_threads = True
ThreadingHTTPServer.request_queue_size = 128
ThreadingHTTPServer(('127.0.0.1', int(sys.argv[1])), Page).serve_forever()
`;

/**
 * The inside client: argv port, requests, concurrency, size, keep (1: keep-alive, 0: a connection per request),
 * warm-up. Prints {seconds, samples} (milliseconds per request) as JSON.
 */
const CLIENT_PY = String.raw`
import http.client, json, sys, threading, time
port, n, c, size, keep, warm = (int(a) for a in sys.argv[1:7])
left = [0]
lock = threading.Lock()
samples = []
errors = []
def worker():
    conn = http.client.HTTPConnection('127.0.0.1', port) if keep else None
    mine = []
    try:
        while True:
            with lock:
                if left[0] <= 0:
                    break
                left[0] -= 1
            t = time.perf_counter_ns()
            if keep:
                conn.request('GET', '/')
            else:
                conn = http.client.HTTPConnection('127.0.0.1', port)
                conn.request('GET', '/', headers={'Connection': 'close'})
            r = conn.getresponse()
            body = r.read()
            if not keep:
                conn.close()
            if r.status != 200 or len(body) != size:
                raise RuntimeError('status %d, %d bytes' % (r.status, len(body)))
            mine.append((time.perf_counter_ns() - t) / 1e6)
    except Exception as e:
        errors.append(repr(e))
    with lock:
        samples.extend(mine)
def run(count):
    left[0] = count
    threads = [threading.Thread(target=worker) for _ in range(c)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return time.perf_counter() - t0
run(warm)
del samples[:]
seconds = run(n)
if errors:
    sys.exit('client errors: ' + '; '.join(errors[:3]))
print(json.dumps({'seconds': seconds, 'samples': [round(s, 4) for s in samples]}))
`;

/** execute_code in the bench session; throws unless it exited 0. Returns structuredContent. */
async function bash(s, code) {
    const r = await s.call('execute_code', { language: 'bash', session: SESSION, code, timeout_ms: 120000 });
    const sc = r.structuredContent;
    if (r.isError || !sc || sc.exitCode !== 0) throw new Error(`bash in the session failed: ${JSON.stringify(r).slice(0, 800)}`);
    return sc;
}

/** One GET of `url` on `agent` (false: a new connection, closed after it); rejects unless 200 with the page. */
function get(url, agent) {
    return new Promise((resolve, reject) => {
        const req = request(url, { agent, headers: agent ? {} : { Connection: 'close' } }, (res) => {
            let n = 0;
            res.on('data', (b) => { n += b.length; });
            res.on('end', () => (res.statusCode === 200 && n === PAGE_BYTES ? resolve()
                : reject(new Error(`preview answered ${res.statusCode} with ${n} bytes`))));
            res.on('error', reject);
        });
        req.on('error', reject);
        req.end();
    });
}

/** `count` GETs through the preview by `c` workers: { samples (ms), runs, seconds }. */
async function previewRound(url, count, c, keep) {
    const agent = keep ? new Agent({ keepAlive: true, maxSockets: c }) : false;
    try {
        const once = () => get(url, agent);
        await throughput(once, Math.min(WARMUP, count), 600, c);
        const samples = [];
        const t = await throughput(async () => { samples.push(await timeIt(once)); }, count, 600, c);
        return { samples, runs: t.runs, seconds: t.seconds };
    } finally {
        if (agent) agent.destroy();
    }
}

/** `count` GETs by the Python client inside the session with `c` threads: { samples (ms), runs, seconds }. */
async function insideRound(s, count, c, keep) {
    const sc = await bash(s, `python3 /tmp/bench_client.py ${PORT} ${count} ${c} ${PAGE_BYTES} ${keep ? 1 : 0} ${Math.min(WARMUP, count)}`);
    const r = JSON.parse(sc.stdout);
    return { samples: r.samples, runs: r.samples.length, seconds: r.seconds };
}

/** Both sides at concurrency `c`, alternating in ROUNDS rounds; each side's figures over all its rounds. */
async function compare(s, url, c, keep, n) {
    const acc = { preview: { samples: [], runs: 0, seconds: 0 }, inside: { samples: [], runs: 0, seconds: 0 } };
    const per = Math.ceil(n / ROUNDS);
    for (let i = 0; i < ROUNDS; i++) {
        process.stderr.write(`concurrency ${c}, ${keep ? 'keep-alive' : 'new connection per request'}, round ${i + 1}/${ROUNDS}\n`);
        for (const [side, r] of [['preview', await previewRound(url, per, c, keep)], ['inside', await insideRound(s, per, c, keep)]]) {
            acc[side].samples.push(...r.samples);
            acc[side].runs += r.runs;
            acc[side].seconds += r.seconds;
        }
    }
    const fig = (a) => ({ ...summary(a.samples), rps: a.runs / a.seconds });
    const preview = fig(acc.preview);
    const inside = fig(acc.inside);
    return {
        concurrency: c, connection: keep ? 'keep-alive' : 'new per request', preview, inside,
        latencyRatio: preview.p50 / inside.p50, p95Ratio: preview.p95 / inside.p95, throughputRatio: inside.rps / preview.rps,
    };
}

const load = loadavg()[0];
const srv = await startServer({ WARM_POOL: 'off', PREVIEW_PORT: '0' });
try {
    const s = await new RawSession(srv.url, srv.apiKey).open();
    await bash(s, `cat > /tmp/bench_server.py <<'EOF'\n${SERVER_PY}\nEOF\ncat > /tmp/bench_client.py <<'EOF'\n${CLIENT_PY}\nEOF\n`
        + `nohup python3 /tmp/bench_server.py ${PORT} ${PAGE_BYTES} > /tmp/bench_server.log 2>&1 &\necho started`);
    const exposed = await s.call('expose_port', { session: SESSION, port: PORT });
    if (exposed.isError) throw new Error(`expose_port failed: ${JSON.stringify(exposed).slice(0, 500)}`);
    const url = exposed.structuredContent.url;
    const end = Date.now() + 30_000;
    for (;;) {
        try {
            await get(url, false);
            break;
        } catch (e) {
            if (Date.now() > end) throw new Error(`the page never answered through ${url}: ${e.message}`);
            await sleep(100);
        }
    }
    console.log(`preview ${url.replace(/[0-9a-f]{48}/, '{token}')}, a ${PAGE_BYTES}-byte page from python3 ThreadingHTTPServer `
        + `(HTTP/1.1 keep-alive) in a bash session; ${N} requests per side, ${ROUNDS} alternating rounds, `
        + `${cpus().length} cores, load average ${load.toFixed(1)}`);
    const rows = [];
    for (const c of CONCURRENCY) rows.push(await compare(s, url, c, true, N));
    rows.push(await compare(s, url, 1, false, Math.max(ROUNDS, Math.round(N / 4))));
    console.log('| concurrency | connection | preview req/s | inside req/s | inside/preview | preview p50 / p95 | inside p50 / p95 | p50 preview/inside |');
    console.log('|---|---|---|---|---|---|---|---|');
    for (const r of rows) {
        console.log(`| ${r.concurrency} | ${r.connection} | ${r.preview.rps.toFixed(0)} | ${r.inside.rps.toFixed(0)} | `
            + `${r.throughputRatio.toFixed(2)}x | ${fmt(r.preview.p50).trim()} / ${fmt(r.preview.p95).trim()} | `
            + `${fmt(r.inside.p50).trim()} / ${fmt(r.inside.p95).trim()} | ${r.latencyRatio.toFixed(2)}x |`);
    }
    console.log(`load average ${load.toFixed(1)} before, ${loadavg()[0].toFixed(1)} after`);
    if (process.env.BENCH_JSON) writeJson(process.env.BENCH_JSON, { previews: { pageBytes: PAGE_BYTES, requests: N, rounds: ROUNDS, rows } });
} finally {
    await srv.stop();
}
