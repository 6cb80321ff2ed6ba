// The chat agent end to end (docs/chat.md): the real jar's `POST /api/chat` and friends against a scripted model
// (fixtures/model-server.js, speaking OpenAI Chat Completions and Anthropic Messages) and a real upstream MCP server
// (fixtures/upstream-mcp.mjs over Streamable HTTP with a bearer token). The cases assert what the model fixture
// RECEIVED (the system prompt, the tools offered, the tool results, the history of a second turn, the key) as well
// as what the chat answered. Traffic rule: nothing here connects anywhere but 127.0.0.1.
//
// Three servers, one after the other:
//  1. LLM_PROVIDER=openai, tenants alice/bob, the upstream `ledger` (the fixture), LLM_MAX_ROUNDS=4 and a small
//     LLM_TIMEOUT_MS: code mode (JSON and SSE), a second turn, the seed's history, a failing tool call then a corrected
//     one, the round cap, the model's errors (401, 429 waited out, 429 named, 500, timeout, malformed) each with the
//     conversation kept and answered on retry, direct mode, tenants, the model key nowhere but the model's API.
//  2. LLM_PROVIDER=anthropic, the same upstream: code mode (JSON and SSE), a failing call then a corrected one,
//     direct mode.
//  3. No LLM_MODEL: 503 chat_off.
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { randomSecret, withLog, startServer, looksLikeStackTrace } from '../lib/server.js';
import { makeBase, keysAppend } from '../lib/server3.js';
import { startUpstreamFixture } from '../lib/upstream.js';
import {
    startModelServer, systemPromptOf, toolNamesOf, messagesOf, toolResultsOf,
} from '../fixtures/model-server.js';

const NODE = '/usr/bin/node';
const UPSTREAM_TOKEN = randomSecret('fxtok-');
const LLM_KEY = randomSecret('sk-llm-');
const LLM_MODEL = 'scripted-model-1';
const MAX_ROUNDS = 4;
const TIMEOUT_MS = 4000;

let base;
let fx; // the upstream MCP fixture
let model; // the scripted model
const bodies = []; // every response body this file got from a server: none may hold the model key

before(async () => {
    base = makeBase();
    fx = await startUpstreamFixture(UPSTREAM_TOKEN, NODE);
    model = await startModelServer();
});
after(async () => {
    fx?.stop();
    await model?.stop();
    base?.remove();
});

// ---------------------------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------------------------

let uniq = 0;
const unique = (prefix) => `${prefix}${process.pid % 1000}x${++uniq}${Math.random().toString(36).slice(2, 6)}`;

/** The upstream fixture's events so far: {tool, event, args}. */
const fxEvents = async () => (await fetch(`http://127.0.0.1:${fx.port}/events`)).json();
/** The upstream fixture's request counts: {authorized, rejected, ...}. */
const fxStats = async () => (await fetch(`http://127.0.0.1:${fx.port}/stats`)).json();

/** A REST call with a tenant key: {status, headers, text, body (parsed JSON or null)}. */
async function call(server, key, method, path, body) {
    const res = await fetch(`${server.base}${path}`, {
        method,
        headers: { Authorization: `Bearer ${key}`, ...(body !== undefined ? { 'Content-Type': 'application/json' } : {}) },
        body: body !== undefined ? JSON.stringify(body) : undefined,
    });
    const text = await res.text();
    bodies.push(text);
    let parsed = null;
    try {
        parsed = text ? JSON.parse(text) : null;
    } catch {
        parsed = null;
    }
    return { status: res.status, headers: res.headers, text, body: parsed };
}

/** POST /api/chat as JSON. */
const chat = (server, key, body) => call(server, key, 'POST', '/api/chat', body);

/** POST /api/chat with `Accept: text/event-stream`: {status, events: [{event, data}], text}. */
async function chatSse(server, key, body) {
    const res = await fetch(`${server.base}/api/chat`, {
        method: 'POST',
        headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json', Accept: 'text/event-stream' },
        body: JSON.stringify(body),
    });
    const text = await res.text();
    bodies.push(text);
    const events = [];
    for (const block of text.split(/\r?\n\r?\n/)) {
        if (!block.trim()) continue;
        let event = 'message';
        const data = [];
        for (const line of block.split(/\r?\n/)) {
            if (line.startsWith('event:')) event = line.slice(6).trim();
            else if (line.startsWith('data:')) data.push(line.slice(5).replace(/^ /, ''));
        }
        if (!data.length) continue;
        let parsed;
        try {
            parsed = JSON.parse(data.join('\n'));
        } catch {
            parsed = data.join('\n');
        }
        events.push({ event, data: parsed });
    }
    return { status: res.status, contentType: res.headers.get('content-type'), events, text };
}

