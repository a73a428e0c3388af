"""SwarmSession: where a swarm and each of its members keep their memory.

Session ids (SPEC section 2 shapes, so every storage backend and checkpointer works
unchanged):

- each member: ``"<swarm-def>--<member>:<contextId>"``, a SessionManager of its own
  (history, AgentState, run records, and its checkpoints when it suspends);
- the swarm itself: ``"<swarm-def>:<contextId>"``, whose ``swarm`` document (the
  storage's `SessionDocumentStorage` capability; ``swarm.json`` for files) holds the
  `SwarmRecord` (shared state, active member, suspended member, handoff trail and the
  open run) and whose run records hold one per swarm run. Its history is the swarm's
  transcript (`multiagent.transcript`): the user's prompts and the members' answers.

``<swarm-def>--<member>`` must match ``^[a-z0-9][a-z0-9_-]{0,63}$``, and neither part
may contain ``--``, so that two (swarm, member) pairs never share a session. An agent
definition of the same framework must not be named like a member session either.

Every write goes through the SessionStorage interface: the record is one document
replaced atomically, apart from any history or AgentState. A record that 0.1.0 kept
in the swarm session's AgentState (under ``"swarm"``) is still read, and a storage
without the capability keeps it there.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from agentkeel.checkpoint.base import Checkpointer
from agentkeel.errors import ConfigurationError, CorruptSessionError
from agentkeel.ids import DEFINITION_NAME_PATTERN
from agentkeel.keys import SessionKey
from agentkeel.messages import JSONValue, Message
from agentkeel.multiagent.record import SwarmRecord, SwarmRunState
from agentkeel.multiagent.result import SwarmResult
from agentkeel.session import SessionManager, run_record
from agentkeel.storage.base import SessionDocumentStorage, SessionStorage

__all__ = ["MEMBER_SEPARATOR", "SwarmSession"]

logger = logging.getLogger(__name__)

MEMBER_SEPARATOR = "--"
"""Joins the swarm's definition and a member's name into the member's definition."""
_RECORD_KEY = "swarm"


@dataclass(frozen=True, slots=True)
class SwarmSession:
    """Persistence for one swarm conversation: the swarm's record and its members' sessions.

    Args:
        definition: The swarm's definition name (its key in framework.json).
        context_id: The conversation's context id (also the checkpoint thread id).
        storage: Where histories, states, run records and the swarm record go.
        checkpointer: Where a suspended member's run waits; None keeps it in memory.
        principal: The owner, when authentication is on.
    """

    definition: str
    context_id: str
    storage: SessionStorage
    checkpointer: Checkpointer | None = None
    principal: str | None = None

    def __post_init__(self) -> None:
        if MEMBER_SEPARATOR in self.definition:
            raise ConfigurationError(
                f"swarm definition {self.definition!r} must not contain {MEMBER_SEPARATOR!r} "
                "(it separates the swarm from the member in member session ids)"
            )
        _ = self.key  # validates the definition and the context id

    @property
    def key(self) -> SessionKey:
        """The swarm's own session key, ``"<swarm-def>:<contextId>"``."""
        return SessionKey(
            definition=self.definition, context_id=self.context_id, principal=self.principal
        )

    def member_definition(self, member: str) -> str:
        """``"<swarm-def>--<member>"``; ConfigurationError if that is not a valid definition."""
        name = f"{self.definition}{MEMBER_SEPARATOR}{member}"
        if MEMBER_SEPARATOR in member or not DEFINITION_NAME_PATTERN.fullmatch(name):
            raise ConfigurationError(
                f"member {member!r} cannot be persisted: its session definition {name!r} must "
                f"match {DEFINITION_NAME_PATTERN.pattern} (lowercase letters, digits, '_' and "
                f"'-', at most 64 characters) and the name must not contain {MEMBER_SEPARATOR!r}"
            )
        return name

    def member_key(self, member: str) -> SessionKey:
        """The session key of one member."""
        return SessionKey(
            definition=self.member_definition(member),
            context_id=self.context_id,
            principal=self.principal,
        )

    def member_manager(self, member: str) -> SessionManager:
        """A SessionManager for one member (same storage, checkpointer and principal)."""
        return SessionManager(
            self.member_key(member).session_id,
            self.storage,
            checkpointer=self.checkpointer,
            principal=self.principal,
        )

    async def load(self) -> SwarmRecord | None:
        """The swarm's record, or None before its first save."""
        document: JSONValue = None
        if isinstance(self.storage, SessionDocumentStorage):
            document = await self.storage.get_document(self.key, _RECORD_KEY)
        if document is None:  # kept in the AgentState by 0.1.0, or no capability
            snapshot = await self.storage.load(self.key)
            if snapshot is None or _RECORD_KEY not in snapshot.state:
                return None
            document = snapshot.state[_RECORD_KEY]
        try:
            if not isinstance(document, dict):
                raise TypeError("not an object")
            return SwarmRecord.from_json(document)
        except (KeyError, TypeError, ValueError) as exc:
            raise CorruptSessionError(
                f"the swarm record of session {self.key.session_id} is malformed: {exc}",
                path=self.key.session_id,
            ) from exc

    async def save(self, record: SwarmRecord) -> None:
        """Replace the swarm's record atomically."""
        if isinstance(self.storage, SessionDocumentStorage):
            await self.storage.put_document(self.key, _RECORD_KEY, record.to_json())
        else:  # an append with no message replaces the state and keeps the transcript
            await self.storage.append(self.key, [], {_RECORD_KEY: record.to_json()})

    async def load_transcript(self) -> list[Message]:
        """The swarm's transcript history (empty before its first committed turn)."""
        snapshot = await self.storage.load(self.key)
        return [] if snapshot is None else snapshot.messages

    async def append_transcript(
        self, entries: Sequence[Message], *, cut: int | None, fence: int | None
    ) -> None:
        """Add one member turn's entries to the transcript, after cutting it at `cut`."""
        await self.storage.append(self.key, entries, None, cut=cut, fence=fence)

    async def put_run(self, run: SwarmRunState, result: SwarmResult) -> None:
        """Create or replace the record of one swarm run."""
        record = run_record(result, input=run.input, started_at=run.started_at)
        await self.storage.put_run(self.key, record)

    async def delete(self, members: Iterable[str] = ()) -> bool:
        """Forget the conversation: every member's session and checkpoints, then the swarm's.

        The member names saved in the record are deleted along with `members`; True if
        anything existed.
        """
        names = set(members)
        try:
            record = await self.load()
        except CorruptSessionError:
            logger.warning("session=<%s> | deleting a corrupt swarm record", self.key.session_id)
            record = None
        if record is not None:
            names.update(record.members)
        existed = False
        for name in sorted(names):
            try:
                key = self.member_key(name)
            except ConfigurationError:
                continue
            if self.checkpointer is not None:
                await self.checkpointer.delete_thread(key)
            existed = await self.storage.delete(key) or existed
        if self.checkpointer is not None:
            await self.checkpointer.delete_thread(self.key)
        return await self.storage.delete(self.key) or existed
