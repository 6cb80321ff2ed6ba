'use strict';
// TypeScript without the typescript package, where the Node running it strips types itself (Node 22.18 and later:
// module.stripTypeScriptTypes, and `.ts` files run natively). The server's stripper (ts-strip-server.js) uses it
// first and hands a run its JavaScript ready; the runners (ts-loader.js for a cold run, warm_node.js and
// session_node.js with --typescript) use it for what comes without, and fall back to the typescript package for what
// it refuses. Loading Node's stripper (a WebAssembly build of SWC) costs about 0.1 s once per process: the server's
// stripper pays it once for many runs.
const Module = require('module');

/** Whether this Node strips types itself: the API, and `.ts` files run natively in strip mode by default. */
const available = typeof Module.stripTypeScriptTypes === 'function' && typeof process.features.typescript === 'string';

/** Calls Node's stripper without its one-time ExperimentalWarning: the runner's business, not the program's output. */
function quietly(fn) {
  const emit = process.emitWarning;
  process.emitWarning = function (warning, ...rest) {
    const text = String(warning && warning.message !== undefined ? warning.message : warning);
    if (text.includes('stripTypeScriptTypes')) return undefined;
    return emit.call(this, warning, ...rest);
  };
  try {
    return fn();
  } finally {
    process.emitWarning = emit;
  }
}

/**
 * The JavaScript of a TypeScript source: `{js, transformed: false}` with the types replaced by blanks (every line and
 * column where it was: no source map needed); for syntax that needs code generated (enums, namespaces, parameter
 * properties) `{js, transformed: true}`, ending in an inline source map. Null when Node cannot handle it (a syntax
 * error, or syntax it does not support): the caller then uses the typescript package, whose diagnostics name the
 * TypeScript line and column.
 */
function strip(code, file) {
  try {
    return { js: quietly(() => Module.stripTypeScriptTypes(code, { mode: 'strip' })), transformed: false };
  } catch (e) {
    if (e === null || typeof e !== 'object' || e.code !== 'ERR_UNSUPPORTED_TYPESCRIPT_SYNTAX') return null;
  }
  try {
    return {
      js: quietly(() => Module.stripTypeScriptTypes(code, { mode: 'transform', sourceMap: true, sourceUrl: file })),
      transformed: true,
    };
  } catch (e) {
    return null;
  }
}

/** Loads the stripper ahead (a warm sandbox, before it says it is ready). */
function preload() {
  strip('const warm: number = 1;\n', '/warm.ts');
  strip('enum Warm { A }\n', '/warm.ts');
}

/** The errors a module's syntax gives when it is compiled as a script (what Node's own detection retries on). */
const MODULE_ONLY = [
  'Cannot use import statement outside a module', "Unexpected token 'export'",
  "Cannot use 'import.meta' outside a module", 'await is only valid in async functions and the top level bodies of modules',
];

/**
 * What JavaScript is: 'script' (compiles as CommonJS), 'module' (import, export, import.meta or top-level await:
 * Node runs it as an ES module) or 'invalid' (syntax this V8 does not have, such as decorators, which Node's
 * stripper leaves in place: the typescript package must turn it into code).
 */
function kind(js, file) {
  try {
    new (require('vm').Script)(Module.wrap(js), { filename: file });
    return 'script';
  } catch (e) {
    if (!(e instanceof SyntaxError)) return 'invalid';
    return MODULE_ONLY.some((m) => e.message.includes(m)) ? 'module' : 'invalid';
  }
}

/**
 * How to run a TypeScript source on this Node, decided before any of it runs:
 * - {how: 'file', js}: a script (no import or export): Node runs the file as the main CommonJS module, stripping it
 *   as it loads it, as `node file.ts` does (js: what it runs, types blanked, for whoever runs it from memory);
 * - {how: 'script', js}: a script that needs code generated (an enum, ...), or one known only from memory: its
 *   JavaScript is compiled by the caller as the main CommonJS module (with its source map when transformed);
 * - {how: 'transpiler'}: for the typescript package: a file with import or export (the package makes CommonJS of
 *   it, as it always has: `require`, `__dirname`, NODE_PATH's modules such as code mode's mcp-tools, and a CommonJS
 *   package's whole `module.exports` as its default import all keep working, which Node's ES module loader would
 *   change), a syntax error (whose diagnostics the package words best), syntax this V8 lacks (decorators), or a
 *   Node that does not strip types.
 * placed: whether the file is on disk (a warm run over stdio whose disk was full has it only in memory).
 */
function plan(code, file, placed = true) {
  if (!available) return { how: 'transpiler' };
  const out = strip(code, file);
  if (out === null || kind(out.js, file) !== 'script') return { how: 'transpiler' };
  return out.transformed || !placed ? { how: 'script', js: out.js } : { how: 'file', js: out.js };
}

/** Runs a plan of 'file': `node file.ts` for a script. */
function run(file) {
  Module.runMain(file);
}

/** A session cell's JavaScript ({js, transformed}), or null when it is for the typescript package. */
function cell(code, name) {
  const out = strip(code, name);
  return out === null || kind(out.js, name) === 'invalid' ? null : out;
}

module.exports = { available, preload, plan, run, cell };
