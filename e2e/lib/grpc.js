// Just enough gRPC to talk to a worker from the tests without a gRPC library (@grpc/grpc-js is not a dependency):
// gRPC is HTTP/2 with length-prefixed protobuf messages and the status in trailers, and Node has HTTP/2 built in.
// Used for the standard health service (readiness of a worker, the way a Kubernetes probe asks), the Status call
// (warm pool levels for the benchmark) and the adversarial token checks (a call without or with a wrong token).
// Plaintext only (h2c with prior knowledge), which is what a worker on loopback serves.
import http2 from 'node:http2';

/** gRPC status codes the tests name. */
export const Code = { OK: 0, CANCELLED: 1, UNKNOWN: 2, INVALID_ARGUMENT: 3, DEADLINE_EXCEEDED: 4, UNIMPLEMENTED: 12,
    UNAVAILABLE: 14, UNAUTHENTICATED: 16, FAILED_PRECONDITION: 9, RESOURCE_EXHAUSTED: 8 };

// ---- protobuf, the few wire types the worker's messages use ----

function varint(n) {
    let v = BigInt(n);
    const out = [];
    do {
        let b = Number(v & 0x7fn);
        v >>= 7n;
        if (v) b |= 0x80;
        out.push(b);
    } while (v);
    return Buffer.from(out);
}

/**
 * Encodes a message from [fieldNumber, value] pairs: a string/Buffer is length-delimited, a number or boolean a
 * varint, an array of pairs a nested message. Zero values are skipped, as proto3 does.
 */
export function encode(fields) {
    const parts = [];
    for (const [no, value] of fields) {
        if (value === undefined || value === null || value === '' || value === 0 || value === false) continue;
        if (typeof value === 'number' || typeof value === 'boolean' || typeof value === 'bigint') {
            parts.push(varint((no << 3) | 0), varint(typeof value === 'boolean' ? 1 : value));
        } else {
            const bytes = Array.isArray(value) ? encode(value) : Buffer.from(value);
            parts.push(varint((no << 3) | 2), varint(bytes.length), bytes);
        }
    }
    return Buffer.concat(parts);
}

/** Decodes one message level into { fieldNumber: [values] }: varints as Numbers, length-delimited as Buffers. */
export function decode(buf) {
    const fields = {};
    let i = 0;
    const readVarint = () => {
        let v = 0n;
        let shift = 0n;
        for (;;) {
            const b = buf[i++];
            v |= BigInt(b & 0x7f) << shift;
            if (!(b & 0x80)) return v;
            shift += 7n;
        }
    };
    while (i < buf.length) {
        const key = Number(readVarint());
        const no = key >> 3;
        const type = key & 7;
        let value;
        if (type === 0) value = Number(readVarint());
        else if (type === 2) {
            const len = Number(readVarint());
            value = buf.subarray(i, i + len);
            i += len;
        } else if (type === 1) { value = buf.readDoubleLE(i); i += 8; }
        else if (type === 5) { value = buf.readFloatLE(i); i += 4; }
        else throw new Error(`protobuf wire type ${type} not supported`);
        (fields[no] ??= []).push(value);
    }
    return fields;
}

const str = (f, no) => (f[no]?.[0] ? f[no][0].toString('utf8') : '');
const num = (f, no) => f[no]?.[0] ?? 0;

// ---- the transport ----

/**
 * One gRPC call (unary or server streaming) to `address` (host:port) over plaintext HTTP/2.
 * Resolves, never rejects: { status (gRPC code, or null when the call got no gRPC answer), message (grpc-message),
 * messages: [Buffer] (the response messages), error (transport error text, or 'timeout') }.
 */
