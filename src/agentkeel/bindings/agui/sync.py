"""When a run needs a MESSAGES_SNAPSHOT: only when the client's copy is not in step.

A snapshot is the whole transcript, so sending one with every run would make a run on a
long thread cost its whole history. AG-UI asks a producer for one whenever it cannot
guarantee that the consumer's copy matches its own; here that guarantee is cheap to
give, from the input's last two messages and the context's latest run record (which
the binding reads anyway, for a pending interrupt):

- every message the binding streams has an id that starts with the native run's id
  (``run-….<AG-UI runId>.text-1``), so the message a client's copy ends with names
  the run that produced it;
- the client is in step when that message comes from the context's latest run, and
  either that run is waiting for a decision (the client saw it suspend), or it
  completed and the message is the assistant text the run ended with (its content is
  the end of the run's final text: a stream cut short leaves a prefix, which is not);
- a run that suspended before it streamed any message (an approval asked for at once)
  leaves the client's copy ending with the message that started it: the copy is in
  step when its last message is a user message with that run's input as its text (no
  other run can start on a context while one waits).

Anything else gets the snapshot: no messages (a reloaded page, a new ``HttpAgent``), a
copy that ends with a message of an older run (another tab or wire ran a turn since),
a failed or cancelled run, or a last message carrying a server's message id. A client
that forges a tail id only spares itself the snapshot: the server never reads the
client's copy for the model (see `agentkeel.bindings.agui.request`).
"""

from __future__ import annotations

from agentkeel.bindings.agui.request import InputMessage, RunAgentInput
from agentkeel.messages import MESSAGE_ID_PATTERN
from agentkeel.storage.base import RunRecord

__all__ = ["in_step", "message_prefix", "server_message_id"]


def message_prefix(native_run_id: str, run_id: str) -> str:
    """What the ids of the messages an AG-UI run streams start with."""
    return f"{native_run_id}.{run_id}."


def server_message_id(message_id: str) -> bool:
    """Whether `message_id` is one a snapshot gave out (a transcript or waiting turn's)."""
    return MESSAGE_ID_PATTERN.fullmatch(message_id) is not None or message_id.endswith(":input")


def _ends_run(tail: InputMessage, latest: RunRecord) -> bool:
    content = tail.content
    if not tail.id.startswith(f"{latest.run_id}."):
        # a run that suspended before it streamed a message: the copy ends with its input
        waiting = latest.status == "suspended" and tail.role == "user"
        return waiting and isinstance(content, str) and content == latest.input
    if latest.status == "suspended":
        return True
    if latest.status != "completed" or tail.role != "assistant":
        return False
    return isinstance(content, str) and bool(content) and latest.text.endswith(content)


def in_step(parsed: RunAgentInput, latest: RunRecord | None) -> bool:
    """Whether the client's copy ends where the context's history does (no snapshot due)."""
    tail = parsed.tail
    if tail is None or latest is None:
        return False
    new = parsed.last_user if parsed.resume is None else None
    if new is not None and server_message_id(new.id):
        return False  # a message the server may have: the snapshot path tells
    return _ends_run(tail, latest)
