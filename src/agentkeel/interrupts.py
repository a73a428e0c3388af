"""Human-in-the-loop: interrupts, the decisions that answer them, and `interrupt()`.

A run suspends when a tool needs an approval or when a tool calls `interrupt(prompt)`
to ask a person. Each interrupt has an unguessable id bound to its tool call (name and
input), so a decision can only release the call that was shown to the human.

An approval's prompt is what the person decides on, so it names the tool and shows what
the call will do (`approval_prompt`): the tool's own `describe` text, or its input as
JSON cut to a readable length, with the inputs the tool marks `secret` hidden.

Inside a tool, `interrupt()` is re-entrant in the LangGraph sense: the first execution
raises a suspension; on resume the tool runs again from the top and the same call to
`interrupt()` returns the person's answer. Tools that call it should therefore do
their side effects after it.
"""

from __future__ import annotations

import json
import logging
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, TypeAlias

from agentkeel.errors import InvalidRequestError
from agentkeel.messages import JSONObject, JSONValue

if TYPE_CHECKING:
    from agentkeel.tools.decorator import Tool

__all__ = [
    "Approve",
    "CancelRun",
    "Decision",
    "InputAnswer",
    "Interrupt",
    "InterruptKind",
    "Reject",
    "approval_prompt",
    "check_decision",
    "decision_from_json",
    "interrupt",
    "shown_input",
]

logger = logging.getLogger(__name__)

InterruptKind = Literal["approval", "input"]

SECRET_MASK = "[secret]"
"""What an approval prompt shows in place of a secret input."""
_MAX_INPUT_CHARS = 300
_MAX_DESCRIBE_CHARS = 500


@dataclass(frozen=True, slots=True, kw_only=True)
class Interrupt:
    """A pending question to a human, bound to one tool call."""

    id: str
    kind: InterruptKind
    call_id: str
    tool: str
    tool_input: JSONObject = field(default_factory=dict)
    prompt: str | None = None

    def to_json(self) -> JSONObject:
        """Encode for a checkpoint."""
        return {
            "id": self.id,
            "kind": self.kind,
            "call_id": self.call_id,
            "tool": self.tool,
            "tool_input": self.tool_input,
            "prompt": self.prompt,
        }

    @classmethod
    def from_json(cls, data: JSONObject) -> Interrupt:
        """Decode from a checkpoint."""
        kind: InterruptKind
        if data["kind"] == "approval":
            kind = "approval"
        elif data["kind"] == "input":
            kind = "input"
        else:
            raise ValueError(f"unknown interrupt kind {data['kind']!r}")
        prompt = data.get("prompt")
        tool_input = data.get("tool_input") or {}
        if not isinstance(tool_input, dict):
            raise ValueError("interrupt tool_input must be an object")
        return cls(
            id=str(data["id"]),
            kind=kind,
            call_id=str(data["call_id"]),
            tool=str(data["tool"]),
            tool_input=tool_input,
            prompt=None if prompt is None else str(prompt),
        )


@dataclass(frozen=True, slots=True)
class Approve:
    """Run the tool call that was waiting for approval."""


@dataclass(frozen=True, slots=True)
class Reject:
    """Do not run the tool; the model gets an error result carrying `reason`."""

    reason: str = "rejected by the user"


@dataclass(frozen=True, slots=True)
class InputAnswer:
    """The person's answer to `interrupt(prompt)`; returned by that call on resume."""

    value: JSONValue


@dataclass(frozen=True, slots=True)
class CancelRun:
    """Abandon the suspended run; the history keeps the turn with an error result."""


Decision: TypeAlias = Approve | Reject | InputAnswer | CancelRun


def decision_from_json(kind: InterruptKind, data: JSONValue) -> Decision:
    """Turn a wire decision into a typed one for an interrupt of `kind`.

    Approvals take ``{"approved": true}`` or ``{"approved": false, "reason": "..."}``;
    input interrupts take any JSON value (usually the answer text). ``{"cancel": true}``
    cancels either.
    """
    if isinstance(data, dict) and data.get("cancel") is True:
        return CancelRun()
    if kind == "input":
        return InputAnswer(data)
    if not isinstance(data, dict) or not isinstance(data.get("approved"), bool):
        raise InvalidRequestError(
            'an approval decision must be {"approved": true} or '
            '{"approved": false, "reason": "..."}'
        )
    if data["approved"]:
        return Approve()
    reason = data.get("reason")
    if reason is not None and not isinstance(reason, str):
        raise InvalidRequestError("the reason of a rejection must be a string")
    return Reject(reason or "rejected by the user")


