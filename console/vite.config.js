import { defineConfig } from 'vite';
import vue from '@vitejs/plugin-vue';
import { fileURLToPath } from 'node:url';

// The jar serves the build from its classpath at /admin/ (AdminConsoleServlet): Maven runs `npm run build` in
// generate-resources, so the output lands straight in target/classes/admin/ and is packed with the classes.
export default defineConfig({
  base: '/admin/',
  plugins: [vue()],
  build: {
    outDir: fileURLToPath(new URL('../target/classes/admin', import.meta.url)),
    emptyOutDir: true,
    assetsDir: 'assets',
    // The polyfill would be bundled anyway, but no browser this targets needs it; keeps index.html script-free.
    modulePreload: { polyfill: false },
    chunkSizeWarningLimit: 800,
  },
  server: {
    proxy: { '/api': 'http://127.0.0.1:8080' },
  },
});
