"""A run's native frames in Chat Completions' words: chunks, a completion, usage.

- ``token`` frames are ``delta.content``; ``thinking`` frames are
  ``delta.reasoning_content`` (the field Open WebUI and other OpenAI-compatible servers
  use for reasoning; the SDKs keep it as an extra field);
- a tool declared ``expose`` has its native ``tool_call`` and ``tool_result`` events
  (with ``input`` and ``output``) in an ``agentkeel`` field of a chunk with an empty
  delta, as Chat Completions has no shape for tools that run on the server; other tools
  stay invisible, as their inputs and outputs stay on the server;
- the done frame ends the completion: ``finish_reason: "stop"``, the run's ``usage``;
  a suspended run (an approval or a question) adds a text saying what is pending and
  where to answer it, since the protocol cannot carry an interrupt; a failed run is an
  error event (streamed) or an error response.
"""

from __future__ import annotations

import json
import time

from agentkeel.messages import JSONObject, JSONValue

__all__ = ["CompletionMapper", "encode_event", "pending_notice", "usage_of"]

_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def usage_of(frame: JSONObject) -> JSONObject:
    """OpenAI's ``usage`` from a done frame's (``inputTokens``, ``outputTokens``...)."""
    usage = frame.get("usage")
    counts = usage if isinstance(usage, dict) else {}
    prompt = counts.get("inputTokens", 0)
    completion = counts.get("outputTokens", 0)
    prompt = prompt if isinstance(prompt, int) else 0
    completion = completion if isinstance(completion, int) else 0
    data: JSONObject = {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }
    if isinstance(cached := counts.get("cachedTokens"), int):
        data["prompt_tokens_details"] = {"cached_tokens": cached}
    if isinstance(reasoning := counts.get("reasoningTokens"), int):
        data["completion_tokens_details"] = {"reasoning_tokens": reasoning}
    return data


def pending_notice(definition: str, context_id: str | None, interrupt: JSONValue) -> str:
    """What a suspended run answers: what waits for a person, and where to answer it."""
    item = interrupt if isinstance(interrupt, dict) else {}
    prompt = item.get("prompt") or f"Run {item.get('tool') or 'a tool'}"
    if item.get("kind") == "approval":
        opening = f"An approval is pending: {prompt}."
        decision = '{"approved": true} (or {"approved": false, "reason": "..."})'
    else:
        opening = f"The agent needs an answer to go on: {prompt}"
        decision = "your answer"
    if context_id is None:
        return (
            f"{opening} This chat cannot give it, and this conversation is not kept: send "
            "the request again with an X-Conversation-Id header to keep the conversation, "
            "then answer on agentkeel's native wire."
        )
    return (
        f"{opening} This chat cannot give it: answer it in agentkeel's chat page, or with "
        f"POST /agents/{definition}/stream and the body "
        f'{{"contextId": "{context_id}", "resume": {{"interruptId": "{item.get("id")}", '
        f'"decision": {decision}}}}}.'
    )


class CompletionMapper:
    """Maps the frames of one run into chunks, or collects them into one completion.

    Args:
        model: The agent's name, echoed as ``model``.
        context_id: The conversation, or None for one that is not kept.
    """

    def __init__(self, model: str, context_id: str | None) -> None:
        self.model = model
        self.context_id = context_id
        self.created = int(time.time())
        self.id = "chatcmpl-pending"
        self.run_id = ""
        self._role_sent = False
        self.reasoning: list[str] = []
        self.tools: list[JSONObject] = []
        self._content: tuple[bytes, bytes] | None = None
        """The bytes around a content delta's JSON string, once the chunk id is known."""

    def _chunk(self, delta: JSONObject, finish: str | None = None) -> JSONObject:
        if not self._role_sent:
            delta = {"role": "assistant", **delta}
            self._role_sent = True
        choice: JSONObject = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        return {
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": [choice],
        }

    def event(self, frame: JSONObject) -> JSONObject | None:
        """The chunk of one event frame, or None for an event this protocol does not show."""
        run_id = frame.get("runId")
        if isinstance(run_id, str) and run_id != self.run_id:
            self.run_id, self.id, self._content = run_id, f"chatcmpl-{run_id}", None
        event = frame.get("event")
        if not isinstance(event, dict):
            return None
        kind = event.get("type")
        if kind == "token":
            return self._chunk({"content": event.get("text")})
        if kind == "thinking":
            text = event.get("text")
            self.reasoning.append(text if isinstance(text, str) else "")
            return self._chunk({"reasoning_content": text})
        if (kind == "tool_call" and "input" in event) or (
            kind == "tool_result" and "output" in event
        ):
            self.tools.append(event)
            chunk = self._chunk({})
            chunk["agentkeel"] = {"event": event}
            return chunk
        return None

    def encoded(self, frame: JSONObject) -> bytes | None:
        """`event` as the SSE bytes of its chunk; None when the protocol shows nothing.

        A token's chunk differs from the previous one only in its text, so after the
        first it is the same bytes around the text's JSON: the per-token cost is that
        of one string, not of a whole chunk object.
        """
        event = frame.get("event")
        if self._content is not None and isinstance(event, dict) and event.get("type") == "token":
            text = event.get("text")
            if isinstance(text, str) and frame.get("runId") == self.run_id:
                before, after = self._content
                return before + _ENCODER.encode(text).encode("utf-8") + after
        chunk = self.event(frame)
        if chunk is None:
            return None
        if self._content is None and self._role_sent:
            marker = "\u0000agentkeel\u0000"
            template = encode_event(self._chunk({"content": marker}))
            before, _, after = template.partition(_ENCODER.encode(marker).encode("utf-8"))
            self._content = (before, after)
        return encode_event(chunk)

    def final_text(self, done: JSONObject) -> str:
        """The text a done frame adds after the streamed tokens (a pending notice)."""
        if done.get("status") != "suspended":
            return ""
        notice = pending_notice(self.model, self.context_id, done.get("interrupt"))
        return f"\n\n{notice}" if done.get("text") else notice

    def finish(self, done: JSONObject, *, include_usage: bool) -> list[JSONObject]:
        """The last chunks of a stream: a pending notice, the finish, and the usage."""
        chunks: list[JSONObject] = []
        if notice := self.final_text(done):
            chunks.append(self._chunk({"content": notice}))
        chunks.append(self._chunk({}, "stop"))
        if include_usage:
            usage = self._chunk({})
            usage["choices"] = []
            usage["usage"] = usage_of(done)
            chunks.append(usage)
        return chunks

    def completion(self, done: JSONObject) -> JSONObject:
        """The whole ``chat.completion`` object of a finished run."""
        text = done.get("text")
        message: JSONObject = {
            "role": "assistant",
            "content": f"{text if isinstance(text, str) else ''}{self.final_text(done)}",
            "refusal": None,
        }
        if self.reasoning:
            message["reasoning_content"] = "".join(self.reasoning)
        data: JSONObject = {
            "id": self.id,
            "object": "chat.completion",
            "created": self.created,
            "model": self.model,
            "choices": [
                {"index": 0, "message": message, "logprobs": None, "finish_reason": "stop"}
            ],
            "usage": usage_of(done),
        }
        if self.tools:
            data["agentkeel"] = {"events": list(self.tools)}
        return data


def encode_event(data: JSONObject | str) -> bytes:
    """One SSE event of a Chat Completions stream (``data: [DONE]`` for the string)."""
    text = data if isinstance(data, str) else _ENCODER.encode(data)
    return b"data: %s\n\n" % text.encode("utf-8")
