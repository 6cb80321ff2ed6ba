'use strict';
// Runs a TypeScript file: transpile with the installed `typescript` package (type-erasure only, no type
// check: about ten times faster than tsc) and run the result as the main CommonJS module, so that
// require() resolves relative to the code file and process.argv looks like `node file args...`.
// Wrapped in a function so the loader's own names never clash with the user's.
(function main() {
  const fs = require('fs');
  const path = require('path');
  const Module = require('module');
  let ts;
  try {
    ts = require('typescript');
  } catch (e) {
    process.stderr.write('typescript is not installed (npm install -g typescript)\n');
    process.exit(127);
  }
  const file = path.resolve(process.argv[2]);
  const source = fs.readFileSync(file, 'utf8');
  const out = ts.transpileModule(source, {
    fileName: file,
    reportDiagnostics: true,
    compilerOptions: {
      module: ts.ModuleKind.CommonJS,
      target: ts.ScriptTarget.ES2022,
      esModuleInterop: true,
      inlineSourceMap: true,
    },
  });
  const errors = (out.diagnostics || []).filter((d) => d.category === ts.DiagnosticCategory.Error);
  if (errors.length > 0) {
    const host = { getCanonicalFileName: (f) => f, getCurrentDirectory: () => process.cwd(), getNewLine: () => '\n' };
    process.stderr.write(ts.formatDiagnostics(errors, host));
    process.exit(1);
  }
  process.argv.splice(1, 2, file);
  const m = new Module(file, null);
  m.filename = file;
  m.paths = Module._nodeModulePaths(path.dirname(file));
  process.mainModule = m;
  require.main = m;
  m.id = '.';
  m._compile(out.outputText, file);
})();
