"""Hook events: typed records handed to hook callbacks at each point of a run.

Each class is frozen except for the fields it lists in `writable`: a hook may replace
those (for example a before-tool hook may change the input or cancel the call), and
setting any other field raises AttributeError. Hook events are a separate family from
the run events of `agentkeel.events`: these never reach the wire.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import ClassVar

from agentkeel.context import RunContext
from agentkeel.messages import JSONObject, JSONValue, Message
from agentkeel.models.base import ModelRequest
from agentkeel.result import AgentResult, Usage

__all__ = [
    "AfterModelCallEvent",
    "AfterRunEvent",
    "AfterToolCallEvent",
    "BeforeModelCallEvent",
    "BeforeRunEvent",
    "BeforeToolCallEvent",
    "HookEvent",
    "MessageAddedEvent",
]


@dataclass(kw_only=True, eq=False)
class HookEvent:
    """Base of every hook event: the run's context and the list of writable fields."""

    writable: ClassVar[frozenset[str]] = frozenset()
    after: ClassVar[bool] = False
    """After-events run their callbacks in reverse registration order."""
    context: RunContext

    def __setattr__(self, name: str, value: object) -> None:
        if name in self.__dict__ and name not in self.writable:
            raise AttributeError(
                f"{type(self).__name__}.{name} is read-only; writable: {sorted(self.writable)}"
            )
        super().__setattr__(name, value)


@dataclass(kw_only=True, eq=False)
class BeforeRunEvent(HookEvent):
    """A run starts, or a suspended run resumes (`resumed`; possibly in a new process).

    A resumed run starts with an empty InvocationState: hooks that keep per-run objects
    there rebuild them here.
    """

    prompt: str | None
    messages: Sequence[Message]
    resumed: bool = False


@dataclass(kw_only=True, eq=False)
class AfterRunEvent(HookEvent):
    """A run ended (completed, suspended, failed or cancelled)."""

    after = True
    result: AgentResult


@dataclass(kw_only=True, eq=False)
class BeforeModelCallEvent(HookEvent):
    """The model is about to be called; a hook may replace the request."""

    writable = frozenset({"request"})
    request: ModelRequest


@dataclass(kw_only=True, eq=False)
class AfterModelCallEvent(HookEvent):
    """The model answered (after agent middleware ran)."""

    after = True
    message: Message
    stop_reason: str
    usage: Usage = field(default_factory=Usage)
    """What this one call used."""


@dataclass(kw_only=True, eq=False)
class BeforeToolCallEvent(HookEvent):
    """A tool is about to run; a hook may replace `tool_input` or set `cancel` to a reason."""

    writable = frozenset({"tool_input", "cancel"})
    call_id: str
    tool_name: str
    tool_input: JSONObject
    cancel: str | None = None


@dataclass(kw_only=True, eq=False)
class AfterToolCallEvent(HookEvent):
    """A tool ended; a hook may replace `output` (what the model will see)."""

    after = True
    writable = frozenset({"output"})
    call_id: str
    tool_name: str
    tool_input: JSONObject
    output: JSONValue
    status: str


@dataclass(kw_only=True, eq=False)
class MessageAddedEvent(HookEvent):
    """A message joined the run's conversation (prompt, model answer, tool results)."""

    message: Message
