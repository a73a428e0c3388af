"""A fake OpenAI-compatible Chat Completions server speaking the real streaming wire.

Usage::

    fake = FakeOpenAI(api_key="sk-test")
    fake.enqueue(OpenAIStream().text("Hel", "lo").finish("stop").usage(12, 3).reply())
    with fake.serve() as base_url:          # base_url ends with /v1
        ...  # OpenAIModel("gpt-test", base_url=base_url, api_key="sk-test")
    fake.requests[0].json["messages"]

Streams are ``data: <chunk JSON>`` frames ending with ``data: [DONE]``, exactly as the
real API sends them (first chunk carries the role, every chunk carries ``"usage": null``
until the usage-only chunk). The fake also checks what the real API would refuse:
tool messages that answer no call, calls left unanswered, fields it does not accept, a
``response_format`` schema that strict mode refuses, a ``tool_choice`` without tools.
``FakeOpenAI(json_schema=False)`` is a compatible server without structured outputs,
which refuses a ``json_schema`` response format as such servers do.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Self

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import ASGIApp

from agentkeel.messages import JSONObject, JSONValue
from fakes.server import (
    FakeProviderServer,
    RecordedRequest,
    Reply,
    Responder,
    json_reply,
    sse_pieces,
    to_response,
)

__all__ = ["FakeOpenAI", "OpenAIStream", "echo_responder", "openai_error"]

_MESSAGE_KEYS = {"role", "content", "name", "tool_calls", "tool_call_id", "refusal"}


def openai_error(
    status: int,
    message: str,
    *,
    type: str = "invalid_request_error",
    code: str | None = None,
    headers: Mapping[str, str] | None = None,
) -> Reply:
    """An HTTP error answer with OpenAI's JSON error body."""
    body: JSONObject = {"error": {"message": message, "type": type, "param": None, "code": code}}
    return json_reply(status, body, headers=headers)


class OpenAIStream:
    """Builds a streamed answer chunk by chunk, in the real ``chat.completion.chunk`` shape."""

    def __init__(self, model: str = "fake-model") -> None:
        self.model = model
        self.events: list[str] = []
        self._started = False

    def _chunk(self, delta: JSONObject | None, finish_reason: str | None = None) -> Self:
        choices: list[JSONValue] = []
        if delta is not None:
            if not self._started:
                delta = {"role": "assistant", **delta}
                self._started = True
            choices.append(
                {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
            )
        return self.data(
            {
                "id": "chatcmpl-fake",
                "object": "chat.completion.chunk",
                "created": 1700000000,
                "model": self.model,
                "system_fingerprint": "fp_fake",
                "choices": choices,
                "usage": None,
            }
        )

    def data(self, payload: JSONValue) -> Self:
        """Add one ``data:`` frame with `payload` as JSON."""
        self.events.append(json.dumps(payload))
        return self

    def raw(self, text: str) -> Self:
        """Add one ``data:`` frame with `text` verbatim (malformed chunks, custom shapes)."""
        self.events.append(text)
        return self

    def delta(self, delta: JSONObject, finish_reason: str | None = None) -> Self:
        """Add one chunk carrying `delta` as is."""
        return self._chunk(delta, finish_reason)

    def text(self, *pieces: str) -> Self:
        """Add one ``content`` delta per piece."""
        for piece in pieces:
            self._chunk({"content": piece})
        return self

    def reasoning(self, *pieces: str, field: str = "reasoning_content") -> Self:
        """Add one reasoning delta per piece, under `field` (``reasoning`` for Ollama)."""
        for piece in pieces:
            self._chunk({field: piece})
        return self

    def tool_call(self, index: int, *, id: str, name: str, arguments: Sequence[str]) -> Self:
        """Add a tool call: one chunk with id and name, then one per argument fragment."""
        self._chunk(
            {
                "tool_calls": [
                    {
                        "index": index,
                        "id": id,
                        "type": "function",
                        "function": {"name": name, "arguments": ""},
                    }
                ]
            }
        )
        for fragment in arguments:
            self._chunk({"tool_calls": [{"index": index, "function": {"arguments": fragment}}]})
        return self

    def finish(self, reason: str = "stop") -> Self:
        """Add the chunk with an empty delta and `finish_reason`."""
        return self._chunk({}, reason)

    def usage(
        self,
        prompt_tokens: int,
        completion_tokens: int,
        *,
        cached_tokens: int | None = None,
        reasoning_tokens: int | None = None,
    ) -> Self:
        """Add the usage-only chunk that ``stream_options.include_usage`` asks for."""
        self._chunk(None)
        last = json.loads(self.events[-1])
        last["usage"] = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        }
        if cached_tokens is not None:
            last["usage"]["prompt_tokens_details"] = {"cached_tokens": cached_tokens}
        if reasoning_tokens is not None:
            last["usage"]["completion_tokens_details"] = {"reasoning_tokens": reasoning_tokens}
        self.events[-1] = json.dumps(last)
        return self

    def error(self, message: str, *, type: str = "server_error", code: str | None = None) -> Self:
        """Add an ``error`` object inside the stream, as the API sends on a late failure."""
        return self.data({"error": {"message": message, "type": type, "code": code}})

    def frames(self, *, done: bool = True) -> list[bytes]:
        """The encoded frames, with the closing ``data: [DONE]`` when `done`."""
        events = [*self.events, "[DONE]"] if done else list(self.events)
        return [f"data: {event}\n\n".encode() for event in events]

    def reply(
        self,
        *,
        done: bool = True,
        chunk_size: int | None = None,
        cut_after: int | None = None,
        delay: float = 0.0,
    ) -> Reply:
        """The scripted HTTP answer.

        Args:
            done: End with ``data: [DONE]``.
            chunk_size: Re-cut the byte stream every this many bytes (splitting frames,
                lines and UTF-8 characters); None writes one frame per network write.
            cut_after: Send only this many frames, then drop the connection.
            delay: Seconds before each network write.
        """
        frames = self.frames(done=done)
        if cut_after is not None:
            frames = frames[:cut_after]
        return Reply(
            pieces=sse_pieces(frames, chunk_size), break_after=cut_after is not None, delay=delay
        )