/** The event names with runs of the same name collapsed (text arrives in pieces) and tool_output left out. */
const eventShape = (events) => events.map((e) => e.event).filter((e) => e !== 'tool_output')
    .filter((e, i, all) => i === 0 || e !== all[i - 1]);

/** Python that calls the upstream's echo through mcp_tools and prints its answer. */
const pyEcho = (word) => `import mcp_tools\nprint("echo said:", mcp_tools.ledger.echo(text="${word}", times=2))`;

const show = (r) => JSON.stringify(r.body ?? r.text)?.slice(0, 3000);

/** The requests the model got since the last reset, as a readable summary for failure messages. */
const seen = () => JSON.stringify(model.requests.map((r) => ({ path: r.path, messages: messagesOf(r) })), null, 1).slice(0, 6000);

/** Writes an UPSTREAM_MCP_FILE with the fixture as `ledger` and returns its path. */
function upstreamFile(name) {
    const p = join(base.dir, name);
    writeFileSync(p, JSON.stringify({
        mcpServers: {
            ledger: {
                url: `http://127.0.0.1:${fx.port}/mcp`, headers: { Authorization: 'Bearer ${FIXTURE_TOKEN}' },
                description: 'The ledger fixture',
            },
        },
    }, null, 2), { mode: 0o600 });
    return p;
}

/** Starts a chat server for `provider` with tenants alice and bob; returns {server, alice, bob}. */
async function startChatServer(provider, extra = {}) {
    const keys = join(base.dir, `keys-${provider}`);
    const alice = keysAppend(keys, 'alice');
    const bob = keysAppend(keys, 'bob');
    const server = await startServer({
        API_KEY: '', API_KEYS_FILE: keys, DATA_DIR: base.dataDir, WORKSPACE_ROOT: base.workspaceRoot(`ws-chat-${provider}`),
        UPSTREAM_MCP_FILE: upstreamFile(`upstream-${provider}.json`), FIXTURE_TOKEN: UPSTREAM_TOKEN,
        LLM_PROVIDER: provider, LLM_BASE_URL: model.url, LLM_API_KEY: LLM_KEY, LLM_MODEL,
        LLM_MAX_ROUNDS: String(MAX_ROUNDS), LLM_TIMEOUT_MS: String(TIMEOUT_MS),
        ...extra,
    });
    return { server, alice, bob };
}

/** Every request the model got carried the configured key and model name, to the provider's path. */
function assertModelRequests(provider) {
    assert.ok(model.requests.length > 0, 'the model got a request');
    for (const r of model.requests) {
        assert.equal(r.path, provider === 'openai' ? '/v1/chat/completions' : '/v1/messages', `path: ${r.path}`);
        assert.equal(r.apiKey, LLM_KEY, 'the configured key was sent to the model API');
        assert.equal(r.body?.model, LLM_MODEL, 'the configured model was asked');
    }
}

// ---------------------------------------------------------------------------------------------------------------
// Cases both providers run
// ---------------------------------------------------------------------------------------------------------------

/** Code mode: the model asks for execute_code calling the upstream, gets its real result, answers. JSON. */
async function codeModeRoundTrip(ctx, provider) {
    const word = unique('zebra');
    const code = pyEcho(word);
    model.reset();
    model.script([
        { toolCalls: [{ name: 'execute_code', arguments: { language: 'python', code } }], usage: { input: 31, output: 7 } },
        { text: `The ledger echoed ${word}.`, usage: { input: 45, output: 9 } },
    ]);
    const r = await chat(ctx.server, ctx.alice, { message: `Echo ${word} twice through the ledger.` });
    assert.equal(r.status, 200, show(r));
    const b = r.body;
    assert.equal(b.response, `The ledger echoed ${word}.`);
    assert.match(b.conversation, /^conv-/);
    assert.equal(b.mode, 'code');
    assert.match(b.workspace, /^chat-/);
    assert.equal(b.rounds, 2);
    assert.equal(b.stopReason, 'answer');
    assert.deepEqual(b.usage, { inputTokens: 76, outputTokens: 16 }, 'usage sums both model calls');
    assert.equal(b.toolCalls.length, 1, show(r));
    const tc = b.toolCalls[0];
    assert.equal(tc.round, 1);
    assert.equal(tc.tool, 'execute_code');
    assert.equal(tc.input.code, code);
    assert.equal(tc.isError, false, show(r));
    assert.ok(tc.output.includes(`echo said: ${word}${word}`), `the tool output holds the upstream's answer: ${show(r)}`);
    assert.equal(typeof tc.ms, 'number');
    // what the model received
    assert.equal(model.requests.length, 2, seen());
    assertModelRequests(provider);
    const [first, second] = model.requests;
    const prompt = systemPromptOf(first);
    assert.ok(prompt.includes('execute_code'), `the system prompt names execute_code: ${prompt.slice(0, 2000)}`);
    assert.ok(prompt.includes('ledger'), `the system prompt names the upstream server: ${prompt.slice(0, 2000)}`);
    assert.ok(toolNamesOf(first).includes('execute_code'), `execute_code is offered: ${toolNamesOf(first)}`);
    const results = toolResultsOf(second);
    assert.equal(results.length, 1, seen());
    assert.ok(results[0].text.includes(`echo said: ${word}${word}`), `the model got the real tool result: ${seen()}`);
    const askedId = messagesOf(second).find((m) => m.role === 'tool_call')?.id;
    assert.equal(results[0].id, askedId, 'the result answers the call the model made');
    // the upstream really got the call, with its credentials
    const ev = await fxEvents();
    assert.ok(ev.some((e) => e.tool === 'echo' && e.event === 'end' && e.args.text === word), 'the upstream got echo');
    assert.equal(model.pending(), 0);
    return b;
}

