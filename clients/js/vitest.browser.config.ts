import { defineConfig } from "vitest/config";

// The browser test of the chat page: Playwright (playwright-core driving Debian's
// /usr/bin/chromium) against a real server. Steps share one page, so they run in order.
export default defineConfig({
  test: {
    include: ["tests/browser/**/*.test.ts"],
    environment: "node",
    testTimeout: 60_000,
    hookTimeout: 120_000,
    fileParallelism: false,
  },
});
