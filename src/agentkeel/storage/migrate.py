"""``agentkeel migrate``: run a framework's storage migrations alone, then stop.

A deployment that wants schema changes applied by a release step rather than by the
first server to start runs this; the servers then find nothing left to do. Storages
without a schema (memory, files) have nothing to migrate and say so.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol, runtime_checkable

from agentkeel.framework import load_framework

__all__ = ["Migratable", "migrate_framework"]


@runtime_checkable
class Migratable(Protocol):
    """A storage with a schema of its own to bring up to date."""

    async def migrate(self) -> list[int]:
        """Apply the missing migrations; the versions applied, in order."""
        ...


async def migrate_framework(path: str | Path) -> str:
    """Migrate the storage `path` (a framework.json) declares; a line saying what was done.

    Raises:
        ConfigurationError: The framework is invalid.
        StorageError: The database cannot be reached, or is newer than this code.
    """
    storage = load_framework(path).storage
    if not isinstance(storage, Migratable):
        return f"storage {type(storage).__name__} has no schema to migrate"
    applied = await storage.migrate()
    if not applied:
        return "storage schema is up to date"
    return "storage schema migrated to version " + ", ".join(str(v) for v in applied)