def echo_responder(recorded: RecordedRequest) -> Reply:
    """Answer any request by echoing the last user message: a steady default for e2e tests."""
    messages = recorded.json.get("messages")
    text = ""
    if isinstance(messages, list):
        for message in messages:
            if isinstance(message, dict) and message.get("role") == "user":
                content = message.get("content")
                text = content if isinstance(content, str) else json.dumps(content)
    model = recorded.json.get("model")
    stream = OpenAIStream(model if isinstance(model, str) else "fake-model")
    return stream.text(f"echo: {text}").finish("stop").usage(len(text), len(text) + 6).reply()


def _check_tool_flow(messages: list[JSONValue]) -> str | None:
    open_calls: set[str] = set()
    previous_role = ""
    for position, message in enumerate(messages):
        if not isinstance(message, dict):
            return f"messages[{position}] must be an object"
        role = message.get("role")
        if open_calls and role != "tool":
            return (
                "An assistant message with 'tool_calls' must be followed by tool messages "
                f"responding to each 'tool_call_id'. Missing: {sorted(open_calls)}"
            )
        if role == "tool":
            call_id = message.get("tool_call_id")
            if previous_role not in ("assistant", "tool") or call_id not in open_calls:
                return (
                    f"messages[{position}]: messages with role 'tool' must be a response to "
                    "a preceding message with 'tool_calls'"
                )
            open_calls.discard(str(call_id))
        calls = message.get("tool_calls")
        if role == "assistant" and isinstance(calls, list):
            for call in calls:
                if not isinstance(call, dict):
                    return f"messages[{position}].tool_calls must hold objects"
                function = call.get("function")
                if not isinstance(function, dict) or not isinstance(function.get("arguments"), str):
                    return f"messages[{position}]: function.arguments must be a string"
                open_calls.add(str(call.get("id")))
        previous_role = str(role)
    return None


def _strict_node_problem(node: JSONObject, where: str) -> str | None:
    for keyword in ("oneOf", "patternProperties", "propertyNames", "uniqueItems"):
        if keyword in node:
            return f"{where}'{keyword}' is not permitted."
    if node.get("type") != "object":
        return None
    if node.get("additionalProperties") is not False:
        return f"{where}'additionalProperties' is required to be supplied and to be false."
    properties = node.get("properties")
    keys = list(properties) if isinstance(properties, dict) else []
    required = node.get("required")
    missing = [key for key in keys if not isinstance(required, list) or key not in required]
    if missing:
        return (
            f"{where}'required' is required to be supplied and to be an array including "
            f"every key in properties. Missing '{missing[0]}'."
        )
    return None


