"""Conformance suites for our Protocols, that other projects' backends can run too.

Storage backends and checkpointers: the suites below. Memory stores:
`agentkeel.testing.memory_store`.

A backend is done when a test module subclasses the suites and they pass. Each suite
needs one fixture, a factory whose every call returns a store over the *same* data (a
fresh object for a persistent backend, so that reads reach the store, not a cache)::

    import pytest
    from agentkeel.testing import SessionStorageSuite, StorageFactory

    class TestMyStorage(SessionStorageSuite):
        @pytest.fixture
        def reopen_storage(self, tmp_path) -> StorageFactory:
            return lambda: MyStorage(tmp_path)

The suites are pytest test classes (they need pytest and anyio's pytest plugin), which
is why this package is imported only by tests, never by agentkeel itself.
"""

from agentkeel.testing.capabilities import CapabilitySuite
from agentkeel.testing.catch_up import CatchUpSuite
from agentkeel.testing.checkpointer import CheckpointerFactory, CheckpointerSuite
from agentkeel.testing.runs import RunRecordSuite
from agentkeel.testing.session_storage import HistorySuite, StorageFactory
from agentkeel.testing.transcript import TranscriptSuite
from agentkeel.testing.versions import VersionSuite

__all__ = [
    "CapabilitySuite",
    "CatchUpSuite",
    "CheckpointerFactory",
    "CheckpointerSuite",
    "HistorySuite",
    "RunRecordSuite",
    "SessionStorageSuite",
    "StorageFactory",
    "TranscriptSuite",
    "VersionSuite",
]


class SessionStorageSuite(
    HistorySuite, RunRecordSuite, VersionSuite, CapabilitySuite, TranscriptSuite, CatchUpSuite
):
    """Everything a SessionStorage does.

    History and runs, versions and fencing, capabilities, the transcript (ids, pages,
    cuts, the session list) and catching a cached history up (`load_since`).
    """
