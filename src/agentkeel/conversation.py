"""Conversation managers decide what part of the history the model sees and keeps."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from agentkeel.errors import ConfigurationError
from agentkeel.messages import Message

__all__ = ["ConversationManager", "KeepAllConversationManager", "SlidingWindowConversationManager"]


@runtime_checkable
class ConversationManager(Protocol):
    """Chooses the messages a model call sees, and trims the stored history after a run."""

    def select(self, history: Sequence[Message], run: Sequence[Message]) -> tuple[Message, ...]:
        """The messages to send to the model: a suffix of `history` followed by `run`.

        The two parts come separately so that a manager sending a window never has to
        copy the whole history first.
        """
        ...

    def trim(self, messages: Sequence[Message]) -> list[Message] | None:
        """The history to keep after a run, or None to keep it unchanged."""
        ...


class KeepAllConversationManager:
    """The default: the model sees everything and nothing is trimmed."""

    def select(self, history: Sequence[Message], run: Sequence[Message]) -> tuple[Message, ...]:
        """Everything."""
        return (*history, *run)

    def trim(self, messages: Sequence[Message]) -> list[Message] | None:
        """Nothing."""
        return None


class SlidingWindowConversationManager:
    """Keep about the last `window_size` messages, never splitting a tool call from its result.

    The window always starts at a user message that carries no tool results, so the
    model never sees a tool result whose call was cut away (providers reject that). If
    no such start exists inside the window, the window grows backwards until one does.
    """

    def __init__(self, window_size: int = 40) -> None:
        if window_size < 1:
            raise ConfigurationError("window_size must be at least 1")
        self.window_size = window_size

    def _start(self, history: Sequence[Message], run: Sequence[Message] = ()) -> int:
        """Where the window starts, as an index into history + run (never copied)."""
        split = len(history)
        total = split + len(run)
        if total <= self.window_size:
            return 0

        def starts_turn(index: int) -> bool:
            message = history[index] if index < split else run[index - split]
            return message.role == "user" and not message.tool_results

        first = total - self.window_size
        for index in range(first, total):
            if starts_turn(index):
                return index
        for index in range(first - 1, -1, -1):
            if starts_turn(index):
                return index
        return 0

    def select(self, history: Sequence[Message], run: Sequence[Message]) -> tuple[Message, ...]:
        """The last window of history + run, starting at a clean turn boundary."""
        start = self._start(history, run)
        if start >= len(history):
            return tuple(run[start - len(history) :])
        return (*history[start:], *run)

    def trim(self, messages: Sequence[Message]) -> list[Message] | None:
        """The same window, kept as the new history."""
        start = self._start(messages)
        return None if start == 0 else list(messages[start:])
