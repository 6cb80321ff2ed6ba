'use strict';
// Preloaded (NODE_OPTIONS=--require) into Node runs that have network access: sends fetch() through the egress
// proxy named by HTTP_PROXY/HTTPS_PROXY, which Node before 22.21 does not do by itself (newer Node does it with
// NODE_USE_ENV_PROXY=1, also set). undici's EnvHttpProxyAgent becomes the global dispatcher that Node's built-in
// fetch reads. Silent when undici is not installed: fetch then has no way out, as any code ignoring the proxy.
try {
  const major = Number(process.versions.node.split('.')[0]);
  if (major < 24 && (process.env.HTTPS_PROXY || process.env.HTTP_PROXY)) {
    let undici = null;
    for (const dir of ['/usr/local/lib/node_modules/undici', '/usr/lib/node_modules/undici']) {
      try { undici = require(dir); break; } catch (e) { /* next */ }
    }
    if (undici && undici.EnvHttpProxyAgent) {
      const warn = process.emitWarning;
      process.emitWarning = () => {}; // "EnvHttpProxyAgent is experimental": not the program's output
      try {
        undici.setGlobalDispatcher(new undici.EnvHttpProxyAgent());
      } finally {
        process.emitWarning = warn;
      }
    }
  }
} catch (e) {
  // never stand in the program's way
}
