"""The body of ``POST /agents/{name}/ag-ui``: AG-UI 1.0's ``RunAgentInput``.

The server owns the memory (SPEC 10): of ``messages`` only the last two are parsed. The
last one is the turn when it is a user message the server does not have yet; the one
before it (or the last, when there is no new turn) is the client's tail, which tells
whether the client's copy of the conversation is in step with the server (see
`agentkeel.bindings.agui.sync`). Everything else is the client's copy and is never
validated or trusted, nor decoded into Python objects (`agentkeel.bindings.agui.body`),
so a long thread costs no more objects to read than a short one.
``resume`` answers the interrupt the previous run ended with. ``tools`` (frontend
tools), ``context``, ``state`` and ``forwardedProps`` are accepted and ignored: the
agent's tools, instructions and state live on the server (docs/bindings/ag-ui.md).
"""

from __future__ import annotations

from typing import Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, JsonValue, ValidationError

from agentkeel.errors import InvalidRequestError

__all__ = ["InputMessage", "ResumeEntry", "RunAgentInput", "parse_run_input"]


class _Open(BaseModel):
    model_config = ConfigDict(
        extra="ignore", frozen=True, hide_input_in_errors=True, populate_by_name=True
    )


class _Part(_Open):
    type: str
    text: str | None = None


class InputMessage(_Open):
    """One of the last two messages of the input (the others are never parsed)."""

    id: str = Field(min_length=1)
    role: str
    content: str | list[_Part] | None = None

    def text(self) -> str:
        """The text of a user message; InvalidRequestError for media parts."""
        if self.content is None or isinstance(self.content, str):
            return self.content or ""
        pieces: list[str] = []
        for part in self.content:
            if part.type != "text" or part.text is None:
                raise InvalidRequestError(f"this agent takes text parts, not {part.type!r}")
            pieces.append(part.text)
        return "".join(pieces)


class ResumeEntry(_Open):
    """An answer to one interrupt of the previous run."""

    interrupt_id: str = Field(alias="interruptId", min_length=1)
    status: Literal["resolved", "cancelled"]
    payload: JsonValue = None

    def decision(self) -> JsonValue:
        """The native decision: ``true``/``false`` approve or reject, objects pass as sent."""
        if isinstance(self.payload, bool):
            return {"approved": self.payload}
        return self.payload


class RunAgentInput(_Open):
    """What the binding reads of a run's input."""

    thread_id: str = Field(alias="threadId", min_length=1)
    run_id: str = Field(alias="runId", min_length=1)
    messages: list[InputMessage] = []
    """After `parse_run_input`: the last two messages sent, at most."""
    resume: list[ResumeEntry] | None = None

    @property
    def last_user(self) -> InputMessage | None:
        """The last message when it is the user's (the candidate new turn)."""
        if self.messages and self.messages[-1].role == "user":
            return self.messages[-1]
        return None

    @property
    def tail(self) -> InputMessage | None:
        """The last message of the client's copy before the new turn (a resume has none)."""
        if self.last_user is None or self.resume is not None:
            return self.messages[-1] if self.messages else None
        return self.messages[-2] if len(self.messages) > 1 else None


_Model = TypeVar("_Model", bound=BaseModel)


def _validated(model: type[_Model], value: object, where: tuple[str | int, ...]) -> _Model:
    """`value` as `model`; InvalidRequestError names the first offending field."""
    try:
        return model.model_validate(value)
    except ValidationError as exc:
        first = exc.errors(include_url=False, include_input=False)[0]
        loc = ".".join(str(part) for part in (*where, *first["loc"]))
        raise InvalidRequestError(f"{loc}: {first['msg']}" if loc else first["msg"]) from None


def parse_run_input(body: object) -> RunAgentInput:
    """Validate a body and its last two messages; InvalidRequestError names the first offence.

    The message before the last is only a hint (the client's tail): when it is not a
    message, it is dropped rather than refused, as a client's copy may hold kinds of
    message this binding does not know.
    """
    if not isinstance(body, dict):
        raise InvalidRequestError("the request body must be a RunAgentInput JSON object")
    sent = body.get("messages", [])
    if not isinstance(sent, (list, tuple)):  # a tuple: `decode_run_input`'s placeholders
        raise InvalidRequestError("messages: Input should be a valid list")
    parsed = _validated(RunAgentInput, {**body, "messages": []}, ())
    tail: list[InputMessage] = []
    if len(sent) > 1:
        try:
            tail.append(InputMessage.model_validate(sent[-2]))
        except ValidationError:
            pass
    if sent:
        tail.append(_validated(InputMessage, sent[-1], ("messages", len(sent) - 1)))
    return parsed.model_copy(update={"messages": tail})
