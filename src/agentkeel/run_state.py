"""RunState: everything a run needs to continue, in a form a checkpoint can hold.

The run loop works on a RunState; when a run suspends, the agent saves it (as JSON)
in the checkpointer, and `resume` loads it back, possibly in a new process. Only what
is needed to continue is kept: the run's own messages (not the whole history), the
calls of the current step, their finished outcomes and the pending interrupts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import cast

from agentkeel.interrupts import Decision, Interrupt
from agentkeel.messages import (
    JSONObject,
    JSONValue,
    Message,
    ToolCallPart,
    message_from_json,
    message_to_json,
)
from agentkeel.middleware import ToolOutcome
from agentkeel.result import ToolCallRecord, Usage

__all__ = ["PendingCall", "RunState"]


@dataclass(slots=True, kw_only=True)
class PendingCall:
    """A tool call waiting for a human: its interrupt, the answers so far, the decision."""

    call: ToolCallPart
    interrupt: Interrupt
    answers: list[JSONValue] = field(default_factory=list)
    """Answers already given to `interrupt()` inside this call (for re-execution)."""
    started: bool = False
    """Whether a tool_call event was already emitted for this call."""
    decision: Decision | None = None
    """Set by `resume`; never stored (a decision is applied before the next save)."""

    def to_json(self) -> JSONObject:
        """Encode for a checkpoint."""
        return {
            "call": {"id": self.call.id, "name": self.call.name, "input": self.call.input},
            "interrupt": self.interrupt.to_json(),
            "answers": self.answers,
            "started": self.started,
        }

    @classmethod
    def from_json(cls, data: JSONObject) -> PendingCall:
        """Decode from a checkpoint."""
        call = cast(JSONObject, data["call"])
        answers = data.get("answers") or []
        if not isinstance(answers, list):
            raise ValueError("pending call answers must be a list")
        return cls(
            call=ToolCallPart(
                id=str(call["id"]), name=str(call["name"]), input=cast(JSONObject, call["input"])
            ),
            interrupt=Interrupt.from_json(cast(JSONObject, data["interrupt"])),
            answers=answers,
            started=bool(data.get("started")),
        )


@dataclass(slots=True, kw_only=True)
class RunState:
    """The mutable state of one run."""

    run_id: str
    input: JSONValue
    started_at: float
    step: int = 0
    messages: list[Message] = field(default_factory=list)
    """Messages this run added (its prompt first)."""
    records: dict[str, ToolCallRecord] = field(default_factory=dict)
    """Tool call records by call id, in call order."""
    usage: Usage = field(default_factory=Usage)
    step_calls: list[ToolCallPart] = field(default_factory=list)
    """The tool calls of the current step, in the model's order."""
    step_outcomes: dict[str, ToolOutcome] = field(default_factory=dict)
    """Outcomes of the current step's calls that have finished."""
    pending: list[PendingCall] = field(default_factory=list)
    stop_reason: str = "end_turn"
    cut: int | None = None
    """For an edit or a regenerate: how many messages of the history the run keeps (it
    sees only those, and its commit drops the rest); None keeps them all."""

    def ordered_records(self) -> tuple[ToolCallRecord, ...]:
        """The tool call records in the model's call order (not completion order)."""
        order = [call.id for message in self.messages for call in message.tool_calls]
        return tuple(self.records[call_id] for call_id in order if call_id in self.records)

    def to_json(self) -> JSONObject:
        """Encode for a checkpoint (the payload the checkpointer stores)."""
        return {
            "run_id": self.run_id,
            "input": self.input,
            "started_at": self.started_at,
            "step": self.step,
            "messages": [message_to_json(m) for m in self.messages],
            "records": [record.to_json() for record in self.records.values()],
            "usage": self.usage.to_json(),
            "step_calls": [{"id": c.id, "name": c.name, "input": c.input} for c in self.step_calls],
            "step_outcomes": {
                call_id: {"content": o.content, "status": o.status}
                for call_id, o in self.step_outcomes.items()
            },
            "pending": [p.to_json() for p in self.pending],
            "stop_reason": self.stop_reason,
            "cut": self.cut,
        }

    @classmethod
    def from_json(cls, data: JSONObject) -> RunState:
        """Decode a checkpoint payload; raises ValueError/KeyError/TypeError when malformed."""
        usage = cast(JSONObject, data.get("usage") or {})
        outcomes = cast(JSONObject, data.get("step_outcomes") or {})
        records = [
            ToolCallRecord.from_json(cast(JSONObject, r))
            for r in cast(list[JSONValue], data.get("records") or [])
        ]
        started = data["started_at"]
        step = data["step"]
        cut = data.get("cut")
        if not isinstance(started, int | float) or not isinstance(step, int):
            raise ValueError("malformed run state")
        if cut is not None and (not isinstance(cut, int) or isinstance(cut, bool) or cut < 0):
            raise ValueError("malformed run state: cut")
        return cls(
            run_id=str(data["run_id"]),
            input=data.get("input"),
            started_at=float(started),
            step=step,
            messages=[message_from_json(m) for m in cast(list[JSONValue], data["messages"])],
            records={record.id: record for record in records},
            usage=Usage.from_json(usage),
            step_calls=[
                ToolCallPart(
                    id=str(c["id"]), name=str(c["name"]), input=cast(JSONObject, c["input"])
                )
                for c in cast(list[JSONObject], data.get("step_calls") or [])
            ],
            step_outcomes={
                call_id: ToolOutcome(
                    content=cast(JSONObject, o)["content"],
                    status="error" if cast(JSONObject, o).get("status") == "error" else "success",
                )
                for call_id, o in outcomes.items()
            },
            pending=[
                PendingCall.from_json(cast(JSONObject, p))
                for p in cast(list[JSONValue], data.get("pending") or [])
            ],
            stop_reason=str(data.get("stop_reason") or "end_turn"),
            cut=cut,
        )
