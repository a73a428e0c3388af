import { createHash } from "node:crypto";
import { readFileSync, readdirSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

import { defineConfig, type Plugin } from "vite";

/**
 * What the chat bundle was built from, and what the build produced, written beside the
 * bundle as `build-record.json` at the end of every build. tests/test_bundle.py hashes
 * the same files and fails when the committed bundle no longer matches its sources (a
 * source edited without a rebuild, or a bundle edited by hand). Any rebuild updates it.
 */
const SOURCES = ["page", "src", "vite.config.ts", "package-lock.json", "tsconfig.json"];
const RECORD = "build-record.json";

function listFiles(root: string, entry: string): string[] {
  const found: string[] = [];
  for (const item of readdirSync(join(root, entry), { withFileTypes: true })) {
    const path = entry === "." ? item.name : `${entry}/${item.name}`;
    if (item.name.startsWith(".") || item.name === RECORD || /\.test\.tsx?$/.test(item.name)) {
      continue;
    }
    if (item.isDirectory()) found.push(...listFiles(root, path));
    else if (item.isFile()) found.push(path);
  }
  return found;
}

/** sha256 over "<path>\n<sha256 of its bytes>\n" for every file, sorted by path. */
function digest(root: string, entries: string[]): string {
  const paths = entries.flatMap((entry) =>
    statSync(join(root, entry)).isDirectory() ? listFiles(root, entry) : [entry],
  );
  const total = createHash("sha256");
  for (const path of [...new Set(paths)].sort()) {
    const file = createHash("sha256").update(readFileSync(join(root, path))).digest("hex");
    total.update(`${path}\n${file}\n`);
  }
  return total.digest("hex");
}

function buildRecord(jsRoot: string, outDir: string): Plugin {
  return {
    name: "agentkeel-build-record",
    closeBundle() {
      const record = { sources: digest(jsRoot, SOURCES), bundle: digest(outDir, ["."]) };
      writeFileSync(join(outDir, RECORD), `${JSON.stringify(record, null, 2)}\n`);
    },
  };
}

const jsRoot = fileURLToPath(new URL(".", import.meta.url));
const outDir = fileURLToPath(new URL("../../src/agentkeel/server/static", import.meta.url));

/**
 * Builds the demo chat page (page/) into the Python package, which serves it at `GET /`.
 * Asset names carry no hash, so a rebuild of unchanged sources changes no file; the
 * server should send them with `Cache-Control: no-cache`.
 *
 * `npm run dev` / `vite preview` proxy `/agents` to AGENTKEEL_URL (default :8000).
 */
const server = process.env["AGENTKEEL_URL"] ?? "http://127.0.0.1:8000";

export default defineConfig({
  plugins: [buildRecord(jsRoot, outDir)],
  root: fileURLToPath(new URL("./page", import.meta.url)),
  base: "./",
  build: {
    outDir,
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