/** The same round trip as server-sent events: the documented event sequence, then done with the final object. */
async function codeModeStreaming(ctx, provider) {
    const word = unique('yak');
    const code = pyEcho(word);
    const answer = `Streamed: the ledger echoed ${word}, as asked.`;
    model.reset();
    model.script([
        { toolCalls: [{ name: 'execute_code', arguments: { language: 'python', code } }], usage: { input: 10, output: 2 } },
        { text: answer, usage: { input: 20, output: 4 } },
    ]);
    const r = await chatSse(ctx.server, ctx.alice, { message: `Echo ${word}` });
    assert.equal(r.status, 200, r.text.slice(0, 3000));
    assert.match(r.contentType ?? '', /^text\/event-stream/);
    assert.deepEqual(eventShape(r.events),
        ['conversation', 'round', 'tool_call', 'tool_result', 'round', 'text', 'done'], r.text.slice(0, 3000));
    const ev = (name) => r.events.filter((e) => e.event === name).map((e) => e.data);
    const [conv] = ev('conversation');
    assert.match(conv.conversation, /^conv-/);
    assert.equal(conv.mode, 'code');
    assert.equal(conv.model, LLM_MODEL);
    assert.deepEqual(ev('round').map((x) => x.round), [1, 2]);
    const [callEv] = ev('tool_call');
    assert.equal(callEv.tool, 'execute_code');
    assert.equal(callEv.round, 1);
    assert.equal(callEv.input.code, code);
    const [resultEv] = ev('tool_result');
    assert.equal(resultEv.id, callEv.id, 'the result names its call');
    assert.equal(resultEv.isError, false);
    assert.ok(resultEv.output.includes(`echo said: ${word}${word}`), JSON.stringify(resultEv));
    assert.equal(ev('text').map((x) => x.text).join(''), answer, 'the text events add up to the answer');
    assert.ok(ev('text').every((x) => x.round === 2));
    const [done] = ev('done');
    assert.equal(done.response, answer);
    assert.equal(done.conversation, conv.conversation);
    assert.equal(done.rounds, 2);
    assert.deepEqual(done.usage, { inputTokens: 30, outputTokens: 6 });
    assert.equal(done.toolCalls.length, 1);
    assert.equal(r.events.at(-1).event, 'done', 'done ends the stream');
    // what the model received
    assert.equal(model.requests.length, 2, seen());
    assertModelRequests(provider);
    assert.ok(toolResultsOf(model.requests[1])[0]?.text.includes(`echo said: ${word}${word}`), seen());
}

/**
 * One round with two failing calls (Python that raises; a tool that does not exist), then a corrected call: the
 * model sees both errors as tool results, the corrected call succeeds.
 */
