"""Anthropic Messages API, streamed: request mapping and event parsing.

Our message shape already follows this API (tool results travel in a ``user`` message),
so the mapping is mostly direct. What it adds: roles must alternate, so consecutive
messages of one role are merged; a user message's ``tool_result`` blocks go first;
thinking is sent back only with its signature, which the API demands when thinking and
tool use are combined (unsigned thinking cannot be replayed and is dropped); empty text
blocks, which the API refuses, are left out.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator
from contextlib import aclosing
from dataclasses import dataclass

import httpx

from agentkeel.errors import ConfigurationError, ModelError, ModelUnavailableError
from agentkeel.messages import (
    JSONObject,
    JSONValue,
    Message,
    Part,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
)
from agentkeel.models._http import HTTPEndpoint, RetryPolicy, error_for_kind, stream_sse
from agentkeel.models.base import (
    FINAL_ANSWER_TOOL,
    Finish,
    ModelChunk,
    ModelRequest,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
)
from agentkeel.result import Usage

__all__ = ["API_VERSION", "AnthropicModel", "DEFAULT_BASE_URL"]

DEFAULT_BASE_URL = "https://api.anthropic.com"
"""Where Anthropic serves the API (without the ``/v1`` suffix)."""
API_VERSION = "2023-06-01"
"""The ``anthropic-version`` header this module's wire mapping was written against."""

_STOP_REASONS = {
    "end_turn": "end_turn",
    "tool_use": "tool_use",
    "max_tokens": "max_tokens",
    "stop_sequence": "stop_sequence",
    "refusal": "content_filter",
    "model_context_window_exceeded": "max_tokens",
}

_INPUT_KEYS = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")


def _block(part: Part) -> JSONObject | None:
    """One part as a content block; None for a part the API would refuse."""
    if isinstance(part, TextPart):
        return {"type": "text", "text": part.text} if part.text else None
    if isinstance(part, ThinkingPart):
        if part.signature is None:
            return None
        return {"type": "thinking", "thinking": part.text, "signature": part.signature}
    if isinstance(part, ToolCallPart):
        return {"type": "tool_use", "id": part.id, "name": part.name, "input": part.input}
    return _tool_result_block(part)


def _tool_result_block(part: ToolResultPart) -> JSONObject:
    content = part.content
    text = content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)
    block: JSONObject = {"type": "tool_result", "tool_use_id": part.call_id, "content": text}
    if part.status == "error":
        block["is_error"] = True
    return block


def map_messages(messages: tuple[Message, ...]) -> list[JSONValue]:
    """Our history as Messages API messages: merged by role, tool results first.

    Args:
        messages: The history to send.

    Returns:
        The ``messages`` array of the request body.
    """
    merged: list[tuple[str, list[JSONObject]]] = []
    for message in messages:
        blocks = [block for part in message.parts if (block := _block(part)) is not None]
        if not blocks:
            continue
        if merged and merged[-1][0] == message.role:
            merged[-1][1].extend(blocks)
        else:
            merged.append((message.role, blocks))
    out: list[JSONValue] = []
    for role, blocks in merged:
        if role == "user":
            blocks.sort(key=lambda block: block["type"] != "tool_result")  # stable
        content: list[JSONValue] = list(blocks)
        out.append({"role": role, "content": content})
    return out


@dataclass(slots=True)
class _StreamState:
    """What parsing one streamed answer has to remember between events."""

    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    stop_reason: str = "end_turn"
    stopped: bool = False

    def count(self, usage: JSONObject) -> None:
        """Take the counts a usage object has; they are cumulative, so the last wins."""
        if "input_tokens" in usage:
            # Cached prompt tokens are reported apart but were read all the same.
            self.input_tokens = sum(_int(usage.get(key)) for key in _INPUT_KEYS)
            self.cached_tokens = _int(usage.get("cache_read_input_tokens"))
        if "output_tokens" in usage:
            self.output_tokens = _int(usage.get("output_tokens"))

    def finish(self) -> Finish:
        return Finish(
            stop_reason=_STOP_REASONS.get(self.stop_reason, "end_turn"),
            usage=Usage(
                input_tokens=self.input_tokens,
                output_tokens=self.output_tokens,
                cached_tokens=self.cached_tokens,
            ),
        )


def _int(value: JSONValue) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _dict(value: JSONValue) -> JSONObject:
    return value if isinstance(value, dict) else {}


def _str(value: JSONValue) -> str:
    return value if isinstance(value, str) else ""


