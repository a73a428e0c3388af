"""ScriptedModel: a public test double that replays scripted turns.

It implements the real Model interface, streams its text in small deltas and its tool
calls as argument fragments (exercising the same assembly code as a real provider), and
records every request it received, so tests assert on what a model would have seen.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from dataclasses import dataclass, field

import anyio

from agentkeel.errors import ModelBadRequestError, ModelError
from agentkeel.messages import JSONObject
from agentkeel.models.base import (
    Finish,
    ModelChunk,
    ModelRequest,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
)
from agentkeel.result import Usage

__all__ = ["ScriptedModel", "ScriptedToolCall", "ScriptedTurn"]


@dataclass(frozen=True, slots=True)
class ScriptedToolCall:
    """A tool call the scripted model will request."""

    name: str
    input: JSONObject = field(default_factory=dict)
    id: str | None = None
    raw_arguments: str | None = None
    """Send these argument characters verbatim (e.g. invalid JSON) instead of `input`."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ScriptedTurn:
    """One model answer: optional thinking, text and tool calls, or an error."""

    text: str = ""
    thinking: str = ""
    tool_calls: Sequence[ScriptedToolCall] = ()
    error: ModelError | None = None
    """Raised after `error_after` chunks were streamed."""
    error_after: int = 0
    delay: float = 0.0
    """Seconds to wait between chunks (for cancellation and concurrency tests)."""
    usage: Usage = field(default_factory=lambda: Usage(input_tokens=10, output_tokens=5))


TurnSource = ScriptedTurn | str | Callable[[ModelRequest], ScriptedTurn | str]


class ScriptedModel:
    """Replays `turns` in order, one per model call; records `requests`.

    A turn may be a string (plain text), a ScriptedTurn, or a function of the request
    returning either (for answers that depend on what the model was sent). With
    `repeat=True` the script loops forever, which suits benchmarks and servers.
    """

    def __init__(
        self, turns: Iterable[TurnSource], *, chunk_size: int = 4, repeat: bool = False
    ) -> None:
        self._turns = list(turns)
        self._position = 0
        self._chunk_size = max(1, chunk_size)
        self._repeat = repeat
        self.requests: list[ModelRequest] = []

    @property
    def name(self) -> str:
        """Always ``scripted``."""
        return "scripted"

    @property
    def remaining(self) -> int:
        """How many scripted turns have not been used."""
        return len(self._turns) - self._position

    def _next_turn(self, request: ModelRequest) -> ScriptedTurn:
        if self._position >= len(self._turns):
            if not self._repeat or not self._turns:
                raise ModelBadRequestError(
                    f"ScriptedModel has no turn left (it was given {len(self._turns)})"
                )
            self._position = 0
        source = self._turns[self._position]
        self._position += 1
        if callable(source):
            source = source(request)
        return ScriptedTurn(text=source) if isinstance(source, str) else source

    def _pieces(self, text: str) -> list[str]:
        size = self._chunk_size
        return [text[i : i + size] for i in range(0, len(text), size)]

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelChunk]:
        """Stream the next scripted turn."""
        self.requests.append(request)
        turn = self._next_turn(request)
        chunks: list[ModelChunk] = [ThinkingDelta(text=p) for p in self._pieces(turn.thinking)]
        chunks.extend(TextDelta(text=p) for p in self._pieces(turn.text))
        for index, call in enumerate(turn.tool_calls):
            arguments = (
                call.raw_arguments if call.raw_arguments is not None else json.dumps(call.input)
            )
            half = len(arguments) // 2
            chunks.append(
                ToolCallDelta(index=index, id=call.id, name=call.name, arguments=arguments[:half])
            )
            chunks.append(ToolCallDelta(index=index, arguments=arguments[half:]))
        stop = "tool_use" if turn.tool_calls else "end_turn"
        for number, chunk in enumerate(chunks):
            if turn.error is not None and number >= turn.error_after:
                raise turn.error
            if turn.delay:
                await anyio.sleep(turn.delay)
            yield chunk
        if turn.error is not None:
            raise turn.error
        yield Finish(stop_reason=stop, usage=turn.usage)
