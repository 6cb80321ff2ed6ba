'use strict';
// Warm Node runner: started ahead of a run inside its sandbox, it says it is ready, then runs the one piece of code
// it is sent as `node FILE args...` would. Single use: the sandbox is discarded after.
// Protocol: docs/interpreter-protocol.md. Wrapped in a function so the runner's names never reach the user's code.
// With --typescript: the TypeScript runner. Its run message mostly brings the JavaScript the server's stripper made
// ahead (`js`, warm/TypeScriptStrippers), which it runs as it is; without (the tenant's stripper not started yet, a
// syntax error) it runs the code as a cold run's ts-loader.js does (a script stripped by Node, anything else
// transpiled), loading what that needs then. Over stdio (gVisor, where the server has no stripper) it loads the
// transpiler and Node's stripper before it says it is ready, as every run there needs them.
// With --stdio (gVisor: the sandbox passes no descriptor beyond 0-2): the ready line is the first line of stdout and
// the run message, in the length-prefixed form Python's runner reads, comes in on stdin ahead of the user's input.
(function main() {
  const fs = require('fs');
  const path = require('path');
  const Module = require('module');
  const helperPath = require.resolve('./codeexec_node.js');
  const { openChannel, send, receiveSync, receiveLengthsSync, closeChannel, writeAllSync } = require(helperPath);
  const flags = process.argv.slice(2);
  if (!flags.every((f) => f === '--typescript' || f === '--stdio')) process.exit(2);
  const typescript = flags.includes('--typescript');
  const stdio = flags.includes('--stdio');
  const loaderPath = typescript ? require.resolve('./ts-loader.js') : null;

  const channel = stdio ? { in: 0, out: 1 } : openChannel();
  const stripperPath = typescript ? require.resolve('./ts-strip.js') : null;
  const stripper = typescript ? require(stripperPath) : null;
  let ts = null;
  let transpile = null;
  /** The typescript package's transpiler (for a Node that does not strip types, or what it refuses). */
  const loadTranspiler = () => {
    if (ts !== null) return;
    ({ transpile } = require(loaderPath));
    ts = require(loaderPath).loadTypescript('').ts;
  };
  if (typescript && stdio) {
    // both ahead: Node's stripper for a script, the transpiler for a file with import or export (ts-strip.js plan)
    if (stripper.available) stripper.preload();
    loadTranspiler();
    transpile(ts, '/warm.ts', 'const warm: string = `${1 + 1}`;\nexport function f(x: number): number { return x; }\n');
  }
  delete process.env.CODE_EXEC_PRELOAD;
  let message;
  try {
    send(channel, { ready: true });
    // Blocking read: nothing else may run before the user's code, and no handle of ours may outlive it.
    message = stdio ? receiveLengthsSync(channel.in) : receiveSync(channel);
  } catch (e) {
    // The server gone (EPIPE), the channel missing (EBADF), a length too large to allocate (RangeError): not the
    // user's output, so exit with a code only.
    process.exit(2);
  }
  if (message === null) process.exit(0);
  if (!stdio) closeChannel(channel);

  const file = message.file;
  const args = message.args || [];
  if (typeof file !== 'string' || !path.isAbsolute(file) || typeof message.code !== 'string' ||
      !Array.isArray(args) || !args.every((a) => typeof a === 'string')) {
    process.exit(2);
  }
  if (stdio) placeCodeFile(file, message.codeBytes);
  try {
    // Resolved again now: a workspace may have been mounted over the working directory after the start.
    process.chdir(path.dirname(file));
  } catch (e) {
    process.exit(2);
  }
  let code = message.code;
  if (code.charCodeAt(0) === 0xfeff) code = code.slice(1);
  // TypeScript on a Node that strips types: as a cold run's ts-loader.js does it (Node runs the file itself, or the
  // transformed JavaScript of one that needs code generated is compiled below); the rest through the transpiler
  let plan = null;
  if (typescript && typeof message.js === 'string') {
    // made by the server's stripper from this code: types blanked in place, or generated with its source map
    code = message.js;
    if (code.includes('//# sourceMappingURL=data:')) process.setSourceMapsEnabled(true);
  } else if (typescript && stripper.available) {
    // (the file may be missing over stdio when the disk was full: the plan then works from the message)
    plan = stripper.plan(code, file, fs.existsSync(file));
    if (plan.how === 'script') {
      process.setSourceMapsEnabled(true);
      code = plan.js;
    } else if (plan.how === 'transpiler') {
      loadTranspiler();
      code = transpile(ts, file, code);
      process.setSourceMapsEnabled(true);
    }
  } else if (typescript) {
    loadTranspiler();
    code = transpile(ts, file, code);
    process.setSourceMapsEnabled(true); // the inline source map: a stack names the TypeScript's lines
  }
  process.argv.splice(1, process.argv.length - 1, file, ...args);
  delete Module._cache[__filename];
  delete Module._cache[helperPath];
  if (loaderPath) delete Module._cache[loaderPath];
  if (stripperPath) delete Module._cache[stripperPath];
  if (plan !== null && plan.how === 'file') {
    // `node file.ts`: Node reads the file (placed by the server, or above over stdio) and strips it again, in
    // microseconds now that its stripper is loaded
    process.nextTick(() => stripper.run(file));
    return;
  }

  // What Module._load does for the main module, minus reading the file: the code came with the message.
  const main = new Module(file, null);
  main.filename = file;
  main.id = '.';
  main.paths = Module._nodeModulePaths(path.dirname(file));
  process.mainModule = main;
  Module._cache[file] = main;
  // Run from the tick queue rather than from here, so that no frame of this runner is on the stack: an uncaught
  // exception is then printed by Node itself, with the user's frames only, and exits 1 as it would.
  process.nextTick(main._compile.bind(main), code, file);
  process.nextTick(() => {
    main.loaded = true;
  });

  /**
   * Over stdio nothing can be mounted into the sandbox after its start, so the server cannot place the code file:
   * the runner writes it where a cold run has it (programs read __filename), read-only as a cold run's; a failure
   * (a full disk) removes what was written and leaves the run to go on from the message.
   */
  function placeCodeFile(file, bytes) {
    let fd;
    try {
      fd = fs.openSync(file, fs.constants.O_WRONLY | fs.constants.O_CREAT | fs.constants.O_EXCL, 0o444);
    } catch (e) {
      return;
    }
    let whole = false;
    try {
      writeAllSync(fd, bytes);
      whole = true;
    } catch (e) {
      // the run goes on from the message
    }
    fs.closeSync(fd);
    if (whole) return;
    try {
      fs.unlinkSync(file); // no truncated copy where the program looks for its source
    } catch (e) {
      // nothing more to do
    }
  }
})();
