"""The commit check every backend makes: the expected version, then the fencing token.

One function, so that the memory backend, the file backend and the database backends to
come refuse exactly the same writes, with the same error and message.
"""

from __future__ import annotations

from agentkeel.errors import ConcurrentWriteError
from agentkeel.keys import SessionKey

__all__ = ["check_commit"]


def check_commit(
    key: SessionKey,
    *,
    version: int,
    highest_fence: int,
    expected_version: int | None,
    fence: int | None,
) -> int:
    """Refuse a stale write; return the highest fence once this write is accepted.

    Args:
        key: The session written (named in the error).
        version: The stored version now.
        highest_fence: The highest fencing token accepted for the session (0 for none).
        expected_version: The version the writer loaded; None skips the check.
        fence: The writer's fencing token; None skips the check.

    Raises:
        ConcurrentWriteError: Another writer committed since, or holds a newer lease.
    """
    if fence is not None and fence < highest_fence:
        raise ConcurrentWriteError(
            f"session {key.session_id}: fencing token {fence} was superseded by "
            f"{highest_fence}; another process owns the context now",
            expected=fence,
            actual=highest_fence,
        )
    if expected_version is not None and expected_version != version:
        raise ConcurrentWriteError(
            f"session {key.session_id}: expected version {expected_version}, but it is at "
            f"{version}; another writer committed first",
            expected=expected_version,
            actual=version,
        )
    return highest_fence if fence is None else max(fence, highest_fence)
