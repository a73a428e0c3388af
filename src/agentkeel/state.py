"""AgentState and InvocationState: two of the seed's three server-side lifetimes.

AgentState lives as long as the Agent (and, with a SessionManager, across restarts), so
it only holds JSON values and refuses anything else at the moment it is set. An
InvocationState lives for one run and is passed by reference to every hook, middleware
and tool of that run; it may hold anything and is never serialized.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator, Mapping

from agentkeel.errors import StateValueError
from agentkeel.messages import JSONObject, JSONValue

__all__ = ["AgentState", "InvocationState", "SharedState"]


class AgentState:
    """A JSON-serializable key/value store that lives as long as its Agent.

    Values are copied in and out, so a caller mutating a returned list cannot change the
    stored state behind the store's back (and the dirty flag stays truthful).
    """

    __slots__ = ("_data", "_dirty")

    def __init__(self, initial: Mapping[str, JSONValue] | None = None) -> None:
        self._data: JSONObject = {}
        self._dirty = False
        for key, value in (initial or {}).items():
            self.set(key, value)
        self._dirty = False

    def get(self, key: str, default: JSONValue = None) -> JSONValue:
        """The value stored under `key` (a copy), or `default`."""
        if key not in self._data:
            return default
        return copy.deepcopy(self._data[key])

    def set(self, key: str, value: JSONValue) -> None:
        """Store `value` under `key`; raises StateValueError if it is not JSON."""
        if not isinstance(key, str) or not key:
            raise StateValueError("AgentState keys must be non-empty strings", key=str(key))
        try:
            encoded = json.dumps(value, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise StateValueError(
                f"AgentState value for key {key!r} is not JSON-serializable: {exc}", key=key
            ) from exc
        self._data[key] = json.loads(encoded)
        self._dirty = True

    def delete(self, key: str) -> None:
        """Remove `key` if present."""
        if key in self._data:
            del self._data[key]
            self._dirty = True

    def keys(self) -> list[str]:
        """The keys, in insertion order."""
        return list(self._data)

    def to_dict(self) -> JSONObject:
        """A deep copy of the whole state, for storage."""
        return copy.deepcopy(self._data)

    def replace(self, data: Mapping[str, JSONValue]) -> None:
        """Replace the whole state (used when a session restores it)."""
        self._data = {}
        for key, value in data.items():
            self.set(key, value)
        self._dirty = False

    @property
    def dirty(self) -> bool:
        """Whether the state changed since the last `mark_saved`."""
        return self._dirty

    def mark_saved(self) -> None:
        """Record that the current state is in storage."""
        self._dirty = False

    def __contains__(self, key: object) -> bool:
        return key in self._data

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._data))

    def __len__(self) -> int:
        return len(self._data)

    def __repr__(self) -> str:
        return f"AgentState({self._data!r})"


class InvocationState(dict[str, object]):
    """Per-run values shared by reference between the tools, hooks and middleware of one run.

    It is a plain dict on purpose: a tool's write is visible to the next hook of the same
    run. It never reaches the model, the wire or storage; a run resumed in a new process
    starts with a fresh one (see docs/concepts.md for rebuilding it in a hook).
    """

    __slots__ = ()


class SharedState(AgentState):
    """A swarm's key/value store, read and written by every member's tools and hooks.

    JSON-only like AgentState (it is saved with the swarm's session), and like it never
    sent to a model or a client: only what a member writes into a handoff message
    reaches the next model. A tool receives it by declaring a parameter of this type.
    """

    __slots__ = ()
