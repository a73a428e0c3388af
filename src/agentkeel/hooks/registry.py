"""HookRegistry: typed callbacks per hook event class, and the HookProvider protocol."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import Protocol, TypeVar, runtime_checkable

from agentkeel.hooks.events import HookEvent

__all__ = ["HookCallback", "HookProvider", "HookRegistry"]

E = TypeVar("E", bound=HookEvent)
HookCallback = Callable[[E], Awaitable[None] | None]


@runtime_checkable
class HookProvider(Protocol):
    """An object that registers several related callbacks at once (e.g. a tracer)."""

    def register_hooks(self, registry: HookRegistry) -> None:
        """Add this provider's callbacks to `registry`."""
        ...


class HookRegistry:
    """Callbacks per event class, invoked in registration order (After* in reverse)."""

    def __init__(self) -> None:
        self._callbacks: dict[type[HookEvent], list[Callable[[HookEvent], object]]] = {}

    def add_callback(self, event_type: type[E], callback: HookCallback[E]) -> None:
        """Call `callback` (sync or async) for every event of `event_type`."""
        self._callbacks.setdefault(event_type, []).append(callback)  # type: ignore[arg-type]

    def add_provider(self, provider: HookProvider) -> None:
        """Let `provider` register its callbacks."""
        provider.register_hooks(self)

    def has_callbacks(self, event_type: type[HookEvent]) -> bool:
        """Whether anything listens for `event_type` (lets the loop skip building events)."""
        return bool(self._callbacks.get(event_type))

    async def invoke(self, event: E) -> E:
        """Run the callbacks for `event` in order and return it (with any writable changes)."""
        callbacks = self._callbacks.get(type(event))
        if not callbacks:
            return event
        ordered = reversed(callbacks) if event.after else iter(callbacks)
        for callback in ordered:
            outcome = callback(event)
            if inspect.isawaitable(outcome):
                await outcome
        return event
