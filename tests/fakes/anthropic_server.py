"""A fake Anthropic Messages API server speaking the real streaming wire.

Usage::

    fake = FakeAnthropic(api_key="sk-ant-test")
    fake.enqueue(AnthropicStream().text("Hel", "lo").stop("end_turn").reply())
    with fake.serve() as base_url:          # no /v1 suffix, like the real default
        ...  # AnthropicModel("claude-test", base_url=base_url, api_key="sk-ant-test")

Streams are ``event: <type>`` + ``data: <JSON>`` frames in the real order
(``message_start``, content blocks with their start/delta/stop, ``message_delta``,
``message_stop``). The fake also refuses what the real API refuses: a missing version
header or ``max_tokens``, roles that do not alternate, empty text blocks, thinking
without a signature, tool results that answer no call or leave a call unanswered.
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
    Reply,
    Responder,
    json_reply,
    sse_pieces,
    to_response,
)

__all__ = ["AnthropicStream", "FakeAnthropic", "anthropic_error"]


def anthropic_error(
    status: int, error_type: str, message: str, *, headers: Mapping[str, str] | None = None
) -> Reply:
    """An HTTP error answer with Anthropic's JSON error body."""
    body: JSONObject = {"type": "error", "error": {"type": error_type, "message": message}}
    return json_reply(status, body, headers=headers)


class AnthropicStream:
    """Builds a streamed answer event by event; content block indexes are counted for you."""

    def __init__(
        self, model: str = "claude-fake", *, input_tokens: int = 10, cache_read_tokens: int = 0
    ) -> None:
        self.events: list[tuple[str, str]] = []
        self._index = 0
        usage: JSONObject = {"input_tokens": input_tokens, "output_tokens": 1}
        if cache_read_tokens:
            usage["cache_read_input_tokens"] = cache_read_tokens
        self.event(
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": "msg_fake",
                    "type": "message",
                    "role": "assistant",
                    "content": [],
                    "model": model,
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": usage,
                },
            },
        )

    def event(self, name: str, payload: JSONValue) -> Self:
        """Add one ``event:``/``data:`` frame."""
        self.events.append((name, json.dumps(payload)))
        return self

    def raw(self, name: str, data: str) -> Self:
        """Add one frame whose data is `data` verbatim (malformed events)."""
        self.events.append((name, data))
        return self

    def ping(self) -> Self:
        """Add a ``ping`` event, as the API sends at any point."""
        return self.event("ping", {"type": "ping"})

    def _block(self, start: JSONObject, deltas: Sequence[JSONObject]) -> Self:
        index = self._index
        self._index += 1
        self.event(
            "content_block_start",
            {"type": "content_block_start", "index": index, "content_block": start},
        )
        for delta in deltas:
            self.event(
                "content_block_delta",
                {"type": "content_block_delta", "index": index, "delta": delta},
            )
        return self.event("content_block_stop", {"type": "content_block_stop", "index": index})

    def text(self, *pieces: str) -> Self:
        """Add a text block streamed as one ``text_delta`` per piece."""
        return self._block(
            {"type": "text", "text": ""}, [{"type": "text_delta", "text": p} for p in pieces]
        )

    def thinking(self, *pieces: str, signature: str | None = "sig-fake") -> Self:
        """Add a thinking block: ``thinking_delta`` per piece, then a ``signature_delta``."""
        deltas: list[JSONObject] = [{"type": "thinking_delta", "thinking": p} for p in pieces]
        if signature is not None:
            deltas.append({"type": "signature_delta", "signature": signature})
        return self._block({"type": "thinking", "thinking": ""}, deltas)

    def tool_use(self, *, id: str, name: str, arguments: Sequence[str]) -> Self:
        """Add a tool_use block whose input JSON streams in `arguments` fragments."""
        return self._block(
            {"type": "tool_use", "id": id, "name": name, "input": {}},
            [{"type": "input_json_delta", "partial_json": fragment} for fragment in arguments],
        )

    def stop(self, reason: str = "end_turn", *, output_tokens: int = 5) -> Self:
        """Add ``message_delta`` (stop reason, output usage) and ``message_stop``."""
        self.event(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": reason, "stop_sequence": None},
                "usage": {"output_tokens": output_tokens},
            },
        )
        return self.event("message_stop", {"type": "message_stop"})

    def error(self, error_type: str, message: str) -> Self:
        """Add an ``error`` event, as the API sends when it fails mid-stream."""
        return self.event(
            "error", {"type": "error", "error": {"type": error_type, "message": message}}
        )

    def frames(self) -> list[bytes]:
        """The encoded frames."""
        return [f"event: {name}\ndata: {data}\n\n".encode() for name, data in self.events]

    def reply(
        self, *, chunk_size: int | None = None, cut_after: int | None = None, delay: float = 0.0
    ) -> Reply:
        """The scripted HTTP answer.

        Args:
            chunk_size: Re-cut the byte stream every this many bytes; None writes one
                frame per network write.
            cut_after: Send only this many frames, then drop the connection.
            delay: Seconds before each network write.
        """
        frames = self.frames()
        if cut_after is not None:
            frames = frames[:cut_after]
        return Reply(
            pieces=sse_pieces(frames, chunk_size), break_after=cut_after is not None, delay=delay
        )


