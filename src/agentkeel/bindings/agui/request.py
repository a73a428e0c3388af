"""The body of ``POST /agents/{name}/ag-ui``: AG-UI 1.0's ``RunAgentInput``.

The server owns the memory (SPEC 10): of ``messages`` only the last one is read, and
only when it is a user message the server does not have yet (it is then the turn);
everything before it is the client's copy of the conversation and never trusted.
``resume`` answers the interrupt the previous run ended with. ``tools`` (frontend
tools), ``context``, ``state`` and ``forwardedProps`` are accepted and ignored: the
agent's tools, instructions and state live on the server (docs/bindings/ag-ui.md).
"""

from __future__ import annotations

from typing import Literal

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
    """One message of the input; only the last one, a user's, is ever read."""

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
    resume: list[ResumeEntry] | None = None

    @property
    def last_user(self) -> InputMessage | None:
        """The last message when it is the user's (the candidate new turn)."""
        if self.messages and self.messages[-1].role == "user":
            return self.messages[-1]
        return None


def parse_run_input(body: object) -> RunAgentInput:
    """Validate a body; InvalidRequestError names the first offending field."""
    if not isinstance(body, dict):
        raise InvalidRequestError("the request body must be a RunAgentInput JSON object")
    try:
        return RunAgentInput.model_validate(body)
    except ValidationError as exc:
        first = exc.errors(include_url=False, include_input=False)[0]
        where = ".".join(str(part) for part in first["loc"])
        raise InvalidRequestError(f"{where}: {first['msg']}" if where else first["msg"]) from None