def shown_input(tool_input: JSONObject, tool: Tool | None) -> JSONObject:
    """`tool_input` as a person may see it: the inputs the tool marks secret masked."""
    secret = tool.secret if tool is not None else frozenset()
    return {key: SECRET_MASK if key in secret else value for key, value in tool_input.items()}


def check_decision(interrupt: Interrupt, decision: Decision) -> None:
    """Refuse a decision that cannot answer `interrupt` (before anything resumes).

    Raises:
        InvalidRequestError: An approval answered with input, or the other way round.
    """
    if isinstance(decision, CancelRun):
        return
    answers = Approve | Reject if interrupt.kind == "approval" else InputAnswer
    if not isinstance(decision, answers):
        raise InvalidRequestError(
            f"interrupt {interrupt.id} is an {interrupt.kind} interrupt; "
            f"{type(decision).__name__} does not answer it"
        )


def approval_prompt(name: str, tool_input: JSONObject, tool: Tool | None = None) -> str:
    """What the person approving a call of `name` is shown: the tool and what it will do.

    ``Run delete_file: Delete notes.txt`` when the tool has a `describe`, otherwise
    ``Run delete_file with {"path": "notes.txt"}`` (cut to a readable length). Inputs the
    tool marks secret show as ``[secret]``, also to `describe`, so no prompt, frame or
    log line of a prompt can carry them. A `describe` that fails or returns no text
    falls back to the JSON form (and is logged, without the input).
    """
    shown = shown_input(tool_input, tool)
    describe = tool.describe if tool is not None else None
    if describe is not None:
        try:
            text = describe(dict(shown))
        except Exception as exc:
            logger.warning(
                "tool=<%s> | describe raised %s; showing the input", name, type(exc).__name__
            )
        else:
            if isinstance(text, str) and text.strip():
                return f"Run {name}: {_cut(' '.join(text.split()), _MAX_DESCRIBE_CHARS)}"
            logger.warning("tool=<%s> | describe returned no text; showing the input", name)
    if not shown:
        return f"Run {name} (no input)"
    encoded = json.dumps(shown, ensure_ascii=False, default=str)
    return f"Run {name} with {_cut(encoded, _MAX_INPUT_CHARS)}"


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


class InterruptRequested(Exception):
    """Raised by `interrupt()` to suspend the current tool call; caught by the executor."""

    def __init__(self, prompt: str) -> None:
        super().__init__(prompt)
        self.prompt = prompt


@dataclass(slots=True)
class _InterruptScope:
    answers: list[JSONValue]
    used: int = 0


_scope: ContextVar[_InterruptScope | None] = ContextVar("agentkeel_interrupt_scope", default=None)


def interrupt(prompt: str) -> JSONValue:
    """Ask a person for input from inside a tool.

    The first time, this suspends the run (status ``suspended``, an ``input`` interrupt
    carrying `prompt`). When the run is resumed with an answer, the tool runs again and
    this call returns that answer. A tool may call it several times; each call gets
    its own interrupt in turn.
    """
    scope = _scope.get()
    if scope is None:
        raise RuntimeError("interrupt() can only be called inside a tool run by an Agent")
    if scope.used < len(scope.answers):
        answer = scope.answers[scope.used]
        scope.used += 1
        return answer
    raise InterruptRequested(prompt)


def enter_interrupt_scope(answers: list[JSONValue]) -> object:
    """Bind the answers already given for the current tool call; returns a reset token."""
    return _scope.set(_InterruptScope(answers=list(answers)))


def exit_interrupt_scope(token: object) -> None:
    """Undo `enter_interrupt_scope`."""
    _scope.reset(token)  # type: ignore[arg-type]
