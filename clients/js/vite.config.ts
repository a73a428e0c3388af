import { fileURLToPath } from "node:url";

import { defineConfig } from "vite";

/**
 * Builds the demo chat page (page/) into the Python package, which serves it at `GET /`.
 * Asset names carry no hash, so a rebuild of unchanged sources changes no file; the
 * server should send them with `Cache-Control: no-cache`.
 *
 * `npm run dev` / `vite preview` proxy `/agents` to AGENTKEEL_URL (default :8000).
 */
const server = process.env["AGENTKEEL_URL"] ?? "http://127.0.0.1:8000";

export default defineConfig({
  root: fileURLToPath(new URL("./page", import.meta.url)),
  base: "./",
  build: {
    outDir: fileURLToPath(new URL("../../src/agentkeel/server/static", import.meta.url)),
    emptyOutDir: true,
    sourcemap: false,
    rollupOptions: {
      output: {
        entryFileNames: "assets/[name].js",
        chunkFileNames: "assets/[name].js",
        assetFileNames: "assets/[name][extname]",
      },
    },
  },
  server: { proxy: { "/agents": server } },
  preview: { proxy: { "/agents": server } },
});
