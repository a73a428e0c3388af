"""What a server serves: an Agent or a Swarm, behind one small interface.

The server (native wire and A2A) only needs a handful of members from what it serves;
`agentkeel.servable.Servable` names them, and `ServedResult` names what it reads from a
run's result. An Agent and a Swarm both satisfy them, so a swarm is served exactly like
an agent (the seed's recipe: "expose an A2A agent that wraps the swarm"). Forgetting a
context is the one place that knows the difference: a swarm's members keep sessions of
their own, which the swarm's record lists, also when nothing is cached.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, TypeAlias

from agentkeel.checkpoint.base import Checkpointer
from agentkeel.errors import CorruptSessionError
from agentkeel.interrupts import Interrupt
from agentkeel.multiagent import Swarm, SwarmSession
from agentkeel.multiagent.session import MEMBER_SEPARATOR
from agentkeel.result import ErrorInfo, Usage
from agentkeel.servable import Served
from agentkeel.session import SessionHome, SessionManager
from agentkeel.storage.base import SessionKey, SessionStorage

__all__ = [
    "Served",
    "ServedFactory",
    "ServedResult",
    "attach_session",
    "forget_context",
]

ServedFactory: TypeAlias = Callable[[str], Served]


class ServedResult(Protocol):
    """The fields of a run's result that reach the wire (AgentResult and SwarmResult)."""

    @property
    def run_id(self) -> str: ...  # noqa: D102
    @property
    def status(self) -> str: ...  # noqa: D102
    @property
    def text(self) -> str: ...  # noqa: D102
    @property
    def tool_names(self) -> list[str]: ...  # noqa: D102
    @property
    def interrupt(self) -> Interrupt | None: ...  # noqa: D102
    @property
    def error(self) -> ErrorInfo | None: ...  # noqa: D102
    @property
    def usage(self) -> Usage: ...  # noqa: D102
    @property
    def output(self) -> Any: ...  # noqa: D102


def attach_session(
    served: Served, key: SessionKey, storage: SessionStorage, checkpointer: Checkpointer
) -> None:
    """Give a freshly built context its persistent memory under `key`."""
    served.attach_session(SessionHome(key, storage, checkpointer))


async def forget_context(
    key: SessionKey,
    storage: SessionStorage,
    checkpointer: Checkpointer,
    *,
    served: Served | None = None,
    declared_swarm: bool = False,
) -> None:
    """Delete everything stored for a context: sessions, runs, checkpoints.

    A swarm's members keep their memory in sessions of their own beside the swarm's,
    which the swarm's record lists; an agent has the one session. Whether the context
    is a swarm's is decided by what was built for it (`served`, when it is cached) or by
    the swarm record stored under its key, not by how the definition was declared: a
    ``factory`` may return a Swarm too.
    """
    swarm = _swarm_session(key, storage, checkpointer)
    if swarm is not None and (
        declared_swarm or isinstance(served, Swarm) or await _holds_swarm_record(swarm)
    ):
        members = tuple(served.members) if isinstance(served, Swarm) else ()
        await swarm.delete(members)
        return
    await SessionManager(
        key.session_id, storage, checkpointer=checkpointer, principal=key.principal
    ).delete()


def _swarm_session(
    key: SessionKey, storage: SessionStorage, checkpointer: Checkpointer
) -> SwarmSession | None:
    """The swarm view of `key`'s context; None when no swarm can have its definition."""
    if MEMBER_SEPARATOR in key.definition:
        return None
    return SwarmSession(
        key.definition,
        key.context_id,
        storage,
        checkpointer=checkpointer,
        principal=key.principal,
    )


async def _holds_swarm_record(swarm: SwarmSession) -> bool:
    try:
        return await swarm.load() is not None
    except CorruptSessionError:
        return False  # an Agent whose AgentState happens to hold a "swarm" key
