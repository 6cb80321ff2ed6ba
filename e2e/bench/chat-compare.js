// The comparison command (scripts/chat-compare.sh, docs/chat.md "Measuring what code mode saves"): one task list
// run in both chat modes against a running server, through POST /api/chat (its JSON form), a fresh conversation
// per task and mode; prints per task and in total the model rounds, input and output tokens, tool calls and time,
// code and direct side by side, with the ratio direct/code.
//
//   node e2e/bench/chat-compare.js [--url URL] [--tasks FILE] [--modes code,direct] [--json FILE] [--keep]
//                                  [--timeout-ms N]
//   CHAT_URL (default http://127.0.0.1:8080) and CHAT_API_KEY: the server and a tenant key (none for a server
//   without keys). The key is read from the environment only, so it shows in no process list.
//
// A task file: {"tasks": [{"id", "message", "expect"?}]} (or the list alone); `expect` is a regular expression the
// answer should match (a mismatch is reported, not fatal). Exit status 1 when a request failed (an HTTP error,
// chat off, a model error), 2 for bad arguments.
import { readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const HERE = dirname(fileURLToPath(import.meta.url));
const DEFAULT_TASKS = join(HERE, 'chat-tasks.json');

function usage(message) {
    process.stderr.write(`chat-compare: ${message}\n`
        + 'usage: chat-compare [--url URL] [--tasks FILE] [--modes code,direct] [--json FILE] [--keep] [--timeout-ms N]\n'
        + '       (CHAT_URL, CHAT_API_KEY from the environment)\n');
    process.exit(2);
}

function parseArgs(argv) {
    const o = {
        url: process.env.CHAT_URL || 'http://127.0.0.1:8080', tasks: DEFAULT_TASKS, modes: ['code', 'direct'],
        json: null, keep: false, timeoutMs: 600_000,
    };
    for (let i = 0; i < argv.length; i++) {
        const a = argv[i];
        const value = () => (i + 1 < argv.length ? argv[++i] : usage(`${a} needs a value`));
        if (a === '--url') o.url = value();
        else if (a === '--tasks') o.tasks = value();
        else if (a === '--modes') o.modes = value().split(',').map((m) => m.trim()).filter(Boolean);
        else if (a === '--json') o.json = value();
        else if (a === '--keep') o.keep = true;
        else if (a === '--timeout-ms') o.timeoutMs = Number(value());
        else if (a === '-h' || a === '--help') usage('compares code mode with direct tool calls');
        else usage(`unknown argument ${a}`);
    }
    if (!o.modes.length || o.modes.some((m) => m !== 'code' && m !== 'direct')) usage('--modes takes code and/or direct');
    if (!(o.timeoutMs > 0)) usage('--timeout-ms must be a positive number');
    o.url = o.url.replace(/\/+$/, '');
    return o;
}

function readTasks(file) {
    let parsed;
    try {
        parsed = JSON.parse(readFileSync(file, 'utf8'));
    } catch (e) {
        usage(`cannot read the task file ${file}: ${e.message}`);
    }
    const tasks = Array.isArray(parsed) ? parsed : parsed.tasks;
    if (!Array.isArray(tasks) || !tasks.length) usage(`${file} has no tasks`);
    tasks.forEach((t, i) => {
        if (typeof t.message !== 'string' || !t.message) usage(`${file}: task ${i + 1} has no message`);
        t.id = t.id || `task-${i + 1}`;
    });
    return tasks;
}

const headers = () => ({
    'Content-Type': 'application/json', Accept: 'application/json',
    ...(process.env.CHAT_API_KEY ? { Authorization: `Bearer ${process.env.CHAT_API_KEY}` } : {}),
});

async function api(o, method, path, body) {
    const res = await fetch(`${o.url}${path}`, {
        method, headers: headers(), body: body === undefined ? undefined : JSON.stringify(body),
        signal: AbortSignal.timeout(o.timeoutMs),
    });
    const text = await res.text();
    let json = null;
    try {
        json = text ? JSON.parse(text) : null;
    } catch {
        // not JSON: reported with its status below
    }
    return { status: res.status, json, text };
}

/** One task in one mode: a new conversation, one answer. */
async function runOne(o, task, mode) {
    const started = performance.now();
    let r;
    try {
        r = await api(o, 'POST', '/api/chat', { message: task.message, mode });
    } catch (e) {
        return { task: task.id, mode, ok: false, error: e.name === 'TimeoutError' ? `no answer within ${o.timeoutMs} ms` : e.message };
    }
    const wallMs = Math.round(performance.now() - started);
    const j = r.json || {};
    if (r.status !== 200) {
        return { task: task.id, mode, ok: false, status: r.status, wallMs, conversation: j.conversation,
            error: `${r.status} ${j.error ?? ''}: ${j.message ?? r.text.slice(0, 300)}` };
    }
    const calls = Array.isArray(j.toolCalls) ? j.toolCalls : [];
    const out = {
        task: task.id, mode, ok: true, conversation: j.conversation, rounds: j.rounds ?? 0,
        inputTokens: j.usage?.inputTokens ?? 0, outputTokens: j.usage?.outputTokens ?? 0,
        toolCalls: calls.length, failedToolCalls: calls.filter((c) => c.isError).length,
        ms: j.ms ?? wallMs, wallMs, stopReason: j.stopReason, response: j.response ?? '',
        expected: task.expect ? new RegExp(task.expect, 'i').test(j.response ?? '') : null,
    };
    if (!o.keep && j.conversation) await api(o, 'DELETE', `/api/chat/${encodeURIComponent(j.conversation)}`).catch(() => {});
    return out;
}

const METRICS = [
    ['rounds', 'rounds', (v) => String(v)],
    ['inputTokens', 'input tok', (v) => v.toLocaleString('en-US')],
    ['outputTokens', 'output tok', (v) => v.toLocaleString('en-US')],
    ['toolCalls', 'tool calls', (v) => String(v)],
    ['ms', 'time s', (v) => (v / 1000).toFixed(2)],
];

function ratio(direct, code) {
    if (code == null || direct == null) return '';
    if (code === 0) return direct === 0 ? '1.0x' : '-';
    return `${(direct / code).toFixed(1)}x`;
}

function table(rows) {
    const widths = rows[0].map((_, c) => Math.max(...rows.map((r) => String(r[c]).length)));
    return rows.map((r) => r.map((cell, c) => (c < 2 || c === r.length - 1 ? String(cell).padEnd(widths[c])
        : String(cell).padStart(widths[c]))).join('  ').trimEnd()).join('\n');
}

function report(o, tasks, results, info) {
    const head = ['task', 'mode', ...METRICS.map((m) => m[1]), 'answer'];
    const rows = [head];
    const totals = Object.fromEntries(o.modes.map((m) => [m, Object.fromEntries(METRICS.map(([k]) => [k, 0]))]));
    const complete = Object.fromEntries(o.modes.map((m) => [m, true]));
    for (const t of tasks) {
        const byMode = {};
        for (const mode of o.modes) {
            const r = results.find((x) => x.task === t.id && x.mode === mode);
            byMode[mode] = r;
            if (!r.ok) {
                complete[mode] = false;
                rows.push([rows.at(-1)?.[0] === t.id ? '' : t.id, mode, ...METRICS.map(() => '-'), `error: ${r.error}`]);
                continue;
            }
            for (const [k] of METRICS) totals[mode][k] += r[k];
            const answer = (r.stopReason === 'max_rounds' ? 'cut short (max_rounds)' : r.expected === false ? 'unexpected: '
                : r.expected ? 'ok: ' : '') + (r.stopReason === 'max_rounds' ? '' : oneLine(r.response, 40));
            rows.push([byModeFirst(byMode, o.modes, mode) ? t.id : '', mode, ...METRICS.map(([k, , f]) => f(r[k])),
                answer + (r.failedToolCalls ? ` (${r.failedToolCalls} failed call${r.failedToolCalls > 1 ? 's' : ''})` : '')]);
        }
        if (o.modes.length === 2 && byMode.code?.ok && byMode.direct?.ok)
            rows.push(['', 'direct/code', ...METRICS.map(([k]) => ratio(byMode.direct[k], byMode.code[k])), '']);
    }
    rows.push(head.map(() => ''));
    for (const mode of o.modes)
        rows.push([mode === o.modes[0] ? 'total' : '', mode, ...METRICS.map(([k, , f]) => f(totals[mode][k])),
            complete[mode] ? '' : '(tasks that failed left out)']);
    if (o.modes.length === 2)
        rows.push(['', 'direct/code', ...METRICS.map(([k]) => ratio(totals.direct[k], totals.code[k])), '']);
    process.stdout.write(`chat-compare: ${tasks.length} task(s), modes ${o.modes.join(' and ')}, against ${o.url}`
        + ` (model ${info.model ?? '?'} via ${info.provider ?? '?'}, LLM_MAX_ROUNDS ${info.maxRounds ?? '?'})\n\n`
        + `${table(rows)}\n\n`
        + 'time: the server\'s time for the answer (its "ms"); tokens: as the model\'s API counted them.\n');
}

function byModeFirst(byMode, modes, mode) {
    return modes.indexOf(mode) === 0 || !byMode[modes[0]];
}

function oneLine(s, max) {
    const t = String(s).replace(/\s+/g, ' ').trim();
    return t.length > max ? `${t.slice(0, max - 1)}…` : t;
}

async function main() {
    const o = parseArgs(process.argv.slice(2));
    const tasks = readTasks(o.tasks);
    let info;
    try {
        info = await api(o, 'GET', '/api/chat');
    } catch (e) {
        process.stderr.write(`chat-compare: cannot reach ${o.url}: ${e.message}\n`);
        process.exit(1);
    }
    if (info.status !== 200) {
        process.stderr.write(`chat-compare: GET /api/chat answered ${info.status}: ${info.text.slice(0, 300)}\n`);
        process.exit(1);
    }
    if (info.json?.enabled === false) {
        process.stderr.write('chat-compare: the chat is off on this server (no LLM_MODEL): see docs/chat.md\n');
        process.exit(1);
    }
    const results = [];
    for (const task of tasks) {
        for (const mode of o.modes) {
            process.stderr.write(`chat-compare: ${task.id} (${mode}) ...`);
            const r = await runOne(o, task, mode);
            process.stderr.write(r.ok ? ` ${r.rounds} round(s), ${(r.ms / 1000).toFixed(2)} s\n` : ` failed: ${r.error}\n`);
            results.push(r);
        }
    }
    report(o, tasks, results, info.json || {});
    if (o.json) {
        writeFileSync(o.json, `${JSON.stringify({ url: o.url, model: info.json?.model, provider: info.json?.provider,
            at: new Date().toISOString(), results }, null, 2)}\n`);
    }
    process.exit(results.every((r) => r.ok) ? 0 : 1);
}

main().catch((e) => {
    process.stderr.write(`chat-compare: ${e.stack || e}\n`);
    process.exit(1);
});
