"""The errors of memory across conversations, each with the code it has on the wire."""

from __future__ import annotations

from agentkeel.errors import AgentkeelError, InvalidRequestError, StorageError

__all__ = [
    "EmbeddingError",
    "EmbeddingMismatchError",
    "InvalidMemoryKeyError",
    "MemoryItemNotFoundError",
    "MemoryNotConfiguredError",
]


class MemoryNotConfiguredError(AgentkeelError):
    """The agent has no memory store (framework.json has no ``memory`` section)."""

    code = "memory_not_configured"


class MemoryItemNotFoundError(AgentkeelError):
    """No item under that key in the caller's memory (another principal's never shows)."""

    code = "memory_not_found"


class InvalidMemoryKeyError(InvalidRequestError):
    """A key, namespace, text or page argument that a store cannot accept."""

    code = "invalid_memory_key"


class EmbeddingError(AgentkeelError):
    """The embedder failed (the provider's body is never passed on)."""

    code = "embedding_failed"


class EmbeddingMismatchError(StorageError):
    """Vectors of another model or dimension than the ones already stored in a scope.

    Cosine scores between two models' vectors mean nothing, so a store refuses to mix
    them instead of returning silently wrong matches.
    """

    code = "embedding_mismatch"
