"""OpenAI-compatible Chat Completions, streamed: request mapping and chunk parsing.

The same wire is spoken by OpenAI and by local servers (Ollama, vLLM, llama.cpp,
LM Studio), so this module sticks to what they share and tolerates their quirks:
reasoning arrives as ``reasoning_content`` or ``reasoning``, some servers omit a tool
call's ``index`` or repeat its id and name on every fragment, some say ``stop`` after
asking for tools. Without an API key no ``Authorization`` header is sent, which is what
a local server expects. Thinking parts are never sent back: these servers reject them.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Literal

import httpx

from agentkeel.errors import ConfigurationError, ModelError, ModelUnavailableError
from agentkeel.messages import JSONObject, JSONValue, Message, ToolCallPart, ToolResultPart
from agentkeel.models._http import HTTPEndpoint, RetryPolicy, error_for_kind, stream_sse
from agentkeel.models.base import (
    FINAL_ANSWER_TOOL,
    Finish,
    ModelChunk,
    ModelRequest,
    ModelSettings,
    OutputSchema,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
    ToolSpec,
)
from agentkeel.result import Usage

__all__ = ["DEFAULT_BASE_URL", "OpenAIModel", "StructuredOutputMode"]

StructuredOutputMode = Literal["json_schema", "tool"]
"""How a structured answer is asked for: ``response_format`` or a final-answer tool."""

DEFAULT_BASE_URL = "https://api.openai.com/v1"
"""Where OpenAI itself serves the API; point `base_url` elsewhere for a local server."""

_STOP_REASONS = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "length": "max_tokens",
    "content_filter": "content_filter",
}


def _tool_result_text(part: ToolResultPart) -> str:
    content = part.content
    text = content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)
    return f"Error: {text}" if part.status == "error" else text


def _tool_call_json(part: ToolCallPart) -> JSONObject:
    return {
        "id": part.id,
        "type": "function",
        "function": {"name": part.name, "arguments": json.dumps(part.input, ensure_ascii=False)},
    }


def _map_message(message: Message) -> list[JSONValue]:
    """One of our messages as Chat Completions messages (tool results become ``tool``)."""
    if message.role == "assistant":
        calls: list[JSONValue] = [_tool_call_json(call) for call in message.tool_calls]
        out: JSONObject = {"role": "assistant", "content": message.text or None}
        if calls:
            out["tool_calls"] = calls
        elif out["content"] is None:
            out["content"] = ""
        return [out]
    # Tool messages must directly follow the assistant message that asked for them,
    # so a user message's results go first and its text after.
    mapped: list[JSONValue] = [
        {"role": "tool", "tool_call_id": result.call_id, "content": _tool_result_text(result)}
        for result in message.tool_results
    ]
    if message.text or not mapped:
        mapped.append({"role": "user", "content": message.text})
    return mapped


def _response_format(output: OutputSchema) -> JSONObject:
    """``response_format`` for an output type: strict when the schema allows it."""
    strict = output.strict_schema is not None
    schema = output.strict_schema if output.strict_schema is not None else output.schema
    return {
        "type": "json_schema",
        "json_schema": {
            "name": output.name,
            "description": output.description,
            "schema": schema,
            "strict": strict,
        },
    }


def _answer_tool(output: OutputSchema) -> ToolSpec:
    return ToolSpec(
        name=FINAL_ANSWER_TOOL, description=output.description, input_schema=output.schema
    )


def _map_tool(tool: ToolSpec) -> JSONObject:
    return {
        "type": "function",
        "function": {
            "name": tool.name,
            "description": tool.description,
            "parameters": tool.input_schema,
        },
    }


@dataclass(slots=True)
class _StreamState:
    """What parsing one streamed answer has to remember between chunks."""

    stop_reason: str | None = None
    usage: Usage = field(default_factory=Usage)
    done: bool = False
    saw_tool_call: bool = False
    sent_ids: set[int] = field(default_factory=set)
    """Tool-call indexes whose id was already passed on."""
    sent_names: set[int] = field(default_factory=set)
    """Tool-call indexes whose name was already passed on."""
    ids: dict[str, int] = field(default_factory=dict)
    """Tool-call ids seen without an ``index`` and the index given to each."""
    last_index: int = -1

    def finish(self) -> Finish:
        reason = _STOP_REASONS.get(self.stop_reason or "stop", "end_turn")
        if self.saw_tool_call and reason == "end_turn":
            reason = "tool_use"  # some local servers say "stop" after asking for tools
        return Finish(stop_reason=reason, usage=self.usage)

    def tool_index(self, fragment: JSONObject, position: int) -> int:
        index = fragment.get("index")
        if isinstance(index, int):
            self.last_index = max(self.last_index, index)
            return index
        call_id = fragment.get("id")
        if isinstance(call_id, str):
            if call_id not in self.ids:
                self.last_index += 1
                self.ids[call_id] = self.last_index
            return self.ids[call_id]
        return self.last_index if self.last_index >= 0 else position

    def tool_call(self, fragment: JSONObject, position: int) -> ToolCallDelta | None:
        self.saw_tool_call = True
        index = self.tool_index(fragment, position)
        function = fragment.get("function")
        function = function if isinstance(function, dict) else {}
        call_id = _str_field(fragment, "id")
        name = _str_field(function, "name")
        arguments = _str_field(function, "arguments") or ""
        # Some servers repeat the id and name on every fragment: pass each on once.
        if call_id is not None and index in self.sent_ids:
            call_id = None
        if name is not None and index in self.sent_names:
            name = None
        if call_id:
            self.sent_ids.add(index)
        if name:
            self.sent_names.add(index)
        if not (call_id or name or arguments):
            return None
        return ToolCallDelta(
            index=index, id=call_id or None, name=name or None, arguments=arguments
        )


def _str_field(data: JSONObject, key: str) -> str | None:
    value = data.get(key)
    return value if isinstance(value, str) else None


class OpenAIModel:
    """A model served over the OpenAI Chat Completions API, or any server that speaks it.

    Example:
        ``OpenAIModel("llama3.2", base_url="http://127.0.0.1:11434/v1")`` talks to a
        local Ollama without a key.

    Args:
        model: The model name the server knows (``gpt-4o-mini``, ``llama3.2``...).
        base_url: The API root, up to and including ``/v1``.
        api_key: Sent as a bearer token; None sends no ``Authorization`` header.
        timeout: Seconds allowed to connect and between two bytes of the answer.
        max_retries: Retries of a failed request before any of its answer streamed.
        backoff_base: Seconds before the first retry; later retries wait longer.
        http_client: A client to reuse (connection pooling, proxies); the caller closes
            it. None opens a client per call, which needs no closing and is safe across
            event loops.
        settings: Defaults for generation settings; a request's own settings win.
        structured_output: How an agent's output type is asked for: ``json_schema``
            (``response_format``, strict where the schema allows it) or ``tool`` (a
            required final-answer tool) for servers without json_schema support.
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str = DEFAULT_BASE_URL,
        api_key: str | None = None,
        timeout: float = 60.0,
        max_retries: int = 3,
        backoff_base: float = 0.5,
        http_client: httpx.AsyncClient | None = None,
        settings: ModelSettings | None = None,
        structured_output: StructuredOutputMode = "json_schema",
    ) -> None:
        if structured_output not in ("json_schema", "tool"):
            raise ConfigurationError(
                f"structured_output must be 'json_schema' or 'tool', not {structured_output!r}"
            )
        self.model = model
        self.structured_output: StructuredOutputMode = structured_output
        self.base_url = base_url.rstrip("/")
        self.settings = settings or ModelSettings()
        headers = {"Accept": "text/event-stream"}
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        self._endpoint = HTTPEndpoint(
            provider="openai",
            url=f"{self.base_url}/chat/completions",
            headers=headers,
            timeout=timeout,
            retry=RetryPolicy(max_retries=max_retries, backoff_base=backoff_base),
            secrets=(api_key,) if api_key else (),
            client=http_client,
        )

    @property
    def name(self) -> str:
        """``openai:<model>``, for logs and metrics."""
        return f"openai:{self.model}"

    def build_body(self, request: ModelRequest) -> JSONObject:
        """The Chat Completions request body for `request` (public for inspection)."""
        messages: list[JSONValue] = []
        if request.system_prompt:
            messages.append({"role": "system", "content": request.system_prompt})
        for message in request.messages:
            messages.extend(_map_message(message))
        body: JSONObject = {
            "model": self.model,
            "messages": messages,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        tools = list(request.tools)
        if request.output is not None and self.structured_output == "tool":
            tools.append(_answer_tool(request.output))
            body["tool_choice"] = "required"
        elif request.output is not None:
            body["response_format"] = _response_format(request.output)
        if tools:
            body["tools"] = [_map_tool(tool) for tool in tools]
        max_tokens = request.settings.max_tokens or self.settings.max_tokens
        if max_tokens is not None:
            # OpenAI's newer models only accept the new name; other servers the old one.
            key = "max_completion_tokens" if self.base_url == DEFAULT_BASE_URL else "max_tokens"
            body[key] = max_tokens
        temperature = request.settings.temperature
        if temperature is None:
            temperature = self.settings.temperature
        if temperature is not None:
            body["temperature"] = temperature
        return body

    async def stream(self, request: ModelRequest) -> AsyncGenerator[ModelChunk, None]:
        """Stream the answer to `request` as text, thinking and tool-call deltas.

        Yields:
            The deltas in the order the server sent them, then one `Finish`.

        Raises:
            ModelError: A typed subclass for every failure, including an ``error``
                object inside the stream and a stream that stops before its end.
        """
        state = _StreamState()
        async with aclosing(stream_sse(self._endpoint, self.build_body(request))) as frames:
            async for frame in frames:
                if frame.data.strip() == "[DONE]":
                    state.done = True
                    break
                for chunk in self._parse(frame.data, state):
                    yield chunk
        if not state.done and state.stop_reason is None:
            raise ModelUnavailableError("openai stream ended before the answer was complete")
        yield state.finish()

    def _parse(self, data: str, state: _StreamState) -> list[ModelChunk]:
        try:
            payload = json.loads(data)
        except ValueError as exc:
            raise ModelUnavailableError(f"openai sent a malformed stream chunk: {exc}") from exc
        if not isinstance(payload, dict):
            return []
        error = payload.get("error")
        if error is not None:
            raise self._stream_error(error)
        usage = payload.get("usage")
        if isinstance(usage, dict):
            prompt = usage.get("prompt_tokens_details")
            completion = usage.get("completion_tokens_details")
            state.usage = Usage(
                input_tokens=_int(usage.get("prompt_tokens")),
                output_tokens=_int(usage.get("completion_tokens")),
                cached_tokens=_int(prompt.get("cached_tokens")) if isinstance(prompt, dict) else 0,
                reasoning_tokens=_int(completion.get("reasoning_tokens"))
                if isinstance(completion, dict)
                else 0,
            )
        chunks: list[ModelChunk] = []
        choices = payload.get("choices")
        for choice in choices if isinstance(choices, list) else []:
            if not isinstance(choice, dict):
                continue
            delta = choice.get("delta")
            if isinstance(delta, dict):
                chunks.extend(self._parse_delta(delta, state))
            reason = choice.get("finish_reason")
            if isinstance(reason, str):
                state.stop_reason = reason
        return chunks

    def _parse_delta(self, delta: JSONObject, state: _StreamState) -> list[ModelChunk]:
        chunks: list[ModelChunk] = []
        reasoning = _str_field(delta, "reasoning_content") or _str_field(delta, "reasoning")
        if reasoning:
            chunks.append(ThinkingDelta(text=reasoning))
        content = _str_field(delta, "content")
        if content:
            chunks.append(TextDelta(text=content))
        calls = delta.get("tool_calls")
        for position, fragment in enumerate(calls if isinstance(calls, list) else []):
            if isinstance(fragment, dict):
                tool_delta = state.tool_call(fragment, position)
                if tool_delta is not None:
                    chunks.append(tool_delta)
        return chunks

    def _stream_error(self, error: JSONValue) -> ModelError:
        if isinstance(error, dict):
            kind = " ".join(
                str(error[key]) for key in ("type", "code") if isinstance(error.get(key), str)
            )
            message = _str_field(error, "message") or json.dumps(error)
        else:
            kind, message = "", str(error)
        return error_for_kind(kind, message, provider="openai", secrets=self._endpoint.secrets)


def _int(value: JSONValue) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
