"""The native wire (SPEC 3 and 4): request models and the JSON of results and frames.

This is the one module of the server where camelCase lives: it parses request bodies
into typed values and builds the JSON objects that go out (SendResult, stream frames,
error bodies) from agentkeel's own types. Frames are built as plain dicts rather than
pydantic models because a token frame is built for every delta of every run: a dict
literal costs a fraction of a model dump, and the shapes are pinned by the e2e tests.
"""

from __future__ import annotations

from json.encoder import encode_basestring
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, ValidationError, model_validator

from agentkeel.errors import InvalidRequestError
from agentkeel.events import (
    ErrorEvent,
    InterruptEvent,
    RunEvent,
    StatusEvent,
    StepEvent,
    ThinkingEvent,
    TokenEvent,
    ToolCallEvent,
    ToolResultEvent,
)
from agentkeel.interrupts import Interrupt
from agentkeel.messages import MESSAGE_ID_PATTERN, JSONObject, Message, TextPart
from agentkeel.multiagent import SwarmResult
from agentkeel.output import output_json
from agentkeel.result import Usage
from agentkeel.rewind import Rewind
from agentkeel.server_settings import ConcurrencyPolicy
from agentkeel.serving import ServedResult
from agentkeel.usage import ModelPrice

__all__ = [
    "ForkRequest",
    "ResumeRequest",
    "SendRequest",
    "WireMessage",
    "WirePart",
    "done_frame",
    "error_body",
    "event_frame",
    "failed_done_frame",
    "first_error",
    "interrupt_json",
    "parse_send_request",
    "send_result",
    "token_frame_json",
    "usage_json",
    "without_done",
]


class _Wire(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, hide_input_in_errors=True)


class WirePart(_Wire):
    """One part of a structured message; only text parts are understood."""

    text: str
    kind: str | None = None
    """A2A 0.3 writes ``"kind": "text"``; accepted and ignored."""
    metadata: JsonValue = None


class WireMessage(_Wire):
    """A structured message as A2A writes it: ``{"role": "user", "parts": [{"text": ...}]}``."""

    role: Literal["user"]
    parts: list[WirePart] = Field(min_length=1)
    kind: str | None = None
    message_id: str | None = Field(default=None, alias="messageId")
    metadata: JsonValue = None


class ResumeRequest(_Wire):
    """An answer to a pending interrupt: a decision, or ``cancel`` to abandon the run."""

    interrupt_id: str = Field(alias="interruptId", min_length=1)
    decision: JsonValue = None
    cancel: bool = False

    @model_validator(mode="after")
    def _decided(self) -> ResumeRequest:
        if "decision" not in self.model_fields_set and not self.cancel:
            raise ValueError('resume needs a "decision" or "cancel": true')
        return self


class SendRequest(_Wire):
    """The body of ``POST /agents/{name}/stream`` and ``/send``."""

    message: str | WireMessage | None = None
    context_id: JsonValue = Field(default=None, alias="contextId")
    """Validated separately, so that a bad id gets its own error code."""
    resume: ResumeRequest | None = None
    multitask: ConcurrencyPolicy | None = None
    """This turn's policy when its context runs another one (default ``server.concurrency``)."""
    replace: str | None = Field(default=None, pattern=MESSAGE_ID_PATTERN.pattern)
    """Edit: cut the history before this user message and send `message` instead."""
    regenerate: str | None = Field(default=None, pattern=MESSAGE_ID_PATTERN.pattern)
    """Cut the history before this assistant message and let the model answer again."""

    @model_validator(mode="after")
    def _one_action(self) -> SendRequest:
        if self.regenerate is not None:
            if self.message is not None or self.resume is not None or self.replace is not None:
                raise ValueError('a "regenerate" takes no "message", "resume" or "replace"')
        elif (self.message is None) == (self.resume is None):
            raise ValueError('send either a "message" or a "resume", exactly one of them')
        if self.replace is not None and self.resume is not None:
            raise ValueError('a "replace" needs a "message", not a "resume"')
        if self.context_id is None:
            for field_name in ("resume", "replace", "regenerate"):
                if getattr(self, field_name) is not None:
                    raise ValueError(f'a "{field_name}" needs the "contextId" of its conversation')
        return self

    def rewind(self) -> Rewind | None:
        """The cut this turn makes (an edit or a regenerate), or None."""
        if self.regenerate is not None:
            return Rewind(self.regenerate)
        if self.replace is not None:
            return Rewind(self.replace, self.prompt())
        return None

    def prompt(self) -> str | Message:
        """The message as the Agent takes it."""
        if isinstance(self.message, WireMessage):
            parts = tuple(TextPart(text=part.text) for part in self.message.parts)
            return Message(role="user", parts=parts)
        if self.message is None:
            raise InvalidRequestError("this request carries no message")
        return self.message


class ForkRequest(_Wire):
    """The body of ``POST /agents/{name}/contexts/{contextId}/fork`` (it may be absent)."""

    message_id: str | None = Field(
        default=None, alias="messageId", pattern=MESSAGE_ID_PATTERN.pattern
    )
    """The last message the copy keeps (all of them when absent)."""
    context_id: JsonValue = Field(default=None, alias="contextId")
    """The new context's id (a new one when absent); validated separately, as in a send."""


def parse_send_request(body: object) -> SendRequest:
    """Validate a request body; InvalidRequestError names the first offending field."""
    if not isinstance(body, dict):
        raise InvalidRequestError("the request body must be a JSON object")
    try:
        return SendRequest.model_validate(body)
    except ValidationError as exc:
        raise InvalidRequestError(first_error(exc)) from None


