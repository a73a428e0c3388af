"""A run's native frames in AG-UI 1.0's words, one stateful mapper per run.

- ``token`` frames are one text message (TEXT_MESSAGE_START, _CONTENT, _END) per
  stretch of text; ``thinking`` frames are a reasoning message (REASONING_START,
  REASONING_MESSAGE_START, _CONTENT, _END, REASONING_END);
- every message id starts with the native run's id and the AG-UI run id (see
  `agentkeel.bindings.agui.sync`, which reads them back to spare a snapshot);
- ``tool_call`` is TOOL_CALL_START and TOOL_CALL_END, with TOOL_CALL_ARGS (the input as
  JSON) only for a tool declared ``expose``; its ``tool_result`` is TOOL_CALL_RESULT
  only for such a tool (the output as JSON): other tools show their name, and their
  inputs and outputs stay on the server;
- a swarm member's frames are a subagent: SUBAGENT_STARTED when the member starts
  speaking, SUBAGENT_FINISHED (or SUBAGENT_ERROR) when another takes over or the run
  ends, and the member's events carry its ``subagentRunId``;
- the done frame ends the run: RUN_FINISHED with the success outcome and the usage, the
  interrupt outcome for a suspended run, the cancelled outcome, or RUN_ERROR.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from json.encoder import encode_basestring

from agentkeel.messages import JSONObject, JSONValue

__all__ = ["EventMapper", "encode", "interrupt_of", "run_error", "user_message"]

_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)


_CONTENT = b'data: {"type":"TEXT_MESSAGE_CONTENT","messageId":'


def encode(event: Mapping[str, JSONValue]) -> bytes:
    """One event as an SSE ``data:`` line."""
    return b"data: %s\n\n" % _ENCODER.encode(event).encode("utf-8")


def run_error(code: str, message: str) -> JSONObject:
    """RUN_ERROR: the run failed or was refused; the message is safe to show."""
    return {"type": "RUN_ERROR", "message": message, "code": code}


def user_message(message_id: str, text: str) -> list[JSONObject]:
    """The client's new message, after a snapshot, as a user text message with its own id.

    Not in the snapshot itself: a client keeps the place of a message it holds, so the
    new message, already last in its copy, would stay before the history the snapshot
    brings; a message the snapshot leaves out is dropped, and this one then comes back
    after the history.
    """
    message: JSONObject = {"messageId": message_id}
    events: list[JSONObject] = [{"type": "TEXT_MESSAGE_START", **message, "role": "user"}]
    if text:
        events.append({"type": "TEXT_MESSAGE_CONTENT", **message, "delta": text})
    events.append({"type": "TEXT_MESSAGE_END", **message})
    return events


def _usage(done: JSONObject) -> list[JSONValue]:
    counts = done.get("usage")
    if not isinstance(counts, dict):
        return []
    inputs, outputs = counts.get("inputTokens"), counts.get("outputTokens")
    if not isinstance(inputs, int) or not isinstance(outputs, int):
        return []
    usage: JSONObject = {
        "inputTokens": inputs,
        "outputTokens": outputs,
        "totalTokens": inputs + outputs,
    }
    if isinstance(reasoning := counts.get("reasoningTokens"), int):
        usage["reasoningTokens"] = reasoning
    if isinstance(cached := counts.get("cachedTokens"), int):
        usage["cachedInputTokens"] = cached
    return [usage]


class EventMapper:
    """Maps the frames of one AG-UI run (one segment of a native run) to events.

    Args:
        thread_id: The thread (the contextId).
        run_id: The AG-UI run id the client chose.
    """

    def __init__(self, thread_id: str, run_id: str) -> None:
        self.thread_id = thread_id
        self.run_id = run_id
        self._count = 0
        self._prefix = f"{run_id}-"
        self._calls: str | None = None
        """The assistant message holding this step's tool calls, once one was made."""
        self._text: str | None = None
        self._content: bytes | None = None
        """The bytes a TEXT_MESSAGE_CONTENT of the open text message starts with."""
        self._reasoning: str | None = None
        self._member: tuple[str, str] | None = None
        """The swarm member speaking, and its subagent run id."""

    def bind(self, prefix: str) -> None:
        """Start the ids of the messages to come with `prefix` (once the native run is known)."""
        self._prefix = prefix

    def _id(self, kind: str) -> str:
        self._count += 1
        return f"{self._prefix}{kind}-{self._count}"

    def _attributed(self, event: Mapping[str, JSONValue]) -> JSONObject:
        """`event`, with the speaking member's subagent run id."""
        attributed = dict(event)
        if self._member is not None:
            attributed["subagentRunId"] = self._member[1]
        return attributed

    def _close(self) -> list[JSONObject]:
        events: list[JSONObject] = []
        if self._text is not None:
            events.append(self._attributed({"type": "TEXT_MESSAGE_END", "messageId": self._text}))
            self._text = None
        if self._reasoning is not None:
            message = {"messageId": self._reasoning}
            events.append(self._attributed({"type": "REASONING_MESSAGE_END", **message}))
            events.append(self._attributed({"type": "REASONING_END", **message}))
            self._reasoning = None
        return events

    def _finish_member(self, outcome: JSONObject | None, error: str | None) -> list[JSONObject]:
        if self._member is None:
            return []
        subagent = self._member[1]
        self._member = None
        if error is not None:
            return [{"type": "SUBAGENT_ERROR", "subagentRunId": subagent, "message": error}]
        event: JSONObject = {"type": "SUBAGENT_FINISHED", "subagentRunId": subagent}
        if outcome is not None:
            event["outcome"] = outcome
        return [event]

    def _switch_member(self, agent: JSONValue) -> list[JSONObject]:
        name = agent if isinstance(agent, str) else None
        if name == (self._member[0] if self._member else None):
            return []
        events = self._close()
        self._calls = None
        events.extend(self._finish_member({"type": "success"}, None))
        if name is not None:
            self._member = (name, self._id(f"agent-{name}"))
            events.append(
                {"type": "SUBAGENT_STARTED", "subagentRunId": self._member[1], "name": name}
            )
        return events

    def encoded(self, frame: JSONObject) -> bytes:
        """`event` as SSE bytes (empty when the frame shows nothing).

        A token inside an open text message is the same bytes around its text's JSON,
        so the per-token cost is that of one string, not of a whole event object.
        """
        event = frame.get("event")
        if (
            self._text is not None
            and self._member is None
            and frame.get("agent") is None
            and isinstance(event, dict)
            and event.get("type") == "token"
        ):
            text = event.get("text")
            if isinstance(text, str) and text:
                if self._content is None:
                    message_id = encode_basestring(self._text).encode("utf-8")
                    self._content = b'%s%s,"delta":' % (_CONTENT, message_id)
                # the escaping `_ENCODER` gives a string (compact, not ASCII-escaped)
                return b"%s%s}\n\n" % (self._content, encode_basestring(text).encode("utf-8"))
        return b"".join(encode(item) for item in self.event(frame))

    def started(self) -> JSONObject:
        """RUN_STARTED."""
        return {"type": "RUN_STARTED", "threadId": self.thread_id, "runId": self.run_id}

    def event(self, frame: JSONObject) -> list[JSONObject]:
        """The AG-UI events of one native event frame."""
        event = frame.get("event")
        if not isinstance(event, dict):
            return []
        events = self._switch_member(frame.get("agent"))
        kind = event.get("type")
        text = event.get("text")
        if kind == "step":
            self._calls = None  # a new model call: its tool calls are a message of their own
        elif kind == "token" and isinstance(text, str) and text:
            if self._text is None:
                events.extend(self._close())
                self._calls = None
                self._text = self._id("text")
                self._content = None
                start = {"type": "TEXT_MESSAGE_START", "messageId": self._text, "role": "assistant"}
                events.append(self._attributed(start))
            content = {"type": "TEXT_MESSAGE_CONTENT", "messageId": self._text, "delta": text}
            events.append(self._attributed(content))
        elif kind == "thinking" and isinstance(text, str) and text:
            if self._reasoning is None:
                events.extend(self._close())
                self._calls = None
                self._reasoning = self._id("reasoning")
                message = {"messageId": self._reasoning}
                events.append(self._attributed({"type": "REASONING_START", **message}))
                start = {"type": "REASONING_MESSAGE_START", **message, "role": "reasoning"}
                events.append(self._attributed(start))
            delta = {
                "type": "REASONING_MESSAGE_CONTENT",
                "messageId": self._reasoning,
                "delta": text,
            }
            events.append(self._attributed(delta))
        elif kind == "tool_call":
            events.extend(self._close())
            if self._calls is None:
                self._calls = self._id("calls")
            call = {"toolCallId": str(event.get("id"))}
            start = {
                "type": "TOOL_CALL_START",
                **call,
                "toolCallName": str(event.get("name")),
                "parentMessageId": self._calls,
            }
            events.append(self._attributed(start))
            if "input" in event:
                arguments = json.dumps(event["input"], ensure_ascii=False)
                events.append(
                    self._attributed({"type": "TOOL_CALL_ARGS", **call, "delta": arguments})
                )
            events.append(self._attributed({"type": "TOOL_CALL_END", **call}))
        elif kind == "tool_result" and "output" in event:
            result: JSONObject = {
                "type": "TOOL_CALL_RESULT",
                "messageId": self._id("tool"),
                "toolCallId": str(event.get("id")),
                "content": json.dumps(event["output"], ensure_ascii=False),
                "role": "tool",
            }
            events.append(self._attributed(result))
        return events

    def finished(self, done: JSONObject, interrupts: list[JSONObject]) -> list[JSONObject]:
        """The events that end the run, from its done frame.

        `interrupts` are the AG-UI interrupts of a suspended run (see `interrupt_of`).
        """
        events = self._close()
        status = done.get("status")
        if status == "failed":
            error = done.get("error")
            item = error if isinstance(error, dict) else {}
            message = str(item.get("message") or "the run failed")
            events.extend(self._finish_member(None, message))
            events.append(run_error(str(item.get("code") or "run_failed"), message))
            return events
        finished: JSONObject = {"type": "RUN_FINISHED", "threadId": self.thread_id}
        finished["runId"] = self.run_id
        if status == "suspended" and interrupts:
            if self._member is not None:
                for item in interrupts:
                    item["subagentRunId"] = self._member[1]
            ids: list[JSONValue] = [item["id"] for item in interrupts]
            events.extend(self._finish_member({"type": "suspended", "interruptIds": ids}, None))
            finished["outcome"] = {"type": "interrupt", "interrupts": list(interrupts)}
        elif status == "cancelled":
            events.extend(self._finish_member({"type": "success"}, None))
            finished["outcome"] = {"type": "cancelled"}
        else:
            events.extend(self._finish_member({"type": "success"}, None))
            finished["outcome"] = {"type": "success"}
            if "output" in done:
                finished["result"] = done["output"]
        if usage := _usage(done):
            finished["usage"] = usage
        events.append(finished)
        return events


def interrupt_of(native: JSONValue, call_id: str | None) -> JSONObject:
    """An AG-UI Interrupt from the native interrupt of a done frame."""
    item = native if isinstance(native, dict) else {}
    approval = item.get("kind") == "approval"
    interrupt: JSONObject = {
        "id": str(item.get("id")),
        "reason": "tool_approval" if approval else "input_required",
    }
    if isinstance(prompt := item.get("prompt"), str):
        interrupt["message"] = prompt
    if call_id is not None:
        interrupt["toolCallId"] = call_id
    if approval:
        interrupt["responseSchema"] = {
            "type": "object",
            "properties": {"approved": {"type": "boolean"}, "reason": {"type": "string"}},
            "required": ["approved"],
        }
    tool = item.get("tool")
    if isinstance(tool, str):
        interrupt["metadata"] = {"tool": tool}
    return interrupt