async function failingThenCorrected(ctx, provider) {
    const boom = unique('boom');
    const word = unique('fixed');
    model.reset();
    model.script([
        {
            toolCalls: [
                { name: 'execute_code', arguments: { language: 'python', code: `raise ValueError("${boom}")` } },
                { name: 'no_such_tool', arguments: { x: 1 } },
            ],
        },
        (req) => {
            const results = toolResultsOf(req);
            // answered from what was received: the fixture checks the errors reached the model before correcting
            if (results.length !== 2 || !results[0].text.includes(boom) || !results[1].text.includes('no_such_tool')) {
                return { text: `UNEXPECTED tool results: ${JSON.stringify(results)}` };
            }
            return { toolCalls: [{ name: 'execute_code', arguments: { language: 'python', code: pyEcho(word) } }] };
        },
        { text: 'Fixed it.' },
    ]);
    const r = await chat(ctx.server, ctx.alice, { message: 'Try, fail, and correct yourself.' });
    assert.equal(r.status, 200, show(r));
    assert.equal(r.body.response, 'Fixed it.', `${show(r)}\n${seen()}`);
    assert.equal(r.body.rounds, 3);
    assert.equal(r.body.stopReason, 'answer');
    const tcs = r.body.toolCalls;
    assert.deepEqual(tcs.map((t) => [t.round, t.tool]), [[1, 'execute_code'], [1, 'no_such_tool'], [2, 'execute_code']]);
    assert.ok(tcs[0].output.includes('ValueError') && tcs[0].output.includes(boom), `the traceback is the result: ${show(r)}`);
    assert.equal(tcs[1].isError, true, 'a call to a tool that does not exist is an error');
    assert.equal(tcs[2].isError, false);
    assert.ok(tcs[2].output.includes(`${word}${word}`));
    // what the model received
    assert.equal(model.requests.length, 3, seen());
    assertModelRequests(provider);
    const errs = toolResultsOf(model.requests[1]);
    assert.ok(errs[0].text.includes(`ValueError: ${boom}`), `the model saw the traceback: ${seen()}`);
    assert.ok(errs[1].text.includes('no_such_tool'), `the model saw the unknown tool's error: ${seen()}`);
    if (provider === 'anthropic') assert.equal(errs[1].isError, true, 'the unknown tool is marked is_error');
    const fixed = toolResultsOf(model.requests[2]);
    assert.ok(fixed.at(-1).text.includes(`${word}${word}`), seen());
}

/**
 * Direct mode: the model is offered the upstream's tools as SERVER__TOOL (no execute_code), calls one, the upstream
 * gets it with its credentials, and no code runs.
 */
async function directMode(ctx, provider) {
    const statsBefore = await call(ctx.server, ctx.alice, 'GET', '/api/admin/stats');
    assert.equal(statsBefore.status, 200, show(statsBefore));
    const fxBefore = await fxStats();
    const whoamiBefore = (await fxEvents()).filter((e) => e.tool === 'whoami' && e.event === 'end').length;
    model.reset();
    model.script([
        { toolCalls: [{ name: 'ledger__whoami', arguments: {} }] },
        { text: 'You are authorized.' },
    ]);
    const r = await chat(ctx.server, ctx.alice, { message: 'Who am I at the ledger?', mode: 'direct' });
    assert.equal(r.status, 200, show(r));
    assert.equal(r.body.mode, 'direct');
    assert.equal(r.body.response, 'You are authorized.');
    assert.deepEqual(r.body.toolCalls.map((t) => [t.tool, t.isError]), [['ledger__whoami', false]], show(r));
    assert.ok(r.body.toolCalls[0].output.includes('authorized'), show(r));
    // what the model was offered
    assert.equal(model.requests.length, 2, seen());
    assertModelRequests(provider);
    const names = toolNamesOf(model.requests[0]);
    for (const t of ['ledger__add', 'ledger__echo', 'ledger__whoami']) assert.ok(names.includes(t), `${t} offered: ${names}`);
    assert.ok(!names.includes('execute_code'), `no execute_code in direct mode: ${names}`);
    assert.ok(names.every((n) => n.startsWith('ledger__')), `only upstream tools: ${names}`);
    const listed = await call(ctx.server, ctx.alice, 'GET', '/api/chat/tools?mode=direct');
    assert.equal(listed.status, 200, show(listed));
    assert.deepEqual(listed.body.tools.map((t) => t.name).sort(), [...names].sort(), 'GET /api/chat/tools says what the model got');
    assert.ok(toolResultsOf(model.requests[1])[0]?.text.includes('authorized'), seen());
    // the upstream got the call with its credentials; no code ran
    const whoamiAfter = (await fxEvents()).filter((e) => e.tool === 'whoami' && e.event === 'end').length;
    assert.equal(whoamiAfter, whoamiBefore + 1, 'the upstream got one whoami');
    assert.ok((await fxStats()).authorized > fxBefore.authorized, 'with the configured token');
    const statsAfter = await call(ctx.server, ctx.alice, 'GET', '/api/admin/stats');
    assert.equal(statsAfter.body.executions.total, statsBefore.body.executions.total, 'no code ran in direct mode');
}


