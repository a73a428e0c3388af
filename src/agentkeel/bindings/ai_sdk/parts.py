"""The native frames of a run as AI SDK UI message stream parts (protocol v1).

One `PartWriter` per response turns the frames it reads into the parts `useChat`
parses, keeping what the protocol needs and the native wire does not say: which text or
reasoning block is open (``text-start`` ... ``text-end``), whether a step is open, the
message id (the run id, so that regenerating and resuming can name the run), and which
tool calls the client already holds. Only parts that AI SDK 6 and 7 both parse are
written, with their required fields; a tool's ``input`` and ``output`` are null unless
the native frame carries them (a tool declared ``expose``). docs/bindings/ai-sdk.md has the table.

A text delta is built from a byte template rather than a dict and a JSON encoder: it is
the one part written for every token of every run.
"""

from __future__ import annotations

import json
from json.encoder import encode_basestring

from agentkeel.messages import JSONObject, JSONValue

__all__ = ["DONE", "HEADERS", "PartWriter", "encode_part"]

_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)
_dumps = _ENCODER.encode

DONE = b"data: [DONE]\n\n"
"""The stream's last event, after ``finish``."""
HEADERS = ((b"x-vercel-ai-ui-message-stream", b"v1"),)
"""What tells the AI SDK this is its UI message stream."""

_TOOL_FAILED = "the tool call failed"
_FINISH_REASONS = {"completed": "stop", "suspended": "tool-calls", "failed": "error"}


def encode_part(part: JSONObject) -> bytes:
    """One part as one SSE event."""
    return b"data: %s\n\n" % _dumps(part).encode("utf-8")


