"""Give a freshly built context's Agent (or each Swarm member) the caller's memory."""

from __future__ import annotations

from agentkeel.agent import Agent
from agentkeel.memory.hook import MemoryHook
from agentkeel.memory.memory import Memory
from agentkeel.multiagent import Swarm
from agentkeel.storage.base import SessionKey

__all__ = ["attach_memory"]


def attach_memory(served: Agent | Swarm, key: SessionKey, memory: Memory) -> None:
    """Add a MemoryHook bound to `key`'s principal, definition and context.

    A swarm's members share the swarm's scope (the definition is the swarm's), so what
    one member remembers, the others can recall.
    """
    bound = memory.bind(key.principal, key.definition, context_id=key.context_id)
    agents = served.members.values() if isinstance(served, Swarm) else (served,)
    for agent in agents:
        agent.hooks.add_provider(MemoryHook(bound))
