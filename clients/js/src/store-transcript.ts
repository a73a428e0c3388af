/**
 * The transcript in the reducer: how transcript messages meet the turns a view shows.
 *
 * The transcript (SPEC 3) holds what the agent remembers, so it has no decisions
 * ("Approved delete_file") and no detail of a run (thinking, tool activity). A run the
 * view already shows therefore keeps its turns exactly as the page showed them live and
 * only adopts the transcript's `msg-` ids (what `edit` and `regenerate` take); the turns
 * of a run the view does not show (a reload, another device) are built from the
 * transcript. A turn the transcript does not hold (a cancelled or failed run) stays where
 * it was. Pure, like the rest of the reducer.
 */

import type { AgentView, AssistantTurn, Turn, UserTurn } from "./store.js";
import type { TranscriptMessage } from "./types.js";

/** An assistant turn waiting for its first frame (or for the transcript to fill it). */
export function emptyAssistant(id: string, runId: string | undefined): AssistantTurn {
  return {
    id,
    role: "assistant",
    runId,
    text: "",
    thinking: "",
    activity: [],
    status: "streaming",
    agent: undefined,
    toolCalls: [],
    messageId: undefined,
    messageIds: [],
  };
}

/** The id of the transcript message a turn ends with, if it holds one. */
export function lastIdOf(turn: Turn | undefined): string | undefined {
  return turn?.role === "assistant" ? turn.messageIds.at(-1) : turn?.messageId;
}

/** The transcript messages of one run (a message without a run is a group of its own). */
interface RunGroup {
  readonly runId: string | undefined;
  readonly users: TranscriptMessage[];
  readonly assistants: TranscriptMessage[];
}

/** The turns the view shows of one run: the sent message, then its answers and decisions. */
interface Shown {
  sent: UserTurn | undefined;
  readonly turns: Turn[];
}

/** A slot of the view: a turn kept as it is, or the place where a run the transcript holds is shown. */
type Slot = { readonly turn: Turn } | { readonly runId: string };

/**
 * The view with the turns from the message `after` on (all of them when absent) merged
 * with transcript messages; the same view when `after` is not in it (a stale answer) or
 * nothing new came.
 */
export function applyTranscript(
  view: AgentView,
  messages: readonly TranscriptMessage[],
  after: string | undefined,
): AgentView {
  let keep = 0;
  if (after !== undefined) {
    keep = view.turns.findIndex((t) => lastIdOf(t) === after) + 1;
    if (keep === 0 || messages.length === 0) return view;
  }
  const groups = runGroups(messages);
  const held = new Set(groups.map((g) => g.runId).filter((r): r is string => r !== undefined));
  const { slots, shown } = slotsOf(view.turns.slice(keep), held);
  const turns: Turn[] = [...view.turns.slice(0, keep)];
  let next = 0;
  const flushUntil = (runId: string | undefined): void => {
    while (next < slots.length) {
      const slot = slots[next];
      next += 1;
      if (slot === undefined) continue;
      if ("turn" in slot) turns.push(slot.turn);
      else if (slot.runId === runId) return;
    }
  };
  for (const group of groups) {
    const live = group.runId === undefined ? undefined : shown.get(group.runId);
    if (live === undefined) {
      turns.push(...built(group));
      continue;
    }
    flushUntil(group.runId);
    turns.push(...adopted(group, live));
  }
  flushUntil(undefined);
  const latest = [...turns].reverse().find((t): t is AssistantTurn => t.role === "assistant");
  return { ...view, turns, thinking: latest?.thinking ?? "", activity: latest?.activity ?? [] };
}

function runGroups(messages: readonly TranscriptMessage[]): RunGroup[] {
  const groups: RunGroup[] = [];
  const byRun = new Map<string, RunGroup>();
  for (const message of messages) {
    let group = message.runId === undefined ? undefined : byRun.get(message.runId);
    if (group === undefined) {
      group = { runId: message.runId, users: [], assistants: [] };
      groups.push(group);
      if (message.runId !== undefined) byRun.set(message.runId, group);
    }
    (message.role === "user" ? group.users : group.assistants).push(message);
  }
  return groups;
}

