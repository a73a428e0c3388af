"""The runtime's own cost per turn at growing history lengths (ScriptedModel, no I/O).

A turn is a user message, one model call streaming a few tokens, and the result. With
the default conversation manager the model is sent the whole history, so building that
request is O(history) by definition. The baseline, measured in the same run, is exactly
that: the manager's `select()` building the request's message tuple (and freeing it).
The runtime's own cost is the turn minus that baseline, and it must not grow with the
history: it prints its ratio between 10,000 and 10 messages.

Then the cost of a typed answer: the same turn, answering the same JSON of a 20-field
pydantic model, with and without `output_type` (validation, and the schema in the
request), measured alternately in the same run; it prints the overhead as a ratio.
"""

from __future__ import annotations

import statistics
import time

import anyio
from pydantic import BaseModel, create_model

from agentkeel import Agent, ScriptedModel
from agentkeel.conversation import KeepAllConversationManager
from agentkeel.messages import Message

SIZES = (10, 1_000, 10_000)
TURNS = 500
FIELDS = 20
Report = create_model(  # type: ignore[call-overload]
    "Report",
    **{f"field_{i}": (str if i % 2 else float, ...) for i in range(FIELDS)},
)
"""A 20-field output model: strings and numbers."""
REPORT_JSON = (
    "{"
    + ", ".join(
        f'"field_{i}": ' + (f'"value number {i}"' if i % 2 else f"{i}.5") for i in range(FIELDS)
    )
    + "}"
)


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


async def typed_turns(turns: int = 4_000) -> tuple[float, float]:
    """Median turn time without and with the output type, turn by turn alternately."""
    models = {typed: ScriptedModel([REPORT_JSON], repeat=True, chunk_size=8) for typed in (0, 1)}
    agents = {
        typed: Agent(model, output_type=Report if typed else None)
        for typed, model in models.items()
    }
    timings: dict[int, list[float]] = {0: [], 1: []}
    for number in range(turns):
        for typed in (number % 2, 1 - number % 2):  # neither always goes first
            agent = agents[typed]
            agent.messages = []
            models[typed].requests.clear()
            started = time.perf_counter()
            result = await agent.invoke_async("report")
            timings[typed].append(time.perf_counter() - started)
            assert isinstance(result.output, BaseModel) == bool(typed)
    return statistics.median(timings[0]), statistics.median(timings[1])


async def main() -> None:
    print(f"{'history':>8} {'turn us':>9} {'select us':>10} {'own us':>8}")
    own: dict[int, float] = {}
    for size in SIZES:
        turn = await turn_cost(size)
        baseline = select_cost(size)
        own[size] = turn - baseline
        print(f"{size:>8} {turn * 1e6:>9.1f} {baseline * 1e6:>10.1f} {own[size] * 1e6:>8.1f}")
    print(f"runtime's own cost per turn, 10,000 vs 10 messages: {own[10_000] / own[10]:.2f}x")
    plain, typed = await typed_turns()
    print(
        f"turn answering a {FIELDS}-field JSON: {plain * 1e6:.1f} us as text, "
        f"{typed * 1e6:.1f} us validated"
    )
    print(f"validation's cost on that turn: {typed / plain:.3f}x ({(typed / plain - 1):+.1%})")


if __name__ == "__main__":
    anyio.run(main)
