"""Where sessions live: the SessionStorage interface, its records and its backends.

`InMemoryStorage` is the reference implementation; `LocalFileStorage` keeps each
session in a folder of plain files (SPEC section 8). Database backends live in their own
modules (``agentkeel.storage.postgres``) so that their drivers stay optional.
"""

from agentkeel.storage.base import (
    RunRecord,
    SessionKey,
    SessionMetadata,
    SessionSnapshot,
    SessionStorage,
)
from agentkeel.storage.file import LocalFileStorage
from agentkeel.storage.memory import InMemoryStorage

__all__ = [
    "InMemoryStorage",
    "LocalFileStorage",
    "RunRecord",
    "SessionKey",
    "SessionMetadata",
    "SessionSnapshot",
    "SessionStorage",
]