/** A model failure while streaming: the stream ends with an `error` event naming the reason and the conversation. */
async function streamedModelError(ctx, steps, reason) {
    model.reset();
    model.script(steps);
    const message = unique(`streamed-${reason}-`);
    const r = await chatSse(ctx.server, ctx.alice, { message });
    assert.equal(r.status, 200, r.text.slice(0, 2000));
    const last = r.events.at(-1);
    assert.equal(last?.event, 'error', `the stream ends with an error event: ${r.text.slice(0, 2000)}`);
    assert.equal(last.data.error, reason, JSON.stringify(last.data));
    assert.equal(typeof last.data.message, 'string');
    assert.ok(!looksLikeStackTrace(last.data.message) && !last.data.message.includes('[Source:'), last.data.message);
    assert.match(last.data.conversation ?? '', /^conv-/);
    assert.equal(r.events[0].event, 'conversation');
    assert.equal(r.events[0].data.conversation, last.data.conversation);
    const g = await call(ctx.server, ctx.alice, 'GET', `/api/chat/${last.data.conversation}`);
    assert.equal(g.body.turns.at(-1).message, message, `the message is kept: ${show(g)}`);
}

// ---------------------------------------------------------------------------------------------------------------
// 1. OpenAI
// ---------------------------------------------------------------------------------------------------------------

