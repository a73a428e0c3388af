"""What a run returns: AgentResult and its records."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

from agentkeel.interrupts import Interrupt
from agentkeel.messages import JSONObject, JSONValue, Message

__all__ = [
    "RUN_STATUSES",
    "AgentResult",
    "ErrorInfo",
    "RunResultFront",
    "RunStatus",
    "ToolCallRecord",
    "ToolCallStatus",
    "Usage",
    "stop_reason",
]

RunStatus = Literal["completed", "suspended", "failed", "cancelled"]
ToolCallStatus = Literal["success", "error", "rejected", "cancelled", "pending"]
RUN_STATUSES: dict[str, RunStatus] = {
    "completed": "completed",
    "suspended": "suspended",
    "failed": "failed",
    "cancelled": "cancelled",
}
"""Decode a stored run status into the Literal type (None for an unknown one)."""
_T = TypeVar("_T")
_TOOL_CALL_STATUSES: dict[str, ToolCallStatus] = {
    "success": "success",
    "error": "error",
    "rejected": "rejected",
    "cancelled": "cancelled",
    "pending": "pending",
}


@dataclass(frozen=True, slots=True, kw_only=True)
class Usage:
    """Token counts reported by the model provider, summed over a run's model calls.

    `cached_tokens` are the part of `input_tokens` the provider read from its prompt
    cache and `reasoning_tokens` the part of `output_tokens` spent thinking, where the
    provider reports them (0 where it does not): they are subsets, never added on top.
    """

    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    reasoning_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cached_tokens=self.cached_tokens + other.cached_tokens,
            reasoning_tokens=self.reasoning_tokens + other.reasoning_tokens,
        )

    @property
    def total_tokens(self) -> int:
        """Input plus output tokens."""
        return self.input_tokens + self.output_tokens

    def to_json(self) -> JSONObject:
        """Encode for a run record (the cached and reasoning counts only when reported)."""
        data: JSONObject = {"input_tokens": self.input_tokens, "output_tokens": self.output_tokens}
        if self.cached_tokens:
            data["cached_tokens"] = self.cached_tokens
        if self.reasoning_tokens:
            data["reasoning_tokens"] = self.reasoning_tokens
        return data

    @classmethod
    def from_json(cls, data: JSONValue) -> Usage:
        """Decode `to_json`'s output; a missing or malformed count reads as 0."""
        if not isinstance(data, dict):
            return cls()

        def count(name: str) -> int:
            value = data.get(name)
            return value if isinstance(value, int) and not isinstance(value, bool) else 0

        return cls(
            input_tokens=count("input_tokens"),
            output_tokens=count("output_tokens"),
            cached_tokens=count("cached_tokens"),
            reasoning_tokens=count("reasoning_tokens"),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallRecord:
    """One tool call of a run, with its input and output (server-side only)."""

    id: str
    name: str
    input: JSONObject
    output: JSONValue = None
    status: ToolCallStatus = "success"
    duration_ms: float = 0.0

    @property
    def ran(self) -> bool:
        """Whether the tool actually executed (a rejected or pending call did not)."""
        return self.status in ("success", "error")

    def to_json(self) -> JSONObject:
        """Encode for a run record or checkpoint."""
        return {
            "id": self.id,
            "name": self.name,
            "input": self.input,
            "output": self.output,
            "status": self.status,
            "duration_ms": self.duration_ms,
        }

    @classmethod
    def from_json(cls, data: JSONObject) -> ToolCallRecord:
        """Decode from a run record or checkpoint."""
        tool_input = data.get("input") or {}
        status = _TOOL_CALL_STATUSES.get(str(data.get("status", "success")))
        duration = data.get("duration_ms", 0.0)
        if not isinstance(tool_input, dict) or status is None:
            raise ValueError("malformed tool call record")
        return cls(
            id=str(data["id"]),
            name=str(data["name"]),
            input=tool_input,
            output=data.get("output"),
            status=status,
            duration_ms=float(duration) if isinstance(duration, int | float) else 0.0,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class ErrorInfo:
    """Why a run failed, in words safe to show a client."""

    code: str
    message: str

    def to_json(self) -> JSONObject:
        """Encode for the wire and run records."""
        return {"code": self.code, "message": self.message}


def stop_reason(status: RunStatus, model_reason: str = "end_turn") -> str:
    """A run's stop reason: the model's when it completed, else the one its status implies."""
    if status == "suspended":
        return "interrupt"
    if status == "cancelled":
        return "cancelled"
    if status == "failed":
        return "error"
    return model_reason


CANCELLED_ERROR = ErrorInfo(code="cancelled", message="the run was cancelled")
"""The error a cancelled run reports, the same for an Agent and a Swarm."""


def run_error(status: RunStatus, failure: ErrorInfo | None) -> ErrorInfo | None:
    """The error a result carries: the failure when it failed, the cancel when cancelled."""
    if status == "failed":
        return failure
    return CANCELLED_ERROR if status == "cancelled" else None


class RunResultFront:
    """What AgentResult and SwarmResult read the same way from their fields.

    Written once so that an agent and a swarm answer on the wire alike (`tool_names`,
    `interrupt`) and make the same run record (`agentkeel.session.run_record`).
    """

    __slots__ = ()
    run_id: str
    status: RunStatus
    text: str
    tool_calls: tuple[ToolCallRecord, ...]
    usage: Usage
    interrupts: tuple[Interrupt, ...]
    error: ErrorInfo | None
    context_id: str | None

    @property
    def interrupt(self) -> Interrupt | None:
        """The interrupt a client should answer next, if the run is suspended."""
        return self.interrupts[0] if self.interrupts else None

    @property
    def tool_names(self) -> list[str]:
        """Names of the tools that ran, in call order (the wire's `toolCalls`)."""
        return [record.name for record in self.tool_calls if record.ran]

    def __str__(self) -> str:
        return self.text


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentResult(RunResultFront):
    """The end of a run (or of the part of it before a suspension)."""

    run_id: str
    """The run's id; a resumed run keeps it."""
    status: RunStatus
    text: str = ""
    """The final completion text of the run."""
    tool_calls: tuple[ToolCallRecord, ...] = ()
    """Every tool call of the run, in call order, with inputs and outputs."""
    stop_reason: str = "end_turn"
    usage: Usage = field(default_factory=Usage)
    messages: tuple[Message, ...] = ()
    """The messages this run added to the history (prompt included)."""
    interrupts: tuple[Interrupt, ...] = ()
    """Pending interrupts when `status` is ``suspended``; the first is `interrupt`."""
    error: ErrorInfo | None = None
    context_id: str | None = None
    agent: str | None = None
    output: Any = None
    """The validated structured answer, for an agent with an `output_type` (else None)."""

    def output_as(self, output_type: type[_T]) -> _T:
        """`output`, checked to be an instance of `output_type` (typed for the caller).

        Raises:
            TypeError: If the run has no output of that type (it failed, or the agent
                has another output type).
        """
        if not isinstance(self.output, output_type):
            raise TypeError(
                f"the run's output is {type(self.output).__name__}, not {output_type.__name__}"
            )
        return self.output
