"""MemoryHook: hands a run the caller's memory and, if asked, recalls into the prompt.

The server adds one to every agent it builds when framework.json has a ``memory``
section; in Python, pass ``hooks=[MemoryHook(memory.bind(principal, "assistant"))]``.
"""

from __future__ import annotations

import dataclasses
import logging

from agentkeel.errors import StorageError
from agentkeel.hooks.events import BeforeModelCallEvent, BeforeRunEvent
from agentkeel.hooks.registry import HookRegistry
from agentkeel.memory.errors import EmbeddingError, InvalidMemoryKeyError
from agentkeel.memory.memory import AgentMemory
from agentkeel.memory.records import MemoryMatch

__all__ = ["MemoryHook", "recall_prompt"]

logger = logging.getLogger(__name__)

RECALL_HEADER = "What you remember about this user from earlier conversations:"


def recall_prompt(matches: list[MemoryMatch]) -> str:
    """The system prompt section that lists recalled items, one line each."""
    lines = [f"- {m.item.text} (key {m.item.key}, relevance {m.score:.2f})" for m in matches]
    return "\n".join([RECALL_HEADER, *lines])


class MemoryHook:
    """Sets `RunContext.memory` for the run; with `auto_recall` > 0, prompts with matches.

    Auto-recall embeds the latest user message before each model call and appends the
    best `auto_recall` items to the system prompt. It costs one embedding per model
    call and roughly the items' words in input tokens per call (docs/memory.md).
    A failure to recall never fails the run: the call goes ahead without the section.
    """

    def __init__(self, memory: AgentMemory, *, auto_recall: int | None = None) -> None:
        self.memory = memory
        self.auto_recall = memory.memory.auto_recall if auto_recall is None else auto_recall

    def register_hooks(self, registry: HookRegistry) -> None:
        """Listen to the start of each run and, with auto-recall, each model call."""
        registry.add_callback(BeforeRunEvent, self._attach)
        if self.auto_recall > 0:
            registry.add_callback(BeforeModelCallEvent, self._recall)

    async def _attach(self, event: BeforeRunEvent) -> None:
        event.context.memory = self.memory

    async def _recall(self, event: BeforeModelCallEvent) -> None:
        request = event.request
        query = next(
            (m.text for m in reversed(request.messages) if m.role == "user" and m.text.strip()),
            None,
        )
        if query is None:
            return
        try:
            matches = await self.memory.recall(query, limit=self.auto_recall)
        except (EmbeddingError, InvalidMemoryKeyError, StorageError) as exc:
            logger.warning("error=<%s> | auto-recall skipped", exc.code)
            return
        if not matches:
            return
        section = recall_prompt(matches)
        prompt = f"{request.system_prompt}\n\n{section}" if request.system_prompt else section
        event.request = dataclasses.replace(request, system_prompt=prompt)
