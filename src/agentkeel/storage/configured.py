"""The storage and checkpointer that framework.json's keys ask for.

``storage`` (a URL, or ``{"env": NAME}`` naming the variable that holds one) excludes
``sessionDir``; a storage that keeps checkpoints itself (a database: it has a
``checkpointer()`` method) excludes ``checkpointer.dir``. Each refusal names its key.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Protocol, runtime_checkable

from agentkeel.checkpoint.base import Checkpointer
from agentkeel.checkpoint.file import FileCheckpointer
from agentkeel.checkpoint.memory import InMemoryCheckpointer
from agentkeel.errors import ConfigurationError
from agentkeel.storage.base import SessionStorage
from agentkeel.storage.registry import open_storage

__all__ = ["EnvReference", "configured_stores", "env_url", "scheme_url"]


@runtime_checkable
class EnvReference(Protocol):
    """``{"env": "NAME"}``: the URL is in that environment variable."""

    @property
    def env(self) -> str:
        """The variable's name."""
        ...


Refuse = Callable[[str, str], ConfigurationError]
"""Makes the error for (key path, message), naming the file too."""


def env_url(value: str | EnvReference, key: str, refuse: Refuse) -> str:
    """The URL `value` holds or names (``{"env": …}``); an unset variable is refused at `key`."""
    if isinstance(value, str):
        return value
    url = os.environ.get(value.env) or ""
    if not url:
        raise refuse(f"{key}.env", f"environment variable {value.env} is not set")
    return url


def scheme_url(
    value: str | EnvReference, key: str, schemes: Collection[str], refuse: Refuse
) -> tuple[str, str]:
    """The URL `value` holds or names, and its scheme, which must be one of `schemes`."""
    url = env_url(value, key, refuse)
    scheme = url.partition(":")[0].lower()
    if scheme not in schemes:
        known = ", ".join(sorted(f"'{name}:…'" for name in schemes))
        raise refuse(key, f"unknown {key.rpartition('.')[2]} scheme {scheme!r}; use {known}")
    return url, scheme


def configured_stores(
    *,
    storage: str | EnvReference | None,
    session_dir: str | None,
    checkpoint_dir: Path | None,
    base: Path,
    refuse: Refuse,
) -> tuple[SessionStorage, Checkpointer]:
    """The (storage, checkpointer) of a framework; memory for both when nothing is set."""
    if storage is not None and session_dir is not None:
        raise refuse("storage", "set either storage or sessionDir, not both")
    url = "memory:" if storage is None else env_url(storage, "storage", refuse)
    if session_dir is not None:
        url = f"file:{session_dir}"
    try:
        store = open_storage(url, base=base)
    except ConfigurationError as exc:
        raise refuse("storage", exc.message) from None
    own = getattr(store, "checkpointer", None)
    if callable(own):
        if checkpoint_dir is not None:
            raise refuse(
                "checkpointer.dir",
                "this storage keeps the checkpoints itself; remove checkpointer.dir",
            )
        checkpointer: Checkpointer = own()
        return store, checkpointer
    if checkpoint_dir is None:
        return store, InMemoryCheckpointer()
    return store, FileCheckpointer(checkpoint_dir)
