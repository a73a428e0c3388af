import { defineConfig } from "vite";

// `npm run dev` serves the app on :5173 and forwards /agents to the agentkeel server, so
// the page and the API share an origin (no CORS set-up needed).
const server = process.env["AGENTKEEL_URL"] ?? "http://127.0.0.1:8000";

export default defineConfig({
  server: { proxy: { "/agents": server } },
  preview: { proxy: { "/agents": server } },
});
