"""Forking a swarm conversation: its transcript, its record and every member's memory.

The copy holds the swarm's transcript up to and including the message (all of it
without one), with the same ids; each member's history without the member turns that
hold a message the copy leaves out (the cut `multiagent.transcript` describes, waiting
cuts made at once), and its AgentState; and the swarm record's shared state, with the
member of the last copied answer active. A suspended run is not copied (nor is an
agent's): the copy starts idle.

The transcript is written first, expected to be the new context's first write, so a
context id taken already (also by a fork at the same instant) is refused before any
member is written.
"""

from __future__ import annotations

from agentkeel.errors import (
    ConcurrentWriteError,
    ConfigurationError,
    ContextExistsError,
    MessageNotFoundError,
)
from agentkeel.multiagent.record import SwarmRecord
from agentkeel.multiagent.session import SwarmSession
from agentkeel.multiagent.transcript import member_cuts
from agentkeel.storage.base import SessionSnapshot

__all__ = ["fork_swarm"]


async def fork_swarm(source: SwarmSession, target: SwarmSession, message_id: str | None) -> None:
    """Copy `source`'s conversation up to `message_id` into `target`'s new context.

    Raises MessageNotFoundError when the transcript holds no such message (or nothing
    yet), ContextExistsError when `target`'s context exists.
    """
    storage = source.storage
    record = await source.load()
    snapshot = await storage.load(source.key)
    if record is None or snapshot is None or not snapshot.messages:
        raise MessageNotFoundError("the conversation holds no committed message yet")
    messages = snapshot.messages
    kept = messages
    if message_id is not None:
        index = next((i for i, m in enumerate(messages) if m.id == message_id), None)
        if index is None:
            raise MessageNotFoundError(f"the conversation holds no message {message_id!r}")
        kept = messages[: index + 1]
    members: dict[str, SessionSnapshot] = {}
    for name in record.members:
        try:
            loaded = await storage.load(source.member_key(name))
        except ConfigurationError:
            continue  # a name this swarm can no longer persist
        if loaded is not None:
            members[name] = loaded
    dropped = [message.id for message in messages[len(kept) :]]
    cuts = member_cuts(dropped, {n: s.messages for n, s in members.items()}, record.cuts)
    try:
        await storage.append(target.key, kept, snapshot.state, expected_version=0)
        for name, loaded in members.items():
            history = loaded.messages
            if name in cuts:
                history = history[: next(i for i, m in enumerate(history) if m.id == cuts[name])]
            await storage.append(target.member_key(name), history, loaded.state, expected_version=0)
    except ConcurrentWriteError:
        raise ContextExistsError(f"context {target.context_id!r} exists already") from None
    speakers = [m.agent for m in kept if m.role == "assistant" and m.agent in record.members]
    await target.save(
        SwarmRecord(
            members=record.members,
            active=speakers[-1] if speakers and speakers[-1] else record.active,
            shared=record.shared,
        )
    )
