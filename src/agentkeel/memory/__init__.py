"""Memory across conversations: a principal's items, searched by meaning (SPEC 12).

`MemoryStore` is the Protocol (backends: `InMemoryMemoryStore`, `FileMemoryStore`, and
`agentkeel.memory.postgres.PostgresMemoryStore` with the `postgres` extra);
`Embedder` turns texts into vectors (`OpenAIEmbedder`, `MiniLMEmbedder`, the
`LexicalEmbedder` fallback and the `StaticEmbedder` test double); `Memory` joins the
two, `AgentMemory` binds it to one caller, and `MemoryHook` hands it to runs.
"""

from agentkeel.memory.embedders import Embedder, LexicalEmbedder, StaticEmbedder, offline_embedder
from agentkeel.memory.errors import (
    EmbeddingError,
    EmbeddingMismatchError,
    InvalidMemoryKeyError,
    MemoryItemNotFoundError,
    MemoryNotConfiguredError,
)
from agentkeel.memory.file import FileMemoryStore
from agentkeel.memory.hook import MemoryHook
from agentkeel.memory.inmemory import InMemoryMemoryStore
from agentkeel.memory.memory import AgentMemory, Memory
from agentkeel.memory.records import (
    MemoryItem,
    MemoryMatch,
    MemoryPage,
    MemoryScope,
    MemorySource,
    VectorSpace,
)
from agentkeel.memory.store import MemoryStore

__all__ = [
    "AgentMemory",
    "Embedder",
    "EmbeddingError",
    "EmbeddingMismatchError",
    "FileMemoryStore",
    "InMemoryMemoryStore",
    "InvalidMemoryKeyError",
    "LexicalEmbedder",
    "Memory",
    "MemoryHook",
    "MemoryItem",
    "MemoryItemNotFoundError",
    "MemoryMatch",
    "MemoryNotConfiguredError",
    "MemoryPage",
    "MemoryScope",
    "MemorySource",
    "MemoryStore",
    "StaticEmbedder",
    "VectorSpace",
    "offline_embedder",
]
