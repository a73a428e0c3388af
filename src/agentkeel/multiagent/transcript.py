"""A swarm's transcript, and what a cut of it means for its members' histories.

Each member keeps its own history (with the handoff prompts it received, its tool calls
and results); the conversation the user had is none of them. So the swarm keeps one more
history, in its own session (``"<swarm-def>:<contextId>"``): the user's prompts and the
assistant messages of the members that answered, each with the id it has in the
member's history, the member's name (`Message.agent`) and the swarm run's id. It is
appended after every member turn that commits, so the transcript, fork, edit and
regenerate work on a swarm as on an agent.

A cut of that transcript (edit, regenerate, rollback, fork) rewinds the members by
whole *member turns*: a member forgets every turn of its own that holds a message the
cut drops, from that turn's prompt on. A member's turn is the unit because a history cut
inside one would leave a prompt without an answer, or a tool call without its result.
The cut of a member that does not run in the rewinding turn waits in the swarm record
(`SwarmRecord.cuts`) and is made, atomically with its next turn, when it next runs: a
member that does not speak has nothing to forget yet. The shared state and each
member's AgentState are not rewound (docs/concepts.md).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace

from agentkeel.messages import Message
from agentkeel.result import AgentResult
from agentkeel.storage.transcript import in_transcript

__all__ = ["member_cuts", "transcript_entries", "turn_start"]


def transcript_entries(result: AgentResult, run_id: str, *, first: bool) -> list[Message]:
    """What one member turn adds to the swarm's transcript.

    Its committed assistant messages, named after the member, and, for the first member
    turn of a swarm run (`first`), the user's prompt that opened it; a handoff prompt is
    the swarm's own doing and is not shown.
    """
    entries: list[Message] = []
    for index, message in enumerate(result.messages):
        if message.role == "assistant":
            entries.append(replace(message, run_id=run_id, agent=result.agent))
        elif index == 0 and first and in_transcript(message):
            entries.append(replace(message, run_id=run_id, agent=None))
    return entries


def turn_start(history: Sequence[Message], index: int) -> int:
    """The position of the prompt of the member turn holding `history[index]`."""
    while index > 0 and not (history[index].role == "user" and in_transcript(history[index])):
        index -= 1
    return index


def member_cuts(
    dropped: Iterable[str],
    histories: Mapping[str, Sequence[Message]],
    earlier: Mapping[str, str],
) -> dict[str, str]:
    """Each member's cut: the prompt id of its first turn that holds a dropped message.

    `dropped` are the ids a transcript cut drops; `earlier` the cuts still waiting,
    kept when they come first. A member with nothing to drop has no entry.
    """
    ids = set(dropped)
    cuts: dict[str, str] = {}
    for name, history in histories.items():
        waiting = earlier.get(name)
        index = next(
            (i for i, message in enumerate(history) if message.id in ids or message.id == waiting),
            None,
        )
        if index is not None:
            cuts[name] = history[turn_start(history, index)].id
    return cuts