describe('chat over the OpenAI Chat Completions API (code and direct mode, errors, tenants, the key)', () => {
    const ctx = {};
    const S = () => ctx.server;
    const t = (name, body) => test(name, withLog(S, body, () => `\n--- model requests ---\n${seen()}`));

    before(async () => {
        Object.assign(ctx, await startChatServer('openai'));
    });
    after(async () => {
        await ctx.server?.stop();
    });

    t('GET /api/chat says the chat is on with the configured provider, model and round cap', async () => {
        const r = await call(ctx.server, ctx.alice, 'GET', '/api/chat');
        assert.equal(r.status, 200, show(r));
        assert.equal(r.body.enabled, true);
        assert.equal(r.body.provider, 'openai');
        assert.equal(r.body.model, LLM_MODEL);
        assert.equal(r.body.maxRounds, MAX_ROUNDS);
        assert.ok(Array.isArray(r.body.conversations));
    });

    t('code mode: execute_code calls the upstream through mcp_tools, the model gets the real result and answers (JSON)',
        () => codeModeRoundTrip(ctx, 'openai'));

    t('code mode as server-sent events: conversation, round, tool_call, tool_result, round, text, done',
        () => codeModeStreaming(ctx, 'openai'));

    t('a second turn sends the model the whole history, and a file the first turn wrote is still in the workspace', async () => {
        const secret = unique('note');
        const m1 = `Write ${secret} to notes.txt.`;
        model.reset();
        model.script([
            {
                toolCalls: [{
                    name: 'execute_code',
                    arguments: { language: 'python', code: `open("notes.txt", "w").write("${secret}")\nprint("written")` },
                }],
            },
            { text: 'Written.' },
        ]);
        const r1 = await chat(ctx.server, ctx.alice, { message: m1 });
        assert.equal(r1.status, 200, show(r1));
        const id = r1.body.conversation;
        const firstCallId = r1.body.toolCalls[0]?.id;
        model.reset();
        const m2 = 'What is in notes.txt?';
        model.script([
            { toolCalls: [{ name: 'execute_code', arguments: { language: 'python', code: 'print("notes:", open("notes.txt").read())' } }] },
            { text: 'It says what you wrote.' },
        ]);
        const r2 = await chat(ctx.server, ctx.alice, { conversation: id, message: m2 });
        assert.equal(r2.status, 200, show(r2));
        assert.equal(r2.body.conversation, id, 'the same conversation');
        assert.equal(r2.body.workspace, r1.body.workspace, 'the same workspace');
        assert.ok(r2.body.toolCalls[0].output.includes(`notes: ${secret}`), `the file persisted: ${show(r2)}`);
        // the first request of turn two holds the whole first turn, then the new message
        const msgs = messagesOf(model.requests[0]);
        assert.deepEqual(msgs.map((m) => m.role), ['user', 'tool_call', 'tool_result', 'assistant', 'user'], seen());
        assert.equal(msgs[0].text, m1);
        assert.equal(msgs[1].name, 'execute_code');
        if (firstCallId) assert.equal(msgs[1].id, firstCallId);
        assert.ok(msgs[2].text.includes('written'), seen());
        assert.equal(msgs[3].text, 'Written.');
        assert.equal(msgs[4].text, m2);
        // GET shows both turns
        const g = await call(ctx.server, ctx.alice, 'GET', `/api/chat/${id}`);
        assert.equal(g.status, 200, show(g));
        assert.deepEqual(g.body.turns.map((x) => [x.message, x.response]), [[m1, 'Written.'], [m2, 'It says what you wrote.']]);
    });

    t('the seed form (the history in the request) starts a new conversation from it', async () => {
        model.reset();
        model.script([{ text: 'Blue, as you said.' }]);
        const r = await chat(ctx.server, ctx.alice, {
            conversation: [{ role: 'user', content: 'My favourite colour is blue.' }, { role: 'assistant', content: 'Noted.' }],
            message: 'What is my favourite colour?',
        });
        assert.equal(r.status, 200, show(r));
        assert.match(r.body.conversation, /^conv-/);
        assert.equal(r.body.response, 'Blue, as you said.');
        const msgs = messagesOf(model.requests[0]);
        assert.deepEqual(msgs.map((m) => [m.role, m.text]), [
            ['user', 'My favourite colour is blue.'], ['assistant', 'Noted.'], ['user', 'What is my favourite colour?'],
        ], seen());
    });

    t('a failing tool call is shown to the model, which corrects itself', () => failingThenCorrected(ctx, 'openai'));

    t('the round cap: a model that keeps asking for tools stops after LLM_MAX_ROUNDS with stopReason max_rounds', async () => {
        model.reset();
        const steps = [];
        for (let i = 1; i <= MAX_ROUNDS + 2; i++) {
            steps.push({ toolCalls: [{ name: 'execute_code', arguments: { language: 'python', code: `print("round ${i}")` } }] });
        }
        model.script(steps);
        const r = await chat(ctx.server, ctx.alice, { message: 'Loop forever.' });
        assert.equal(r.status, 200, show(r));
        assert.equal(r.body.stopReason, 'max_rounds', show(r));
        assert.equal(r.body.rounds, MAX_ROUNDS);
        assert.equal(r.body.toolCalls.length, MAX_ROUNDS, 'the calls of the last round were made and kept');
        assert.ok(r.body.toolCalls.at(-1).output.includes(`round ${MAX_ROUNDS}`), show(r));
        assert.equal(typeof r.body.response, 'string');
        assert.ok(r.body.response.length > 0, 'the response says the answer was cut short');
        assert.equal(model.requests.length, MAX_ROUNDS, `exactly ${MAX_ROUNDS} model calls: ${seen()}`);
        assert.equal(model.pending(), 2);
        model.reset();
    });

    // The model's errors: each a clear error with the conversation id; the message stays; a retry answers it.
    const modelError = (name, steps, status, reason, check = () => {}) => t(name, async () => {
        model.reset();
        const message = unique(`question-${reason}-`);
        model.script(steps);
        const r = await chat(ctx.server, ctx.alice, { message });
        assert.equal(r.status, status, show(r));
        assert.equal(r.body?.error, reason, show(r));
        assert.equal(typeof r.body.message, 'string');
        assert.ok(!r.text.includes('[Source:') && !looksLikeStackTrace(r.text), `a clear message, no internals: ${show(r)}`);
        assert.match(r.body.conversation ?? '', /^conv-/, `the error carries the conversation id: ${show(r)}`);
        check(r);
        const id = r.body.conversation;
        const g = await call(ctx.server, ctx.alice, 'GET', `/api/chat/${id}`);
        assert.equal(g.status, 200, show(g));
        assert.equal(g.body.turns.at(-1).message, message, `the message is kept: ${show(g)}`);
        assert.ok(g.body.turns.at(-1).error, `the turn names its error: ${show(g)}`);
        // a retry: the conversation without a message answers the same message
        model.reset();
        model.script([{ text: `Answered after ${reason}.` }]);
        const again = await chat(ctx.server, ctx.alice, { conversation: id });
        assert.equal(again.status, 200, show(again));
        assert.equal(again.body.response, `Answered after ${reason}.`);
        const users = messagesOf(model.requests[0]).filter((m) => m.role === 'user');
        assert.deepEqual(users.map((m) => m.text), [message], `the retry asks the same message once: ${seen()}`);
        const g2 = await call(ctx.server, ctx.alice, 'GET', `/api/chat/${id}`);
        assert.equal(g2.body.turns.at(-1).response, `Answered after ${reason}.`, show(g2));
    });

    modelError('a 401 from the model is model_auth', [{ status: 401 }], 502, 'model_auth',
        () => assert.equal(model.requests.length, 1, `a refused key is not retried: ${seen()}`));
    modelError('a 429 with Retry-After: 120 is model_rate_limited and names the wait',
        [{ status: 429, headers: { 'Retry-After': '120' } }], 429, 'model_rate_limited', (r) => {
            assert.match(r.body.message, /120/, 'the error names the wait');
            assert.equal(r.headers.get('retry-after'), '120', `the response passes the wait on: ${show(r)}`);
            assert.equal(model.requests.length, 1, `a long Retry-After is not waited out: ${seen()}`);
        });
    modelError('a 500 from the model is model_error', [{ status: 500 }, { status: 500 }, { status: 500 }], 502, 'model_error');
    modelError(`no answer within LLM_TIMEOUT_MS (${TIMEOUT_MS} ms) is model_timeout`,
        [{ delayMs: TIMEOUT_MS * 3, text: 'too late' }, { delayMs: TIMEOUT_MS * 3, text: 'too late' }, { delayMs: TIMEOUT_MS * 3, text: 'too late' }],
        504, 'model_timeout');
    modelError('a malformed answer is model_malformed', [{ malformed: true }, { malformed: true }, { malformed: true }], 502,
        'model_malformed');

    t('a model error while streaming ends the stream with an error event (500, malformed)', async () => {
        await streamedModelError(ctx, [{ status: 500 }], 'model_error');
        await streamedModelError(ctx, [{ malformed: true }], 'model_malformed');
    });

    t('a 429 with Retry-After: 1 is waited out once and the retry answers', async () => {
        model.reset();
        model.script([{ status: 429, headers: { 'Retry-After': '1' } }, { text: 'After the wait.' }]);
        const started = Date.now();
        const r = await chat(ctx.server, ctx.alice, { message: 'Be patient.' });
        assert.equal(r.status, 200, show(r));
        assert.equal(r.body.response, 'After the wait.');
        assert.equal(model.requests.length, 2, seen());
        assert.ok(Date.now() - started >= 900, 'the Retry-After was waited out');
    });

    t('direct mode: the upstream tools as SERVER__TOOL, called directly with the credentials, no code runs',
        () => directMode(ctx, 'openai'));

    t('another tenant cannot read, continue or delete a conversation, nor list it', async () => {
        model.reset();
        model.script([{ text: 'Alice only.' }]);
        const r = await chat(ctx.server, ctx.alice, { message: 'A secret of alice.' });
        assert.equal(r.status, 200, show(r));
        const id = r.body.conversation;
        model.reset();
        for (const [method, path, body] of [['GET', `/api/chat/${id}`], ['DELETE', `/api/chat/${id}`],
            ['POST', '/api/chat', { conversation: id, message: 'bob continues' }], ['POST', '/api/chat', { conversation: id }]]) {
            const b = await call(ctx.server, ctx.bob, method, path, body);
            assert.equal(b.status, 404, `${method} ${path} as bob: ${show(b)}`);
            assert.equal(b.body?.error, 'not_found', show(b));
            assert.ok(!b.text.includes('A secret of alice'), 'nothing of the conversation leaks');
        }
        assert.equal(model.requests.length, 0, 'bob reached no model');
        const bobList = await call(ctx.server, ctx.bob, 'GET', '/api/chat');
        assert.equal(bobList.status, 200);
        assert.ok(!bobList.body.conversations.some((c) => c.id === id), 'bob does not list it');
        const aliceList = await call(ctx.server, ctx.alice, 'GET', '/api/chat');
        assert.ok(aliceList.body.conversations.some((c) => c.id === id), 'alice does');
        assert.equal(aliceList.body.conversations[0].id, id, 'most recent first');
        const g = await call(ctx.server, ctx.alice, 'GET', `/api/chat/${id}`);
        assert.equal(g.status, 200, 'still there for alice after bob tried');
        const d = await call(ctx.server, ctx.alice, 'DELETE', `/api/chat/${id}`);
        assert.equal(d.status, 204);
        assert.equal((await call(ctx.server, ctx.alice, 'GET', `/api/chat/${id}`)).status, 404, 'gone after DELETE');
    });

    t('the model key reaches the model API only: not a sandbox (env, /proc), a tool result, a response or a log line', async () => {
        model.reset();
        // the sandbox prints its whole environment; the key must not be in it (nor in what the model gets back)
        const code = [
            'import os',
            'print("ENV", sorted(os.environ))',
            'print("RAW", open("/proc/self/environ", "rb").read().decode(errors="replace").replace("\\0", " "))',
        ].join('\n');
        model.script([
            { toolCalls: [{ name: 'execute_code', arguments: { language: 'python', code } }] },
            { toolCalls: [{ name: 'execute_code', arguments: { language: 'bash', code: 'env; cat /proc/self/environ | tr "\\0" "\\n"' } }] },
            { text: 'Looked around.' },
        ]);
        const r = await chatSse(ctx.server, ctx.alice, { message: 'Show me your environment.' });
        assert.equal(r.status, 200);
        const done = r.events.find((e) => e.event === 'done')?.data;
        assert.ok(done, r.text.slice(0, 3000));
        assert.match(done.toolCalls[0].output, /RAW .*PATH=/, `the sandbox read its environ: ${done.toolCalls[0].output.slice(0, 500)}`);
        for (const c of done.toolCalls) assert.ok(!c.output.includes(LLM_KEY), 'no tool output holds the key');
        assert.ok(done.toolCalls[1].output.includes('PATH='), `env ran: ${done.toolCalls[1].output.slice(0, 500)}`);
        for (const req of model.requests) {
            for (const res of toolResultsOf(req)) assert.ok(!res.text.includes(LLM_KEY), 'no tool result the model got holds the key');
        }
        assertModelRequests('openai');
        for (const b of bodies) assert.ok(!b.includes(LLM_KEY), `a response held the model key: ${b.slice(0, 300)}`);
        assert.ok(bodies.length > 20, `the bodies of the whole file so far were checked (${bodies.length})`);
        assert.ok(!ctx.server.log().includes(LLM_KEY), 'no log line holds the model key');
        assert.ok(!ctx.server.log().includes(UPSTREAM_TOKEN), 'nor the upstream token');
    });
});

