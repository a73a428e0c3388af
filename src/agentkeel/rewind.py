"""Rewind: a turn that first cuts the history, to edit a message or regenerate an answer.

``Rewind(message_id, prompt)`` replaces a user message: the run sees the history before
it and then `prompt`. ``Rewind(message_id)`` regenerates an assistant message: the run
sees the history before it and the model answers again from there. The cut is part of
the turn: the run carries it (`RunState.cut`), the Agent keeps its whole history while
the run goes on, and the history is cut only when the turn commits, in the same storage
write as its messages. A turn that fails or is cancelled before it commits cuts nothing.

The AgentState is not rewound: it is the agent's long-lived memory, not a record of the
conversation, and what a tool wrote there stays.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from agentkeel.errors import InvalidRequestError, MessageNotFoundError
from agentkeel.messages import Message
from agentkeel.run_state import RunState
from agentkeel.storage.transcript import in_transcript

__all__ = ["Rewind"]


@dataclass(frozen=True, slots=True)
class Rewind:
    """Edit a user message, or regenerate an assistant message (when `prompt` is None).

    `Agent.rewind_async` runs it.
    """

    message_id: str
    prompt: str | Message | None = None

    @property
    def kind(self) -> str:
        """``replace`` or ``regenerate`` (what metrics count)."""
        return "regenerate" if self.prompt is None else "replace"

    def begin(self, history: Sequence[Message], run_id: str) -> RunState:
        """The run of this turn over `history`.

        Raises MessageNotFoundError if `history` has no such message in the role asked
        for; then nothing changes.
        """
        role = "assistant" if self.prompt is None else "user"
        index = next(
            (
                i
                for i, message in enumerate(history)
                if message.id == self.message_id and message.role == role and in_transcript(message)
            ),
            None,
        )
        if index is None:
            raise MessageNotFoundError(
                f"the conversation holds no {role} message {self.message_id!r}"
            )
        messages: list[Message] = []
        if isinstance(self.prompt, str):
            messages.append(Message.user(self.prompt))
        elif isinstance(self.prompt, Message):
            if self.prompt.role != "user":
                raise InvalidRequestError("a replacing message must be a user message")
            messages.append(self.prompt)
        users = [m for m in [*history[:index], *messages] if m.role == "user" and in_transcript(m)]
        return RunState(
            run_id=run_id,
            input=users[-1].text if users else "",
            started_at=time.time(),
            messages=messages,
            cut=index,
        )
