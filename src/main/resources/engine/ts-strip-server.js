'use strict';
// The server's TypeScript stripper (warm/TypeScriptStrippers): one per tenant, in a sandbox of its own like a run's
// (no network, no workspace, the sandbox uid), started once and kept. It takes one request per line on its control
// channel, {file, code}, and answers one line: {js} when the source can run as that JavaScript (types stripped by
// Node, or a file with import or export made CommonJS by the typescript package, with its inline source map), else {}
// (a syntax error, or a source too odd to be sure of): the run then does it itself, with the same error messages as
// ever. Node's stripper is loaded ahead; the typescript package when the first file with import or export comes.
// The answer is the same as a run's own runner (ts-loader.js) would compute: one code path, ts-strip.js's plan.
(function main() {
  const { openChannel, send, receiveSync } = require('./codeexec_node.js');
  const stripper = require('./ts-strip.js');
  const channel = openChannel();
  let loader = null;
  let ts = null;

  /** A file's CommonJS through the typescript package, or null on a syntax error (the run words those). */
  function transpiled(code, file) {
    if (ts === null) {
      loader = require('./ts-loader.js');
      ts = loader.loadTypescript('').ts;
    }
    const out = loader.compile(ts, file, code);
    return out.errors.length > 0 ? null : out.js;
  }

  function answer(message) {
    const { code, file } = message;
    if (typeof code !== 'string' || typeof file !== 'string') return {};
    const source = code.charCodeAt(0) === 0xfeff ? code.slice(1) : code;
    const plan = stripper.plan(source, file);
    const js = plan.how === 'transpiler' ? transpiled(source, file) : plan.js;
    return typeof js === 'string' ? { js } : {};
  }

  if (stripper.available) stripper.preload();
  send(channel, { ready: true });
  for (;;) {
    const message = receiveSync(channel);
    if (message === null) process.exit(0);
    let reply;
    try {
      reply = answer(message);
    } catch (e) {
      reply = {};
    }
    send(channel, reply);
  }
})();
