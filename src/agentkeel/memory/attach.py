"""Give a freshly built context's Agent (or each Swarm member) the caller's memory."""

from __future__ import annotations

from agentkeel.memory.hook import MemoryHook
from agentkeel.memory.memory import Memory
from agentkeel.servable import Served
from agentkeel.storage.base import SessionKey

__all__ = ["attach_memory"]


def attach_memory(served: Served, key: SessionKey, memory: Memory) -> None:
    """Add a MemoryHook bound to `key`'s principal, definition and context.

    A swarm's members share the swarm's scope (the definition is the swarm's), so what
    one member remembers, the others can recall.
    """
    bound = memory.bind(key.principal, key.definition, context_id=key.context_id)
    for agent in served.agents:
        agent.hooks.add_provider(MemoryHook(bound))
