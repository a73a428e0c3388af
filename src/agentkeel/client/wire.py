"""Reading the native wire: the only place that knows its camelCase names.

Answers are validated into the records of `agentkeel.client.records` with pydantic,
after their keys are turned into snake_case; a stream's frames go through
`FrameTracker`, which follows one run across reconnects.
"""

from __future__ import annotations

import json
import re
from typing import Annotated, TypeVar, get_args

import httpx
import pydantic

from agentkeel.client.errors import ConnectionLostError, malformed
from agentkeel.client.records import (
    AgentInfo,
    CancelResult,
    ClientStreamItem,
    ContextPage,
    ContextSummary,
    MessagePage,
    SendResult,
)
from agentkeel.events import RunEvent
from agentkeel.sse import SSEFrame

__all__ = [
    "FrameTracker",
    "parse_agents",
    "parse_cancel",
    "parse_context",
    "parse_context_page",
    "parse_fork",
    "parse_message_page",
    "parse_result",
    "read_json",
]

_T = TypeVar("_T")
_EVENTS: pydantic.TypeAdapter[RunEvent] = pydantic.TypeAdapter(
    Annotated[RunEvent, pydantic.Field(discriminator="type")]
)
_EVENT_TYPES = frozenset(cls.__dataclass_fields__["type"].default for cls in get_args(RunEvent))
_RESULTS = pydantic.TypeAdapter(SendResult)
_AGENTS = pydantic.TypeAdapter(list[AgentInfo])
_CONTEXT = pydantic.TypeAdapter(ContextSummary)
_CONTEXT_PAGE = pydantic.TypeAdapter(ContextPage)
_MESSAGE_PAGE = pydantic.TypeAdapter(MessagePage)
_CANCEL = pydantic.TypeAdapter(CancelResult)
_CAPITAL = re.compile(r"(?<!^)([A-Z])")


def _snake(value: object) -> object:
    """`value` with every object key in snake_case (``contextId`` -> ``context_id``)."""
    if isinstance(value, dict):
        return {_CAPITAL.sub(r"_\1", k).lower(): _snake(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_snake(item) for item in value]
    return value


def read_json(response: httpx.Response) -> object:
    """The JSON body of `response`, or a malformed-answer error."""
    try:
        return response.json()
    except ValueError as exc:
        raise malformed(f"{response.request.method} {response.url.path} is not JSON") from exc


def _decode(adapter: pydantic.TypeAdapter[_T], data: object, what: str) -> _T:
    try:
        return adapter.validate_python(_snake(data))
    except pydantic.ValidationError as exc:
        first = exc.errors()[0]
        raise malformed(f"{what}: {first['msg']} at {list(first['loc'])}") from exc


def parse_result(data: object) -> SendResult:
    """Decode a SendResult: the ``send`` body, or the fields of the ``done`` frame."""
    if not isinstance(data, dict):
        raise malformed("a run result is not a JSON object")
    fields = dict(data)
    if isinstance(usage := data.get("usage"), dict):  # the counts, and a cost beside them
        fields["usage"] = {key: value for key, value in usage.items() if key != "cost"}
        fields["cost"] = usage.get("cost")
    return _decode(_RESULTS, fields, "a result")


def parse_agents(data: object) -> list[AgentInfo]:
    """Decode the body of ``GET /agents``."""
    agents = data.get("agents") if isinstance(data, dict) else None
    return _decode(_AGENTS, agents, "GET /agents")


def parse_context(data: object) -> ContextSummary:
    """Decode one ContextSummary."""
    return _decode(_CONTEXT, data, "a context summary")


def parse_context_page(data: object) -> ContextPage:
    """Decode the body of ``GET …/contexts``."""
    return _decode(_CONTEXT_PAGE, data, "a context list")


def parse_message_page(data: object) -> MessagePage:
    """Decode the body of ``GET …/contexts/{id}/messages``."""
    return _decode(_MESSAGE_PAGE, data, "a transcript page")


def parse_cancel(data: object) -> CancelResult:
    """Decode the body of ``POST …/cancel``."""
    return _decode(_CANCEL, data, "a cancel answer")


def parse_fork(data: object) -> str:
    """The new context id in the body of ``POST …/fork``."""
    context_id = data.get("contextId") if isinstance(data, dict) else None
    if not isinstance(context_id, str):
        raise malformed("a fork answer without contextId")
    return context_id


class FrameTracker:
    """Follows one run's frames across reconnects: drops repeats, remembers where it is."""

    def __init__(self, context_id: str | None, after: int | None) -> None:
        self.context_id = context_id
        self.run_id: str | None = None
        self.last_id = after

    def accept(self, frame: SSEFrame) -> ClientStreamItem | None:
        """The item `frame` carries; None for a repeat or an event type this client skips."""
        frame_id = int(frame.id) if frame.id is not None and frame.id.isdigit() else None
        if frame_id is not None and self.last_id is not None and frame_id <= self.last_id:
            return None  # replayed after a reconnect: already delivered
        try:
            data = json.loads(frame.data)
        except ValueError as exc:
            raise malformed("a stream frame is not JSON") from exc
        if not isinstance(data, dict) or not isinstance(data.get("contextId"), str):
            raise malformed("a stream frame without contextId")
        run_id = data.get("runId")
        if self.run_id is not None and run_id != self.run_id:
            raise ConnectionLostError("the run's stream is gone: the context started another run")
        self.run_id = run_id if isinstance(run_id, str) else None
        self.context_id = data["contextId"]
        if frame_id is not None:
            self.last_id = frame_id
        if data.get("done") is True:
            return parse_result(data)
        event = data.get("event")
        if not isinstance(event, dict) or event.get("type") not in _EVENT_TYPES:
            return None  # a type from a newer server: skipped, not an error
        if isinstance(data.get("agent"), str):
            event = {**event, "agent": data["agent"]}
        return _decode(_EVENTS, event, "an event")
