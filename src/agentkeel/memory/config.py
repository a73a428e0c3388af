"""The ``memory`` section of framework.json: which store, which embeddings, which scope.

```json
"memory": {"store": "file", "embeddings": "offline", "scope": "principal", "autoRecall": 0}
```

- ``store``: ``"memory"`` (this process only), ``"file"`` (under the session folder's
  root, ``<sessionDir>/.memory``; needs ``sessionDir`` or a ``file:`` storage),
  ``"file:<folder>"``, ``"postgresql"`` (the tables beside the sessions, on the
  storage's pool; needs a ``postgresql://`` storage) or a ``postgresql://…`` URL of its
  own. Default: the sessions' backend when it is files or PostgreSQL, else ``"memory"``.
- ``embeddings``: ``"offline"`` (default: the bundled MiniLM model, or the lexical
  fallback when it is not installed), ``"lexical"``, or ``{"provider": "openai",
  "model", "baseUrl", "apiKeyEnv", "dimensions"}``.
- ``scope``: ``"principal"`` (default; shared by a principal's agents) or ``"agent"``.
- ``autoRecall``: matches added to the system prompt before each model call (0: off).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from agentkeel.errors import ConfigurationError
from agentkeel.memory.embedders import Embedder, LexicalEmbedder, offline_embedder
from agentkeel.memory.file import MEMORY_FOLDER, FileMemoryStore
from agentkeel.memory.inmemory import InMemoryMemoryStore
from agentkeel.memory.memory import Memory
from agentkeel.memory.openai import OpenAIEmbedder
from agentkeel.memory.store import MemoryStore
from agentkeel.storage.base import SessionStorage
from agentkeel.storage.file import LocalFileStorage

__all__ = ["MemorySection", "load_memory"]


class _Strict(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        alias_generator=to_camel,
        strict=True,
        frozen=True,
        hide_input_in_errors=True,
    )


class _OpenAIEmbeddings(_Strict):
    provider: Literal["openai"]
    model: str = Field(default="text-embedding-3-small", min_length=1)
    base_url: str = Field(default="https://api.openai.com/v1", min_length=1)
    api_key_env: str | None = Field(default=None, min_length=1)
    dimensions: int | None = Field(default=None, ge=1)


class MemorySection(_Strict):
    """framework.json's ``memory`` object, as validated."""

    store: str | None = Field(default=None, min_length=1)
    embeddings: Literal["offline", "lexical"] | _OpenAIEmbeddings = "offline"
    scope: Literal["principal", "agent"] = "principal"
    auto_recall: int = Field(default=0, ge=0, le=20)


def _postgres(spec: str, storage: SessionStorage | None, where: str) -> MemoryStore:
    """A PostgresMemoryStore: on the storage's pool, or on a URL of its own."""
    try:
        from agentkeel.memory.postgres import PostgresMemoryStore, memory_store_from_url
        from agentkeel.storage.postgres_pool import PostgresPool
    except ImportError as exc:
        raise ConfigurationError(
            f"{where}.store: PostgreSQL memory needs {exc.name!r}; install it with: "
            "pip install 'agentkeel[postgres]'"
        ) from exc
    if spec in ("postgresql", "postgres"):
        if not isinstance(storage, PostgresPool):
            raise ConfigurationError(
                f"{where}.store: 'postgresql' keeps memory beside the sessions, but they are "
                "not in PostgreSQL; set a postgresql:// storage, or a postgresql:// URL here"
            )
        return PostgresMemoryStore.over(storage)
    return memory_store_from_url(spec)


def _in_postgres(storage: SessionStorage | None) -> bool:
    try:
        from agentkeel.storage.postgres_pool import PostgresPool
    except ImportError:  # without the driver no storage can be in PostgreSQL
        return False
    return isinstance(storage, PostgresPool)


def _store(
    section: MemorySection,
    base: Path,
    session_root: Path | None,
    where: str,
    storage: SessionStorage | None,
) -> MemoryStore:
    default = "memory"
    if session_root is not None:
        default = "file"
    elif _in_postgres(storage):
        default = "postgresql"
    spec = section.store or default
    if spec in ("memory", "memory:"):
        return InMemoryMemoryStore()
    if spec in ("postgresql", "postgres") or spec.startswith(("postgresql://", "postgres://")):
        return _postgres(spec, storage, where)
    if spec == "file":
        if session_root is None:
            raise ConfigurationError(
                f"{where}.store: 'file' keeps memory under the session folder, but sessions "
                "are not in files; set sessionDir, or use 'file:<folder>'"
            )
        return FileMemoryStore(session_root / MEMORY_FOLDER)
    if spec.startswith("file:"):
        folder = spec.removeprefix("file:").removeprefix("//")
        if not folder:
            raise ConfigurationError(f"{where}.store: a file: store needs a folder")
        path = Path(folder).expanduser()
        return FileMemoryStore(path if path.is_absolute() else base / path)
    raise ConfigurationError(
        f"{where}.store: memory store {spec!r} is not available; use 'memory', 'file', "
        "'file:<folder>', 'postgresql' or a postgresql:// URL"
    )


def _embedder(section: MemorySection, where: str) -> Embedder:
    config = section.embeddings
    if config == "offline":
        return offline_embedder()
    if config == "lexical":
        return LexicalEmbedder()
    api_key = None
    if config.api_key_env is not None:
        api_key = os.environ.get(config.api_key_env)
        if not api_key:
            raise ConfigurationError(
                f"{where}.embeddings.apiKeyEnv: the environment variable "
                f"{config.api_key_env} is not set"
            )
    return OpenAIEmbedder(
        config.model, base_url=config.base_url, api_key=api_key, dimensions=config.dimensions
    )


def load_memory(
    section: MemorySection, base: Path, storage: SessionStorage | None, source: str
) -> Memory:
    """Build the configured Memory; errors name the key and the file.

    Args:
        section: The validated section.
        base: The folder relative paths are relative to (the file's).
        storage: The sessions' storage: ``"file"`` keeps memory under its folder, and
            ``"postgresql"`` shares its pool.
        source: The file, for messages.

    Raises:
        ConfigurationError: A store or embeddings setting that cannot work.
    """
    root = storage.directory if isinstance(storage, LocalFileStorage) else None
    where = f"{source}: memory"
    return Memory(
        store=_store(section, base, root, where, storage),
        embedder=_embedder(section, where),
        scope=section.scope,
        auto_recall=section.auto_recall,
    )