class AnthropicModel:
    """A Claude model over the Anthropic Messages API.

    Args:
        model: The model name (``claude-sonnet-4-5``...).
        base_url: The API root, without ``/v1``.
        api_key: Sent as ``x-api-key``; None sends none (for a proxy that adds it).
        max_tokens: The answer budget, which this API requires; a request's
            ``settings.max_tokens`` overrides it.
        thinking_budget: Enables extended thinking with this many tokens (it must be
            below `max_tokens`); temperature is then not sent, as the API requires.
        timeout: Seconds allowed to connect and between two bytes of the answer.
        max_retries: Retries of a failed request before any of its answer streamed.
        backoff_base: Seconds before the first retry; later retries wait longer.
        http_client: A client to reuse; the caller closes it. None opens one per call.

    Raises:
        ConfigurationError: If `thinking_budget` does not fit below `max_tokens`.
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str = DEFAULT_BASE_URL,
        api_key: str | None = None,
        max_tokens: int = 4096,
        thinking_budget: int | None = None,
        timeout: float = 60.0,
        max_retries: int = 3,
        backoff_base: float = 0.5,
        http_client: httpx.AsyncClient | None = None,
    ) -> None:
        if thinking_budget is not None and not 0 < thinking_budget < max_tokens:
            raise ConfigurationError(
                f"thinking_budget ({thinking_budget}) must be positive and below "
                f"max_tokens ({max_tokens})"
            )
        self.model = model
        self.max_tokens = max_tokens
        self.thinking_budget = thinking_budget
        headers = {"anthropic-version": API_VERSION, "Accept": "text/event-stream"}
        if api_key:
            headers["x-api-key"] = api_key
        self._endpoint = HTTPEndpoint(
            provider="anthropic",
            url=f"{base_url.rstrip('/')}/v1/messages",
            headers=headers,
            timeout=timeout,
            retry=RetryPolicy(max_retries=max_retries, backoff_base=backoff_base),
            secrets=(api_key,) if api_key else (),
            client=http_client,
        )

    @property
    def name(self) -> str:
        """``anthropic:<model>``, for logs and metrics."""
        return f"anthropic:{self.model}"

    def build_body(self, request: ModelRequest) -> JSONObject:
        """The Messages API request body for `request` (public for inspection)."""
        body: JSONObject = {
            "model": self.model,
            "max_tokens": request.settings.max_tokens or self.max_tokens,
            "messages": map_messages(request.messages),
            "stream": True,
        }
        if request.system_prompt:
            body["system"] = request.system_prompt
        tools: list[JSONValue] = [
            {"name": tool.name, "description": tool.description, "input_schema": tool.input_schema}
            for tool in request.tools
        ]
        if request.output is not None:
            # No native structured output here: the answer is a tool's input. A forced
            # tool choice is refused with extended thinking, which then gets "auto".
            tools.append(
                {
                    "name": FINAL_ANSWER_TOOL,
                    "description": request.output.description,
                    "input_schema": request.output.schema,
                }
            )
            forced = self.thinking_budget is None
            body["tool_choice"] = {"type": "any" if forced else "auto"}
        if tools:
            body["tools"] = tools
        if self.thinking_budget is not None:
            body["thinking"] = {"type": "enabled", "budget_tokens": self.thinking_budget}
        elif request.settings.temperature is not None:
            body["temperature"] = request.settings.temperature
        return body

    async def stream(self, request: ModelRequest) -> AsyncGenerator[ModelChunk, None]:
        """Stream the answer to `request` as text, thinking and tool-call deltas.

        Tool-call deltas are indexed by their content block's index.

        Yields:
            The deltas in the order the server sent them, then one `Finish`.

        Raises:
            ModelError: A typed subclass for every failure, including an ``error`` event
                and a stream that stops before ``message_stop``.
        """
        state = _StreamState()
        async with aclosing(stream_sse(self._endpoint, self.build_body(request))) as frames:
            async for frame in frames:
                try:
                    payload = json.loads(frame.data)
                except ValueError as exc:
                    raise ModelUnavailableError(
                        f"anthropic sent a malformed stream event: {exc}"
                    ) from exc
                payload = _dict(payload)
                kind = _str(payload.get("type")) or (frame.event or "")
                for chunk in self._parse(kind, payload, state):
                    yield chunk
                if state.stopped:
                    break
        if not state.stopped:
            raise ModelUnavailableError("anthropic stream ended before message_stop")
        yield state.finish()

    def _parse(self, kind: str, payload: JSONObject, state: _StreamState) -> list[ModelChunk]:
        if kind == "message_start":
            state.count(_dict(_dict(payload.get("message")).get("usage")))
        elif kind == "content_block_start":
            return self._block_start(payload)
        elif kind == "content_block_delta":
            return self._block_delta(payload)
        elif kind == "message_delta":
            reason = _dict(payload.get("delta")).get("stop_reason")
            if isinstance(reason, str):
                state.stop_reason = reason
            state.count(_dict(payload.get("usage")))
        elif kind == "message_stop":
            state.stopped = True
        elif kind == "error":
            raise self._stream_error(_dict(payload.get("error")))
        return []  # ping, content_block_stop and event types added later

    def _block_start(self, payload: JSONObject) -> list[ModelChunk]:
        index = _int(payload.get("index"))
        block = _dict(payload.get("content_block"))
        block_type = block.get("type")
        if block_type == "text" and _str(block.get("text")):
            return [TextDelta(text=_str(block.get("text")))]
        if block_type == "thinking" and _str(block.get("thinking")):
            return [ThinkingDelta(text=_str(block.get("thinking")))]
        if block_type == "tool_use":
            start = ToolCallDelta(
                index=index, id=_str(block.get("id")), name=_str(block.get("name"))
            )
            block_input = block.get("input")
            if isinstance(block_input, dict) and block_input:
                # Not streamed as fragments: pass the whole input as one fragment.
                return [start, ToolCallDelta(index=index, arguments=json.dumps(block_input))]
            return [start]
        return []

    def _block_delta(self, payload: JSONObject) -> list[ModelChunk]:
        delta = _dict(payload.get("delta"))
        delta_type = delta.get("type")
        if delta_type == "text_delta" and _str(delta.get("text")):
            return [TextDelta(text=_str(delta.get("text")))]
        if delta_type == "thinking_delta" and _str(delta.get("thinking")):
            return [ThinkingDelta(text=_str(delta.get("thinking")))]
        if delta_type == "signature_delta" and _str(delta.get("signature")):
            return [ThinkingDelta(signature=_str(delta.get("signature")))]
        if delta_type == "input_json_delta" and _str(delta.get("partial_json")):
            index = _int(payload.get("index"))
            return [ToolCallDelta(index=index, arguments=_str(delta.get("partial_json")))]
        return []

    def _stream_error(self, error: JSONObject) -> ModelError:
        kind = _str(error.get("type"))
        message = _str(error.get("message")) or json.dumps(error)
        return error_for_kind(kind, message, provider="anthropic", secrets=self._endpoint.secrets)
