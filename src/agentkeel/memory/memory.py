"""Memory: a store and its embedder; AgentMemory: that memory bound to one caller.

`Memory` is what framework.json (or Python) configures once per server. `AgentMemory`
is what a run sees: the memory, the caller's scope (the principal, and the agent when
memory is scoped per agent) and the conversation the run belongs to, which every item it
writes records as its source. Tools never choose a scope, so a model cannot read or
write another principal's memory whatever it asks for.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

from agentkeel.memory.embedders import Embedder
from agentkeel.memory.errors import InvalidMemoryKeyError
from agentkeel.memory.records import (
    DEFAULT_NAMESPACE,
    MAX_TEXT_CHARS,
    MemoryItem,
    MemoryMatch,
    MemoryPage,
    MemoryScope,
    MemorySource,
    validate_key,
    validate_namespace,
)
from agentkeel.memory.store import MemoryStore, MemoryStoreLifecycle
from agentkeel.messages import JSONValue

__all__ = ["ANONYMOUS_PRINCIPAL", "AgentMemory", "Memory", "MemoryScopeRule"]

ANONYMOUS_PRINCIPAL = "anonymous"
"""The principal of every caller when authentication is off."""

MemoryScopeRule = Literal["principal", "agent"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Memory:
    """A memory store searched through an embedder.

    Attributes:
        store: Where items live.
        embedder: What turns texts into vectors (its model is stored with them).
        scope: ``principal`` shares a principal's memory between all agents;
            ``agent`` gives each agent definition its own.
        auto_recall: How many matches to add to the system prompt before each model
            call (0, the default, turns it off; see docs/memory.md for its token cost).
    """

    store: MemoryStore
    embedder: Embedder
    scope: MemoryScopeRule = "principal"
    auto_recall: int = 0

    async def open(self) -> None:
        """Open the store when it holds connections (the server's lifespan calls it)."""
        if isinstance(self.store, MemoryStoreLifecycle):
            await self.store.open()

    async def close(self) -> None:
        """Close what `open` opened."""
        if isinstance(self.store, MemoryStoreLifecycle):
            await self.store.close()

    def scope_for(self, principal: str | None, agent: str) -> MemoryScope:
        """The scope of `principal` (None: the anonymous one) talking to `agent`."""
        return MemoryScope(
            principal or ANONYMOUS_PRINCIPAL, agent if self.scope == "agent" else None
        )

    def bind(
        self,
        principal: str | None,
        agent: str,
        *,
        context_id: str | None = None,
    ) -> AgentMemory:
        """The memory as seen by `principal` in a conversation with `agent`."""
        return AgentMemory(
            memory=self,
            scope=self.scope_for(principal, agent),
            agent=agent,
            context_id=context_id,
        )


def _text(text: object) -> str:
    if not isinstance(text, str) or not text.strip():
        raise InvalidMemoryKeyError("a memory needs a non-empty text")
    if len(text) > MAX_TEXT_CHARS:
        raise InvalidMemoryKeyError(f"a memory's text is at most {MAX_TEXT_CHARS} characters")
    return text.strip()


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentMemory:
    """One caller's memory, as the semantic tools and the memory endpoints use it."""

    memory: Memory
    scope: MemoryScope
    agent: str
    context_id: str | None = None

    async def remember(
        self,
        text: str,
        *,
        key: str | None = None,
        value: JSONValue = None,
        namespace: str = DEFAULT_NAMESPACE,
        run_id: str | None = None,
    ) -> MemoryItem:
        """Store `text` under `key` (a new key when None), replacing what was there.

        An update keeps the item's creation time.
        """
        text = _text(text)
        key = validate_key(key) if key is not None else f"mem-{secrets.token_hex(8)}"
        validate_namespace(namespace)
        (vector,) = await self.memory.embedder.embed([text])
        old = await self.memory.store.get(self.scope, namespace, key)
        now = datetime.now(UTC)
        item = MemoryItem(
            namespace=namespace,
            key=key,
            text=text,
            value=value,
            created_at=now if old is None else old.created_at,
            updated_at=now,
            source=MemorySource(context_id=self.context_id, agent=self.agent, run_id=run_id),
            model=self.memory.embedder.model,
            vector=vector,
        )
        await self.memory.store.put(self.scope, [item])
        return item

    async def recall(
        self, query: str, *, limit: int = 5, namespace: str | None = DEFAULT_NAMESPACE
    ) -> list[MemoryMatch]:
        """The items closest in meaning to `query`, best first, with their scores."""
        (vector,) = await self.memory.embedder.embed([_text(query)])
        return await self.memory.store.search(
            self.scope,
            vector,
            model=self.memory.embedder.model,
            namespace=namespace,
            limit=limit,
        )

    async def get(self, key: str, *, namespace: str = DEFAULT_NAMESPACE) -> MemoryItem | None:
        """The item under `key`, or None."""
        return await self.memory.store.get(self.scope, namespace, validate_key(key))

    async def forget(self, key: str, *, namespace: str = DEFAULT_NAMESPACE) -> bool:
        """Delete the item under `key`; False when there was none."""
        return await self.memory.store.delete(self.scope, namespace, validate_key(key)) > 0

    async def forget_all(self) -> int:
        """Delete everything this scope holds, in every namespace; how many items went."""
        return await self.memory.store.delete(self.scope)

    async def page(self, *, cursor: str | None = None, limit: int = 50) -> MemoryPage:
        """A page of this scope's items, most recently updated first."""
        return await self.memory.store.list(self.scope, cursor=cursor, limit=limit)
