"""The runtime's own cost per turn at growing history lengths (ScriptedModel, no I/O).

A turn is a user message, one model call streaming a few tokens, and the result. With
the default conversation manager the model is sent the whole history, so building that
request is O(history) by definition. The baseline, measured in the same run, is exactly
that: the manager's `select()` building the request's message tuple (and freeing it).
The runtime's own cost is the turn minus that baseline, and it must not grow with the
history: the last line prints its ratio between 10,000 and 10 messages.
"""

from __future__ import annotations

import statistics
import time

import anyio

from agentkeel import Agent, ScriptedModel
from agentkeel.conversation import KeepAllConversationManager
from agentkeel.messages import Message

SIZES = (10, 1_000, 10_000)
TURNS = 500


def history(size: int) -> list[Message]:
    return [
        Message.user(f"question {i}") if i % 2 == 0 else Message.assistant(f"answer {i}")
        for i in range(size)
    ]


async def turn_cost(size: int) -> float:
    model = ScriptedModel(["A short answer of a few tokens."], repeat=True, chunk_size=8)
    agent = Agent(model)
    base = history(size)
    timings: list[float] = []
    for _ in range(TURNS):
        agent.messages = list(base)
        model.requests.clear()  # the test double records requests; not part of a turn
        started = time.perf_counter()
        await agent.invoke_async("hello")
        timings.append(time.perf_counter() - started)
    return statistics.median(timings)


def select_cost(size: int) -> float:
    manager = KeepAllConversationManager()
    base = history(size)
    run = [Message.user("hello")]
    timings = []
    for _ in range(TURNS):
        started = time.perf_counter()
        request_messages = manager.select(base, run)
        del request_messages
        timings.append(time.perf_counter() - started)
    return statistics.median(timings)


async def main() -> None:
    print(f"{'history':>8} {'turn us':>9} {'select us':>10} {'own us':>8}")
    own: dict[int, float] = {}
    for size in SIZES:
        turn = await turn_cost(size)
        baseline = select_cost(size)
        own[size] = turn - baseline
        print(f"{size:>8} {turn * 1e6:>9.1f} {baseline * 1e6:>10.1f} {own[size] * 1e6:>8.1f}")
    print(f"runtime's own cost per turn, 10,000 vs 10 messages: {own[10_000] / own[10]:.2f}x")


if __name__ == "__main__":
    anyio.run(main)
