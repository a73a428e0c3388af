"""Judging a model's final answer against an agent's output type, retries included.

The run loop hands each answer here: the final-answer tool's input when the model
called it, else the message's text. An invalid answer goes back to the model with its
validation errors (as the tool's error result, or as a user message) until the retries
are spent; then the run fails with ``output_invalid``. Either way every tool call of the
message gets a result, so the history stays valid: calls beside a final answer are not
run.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from agentkeel.messages import Message, Part, ToolCallPart, ToolResultPart
from agentkeel.models.base import FINAL_ANSWER_TOOL
from agentkeel.output import OutputParseError, OutputType
from agentkeel.result import ErrorInfo

__all__ = ["AnswerChecker", "Verdict"]

_ACCEPTED = "Final answer received."
_NOT_RUN = "not run: the final answer was given in the same message"


@dataclass(frozen=True, slots=True, kw_only=True)
class Verdict:
    """What became of one answer."""

    messages: tuple[Message, ...] = ()
    """Messages the run adds to its history (tool results, or the errors for the model)."""
    accepted: bool = False
    value: Any = None
    """The validated output, when `accepted`."""
    text: str = ""
    """The answer as the model gave it (kept in the run record, also when it failed)."""
    error: ErrorInfo | None = None
    """Set when the retries are spent: the run fails with it."""


class AnswerChecker:
    """Validates one run's answers; counts the failures against `retries`."""

    def __init__(self, output: OutputType, retries: int) -> None:
        self.output = output
        self.retries = retries
        self.failures = 0

    def check(
        self, message: Message, answer: ToolCallPart | None, raw: str, problem: str | None
    ) -> Verdict:
        """Judge `message`'s answer: `answer` is its final-answer call, if it made one.

        Args:
            message: The model's message.
            answer: The final-answer tool call, or None for an answer in text.
            raw: The answer as the model wrote it (the call's arguments, or the text).
            problem: Why the call's arguments could not be read as JSON, if they could not.
        """
        try:
            if problem is not None:
                raise OutputParseError(problem)
            if answer is None:
                value = self.output.parse_text(raw)
            else:
                value = self.output.parse_object(answer.input)
        except OutputParseError as exc:
            return self._refuse(message, answer, raw, exc.errors)
        results = () if answer is None else (_results(message, answer, _ACCEPTED, "success"),)
        return Verdict(messages=results, accepted=True, value=value, text=raw)

    def _refuse(
        self, message: Message, answer: ToolCallPart | None, raw: str, errors: str
    ) -> Verdict:
        self.failures += 1
        failed = self.failures > self.retries
        how = (
            "Correct it and give the whole answer again."
            if answer is not None
            else "Answer again with only the corrected JSON, or by calling the "
            f"{FINAL_ANSWER_TOOL} tool if it is offered."
        )
        feedback = f"Your answer does not match the required output:\n{errors}\n{how}"
        if answer is not None:
            messages: tuple[Message, ...] = (_results(message, answer, feedback, "error"),)
        else:
            messages = () if failed else (Message.user(feedback),)
        if not failed:
            return Verdict(messages=messages, text=raw)
        tries = self.failures
        error = ErrorInfo(
            code="output_invalid",
            message="the model's answer did not match the output type after "
            f"{tries} attempt{'s' if tries > 1 else ''}",
        )
        return Verdict(messages=messages, text=raw, error=error)


def _results(
    message: Message, answer: ToolCallPart, content: str, status: Literal["success", "error"]
) -> Message:
    """A result for every call of `message`: `content` for the answer, "not run" for others."""
    parts: list[Part] = []
    for call in message.tool_calls:
        if call.id == answer.id:
            parts.append(
                ToolResultPart(call_id=call.id, name=call.name, content=content, status=status)
            )
        else:
            parts.append(
                ToolResultPart(call_id=call.id, name=call.name, content=_NOT_RUN, status="error")
            )
    return Message(role="user", parts=tuple(parts))
