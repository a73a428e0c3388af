"""The records of memory across conversations: scopes, items, matches and pages.

An item lives under (scope, namespace, key). The scope is who it belongs to: always a
principal, and optionally one agent definition; a store never returns an item to
another scope. Its vector is kept with the model that made it and its dimension, so a
store can refuse to mix vectors of two models.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime

import numpy as np
import numpy.typing as npt

from agentkeel.memory.errors import InvalidMemoryKeyError
from agentkeel.messages import JSONValue

__all__ = [
    "DEFAULT_NAMESPACE",
    "MAX_TEXT_CHARS",
    "NAMESPACE_PATTERN",
    "MemoryItem",
    "MemoryMatch",
    "MemoryPage",
    "MemoryScope",
    "MemorySource",
    "Vector",
    "VectorSpace",
    "validate_key",
    "validate_namespace",
]

Vector = npt.NDArray[np.float32]
"""One embedding, L2-normalised, so a dot product is the cosine similarity."""

DEFAULT_NAMESPACE = "memories"
"""Where the semantic tools keep what they remember."""

MAX_TEXT_CHARS = 10_000
"""The longest text one item may hold (a memory is a fact, not a document)."""

_KEY = re.compile(r"^[^\x00-\x1f/\\]{1,200}$")
_NAMESPACE = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,63}$")
NAMESPACE_PATTERN = _NAMESPACE.pattern
"""What a namespace may be: lower-case letters, digits and ``_.-``, up to 64."""


def validate_key(key: object) -> str:
    """Return `key` if a store can keep it: 1-200 characters, no control or slash."""
    if not isinstance(key, str) or not _KEY.fullmatch(key) or key.strip() != key:
        raise InvalidMemoryKeyError(
            "a memory key is 1-200 characters without slashes, control characters or "
            "surrounding spaces"
        )
    return key


def validate_namespace(namespace: object) -> str:
    """Return `namespace` if valid: lower-case letters, digits, ``_.-``, up to 64."""
    if not isinstance(namespace, str) or not _NAMESPACE.fullmatch(namespace):
        raise InvalidMemoryKeyError(
            f"memory namespace {namespace!r} must match {_NAMESPACE.pattern}"
        )
    return namespace


@dataclass(frozen=True, slots=True)
class MemoryScope:
    """Whose memory: a principal's, optionally narrowed to one agent definition.

    Without authentication every caller is the anonymous principal, so the server uses
    ``"anonymous"``; with authentication the principal is the key's name or the token's
    ``sub``. ``agent=None`` is shared by all of the principal's agents.
    """

    principal: str
    agent: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.principal, str) or not self.principal:
            raise InvalidMemoryKeyError("a memory scope needs a non-empty principal")
        if self.agent is not None and (not isinstance(self.agent, str) or not self.agent):
            raise InvalidMemoryKeyError("a memory scope's agent must be a non-empty name")


@dataclass(frozen=True, slots=True, kw_only=True)
class MemorySource:
    """Where an item came from, so a user can tell which conversation taught it."""

    context_id: str | None = None
    agent: str | None = None
    run_id: str | None = None


@dataclass(frozen=True, slots=True)
class VectorSpace:
    """The model and dimension of a scope's vectors; two spaces never mix."""

    model: str
    dimension: int


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryItem:
    """One remembered thing: its text (what is searched), a JSON value and its vector."""

    namespace: str
    key: str
    text: str
    value: JSONValue = None
    created_at: datetime
    updated_at: datetime
    source: MemorySource = field(default_factory=MemorySource)
    model: str
    """The embedding model of `vector`."""
    vector: Vector = field(compare=False, repr=False)

    @property
    def space(self) -> VectorSpace:
        """The model and dimension of this item's vector."""
        return VectorSpace(self.model, int(self.vector.shape[0]))


@dataclass(frozen=True, slots=True)
class MemoryMatch:
    """A search result: the item and its cosine similarity to the query (-1 to 1)."""

    item: MemoryItem
    score: float


@dataclass(frozen=True, slots=True)
class MemoryPage:
    """A page of items, most recently updated first, and the cursor of the next one."""

    items: tuple[MemoryItem, ...]
    next_cursor: str | None = None
