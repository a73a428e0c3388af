import { defineConfig } from "vitest/config";

// Unit and integration tests, co-located with the code (src/**/*.test.ts[x]). The hook's
// tests choose jsdom with a `@vitest-environment` comment; everything else runs in node.
export default defineConfig({
  test: {
    include: ["src/**/*.test.{ts,tsx}"],
    environment: "node",
    testTimeout: 20_000,
    hookTimeout: 60_000,
  },
});
