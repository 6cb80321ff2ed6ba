'use strict';
// Node session runner: one interpreter whose global scope persists across calls, like a notebook kernel. Each
// call's code runs as a script in one vm context; its completion value (awaited when it is a promise), its error
// and whether it was interrupted come back on the control channel. Protocol: docs/interpreter-protocol.md.
// Wrapped in a function so the runner's names never reach the user's code.
(function main() {
  const net = require('net');
  const path = require('path');
  const util = require('util');
  const vm = require('vm');
  const Module = require('module');
  const { openChannel, send, parse, writeAllSync } = require('./codeexec_node.js');

  const channel = openChannel();
  delete process.env.CODE_EXEC_PRELOAD;
  process.argv.splice(1);

  const context = createContext();
  let cells = 0;
  // Set while a call awaits a promise: a SIGINT then ends the wait.
  let interruptWait = null;

  // Between calls a SIGINT must not end the runner; during a script, breakOnSigint takes it instead of this.
  const onSigint = () => {
    if (interruptWait !== null) interruptWait();
  };
  process.on('SIGINT', onSigint);
  // An error thrown later by a call's timer or left-over promise is reported, as Node would, but does not end the
  // session: it shows up in the output of whichever call is running (or the next one).
  process.on('uncaughtException', (error) => printError(error));
  process.on('unhandledRejection', (reason) => printError(reason));

  /** A fresh global scope with Node's globals, require/module/exports resolving from the working directory. */
  function createContext() {
    const ctx = vm.createContext({}, { name: 'session' });
    const own = new Set(vm.runInContext('Object.getOwnPropertyNames(globalThis)', ctx));
    for (const name of Object.getOwnPropertyNames(globalThis)) {
      if (!own.has(name)) Object.defineProperty(ctx, name, Object.getOwnPropertyDescriptor(globalThis, name));
    }
    const filename = path.join(process.cwd(), '[session]');
    const sessionModule = new Module(filename, null);
    sessionModule.filename = filename;
    sessionModule.paths = Module._nodeModulePaths(process.cwd());
    sessionModule.loaded = true;
    const define = (name, value) =>
      Object.defineProperty(ctx, name, { value, writable: true, configurable: true, enumerable: false });
    define('global', vm.runInContext('globalThis', ctx));
    // The context's own console is V8's, which prints nowhere.
    define('console', console);
    define('require', Module.createRequire(filename));
    define('module', sessionModule);
    define('exports', sessionModule.exports);
    return ctx;
  }

  // import() in a cell needs a loader for the vm context: Node 21.7+ offers its main one; on older Node import()
  // in a cell fails (require works).
  const importOption = vm.constants && vm.constants.USE_MAIN_CONTEXT_DEFAULT_LOADER
    ? { importModuleDynamically: vm.constants.USE_MAIN_CONTEXT_DEFAULT_LOADER }
    : {};

  /**
   * The cell as a script. Code that does not compile as one because it uses top-level await runs as the body of
   * an async function instead (its declarations then stay local to the cell). Its value: the whole code when it
   * is one expression, else the last line when that is an expression statement on its own.
   */
  function compile(code, filename) {
    const options = { filename, ...importOption };
    try {
      return new vm.Script(code, options);
    } catch (error) {
      if (!(error instanceof SyntaxError) || !/\bawait\b/.test(code)) throw error;
      for (const wrapped of asyncForms(code)) {
        try {
          return new vm.Script(wrapped, options);
        } catch (e) {
          // Try the next form; if none compiles, the original error is the one to report.
        }
      }
      throw error;
    }
  }

  /** The async-function forms of a cell, most informative first. Line numbers stay those of the cell. */
  function asyncForms(code) {
    const trimmed = code.replace(/[\s;]+$/, '');
    const forms = ['(async () => (' + trimmed + '\n))()'];
    // The last statement: after the last line break, or after the last `;` of the last line (unless a comment
    // could hold that `;`).
    let split = trimmed.lastIndexOf('\n');
    const lastLine = trimmed.slice(split + 1);
    if (lastLine.includes(';') && !/\/\/|\/\*/.test(lastLine)) split += 1 + lastLine.lastIndexOf(';');
    const head = trimmed.slice(0, split + 1);
    const last = trimmed.slice(split + 1).trim();
    const headEnd = head.trimEnd().split('\n').pop();
    // It is returned only where it surely is a statement of its own: it starts like an expression that cannot
    // continue what comes before (not with an operator, bracket or template), and what comes before is not a loop
    // or if header whose body it would be.
    if (/^[A-Za-z0-9_$'"]/.test(last) &&
        !/\b(if|for|while|with)\s*\(.*\)\s*$|\b(else|do)\s*$|=>\s*$/.test(headEnd)) {
      forms.push('(async () => {' + head + 'return (' + last + '\n)})()');
    }
    forms.push('(async () => {' + code + '\n})()');
    return forms;
  }

  function isThenable(value) {
    return value !== null && (typeof value === 'object' || typeof value === 'function') && typeof value.then === 'function';
  }

  const INTERRUPTED = Symbol('interrupted');

  /** Awaits value, or stops waiting at a SIGINT (the promise itself cannot be cancelled; it settles unobserved). */
  function awaitInterruptibly(value) {
    return new Promise((resolve, reject) => {
      interruptWait = () => reject(INTERRUPTED);
      Promise.resolve(value).then(resolve, reject);
    }).finally(() => {
      interruptWait = null;
    });
  }

  function isInterruption(error) {
    return error === INTERRUPTED || (error !== null && typeof error === 'object' && error.code === 'ERR_SCRIPT_EXECUTION_INTERRUPTED');
  }

  /** Drops the runner's frames (this file and node:vm, always the outermost ones) from an error's stack. */
  function trimStack(error) {
    if (error === null || typeof error !== 'object' || typeof error.stack !== 'string') return;
    let lines = error.stack.split('\n');
    const cut = lines.findIndex((line) => /^\s+at /.test(line) && (line.includes(__filename) || line.includes('(node:vm:')));
    if (cut >= 0) lines = lines.slice(0, cut);
    // An awaited cell's frames end in the tick queue that resumed it: Node's plumbing, not the user's.
    while (lines.length > 1 && /^\s+at .*\(node:internal\/process\/task_queues/.test(lines[lines.length - 1])) lines.pop();
    if (lines.join('\n') !== error.stack) {
      try {
        error.stack = lines.join('\n');
      } catch (e) {
        // A frozen error keeps its stack.
      }
    }
  }

  function printError(error) {
    trimStack(error);
    let text;
    if (error !== null && typeof error === 'object' && typeof error.stack === 'string') {
      // inspect() shows extra properties (code, ...) but brackets a stack without frames; such a stack (a syntax
      // error: all its frames were the runner's) has nothing else worth showing.
      text = error.stack.includes('\n    at ') ? util.inspect(error) : error.stack;
    } else {
      text = 'Uncaught ' + util.inspect(error);
    }
    try {
      writeAllSync(2, text + '\n');
    } catch (e) {
      // stderr is gone: nothing more to do.
    }
  }

  function describe(error) {
    let line;
    if (error !== null && typeof error === 'object' && typeof error.stack === 'string') {
      const name = error.code && String(error.name) === 'Error' ? 'Error [' + error.code + ']' : String(error.name);
      line = error.message ? name + ': ' + error.message : name;
    } else {
      line = 'Uncaught ' + util.inspect(error);
    }
    return line.replace(/\s*\n\s*/g, ' ');
  }

  /** {name, value, traceback} of a failed cell, as a notebook reports it (the stack after printError trimmed it). */
  function errorInfo(error) {
    if (error !== null && typeof error === 'object' && typeof error.stack === 'string') {
      return { name: String(error.name), value: String(error.message ?? ''), traceback: error.stack };
    }
    const text = util.inspect(error);
    return { name: 'Uncaught', value: text, traceback: 'Uncaught ' + text };
  }

  async function call(message) {
    cells += 1;
    const response = { id: message.id, result: null, error: null, errorInfo: null, interrupted: false, figures: [],
      executionCount: cells };
    try {
      const script = compile(String(message.code || ''), '<cell ' + cells + '>');
      let value = script.runInContext(context, { breakOnSigint: true });
      if (isThenable(value)) value = await awaitInterruptibly(value);
      if (value !== undefined) response.result = util.inspect(value);
    } catch (error) {
      if (isInterruption(error)) {
        response.interrupted = true;
        response.error = 'Interrupted';
        // breakOnSigint's error is printed like any error a script throws; a wait that was given up threw nothing.
        if (error !== INTERRUPTED) printError(error);
      } else {
        response.error = describe(error);
        printError(error);
        response.errorInfo = errorInfo(error);
      }
    }
    return response;
  }

  function finish(response) {
    // Output to pipes is synchronous in Node on Linux: everything the call printed is already written.
    for (const fd of [1, 2]) {
      try {
        writeAllSync(fd, response.id);
      } catch (e) {
        // The user closed it; the server sees that stream end.
      }
    }
    send(channel, response);
  }

  // Messages are handled one at a time, in order; the reader keeps the event loop alive between calls.
  const queue = [];
  let busy = false;
  async function pump() {
    if (busy) return;
    busy = true;
    while (queue.length > 0) {
      const message = queue.shift();
      if (typeof message.id !== 'string' || !/^[0-9a-f]{32}$/.test(message.id)) process.exit(2);
      finish(await call(message));
      // A cell may have removed the listener; between calls a SIGINT must never end the runner.
      if (!process.listeners('SIGINT').includes(onSigint)) process.on('SIGINT', onSigint);
    }
    busy = false;
  }

  const reader = new net.Socket({ fd: channel.in, readable: true, writable: false });
  let pending = '';
  reader.setEncoding('utf8');
  reader.on('data', (chunk) => {
    pending += chunk;
    let newline;
    while ((newline = pending.indexOf('\n')) >= 0) {
      queue.push(parse(pending.slice(0, newline)));
      pending = pending.slice(newline + 1);
    }
    pump();
  });
  reader.on('end', () => process.exit(0));
  reader.on('error', () => process.exit(0));
  send(channel, { ready: true });
})();
