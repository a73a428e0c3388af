"""Where sessions live: the SessionStorage interface, its records and its backends.

`InMemoryStorage` is the reference implementation; `LocalFileStorage` keeps each
session in a folder of plain files (SPEC section 8). Every backend also has the
`TranscriptStorage` capability (a page of a history, a principal's sessions).
`open_storage` picks a backend by URL (`agentkeel.storage.registry`), importing
database drivers only when one is asked for. The conformance suite every backend
passes is `agentkeel.testing`.
"""

from agentkeel.keys import SessionKey
from agentkeel.storage.base import (
    IncrementalLoadStorage,
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
from agentkeel.storage.transcript import ContextListing, HistoryPage, TranscriptStorage

__all__ = [
    "ContextListing",
    "HistoryPage",
    "InMemoryStorage",
    "IncrementalLoadStorage",
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
    "TranscriptStorage",
    "open_storage",
]
