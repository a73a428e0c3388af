"""ContextCache: one Agent per (principal, definition, contextId), least recently used first out.

An Agent holds a conversation's memory, so the server keeps one per context and never
shares one between contexts. Building it means calling the definition's factory,
attaching a SessionManager (session id ``"<def-name>:<contextId>"``, the checkpointer
and the principal) and restoring history, AgentState and any suspended run from
storage. Because everything is saved before a turn's result is returned, evicting an
idle Agent loses nothing: the next request rebuilds it from storage, pending interrupts
included. A context with a turn running or queued is never evicted.

Turns on one context run one at a time, in arrival order: the coordination's
`RunLease` keeps the line (`agentkeel.runtime.lease` in this process). The cache only
counts the turns of this process running or waiting on an entry, which keeps the entry
from being evicted or deleted under them.

A factory must build a new Agent (or Swarm) for every context: the cache remembers every
instance it handed out (weakly) and refuses one that comes back for another context with
SharedAgentError, naming the definition, instead of letting two contexts share memory.

No HTTP here: the cache is shared by every binding (native wire, A2A).
"""

from __future__ import annotations

import logging
import weakref
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass

import anyio

from agentkeel.checkpoint.base import Checkpointer
from agentkeel.errors import RunInProgressError, SharedAgentError
from agentkeel.server_settings import ConcurrencyPolicy
from agentkeel.serving import Served, ServedFactory, attach_session, forget_context
from agentkeel.storage.base import SessionKey, SessionStorage

__all__ = ["ContextCache", "ContextEntry"]

logger = logging.getLogger(__name__)


@dataclass(eq=False, slots=True)
class ContextEntry:
    """A cached Agent and the bookkeeping that keeps its turns in order."""

    key: SessionKey
    agent: Served
    leases: int = 0
    """Requests holding the entry between lookup and queueing (blocks eviction)."""
    turns: int = 0
    """Turns of this process running or waiting on the context."""

    @property
    def idle(self) -> bool:
        """Nothing holds the entry: it may be evicted."""
        return self.leases == 0 and not self.turns


