"""Where suspended human-in-the-loop runs wait: the Checkpointer interface and backends.

`InMemoryCheckpointer` is the reference implementation; `FileCheckpointer` keeps one
JSON file per suspended run, so a pending interrupt survives a restart.
"""

from agentkeel.checkpoint.base import Checkpoint, Checkpointer
from agentkeel.checkpoint.file import FileCheckpointer
from agentkeel.checkpoint.memory import InMemoryCheckpointer

__all__ = ["Checkpoint", "Checkpointer", "FileCheckpointer", "InMemoryCheckpointer"]