def _strict_problem(node: JSONValue, context: tuple[str, ...]) -> str | None:
    """What strict mode refuses in one schema node (recursively), as OpenAI words it."""
    if isinstance(node, list):
        for item in node:
            problem = _strict_problem(item, context)
            if problem is not None:
                return problem
        return None
    if not isinstance(node, dict):
        return None
    problem = _strict_node_problem(node, f"In context={context}, ")
    if problem is not None:
        return problem
    for key, value in node.items():
        if key in ("properties", "$defs", "definitions") and isinstance(value, dict):
            for name, child in value.items():
                problem = _strict_problem(child, (*context, key, str(name)))
                if problem is not None:
                    return problem
        elif key in ("items", "anyOf", "allOf"):
            problem = _strict_problem(value, (*context, key))
            if problem is not None:
                return problem
    return None


def _check_response_format(body: JSONObject, json_schema_supported: bool) -> str | None:
    response_format = body.get("response_format")
    if response_format is None:
        return None
    if not isinstance(response_format, dict):
        return "response_format must be an object"
    kind = response_format.get("type")
    if kind != "json_schema":
        return None if kind in ("text", "json_object") else f"invalid response_format type {kind!r}"
    if not json_schema_supported:
        return "response_format type 'json_schema' is not supported by this server"
    spec = response_format.get("json_schema")
    if not isinstance(spec, dict) or not isinstance(spec.get("name"), str):
        return "response_format.json_schema.name: Field required"
    name, schema = spec["name"], spec.get("schema")
    if not isinstance(schema, dict) or schema.get("type") != "object":
        kind = schema.get("type") if isinstance(schema, dict) else None
        return (
            f"Invalid schema for response_format '{name}': schema must be a JSON Schema of "
            f"'type: \"object\"', got 'type: \"{kind}\"'."
        )
    if spec.get("strict") is True:
        problem = _strict_problem(schema, ())
        if problem is not None:
            return f"Invalid schema for response_format '{name}': {problem}"
    return None


def _check_tools(body: JSONObject) -> str | None:
    tools = body.get("tools")
    names: list[str] = []
    for tool in tools if isinstance(tools, list) else []:
        function = tool.get("function") if isinstance(tool, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            return "tools[].function.name: Field required"
        names.append(str(function["name"]))
    if len(set(names)) != len(names):
        return "tools: function names must be unique"
    if "tool_choice" in body and not names:
        return (
            "Invalid value for 'tool_choice': 'tool_choice' is only allowed when 'tools' "
            "are specified."
        )
    return None


def validate_request(body: JSONObject, *, json_schema: bool = True) -> str | None:
    """What the real API would refuse in `body`, as its error message; None if valid."""
    if not isinstance(body.get("model"), str):
        return "you must provide a model parameter"
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return "'messages' must be a non-empty array"
    for position, message in enumerate(messages):
        if not isinstance(message, dict):
            return f"messages[{position}] must be an object"
        if message.get("role") not in ("system", "developer", "user", "assistant", "tool"):
            return f"messages[{position}].role is invalid: {message.get('role')!r}"
        extra = set(message) - _MESSAGE_KEYS
        if extra:
            return f"messages[{position}]: unrecognized fields {sorted(extra)}"
    return (
        _check_tools(body)
        or _check_response_format(body, json_schema)
        or _check_tool_flow(messages)
    )


class FakeOpenAI(FakeProviderServer):
    """The fake server: scriptable replies, recorded requests, optional key check.

    Args:
        api_key: When set, requests must carry ``Authorization: Bearer <api_key>``; a
            wrong key gets the real 401 body, echoing the key it received in full
            (worse than the real API, which masks it) to prove clients scrub it.
        responder: Answers requests when no scripted reply is queued.
        json_schema: False plays a compatible server without structured outputs.
    """

    name = "OpenAI"
    api_suffix = "/v1"

    def __init__(
        self,
        *,
        api_key: str | None = None,
        responder: Responder | None = None,
        json_schema: bool = True,
    ) -> None:
        super().__init__(api_key=api_key, responder=responder)
        self.json_schema = json_schema
        self._app = Starlette(
            routes=[Route("/v1/chat/completions", self._completions, methods=["POST"])]
        )

    @property
    def app(self) -> ASGIApp:
        """The Chat Completions endpoint."""
        return self._app

    async def _completions(self, request: Request) -> Response:
        recorded = await self.script.record(request)
        if self.api_key is not None:
            given = recorded.headers.get("authorization", "")
            if given != f"Bearer {self.api_key}":
                key = given.removeprefix("Bearer ")
                return to_response(
                    openai_error(401, f"Incorrect API key provided: {key}.", code="invalid_api_key")
                )
        problem = validate_request(recorded.json, json_schema=self.json_schema)
        if problem is not None:
            return to_response(openai_error(400, problem))
        return to_response(self.script.next_reply(recorded))