/**
 * The view's turns in order, with the turns of each run the transcript holds gathered
 * into one slot: the user turn just before its first answer is the message that started
 * it, a user turn between two of its answers is a decision. A turn that carries ids the
 * transcript no longer confirms (it came from an earlier read) is dropped.
 */
function slotsOf(turns: readonly Turn[], held: ReadonlySet<string>): { slots: Slot[]; shown: Map<string, Shown> } {
  const slots: Slot[] = [];
  const shown = new Map<string, Shown>();
  let waiting: UserTurn | undefined;
  let current: Shown | undefined;
  const release = (): void => {
    if (waiting !== undefined && waiting.messageId === undefined) slots.push({ turn: waiting });
    waiting = undefined;
  };
  for (const turn of turns) {
    if (turn.role === "user") {
      if (current !== undefined && waiting === undefined && turn.messageId === undefined) {
        waiting = turn; // a decision, or the next message: the next turn tells which
      } else {
        release();
        current = undefined;
        waiting = turn;
      }
      continue;
    }
    const runId = turn.runId;
    if (runId === undefined || !held.has(runId)) {
      release();
      current = undefined;
      if (turn.messageIds.length === 0) slots.push({ turn });
      continue;
    }
    let run = shown.get(runId);
    if (run === undefined) {
      run = { sent: undefined, turns: [] };
      shown.set(runId, run);
      slots.push({ runId });
    }
    if (waiting !== undefined) {
      if (current === run) run.turns.push(waiting);
      else if (run.sent === undefined && run.turns.length === 0) run.sent = waiting;
      else if (waiting.messageId === undefined) slots.push({ turn: waiting });
      waiting = undefined;
    }
    run.turns.push(turn);
    current = run;
  }
  release();
  return { slots, shown };
}

/** The turns of a run the view shows, as shown, with the transcript's ids. */
function adopted(group: RunGroup, live: Shown): Turn[] {
  const turns: Turn[] = [];
  const [first, ...others] = group.users;
  if (first === undefined) {
    if (live.sent !== undefined && live.sent.messageId === undefined) turns.push(live.sent);
  } else if (live.sent === undefined) {
    turns.push(userTurn(first)); // followed without being sent here (attach): show what was asked
  } else {
    turns.push({ ...live.sent, messageId: first.id });
  }
  turns.push(...others.map(userTurn));
  const answers = live.turns.filter((t): t is AssistantTurn => t.role === "assistant");
  const ids = group.assistants.map((m) => m.id);
  let given = 0;
  for (const turn of live.turns) {
    if (turn.role === "user") {
      turns.push(turn);
      continue;
    }
    // each answer before the last takes one message; the last takes the rest
    const take = turn === answers.at(-1) ? ids.length - given : Math.min(1, ids.length - given);
    const mine = ids.slice(given, given + take);
    given += take;
    turns.push({ ...turn, messageId: mine[0], messageIds: mine });
  }
  return turns;
}

/** The turns of a run the view does not show: its messages, one assistant turn for its answers. */
function built(group: RunGroup): Turn[] {
  const turns: Turn[] = group.users.map(userTurn);
  const [first] = group.assistants;
  if (first === undefined) return turns;
  turns.push({
    ...emptyAssistant(first.id, group.runId),
    text: group.assistants.map((m) => m.text).filter((t) => t !== "").join("\n\n"),
    status: "completed",
    agent: group.assistants.reduce<string | undefined>((agent, m) => m.agent ?? agent, undefined),
    toolCalls: group.assistants.flatMap((m) => m.toolCalls ?? []),
    messageId: first.id,
    messageIds: group.assistants.map((m) => m.id),
  });
  return turns;
}

function userTurn(message: TranscriptMessage): UserTurn {
  return { id: message.id, role: "user", text: message.text, messageId: message.id };
}