export function call(address, path, request = Buffer.alloc(0), { metadata = {}, timeoutMs = 5000, respond } = {}) {
    return new Promise((resolve) => {
        let settled = false;
        let session;
        const chunks = [];
        let headers = {};
        let trailers = {};
        const finish = (extra = {}) => {
            if (settled) return;
            settled = true;
            clearTimeout(timer);
            session?.destroy();
            const data = Buffer.concat(chunks);
            const messages = [];
            for (let i = 0; i + 5 <= data.length;) {
                const len = data.readUInt32BE(i + 1);
                messages.push(data.subarray(i + 5, i + 5 + len));
                i += 5 + len;
            }
            const raw = trailers['grpc-status'] ?? headers['grpc-status'];
            resolve({ status: raw === undefined ? null : Number(raw),
                message: decodeURIComponent(trailers['grpc-message'] ?? headers['grpc-message'] ?? ''),
                messages, error: null, ...extra });
        };
        const timer = setTimeout(() => finish({ error: 'timeout' }), timeoutMs);
        try {
            session = http2.connect(`http://${address}`);
        } catch (e) {
            finish({ error: e.message });
            return;
        }
        session.on('error', (e) => finish({ error: e.code || e.message }));
        const frame = Buffer.alloc(5 + request.length);
        frame.writeUInt32BE(request.length, 1);
        request.copy(frame, 5);
        const req = session.request({ ':method': 'POST', ':path': path, 'content-type': 'application/grpc',
            te: 'trailers', ...metadata });
        req.on('response', (h) => { headers = h; });
        req.on('trailers', (t) => { trailers = t; });
        req.on('error', (e) => finish({ error: e.code || e.message }));
        req.on('end', () => finish());
        if (!respond) {
            req.on('data', (c) => chunks.push(c));
            req.end(frame);
            return;
        }
        // A client-streaming side: each response message may get an answer (then the stream is half-closed).
        let pending = Buffer.alloc(0);
        let answered = false;
        req.on('data', (c) => {
            chunks.push(c);
            pending = Buffer.concat([pending, c]);
            while (pending.length >= 5 && pending.length >= 5 + pending.readUInt32BE(1)) {
                const len = pending.readUInt32BE(1);
                const reply = answered ? null : respond(pending.subarray(5, 5 + len));
                pending = pending.subarray(5 + len);
                if (reply) {
                    answered = true;
                    const out = Buffer.alloc(5 + reply.length);
                    out.writeUInt32BE(reply.length, 1);
                    reply.copy(out, 5);
                    req.end(out);
                }
            }
        });
        req.write(frame);
    });
}

const HEALTH = ['UNKNOWN', 'SERVING', 'NOT_SERVING', 'SERVICE_UNKNOWN'];

/**
 * The standard health service's answer for `service` ('' = the whole server): 'SERVING', 'NOT_SERVING', ...,
 * or a string saying why there is none ('unreachable: ECONNREFUSED', 'timeout', 'grpc status 12').
 */
export async function health(address, service = '', timeoutMs = 2000) {
    const r = await call(address, '/grpc.health.v1.Health/Check', encode([[1, service]]), { timeoutMs });
    if (r.error) return r.error === 'timeout' ? 'timeout' : `unreachable: ${r.error}`;
    if (r.status !== 0) return `grpc status ${r.status} ${r.message}`;
    return HEALTH[num(decode(r.messages[0] ?? Buffer.alloc(0)), 1)] ?? 'UNKNOWN';
}

const bearer = (token) => (token === undefined ? {} : { authorization: `Bearer ${token}` });

/** Worker.Status: { status, message, worker, instanceId, running, queued, slots, sessions, draining, warmPool }. */
export async function workerStatus(address, token, timeoutMs = 3000) {
    const r = await call(address, '/codeexec.worker.v1.Worker/Status', Buffer.alloc(0),
        { metadata: bearer(token), timeoutMs });
    if (r.status !== 0 || !r.messages.length) return { status: r.status, message: r.message, error: r.error };
    const f = decode(r.messages[0]);
    const warmPool = {};
    for (const entry of f[9] ?? []) {
        const e = decode(entry);
        const level = decode(e[2]?.[0] ?? Buffer.alloc(0));
        warmPool[str(e, 1)] = { ready: num(level, 1), target: num(level, 2) };
    }
    return { status: 0, worker: str(f, 1), instanceId: str(f, 2), running: num(f, 4), queued: num(f, 5),
        slots: num(f, 6), sessions: num(f, 7), draining: num(f, 8) === 1, warmPool };
}

/**
 * Worker.Execute as a gateway would send it, without the gateway: { status, message, error, events } where each
 * event is 'accepted', 'output' or { result: { exitCode, stdout, stderr, outcome, worker } }.
 */
export async function workerExecute(address, token, { language, code, tenant = '', workspace = '', timeoutMs = 10_000 }) {
    const limits = [[1, timeoutMs], [2, 10], [3, 256 * 1024 * 1024], [4, 64], [5, 1024 * 1024], [6, 64 * 1024 * 1024]];
    const request = encode([[1, language], [2, code], [6, limits], [7, tenant], [8, workspace]]);
    // ExecuteInput{request}, then ExecuteInput{start} once `accepted` arrives (the worker waits for it to start).
    const r = await call(address, '/codeexec.worker.v1.Worker/Execute', encode([[1, request]]),
        { metadata: bearer(token), timeoutMs: timeoutMs + 10_000,
            respond: (m) => (decode(m)[1] ? encode([[2, Buffer.alloc(0)]]) : null) });
    const events = r.messages.map((m) => {
        const f = decode(m);
        if (f[1]) return 'accepted';
        if (f[2]) return 'output';
        if (f[3]) {
            const res = decode(f[3][0]);
            return { result: { exitCode: num(res, 2), stdout: str(res, 3), stderr: str(res, 4), outcome: str(res, 6),
                worker: str(res, 14) } };
        }
        return 'unknown';
    });
    return { status: r.status, message: r.message, error: r.error, events };
}
