"""What a loaded framework is: its definitions, stores and settings (SPEC 5).

Kept apart from the loader so that the loader and what reads a `Framework` (the
runtime, the app factory) depend on this record, not on each other.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from agentkeel.checkpoint.base import Checkpointer
from agentkeel.checkpoint.memory import InMemoryCheckpointer
from agentkeel.definitions import AgentDefinition
from agentkeel.memory.memory import Memory
from agentkeel.server_settings import Retention, ServerSettings
from agentkeel.storage.base import SessionStorage
from agentkeel.storage.memory import InMemoryStorage
from agentkeel.usage import UsagePolicy

__all__ = ["TASK_INDEX_DEFINITION", "Framework"]

TASK_INDEX_DEFINITION = "a2a-task-index"
"""Reserved: the definition part of the A2A task index's session keys."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Framework:
    """A validated framework: definitions, where memory lives, and the server settings."""

    definitions: Mapping[str, AgentDefinition]
    storage: SessionStorage = field(default_factory=InMemoryStorage)
    checkpointer: Checkpointer = field(default_factory=InMemoryCheckpointer)
    """Without a configured one, suspended runs wait in memory (they survive eviction
    from the context cache, not a restart)."""
    max_contexts: int = 1000
    server: ServerSettings = field(default_factory=ServerSettings)
    retention: Retention = field(default_factory=Retention)
    usage: UsagePolicy = field(default_factory=UsagePolicy)  # budgets and prices
    memory: Memory | None = None
    """Memory across conversations (SPEC 12, docs/memory.md); None turns it off."""
    coordination: str | None = field(default=None, repr=False)  # a URL may hold a password
    """What replicas share (SPEC 11): a ``redis://`` or ``postgresql://`` URL; None: one process."""
    source: str = "<code>"
    """The file the framework came from, for messages."""
