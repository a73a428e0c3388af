"""Where sessions live: the SessionStorage interface, its records and its backends.

`InMemoryStorage` is the reference implementation; `LocalFileStorage` keeps each
session in a folder of plain files (SPEC section 8). `open_storage` picks a backend by
URL (`agentkeel.storage.registry`), importing database drivers only when one is asked
for. The conformance suite every backend passes is `agentkeel.testing`.
"""

from agentkeel.keys import SessionKey
from agentkeel.storage.base import (
    RunEventStorage,
    RunRecord,
    SessionDocumentStorage,
    SessionMetadata,
    SessionSnapshot,
    SessionStorage,
    StorageHealth,
    TaskIndexStorage,
)
from agentkeel.storage.file import LocalFileStorage
from agentkeel.storage.memory import InMemoryStorage
from agentkeel.storage.registry import open_storage

__all__ = [
    "InMemoryStorage",
    "LocalFileStorage",
    "RunEventStorage",
    "RunRecord",
    "SessionDocumentStorage",
    "SessionKey",
    "SessionMetadata",
    "SessionSnapshot",
    "SessionStorage",
    "StorageHealth",
    "TaskIndexStorage",
    "open_storage",
]
