"""An MCP server's question to the user (``elicitation/create``), as an `input` interrupt.

While a call waits for a person, the server's request is held open on the live
connection: the run suspends with an ``input`` interrupt whose prompt is the server's
message (and the fields it asks for), and the decision that resumes the run is the
answer the server gets. A restart loses the server's request (it lived in that process
and that connection), so a decision that arrives afterwards cannot be delivered: the
call ends with an error result saying so, and the model may call the tool again.

Answers: a JSON object is the form's content (``accept``); ``{"action": "decline"}`` or
``{"action": "cancel"}`` say no; ``null`` declines; a string or number answers a form
that asks for one field.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import anyio
import mcp_types as types
import pydantic

from agentkeel.interrupts import InterruptRequested, interrupt
from agentkeel.messages import JSONValue

__all__ = ["NO_ANSWER", "Elicitation", "elicit_result", "given_answer"]


@dataclass(eq=False, slots=True)
class Elicitation:
    """One pending question and the answer it waits for."""

    message: str
    schema: dict[str, object]
    _answered: anyio.Event = field(default_factory=anyio.Event)
    _result: types.ElicitResult | None = None

    @classmethod
    def from_params(cls, params: types.ElicitRequestParams) -> Elicitation:
        """The question of a form-mode request."""
        schema: object = getattr(params, "requested_schema", None)
        if isinstance(schema, pydantic.BaseModel):
            schema = schema.model_dump(by_alias=True, exclude_none=True)
        return cls(message=params.message, schema=dict(schema) if isinstance(schema, dict) else {})

    @property
    def fields(self) -> list[str]:
        """The names of the fields the form asks for."""
        properties = self.schema.get("properties")
        return list(properties) if isinstance(properties, dict) else []

    @property
    def prompt(self) -> str:
        """What the person is shown: the server's message and the fields it wants."""
        if not self.fields:
            return self.message
        return f"{self.message} (fields: {', '.join(self.fields)})"

    def give(self, value: JSONValue) -> None:
        """Answer the question (the decision that resumed the run)."""
        if not self._answered.is_set():
            self._result = elicit_result(value, self.fields)
            self._answered.set()

    def abandon(self) -> None:
        """Nobody will answer (the call ended or was cancelled): the server hears cancel."""
        if not self._answered.is_set():
            self._result = types.ElicitResult(action="cancel")
            self._answered.set()

    async def answer(self) -> types.ElicitResult:
        """Wait for `give` or `abandon`."""
        await self._answered.wait()
        return self._result or types.ElicitResult(action="cancel")


def elicit_result(value: JSONValue, fields: list[str]) -> types.ElicitResult:
    """Turn a person's answer into the result the server gets (see the module docs)."""
    if value is None:
        return types.ElicitResult(action="decline")
    if isinstance(value, dict):
        action = value.get("action")
        if action in ("decline", "cancel") and set(value) <= {"action"}:
            return types.ElicitResult(action="decline" if action == "decline" else "cancel")
        content = value.get("content") if action == "accept" else value
        if isinstance(content, dict):
            return types.ElicitResult(action="accept", content=_form(content))
    if isinstance(value, str | int | float | bool) and len(fields) == 1:
        return types.ElicitResult(action="accept", content={fields[0]: value})
    return types.ElicitResult(action="decline")


def _form(content: dict[str, JSONValue]) -> dict[str, str | int | float | bool | list[str] | None]:
    form: dict[str, str | int | float | bool | list[str] | None] = {}
    for key, item in content.items():
        if item is None or isinstance(item, str | int | float | bool):
            form[key] = item
        elif isinstance(item, list) and all(isinstance(entry, str) for entry in item):
            form[key] = [str(entry) for entry in item]
        else:
            form[key] = json.dumps(item)
    return form


NO_ANSWER = object()
"""What `given_answer` returns when the person has not answered (yet)."""


def given_answer(index: int) -> object:
    """The person's answer number `index` for this tool call, or `NO_ANSWER`."""
    value: object = NO_ANSWER
    try:
        for _ in range(index + 1):
            value = interrupt("")
    except InterruptRequested:
        return NO_ANSWER
    except RuntimeError:  # called outside an agent run: nobody to ask
        return NO_ANSWER
    return value