def first_error(exc: ValidationError) -> str:
    """The first offending field of `exc` and what is wrong with it (never the input)."""
    first = exc.errors(include_url=False, include_input=False)[0]
    where = ".".join(str(part) for part in first["loc"])
    message = "unknown field" if first["type"] == "extra_forbidden" else first["msg"]
    message = message.removeprefix("Value error, ")
    return f"{where}: {message}" if where else message


def interrupt_json(item: Interrupt) -> JSONObject:
    """A pending interrupt as clients see it (the tool input stays on the server)."""
    data: JSONObject = {"id": item.id, "kind": item.kind, "tool": item.tool}
    if item.prompt is not None:
        data["prompt"] = item.prompt
    return data


def _event_json(event: RunEvent) -> JSONObject:
    if isinstance(event, TokenEvent | ThinkingEvent):
        return {"type": event.type, "text": event.text}
    if isinstance(event, StepEvent):
        return {"type": "step", "step": event.step}
    if isinstance(event, StatusEvent):
        return {"type": "status", "status": event.status}
    if isinstance(event, ToolCallEvent):
        call: JSONObject = {"type": "tool_call", "id": event.id, "name": event.name}
        if event.input is not None:  # an exposed tool's input (SPEC 10)
            call["input"] = event.input
        return call
    if isinstance(event, ToolResultEvent):
        result: JSONObject = {
            "type": "tool_result",
            "id": event.id,
            "name": event.name,
            "status": event.status,
        }
        if event.exposed:
            result["output"] = event.output
        return result
    if isinstance(event, InterruptEvent):
        data: JSONObject = {"type": "interrupt", "id": event.id, "kind": event.kind}
        if event.tool is not None:
            data["tool"] = event.tool
        if event.prompt is not None:
            data["prompt"] = event.prompt
        return data
    if isinstance(event, ErrorEvent):
        return {"type": "error", "code": event.code, "message": event.message}
    raise TypeError(f"not a run event: {event!r}")


def event_frame(context_id: str, run_id: str, event: RunEvent) -> JSONObject:
    """The data of one event frame; a swarm member's frames also carry ``agent``."""
    frame: JSONObject = {"contextId": context_id, "runId": run_id, "event": _event_json(event)}
    if event.agent is not None:
        frame["agent"] = event.agent
    return frame


def token_frame_json(context_id: str, run_id: str, event: RunEvent) -> str | None:
    """`event_frame` of a token event as compact JSON, built around its text; else None.

    Token frames are nearly all of a run's frames, and only their text varies: escaping
    three strings costs a fraction of encoding the dict. The text is the same as the
    frame encoder's (compact, not ASCII-escaped: `encode_basestring` is the escaping it
    uses for strings).
    """
    if type(event) is not TokenEvent or event.agent is not None:
        return None
    context, run, text = (
        encode_basestring(context_id),
        encode_basestring(run_id),
        encode_basestring(event.text),
    )
    return f'{{"contextId":{context},"runId":{run},"event":{{"type":"token","text":{text}}}}}'


def usage_json(usage: Usage, price: ModelPrice | None = None) -> JSONObject:
    """``usage`` of a SendResult: the SPEC's two counts, the others when reported.

    ``cost`` (in the currency of the configured prices) is there only when the model
    has a price.
    """
    data: JSONObject = {"inputTokens": usage.input_tokens, "outputTokens": usage.output_tokens}
    if usage.cached_tokens:
        data["cachedTokens"] = usage.cached_tokens
    if usage.reasoning_tokens:
        data["reasoningTokens"] = usage.reasoning_tokens
    if price is not None:
        data["cost"] = price.cost(usage)
    return data


def send_result(
    context_id: str, result: ServedResult, *, price: ModelPrice | None = None
) -> JSONObject:
    """The SendResult of a run: the body of ``send`` and the fields of the done frame."""
    data: JSONObject = {
        "contextId": context_id,
        "runId": result.run_id,
        "status": result.status,
        "text": result.text,
        "toolCalls": list(result.tool_names),
        "usage": usage_json(result.usage, price),
    }
    if result.output is not None:
        data["output"] = output_json(result.output)
    if result.interrupt is not None:
        data["interrupt"] = interrupt_json(result.interrupt)
    if result.error is not None:
        data["error"] = {"code": result.error.code, "message": result.error.message}
    if isinstance(result, SwarmResult) and result.agent is not None:
        data["agent"] = result.agent  # the member that answered (or stopped) last
    return data


def done_frame(
    context_id: str, result: ServedResult, *, price: ModelPrice | None = None
) -> JSONObject:
    """The data of the last frame of a stream: ``done: true`` and the SendResult fields."""
    data = send_result(context_id, result, price=price)
    return {"contextId": data.pop("contextId"), "runId": data.pop("runId"), "done": True, **data}


def failed_done_frame(
    context_id: str,
    run_id: str,
    code: str,
    message: str,
    *,
    status: Literal["failed", "cancelled"] = "failed",
) -> JSONObject:
    """A done frame for a run the server could not finish (nothing more was saved)."""
    return {
        "contextId": context_id,
        "runId": run_id,
        "done": True,
        "status": status,
        "text": "",
        "toolCalls": [],
        "usage": usage_json(Usage()),
        "error": {"code": code, "message": message},
    }


def error_body(code: str, message: str, *, interrupt_id: str | None = None) -> JSONObject:
    """``{"error": {"code", "message"}}``; ``interruptId`` names a pending interrupt."""
    error: JSONObject = {"code": code, "message": message}
    if interrupt_id is not None:
        error["interruptId"] = interrupt_id
    return {"error": error}


def without_done(frame: JSONObject) -> JSONObject:
    """The SendResult fields of a done frame."""
    return {key: value for key, value in frame.items() if key != "done"}
