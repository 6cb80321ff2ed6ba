'use strict';
// Warm Node runner: started ahead of a run inside its sandbox, it says it is ready, then runs the one piece of code
// it is sent as `node FILE args...` would. Single use: the sandbox is discarded after.
// Protocol: docs/interpreter-protocol.md. Wrapped in a function so the runner's names never reach the user's code.
// With --typescript: the TypeScript runner. It loads the transpiler (ts-loader.js) and transpiles a snippet before
// it says it is ready, then transpiles the code it is sent exactly as a cold run's ts-loader does.
(function main() {
  const path = require('path');
  const Module = require('module');
  const helperPath = require.resolve('./codeexec_node.js');
  const { openChannel, send, receiveSync, closeChannel } = require(helperPath);
  const typescript = process.argv[2] === '--typescript';
  const loaderPath = typescript ? require.resolve('./ts-loader.js') : null;

  const channel = openChannel();
  let ts = null;
  let transpile = null;
  if (typescript) {
    ({ transpile } = require(loaderPath));
    ts = require(loaderPath).loadTypescript('').ts;
    transpile(ts, '/warm.ts', 'const warm: string = `${1 + 1}`;\nexport function f(x: number): number { return x; }\n');
  }
  delete process.env.CODE_EXEC_PRELOAD;
  send(channel, { ready: true });
  // Blocking read: nothing else may run before the user's code, and no handle of ours may outlive it.
  const message = receiveSync(channel);
  if (message === null) process.exit(0);
  closeChannel(channel);

  const file = message.file;
  const args = message.args || [];
  if (typeof file !== 'string' || !path.isAbsolute(file) || typeof message.code !== 'string' ||
      !Array.isArray(args) || !args.every((a) => typeof a === 'string')) {
    process.exit(2);
  }
  try {
    // Resolved again now: a workspace may have been mounted over the working directory after the start.
    process.chdir(path.dirname(file));
  } catch (e) {
    process.exit(2);
  }
  let code = message.code;
  if (code.charCodeAt(0) === 0xfeff) code = code.slice(1);
  if (typescript) code = transpile(ts, file, code);
  process.argv.splice(1, process.argv.length - 1, file, ...args);
  delete Module._cache[__filename];
  delete Module._cache[helperPath];
  if (loaderPath) delete Module._cache[loaderPath];

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
})();
