import { defineConfig } from "vite";

// `npm run dev` serves the app on :5173 and forwards /agents to the agentkeel server, so
// the page and the API share an origin (no CORS set-up needed).
const server = process.env["AGENTKEEL_URL"] ?? "http://127.0.0.1:8000";

export default defineConfig({
  // agentkeel is linked from ../../clients/js, which has its own node_modules/react:
  // make every import of React resolve to this app's single copy.
  resolve: { dedupe: ["react", "react-dom"] },
  server: { proxy: { "/agents": server } },
  preview: { proxy: { "/agents": server } },
});
