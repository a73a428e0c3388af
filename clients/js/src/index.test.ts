import { describe, expect, it } from "vitest";

import * as root from "./index.js";
import * as react from "./react/index.js";

// The public surface, pinned: a new export is a decision, documented in docs/api.
describe("the package's exports", () => {
  it('"agentkeel" exports the headless client, the store, the decoder and the wire helpers', () => {
    expect(Object.keys(root).sort()).toEqual([
      "AgentChat",
      "AgentClient",
      "AgentError",
      "AgentStore",
      "ContextExistsError",
      "MessageNotFoundError",
      "NoActiveRunError",
      "RUN_EVENT_TYPES",
      "SSEDecoder",
      "applyAction",
      "applyFrame",
      "decodeSSE",
      "initialView",
      "isDoneFrame",
      "listAgents",
      "parseStreamFrame",
      "toSendResult",
    ]);
  });

  it('"agentkeel/react" exports useAgent only', () => {
    expect(Object.keys(react)).toEqual(["useAgent"]);
  });
});