class PartWriter:
    """Writes the parts of one response, frame by frame.

    Args:
        shown: Tool call ids the client holds already, mapped to the ``toolCallId`` it
            knows them by (an approved call resumed: its part came with the approval).
    """

    def __init__(self, shown: dict[str, str] | None = None) -> None:
        self._started = False
        self._text: bytes | None = None
        """The open text block's prefix for deltas (None: no block open)."""
        self._text_id = ""
        self._reasoning: bytes | None = None
        self._reasoning_id = ""
        self._step = False
        self._blocks = 0
        self._agent: str | None = None
        self.shown: dict[str, str] = dict(shown or {})
        self.failed = False
        """An ``error`` part was written (the run's error, not to be repeated at its end)."""

    def start(self, run_id: str) -> bytes:
        """``start`` with the message id, once per response."""
        if self._started:
            return b""
        self._started = True
        return encode_part({"type": "start", "messageId": run_id})

    def frame(self, data: JSONObject) -> bytes:
        """The parts of one event frame (not a done frame)."""
        event = data.get("event")
        if not isinstance(event, dict):
            return b""
        head = self.start(str(data.get("runId", "")))
        agent = data.get("agent")
        if isinstance(agent, str) and agent != self._agent:
            self._agent = agent  # a swarm member took over: the message says which
            head += encode_part({"type": "message-metadata", "messageMetadata": {"agent": agent}})
        kind = event.get("type")
        if kind == "token":
            return head + self._delta(str(event.get("text", "")))
        if kind == "thinking":
            return head + self._thought(str(event.get("text", "")))
        if kind == "step":
            return head + self._close() + self._end_step() + self._begin_step()
        if kind == "tool_call":
            return head + self._close() + self._tool_call(event)
        if kind == "tool_result":
            return head + self._close() + self._tool_result(event)
        if kind == "interrupt":
            return head + self._close() + self._interrupt(event)
        if kind == "error":
            self.failed = True
            return head + self._close() + _error(str(event.get("message", "the run failed")))
        return head  # status: the run started (``start`` says so)

    def done(self, data: JSONObject, *, last: bool) -> bytes:
        """The parts of a done frame: ``finish`` (or ``abort``) when it is the `last`.

        A done frame that is not the last (a replay goes on past a suspension that was
        answered) only closes what is open.
        """
        out = self.start(str(data.get("runId", ""))) + self._close() + self._end_step()
        if not last:
            return out
        status = data.get("status")
        error = data.get("error")
        if status == "failed" and not self.failed:
            message = error.get("message") if isinstance(error, dict) else None
            out += _error(str(message) if message else "the run failed")
        if status == "cancelled":
            return out + encode_part({"type": "abort", "reason": "cancelled"}) + DONE
        metadata: JSONObject = {"runId": data.get("runId"), "status": status}
        if "usage" in data:
            metadata["usage"] = data["usage"]
        finish: JSONObject = {"type": "finish", "messageMetadata": metadata}
        reason = _FINISH_REASONS.get(str(status))
        if reason is not None:
            finish["finishReason"] = reason
        return out + encode_part(finish) + DONE

    def denied(self, tool_call_id: str) -> bytes:
        """``tool-output-denied``: the person rejected the call, so it never ran."""
        return encode_part({"type": "tool-output-denied", "toolCallId": tool_call_id})

    def failure(self, message: str) -> bytes:
        """An ``error`` part and the end, for a stream the server could not go on with."""
        return self._close() + self._end_step() + _error(message) + DONE

    def _delta(self, text: str) -> bytes:
        out = b""
        if self._reasoning is not None:
            out = self._close()
        if self._text is None:
            self._blocks += 1
            self._text_id = f"text-{self._blocks}"
            out += encode_part({"type": "text-start", "id": self._text_id})
            self._text = b'data: {"type":"text-delta","id":"%s","delta":' % self._text_id.encode()
        return out + self._text + encode_basestring(text).encode("utf-8") + b"}\n\n"

    def _thought(self, text: str) -> bytes:
        out = b""
        if self._text is not None:
            out = self._close()
        if self._reasoning is None:
            self._blocks += 1
            self._reasoning_id = f"reasoning-{self._blocks}"
            out += encode_part({"type": "reasoning-start", "id": self._reasoning_id})
            self._reasoning = (
                b'data: {"type":"reasoning-delta","id":"%s","delta":' % self._reasoning_id.encode()
            )
        return out + self._reasoning + encode_basestring(text).encode("utf-8") + b"}\n\n"

    def _close(self) -> bytes:
        out = b""
        if self._text is not None:
            out += encode_part({"type": "text-end", "id": self._text_id})
            self._text = None
        if self._reasoning is not None:
            out += encode_part({"type": "reasoning-end", "id": self._reasoning_id})
            self._reasoning = None
        return out

    def _begin_step(self) -> bytes:
        self._step = True
        return encode_part({"type": "start-step"})

    def _end_step(self) -> bytes:
        if not self._step:
            return b""
        self._step = False
        return encode_part({"type": "finish-step"})

    def _tool_call(self, event: JSONObject) -> bytes:
        call_id = str(event.get("id", ""))
        if call_id in self.shown:
            return b""  # the client has this call's part already (it approved it)
        self.shown[call_id] = call_id
        part: JSONObject = {
            "type": "tool-input-available",
            "toolCallId": call_id,
            "toolName": str(event.get("name", "")),
            "input": event.get("input"),  # null unless the tool is exposed
        }
        return encode_part(part)

    def _tool_result(self, event: JSONObject) -> bytes:
        call_id = str(event.get("id", ""))
        shown = self.shown.get(call_id)
        out = b""
        if shown is None:  # a result without its call (a replay that starts late)
            out = self._tool_call(event)
            shown = call_id
        if event.get("status") == "error":
            output = event.get("output")
            text = output if isinstance(output, str) and "output" in event else _TOOL_FAILED
            return out + encode_part(
                {"type": "tool-output-error", "toolCallId": shown, "errorText": text}
            )
        part = {"type": "tool-output-available", "toolCallId": shown, "output": event.get("output")}
        return out + encode_part(part)

    def _interrupt(self, event: JSONObject) -> bytes:
        interrupt_id = str(event.get("id", ""))
        prompt: JSONValue = event.get("prompt")
        if event.get("kind") != "approval":
            data: JSONObject = {"id": interrupt_id, "kind": event.get("kind"), "prompt": prompt}
            if "tool" in event:
                data["tool"] = event["tool"]
            return encode_part({"type": "data-interrupt", "id": interrupt_id, "data": data})
        # the approval's part is named by the interrupt id: the id the decision must carry,
        # and the call id the resumed run's tool frames are mapped back to
        part: JSONObject = {
            "type": "tool-input-available",
            "toolCallId": interrupt_id,
            "toolName": str(event.get("tool", "")),
            "input": None,  # the prompt says what the call will do
        }
        if isinstance(prompt, str):
            part["providerMetadata"] = {"agentkeel": {"prompt": prompt}}
        request: JSONObject = {
            "type": "tool-approval-request",
            "approvalId": interrupt_id,
            "toolCallId": interrupt_id,
        }
        return encode_part(part) + encode_part(request)


def _error(message: str) -> bytes:
    return encode_part({"type": "error", "errorText": message})