def _check_blocks(
    position: int, role: str, blocks: list[JSONValue], open_calls: set[str]
) -> str | None:
    """Check one message's blocks; updates `open_calls` (tool_use ids awaiting results)."""
    answered: set[str] = set()
    seen_other = False
    for block in blocks:
        if not isinstance(block, dict):
            return f"messages.{position}: content blocks must be objects"
        kind = block.get("type")
        if kind == "text" and not block.get("text"):
            return f"messages.{position}: text content blocks must be non-empty"
        if kind == "thinking" and (role != "assistant" or not block.get("signature")):
            return f"messages.{position}: thinking blocks need a signature"
        if kind == "tool_result":
            if role != "user" or block.get("tool_use_id") not in open_calls or seen_other:
                return f"messages.{position}: unexpected `tool_result` block"
            answered.add(str(block.get("tool_use_id")))
        else:
            seen_other = True
        if kind == "tool_use":
            if role != "assistant" or not isinstance(block.get("input"), dict):
                return f"messages.{position}: invalid `tool_use` block"
    if role == "user" and open_calls - answered:
        return (
            f"messages.{position}: `tool_use` ids were found without `tool_result` blocks "
            f"immediately after: {sorted(open_calls - answered)}"
        )
    open_calls.clear()
    if role == "assistant":
        open_calls.update(
            str(b.get("id")) for b in blocks if isinstance(b, dict) and b.get("type") == "tool_use"
        )
    return None


_BODY_KEYS = {
    "model", "max_tokens", "messages", "system", "stream", "tools", "tool_choice",
    "thinking", "temperature", "top_p", "top_k", "stop_sequences", "metadata",
}  # fmt: skip


def _check_keys(body: JSONObject) -> str | None:
    extra = sorted(set(body) - _BODY_KEYS)
    return f"{extra[0]}: Extra inputs are not permitted" if extra else None


def _check_tools(body: JSONObject) -> str | None:
    tools = body.get("tools")
    names: list[str] = []
    for position, tool in enumerate(tools if isinstance(tools, list) else []):
        if not isinstance(tool, dict) or not isinstance(tool.get("name"), str):
            return f"tools.{position}.custom.name: Field required"
        schema = tool.get("input_schema")
        if not isinstance(schema, dict) or schema.get("type") != "object":
            return f"tools.{position}.custom.input_schema.type: Input should be 'object'"
        names.append(str(tool["name"]))
    if len(set(names)) != len(names):
        return "tools: Tool names must be unique."
    choice = body.get("tool_choice")
    if choice is None:
        return None
    kind = choice.get("type") if isinstance(choice, dict) else None
    if kind not in ("auto", "any", "tool", "none"):
        return "tool_choice: Input tag does not match any of the expected tags"
    if kind == "tool" and isinstance(choice, dict) and choice.get("name") not in names:
        return f"tool_choice.name: tool {choice.get('name')!r} is not in tools"
    if kind in ("any", "tool") and isinstance(body.get("thinking"), dict):
        return "Thinking may not be enabled when tool_choice forces tool use."
    return None


def validate_request(body: JSONObject) -> str | None:
    """What the real API would refuse in `body`, as its error message; None if valid."""
    problem = _check_keys(body) or _check_tools(body)
    if problem is not None:
        return problem
    max_tokens = body.get("max_tokens")
    if not isinstance(body.get("model"), str) or not isinstance(max_tokens, int):
        return "model and max_tokens: Field required"
    thinking = body.get("thinking")
    if isinstance(thinking, dict):
        budget = thinking.get("budget_tokens")
        if not isinstance(budget, int) or budget >= max_tokens:
            return "`max_tokens` must be greater than `thinking.budget_tokens`"
        if "temperature" in body:
            return "`temperature` may only be set to 1 when thinking is enabled"
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return "messages: at least one message is required"
    open_calls: set[str] = set()
    expected = "user"
    for position, message in enumerate(messages):
        if not isinstance(message, dict) or message.get("role") != expected:
            return f"messages.{position}: roles must alternate, starting with 'user'"
        content = message.get("content")
        if isinstance(content, list):
            problem = _check_blocks(position, expected, content, open_calls)
            if problem is not None:
                return problem
        elif not isinstance(content, str) or open_calls:
            return f"messages.{position}: content must be a string or a list of blocks"
        expected = "assistant" if expected == "user" else "user"
    return None


class FakeAnthropic(FakeProviderServer):
    """The fake server: scriptable replies, recorded requests, optional key check.

    Args:
        api_key: When set, requests must carry ``x-api-key: <api_key>``; a wrong key
            gets a 401 whose message echoes the key it received (worse than the real
            API) to prove clients scrub it.
        responder: Answers requests when no scripted reply is queued.
    """

    name = "Anthropic"
    api_suffix = ""  # the client adds /v1/messages itself

    def __init__(self, *, api_key: str | None = None, responder: Responder | None = None) -> None:
        super().__init__(api_key=api_key, responder=responder)
        self._app = Starlette(routes=[Route("/v1/messages", self._messages, methods=["POST"])])

    @property
    def app(self) -> ASGIApp:
        """The Messages API endpoint."""
        return self._app

    async def _messages(self, request: Request) -> Response:
        recorded = await self.script.record(request)
        if self.api_key is not None:
            given = recorded.headers.get("x-api-key", "")
            if given != self.api_key:
                return to_response(
                    anthropic_error(401, "authentication_error", f"invalid x-api-key: {given}")
                )
        if "anthropic-version" not in recorded.headers:
            return to_response(
                anthropic_error(
                    400, "invalid_request_error", "anthropic-version: header is required"
                )
            )
        problem = validate_request(recorded.json)
        if problem is not None:
            return to_response(anthropic_error(400, "invalid_request_error", problem))
        return to_response(self.script.next_reply(recorded))