// ---------------------------------------------------------------------------------------------------------------
// 2. Anthropic
// ---------------------------------------------------------------------------------------------------------------

describe('chat over the Anthropic Messages API (code and direct mode)', () => {
    const ctx = {};
    const S = () => ctx.server;
    const t = (name, body) => test(name, withLog(S, body, () => `\n--- model requests ---\n${seen()}`));

    before(async () => {
        Object.assign(ctx, await startChatServer('anthropic'));
    });
    after(async () => {
        await ctx.server?.stop();
    });

    t('code mode: execute_code calls the upstream through mcp_tools, the model gets the real result and answers (JSON)',
        () => codeModeRoundTrip(ctx, 'anthropic'));

    t('code mode as server-sent events: conversation, round, tool_call, tool_result, round, text, done',
        () => codeModeStreaming(ctx, 'anthropic'));

    t('a failing tool call is shown to the model, which corrects itself', () => failingThenCorrected(ctx, 'anthropic'));

    t('direct mode: the upstream tools as SERVER__TOOL, called directly with the credentials, no code runs',
        () => directMode(ctx, 'anthropic'));

    t('a model error while streaming ends the stream with an error event (401, malformed)', async () => {
        await streamedModelError(ctx, [{ status: 401 }], 'model_auth');
        await streamedModelError(ctx, [{ malformed: true }], 'model_malformed');
    });

    t('a malformed answer is model_malformed (JSON)', async () => {
        model.reset();
        model.script([{ malformed: true }]);
        const r = await chat(ctx.server, ctx.alice, { message: 'Anything.' });
        assert.equal(r.status, 502, show(r));
        assert.equal(r.body?.error, 'model_malformed', show(r));
        assert.match(r.body.conversation ?? '', /^conv-/);
    });

    t('the model key is sent as x-api-key and appears in no response or log line', async () => {
        assert.ok(model.requests.length > 0);
        for (const r of model.requests) assert.equal(r.headers['x-api-key'], LLM_KEY);
        for (const b of bodies) assert.ok(!b.includes(LLM_KEY), `a response held the model key: ${b.slice(0, 300)}`);
        assert.ok(!ctx.server.log().includes(LLM_KEY), 'no log line holds the model key');
    });
});

// ---------------------------------------------------------------------------------------------------------------
// 3. No model
// ---------------------------------------------------------------------------------------------------------------

describe('chat without LLM_MODEL', () => {
    let server;
    before(async () => {
        server = await startServer({ DATA_DIR: base.dataDir, WARM_POOL: 'off', LLM_API_KEY: LLM_KEY });
    });
    after(async () => {
        await server?.stop();
    });

    test('POST /api/chat answers 503 chat_off and says so; the model is never asked', withLog(() => server, async () => {
        model.reset();
        const r = await chat(server, server.apiKey, { message: 'hello' });
        assert.equal(r.status, 503, show(r));
        assert.equal(r.body?.error, 'chat_off', show(r));
        assert.match(r.body.message, /LLM_MODEL/, 'the error names what turns the chat on');
        assert.equal(model.requests.length, 0);
        assert.ok(!r.text.includes(LLM_KEY));
    }));
});
