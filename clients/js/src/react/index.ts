/**
 * agentkeel/react: the `useAgent` hook.
 *
 * A thin binding of AgentChat (from `agentkeel`) with `useSyncExternalStore`; all the
 * protocol logic lives in the headless package.
 */

export { type UseAgentOptions, type UseAgentResult, useAgent } from "./use-agent.js";