class ContextCache:
    """Agents per context, built by their definition's factory and restored from storage.

    Args:
        factories: Agent factories by definition name.
        storage: Where sessions live.
        checkpointer: Where suspended runs wait.
        max_contexts: How many idle Agents to keep; busy ones may briefly exceed it.
        policy: The server's ``concurrency`` (``queue``, ``reject``, ``interrupt``,
            ``rollback``); the runtime applies it, the cache only remembers it.
        on_evict: Called once per eviction (metrics).
        swarms: The definitions declared as swarms (a factory's Swarm is recognised
            by what it returned, or by the swarm record it stored).
        on_built: Told each freshly built Agent or Swarm (a definition learns its tools).
        on_drop: Told each Agent that leaves the cache (evicted, discarded, deleted), so
            that what it held for its context alone (per-context MCP connections) closes.
    """

    def __init__(
        self,
        factories: Mapping[str, ServedFactory],
        storage: SessionStorage,
        checkpointer: Checkpointer,
        *,
        max_contexts: int = 1000,
        policy: ConcurrencyPolicy = "queue",
        on_evict: Callable[[], None] | None = None,
        swarms: frozenset[str] = frozenset(),
        on_built: Callable[[SessionKey, Served], None] | None = None,
        on_drop: Callable[[ContextEntry], None] | None = None,
    ) -> None:
        self.factories = dict(factories)
        self.swarms = swarms
        """Definitions that build swarms (their members' sessions are deleted with them)."""
        self.storage = storage
        self.checkpointer = checkpointer
        self.max_contexts = max(1, max_contexts)
        self.policy = policy
        self.on_evict = on_evict
        self.on_drop = on_drop
        self.evictions = 0
        self._entries: OrderedDict[SessionKey, ContextEntry] = OrderedDict()
        self._busy: dict[SessionKey, anyio.Event] = {}
        """Keys being built or deleted; lookups wait for them."""
        self.on_built = on_built
        self._handed_out: weakref.WeakSet[Served] = weakref.WeakSet()
        """Every Agent and Swarm a factory built so far (a second hand-out is refused)."""

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def queued_turns(self) -> int:
        """Turns waiting behind a running turn, over every cached context."""
        return sum(max(0, entry.turns - 1) for entry in self._entries.values())

    def entries(self) -> list[ContextEntry]:
        """A snapshot of the cached entries (shutdown cancels their runs)."""
        return list(self._entries.values())

    async def acquire(self, key: SessionKey) -> ContextEntry:
        """The entry of `key`, built and restored if needed, leased until `release`."""
        while True:
            entry = self._entries.get(key)
            if entry is not None:
                self._entries.move_to_end(key)
                entry.leases += 1
                return entry
            pending = self._busy.get(key)
            if pending is not None:
                await pending.wait()
                continue
            done = self._busy[key] = anyio.Event()
            try:
                entry = await self._build(key)
            finally:
                del self._busy[key]
                done.set()
            self._entries[key] = entry
            entry.leases += 1
            self._evict()
            return entry

    def release(self, entry: ContextEntry) -> None:
        """End a lease taken by `acquire`."""
        entry.leases -= 1
        self._evict()

    def join(self, entry: ContextEntry) -> None:
        """Count a turn on `entry` (running or waiting for the context's lease)."""
        entry.turns += 1

    def leave(self, entry: ContextEntry) -> None:
        """A turn ended: stop counting it and evict if the cache is over its size."""
        entry.turns -= 1
        self._evict()

    def discard(self, key: SessionKey) -> None:
        """Drop `key`'s Agent even if it is busy (its memory may differ from storage)."""
        self._dropped(self._entries.pop(key, None))

    async def exists(self, key: SessionKey) -> bool:
        """Whether the context has anything: a cached Agent, a session, runs or a checkpoint."""
        if key in self._entries:
            return True
        if await self.storage.exists(key):
            return True
        return await self.checkpointer.latest(key) is not None

    async def delete(
        self,
        key: SessionKey,
        *,
        before: Callable[[SessionKey], Awaitable[None]] | None = None,
    ) -> bool:
        """Forget the context: its Agent, session, runs and checkpoints; False if unknown.

        A swarm's members go with it, whether the definition was declared as a swarm or
        its factory returned one (known from the cached Swarm or the stored record).

        Args:
            key: The context.
            before: Deletes what a binding keeps for the context (A2A task records);
                awaited first, so a crash midway leaves a context that DELETE can retry.

        Raises:
            RunInProgressError: A turn is running or queued on the context.
        """
        while (pending := self._busy.get(key)) is not None:
            await pending.wait()
        entry = self._entries.get(key)
        if entry is not None and entry.turns:
            raise RunInProgressError(
                f"context {key.context_id} is running a turn; delete it when the turn ends"
            )
        done = self._busy[key] = anyio.Event()
        try:
            existed = await self.exists(key)
            cached = self._entries.pop(key, None)
            self._dropped(cached)
            if existed:
                if before is not None:
                    await before(key)
                await forget_context(
                    key,
                    self.storage,
                    self.checkpointer,
                    served=None if cached is None else cached.agent,
                    declared_swarm=key.definition in self.swarms,
                )
            return existed
        finally:
            del self._busy[key]
            done.set()

    async def _build(self, key: SessionKey) -> ContextEntry:
        factory = self.factories[key.definition]
        agent = factory(key.context_id)
        if agent in self._handed_out:
            raise SharedAgentError(
                f"the factory of agent {key.definition!r} returned an {type(agent).__name__} "
                "it already built for another context; it must build a new one per context "
                "(one instance would share its memory between conversations)",
                definition=key.definition,
            )
        self._handed_out.add(agent)
        if self.on_built is not None:
            self.on_built(key, agent)
        attach_session(agent, key, self.storage, self.checkpointer)
        await agent.restore()
        return ContextEntry(key=key, agent=agent)

    def _dropped(self, entry: ContextEntry | None) -> None:
        if entry is not None and self.on_drop is not None:
            self.on_drop(entry)

    def _evict(self) -> None:
        excess = len(self._entries) - self.max_contexts
        if excess <= 0:
            return
        victims: list[SessionKey] = []
        for key, entry in self._entries.items():  # least recently used first
            if entry.idle:
                victims.append(key)
                if len(victims) == excess:
                    break
        for key in victims:
            self._dropped(self._entries.pop(key))
            self.evictions += 1
            if self.on_evict is not None:
                self.on_evict()
