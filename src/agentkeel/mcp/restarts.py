"""How soon a dead MCP server may be started again.

The first restart is tried at once (a server that crashed once usually starts fine);
while it keeps failing, the attempts wait 0.5 s, 1 s, 2 s ... up to 30 s, so a broken
server is not spawned on every call. A call that succeeds forgets the failures.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

__all__ = ["RestartBackoff"]

_MAX_BACKOFF = 30.0


@dataclass(slots=True)
class RestartBackoff:
    """Failures of one connection slot, and when it may be tried again."""

    count: int = 0
    last: float = 0.0

    def wait_left(self) -> float:
        """Seconds until the next restart may be tried (none after the first failure)."""
        if self.count <= 1:
            return 0.0
        pause = min(_MAX_BACKOFF, 0.5 * float(2 ** (self.count - 2)))
        return max(0.0, self.last + pause - time.monotonic())

    def failed(self) -> None:
        """Count one more failure (a death, or a start that failed)."""
        self.count += 1
        self.last = time.monotonic()
