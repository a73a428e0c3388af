"""The conformance agent: a scripted model that acts out the A2A TCK's scenarios.

The A2A conformance kit (a2aproject/a2a-tck, branch 1.0-dev) steers the agent under
test by the prefix of each message's ``messageId`` (its ``scenarios/*.feature``). This
agent is an ordinary agentkeel Agent served through the ordinary A2A binding: its
ScriptedModel reads the id with `agentkeel.a2a.current_message()` (the public way any
tool or model reads the A2A message it answers), and its tools use the binding's
public helpers. Nothing in agentkeel knows about the kit.

| prefix | behaviour |
| --- | --- |
| ``tck-input-required`` | a tool asks for input (``TASK_STATE_INPUT_REQUIRED``) and asks
  again while the answers also carry this prefix |
| ``tck-message-response`` | a direct Message reply, "Direct message response" |
| ``tck-artifact-text`` / ``-file`` / ``-file-url`` / ``-data`` | one artifact of that kind |
| ``tck-stream-artifact-file`` | a file artifact |
| ``tck-stream-…``, ``tck-stream-artifact-text`` | a short text |
| ``test-resubscribe-message-id`` | a slow answer (about 4 s) |
| ``tck-reject-task`` | the run fails with "rejected" |
| any other ``tck-…`` | "Hello from TCK" |

Serve it with ``agentkeel serve examples/conformance/framework.json --port 8765`` and
run ``scripts/a2a-tck.sh KIT http://127.0.0.1:8765/agents/conformance/a2a``.
"""

from __future__ import annotations

from a2a.types import Artifact, Part
from google.protobuf.json_format import ParseDict

from agentkeel import Agent, ScriptedModel, ScriptedToolCall, ScriptedTurn, interrupt, tool
from agentkeel.a2a import current_message, publish_artifact, reply_as_message
from agentkeel.errors import ModelError
from agentkeel.messages import JSONValue
from agentkeel.models.base import ModelRequest

TEXTS = {
    "tck-artifact-text": "Generated text content",
    "tck-stream-artifact-text": "Streamed text content",
    "tck-stream-artifact-chunked": "chunk-1 chunk-2",
    "tck-stream-ordering-001": "Ordered output",
    "tck-stream-001": "Stream hello from TCK",
    "tck-stream-003": "Stream task lifecycle",
}
"""Prefixes answered with a fixed text (checked in order: longer prefixes first)."""
ARTIFACTS = {
    "tck-artifact-file-url": "url",
    "tck-artifact-file": "file",
    "tck-artifact-data": "data",
    "tck-stream-artifact-file": "file",
}


def message_id() -> str:
    """The ``messageId`` of the A2A message being answered ("" outside A2A)."""
    message = current_message()
    return "" if message is None else message.message_id


@tool
def ask_for_input() -> str:
    """Ask the user for input, and again while their answers ask for more."""
    answers: list[JSONValue] = []
    while True:
        answers.append(interrupt("Please provide more input."))
        if not message_id().startswith("tck-input-required"):
            return f"received {len(answers)} answer(s)"


@tool
async def attach(kind: str) -> str:
    """Attach an artifact of the given kind to the task.

    Args:
        kind: ``file`` (inline bytes), ``url`` (a file by URL) or ``data``.
    """
    if kind == "data":
        part = ParseDict({"data": {"key": "value", "count": 42}}, Part())
    elif kind == "url":
        part = Part(
            url="https://example.com/output.txt", media_type="text/plain", filename="output.txt"
        )
    else:
        part = Part(raw=b"Generated file content", media_type="text/plain", filename="output.txt")
    await publish_artifact(Artifact(name="output", parts=[part]))
    return f"attached a {kind} artifact"


def _first(table: dict[str, str], key: str) -> str | None:
    return next((value for prefix, value in table.items() if key.startswith(prefix)), None)


def brain(request: ModelRequest) -> ScriptedTurn:
    """One model answer, chosen by the prefix of the A2A message id."""
    last = request.messages[-1]
    key = message_id()
    if last.tool_results:
        attached = any(result.name == "attach" for result in last.tool_results)
        return ScriptedTurn(text="" if attached else "Hello from TCK")
    if key.startswith("tck-input-required"):
        return ScriptedTurn(tool_calls=[ScriptedToolCall("ask_for_input")])
    if key.startswith("tck-message-response"):
        reply_as_message()
        return ScriptedTurn(text="Direct message response")
    kind = _first(ARTIFACTS, key)
    if kind is not None:
        return ScriptedTurn(tool_calls=[ScriptedToolCall("attach", {"kind": kind})])
    text = _first(TEXTS, key)
    if text is not None:
        return ScriptedTurn(text=text)
    if key.startswith("test-resubscribe-message-id"):
        return ScriptedTurn(text="Slowly done " * 4, delay=0.25)
    if key.startswith("tck-reject-task"):
        return ScriptedTurn(error=ModelError("rejected"))
    if key.startswith("tck-"):
        return ScriptedTurn(text="Hello from TCK")
    return ScriptedTurn(text=f"echo: {last.text}")


def make_agent(context_id: str) -> Agent:
    """A new conformance Agent for one context (the framework.json factory)."""
    del context_id
    return Agent(
        ScriptedModel([brain], repeat=True, chunk_size=8),
        tools=[ask_for_input, attach],
        name="conformance",
        description="Acts out the A2A conformance kit's scenarios, chosen by messageId prefix.",
    )
