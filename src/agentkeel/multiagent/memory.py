"""SwarmMemory: what a swarm remembers between runs, and when it is saved.

The members keep their own histories and states (each with its own SessionManager);
the swarm remembers the rest: the shared state, the active member, the suspended
member, the open run and the last handoff trail. It saves them at every handoff and
before a run's result is returned, so that a crash loses at most the member run in
progress, and a suspended swarm resumes in the right member after a restart. It also
keeps the swarm's transcript, and the member cuts an edit, a regenerate or a rollback
leaves for later (`multiagent.transcript`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping

from agentkeel.agent import Agent
from agentkeel.errors import ConcurrentWriteError, MessageNotFoundError
from agentkeel.ids import new_run_id
from agentkeel.interrupts import Interrupt
from agentkeel.messages import Message
from agentkeel.multiagent.loop import SwarmOutcome
from agentkeel.multiagent.record import SwarmRecord, SwarmRunState
from agentkeel.multiagent.result import HandoffRecord, SwarmResult
from agentkeel.multiagent.session import SwarmSession
from agentkeel.multiagent.transcript import member_cuts, transcript_entries
from agentkeel.result import CANCELLED_ERROR, AgentResult
from agentkeel.rewind import Rewind
from agentkeel.state import SharedState

__all__ = ["SwarmMemory"]

logger = logging.getLogger(__name__)


class SwarmMemory:
    """The swarm's position in its conversation, persisted through a SwarmSession."""

    def __init__(
        self, *, members: Mapping[str, Agent], entry: str, shared_state: SharedState
    ) -> None:
        self.members = members
        self.shared_state = shared_state
        self.session: SwarmSession | None = None
        self.active = entry
        """The member the next prompt goes to."""
        self.suspended: str | None = None
        """The member whose pending interrupts suspend the swarm."""
        self.run: SwarmRunState | None = None
        """The run in progress or suspended."""
        self.trail: tuple[HandoffRecord, ...] = ()
        """The handoff trail of the current run, or of the last one."""
        self.transcript: list[Message] = []
        """The swarm's transcript history, as committed."""
        self.cuts: dict[str, str] = {}
        """Member cuts waiting for the member's next turn (`SwarmRecord.cuts`)."""
        self.opened_by: str | None = None
        """The member the run in progress started in (a rollback makes it active again)."""
        self.restored = False

    @property
    def pending_interrupts(self) -> tuple[Interrupt, ...]:
        """The suspended member's pending interrupts."""
        if self.suspended is None:
            return ()
        return self.members[self.suspended].pending_interrupts

    async def restore(self) -> None:
        """Attach each member's session, restore the members, then the swarm's record.

        After the first load it costs one version read per member, and loads again only
        when another process moved a member's session on (SPEC guarantee 9). The record
        needs no version of its own: it is written only by a swarm turn, and every turn
        commits the member that answered it before the record.
        """
        if self.restored and not await self.moved_on():
            return
        session = self.session
        if session is not None and not self.restored:
            for member in self.members.values():
                member.session_manager = session.member_manager(member.name)
        for member in self.members.values():
            await member.restore()
        record = None if session is None else await session.load()
        if session is not None:
            self.transcript = await session.load_transcript()
        if record is not None:
            self.shared_state.replace(record.shared)
            if record.active in self.members:
                self.active = record.active
            self.trail = record.handoffs
            self.cuts = {name: cut for name, cut in record.cuts.items() if name in self.members}
        self._adopt_suspension(record)
        self.restored = True

    async def moved_on(self) -> bool:
        """Whether storage holds a newer version of any member's session than it knows."""
        for member in self.members.values():
            manager = member.session_manager
            if manager is not None and await manager.moved_on():
                return True
        return False

    def begin(self, text: str, run_id: str | None = None) -> SwarmRunState:
        """Open a new run (under `run_id` when the caller chose it)."""
        self.suspended = None
        self.opened_by = self.active
        run_id = run_id or new_run_id()
        self.run = SwarmRunState(run_id=run_id, input=text, started_at=time.time())
        return self.run

    def begin_rewind(self, rewind: Rewind, run_id: str | None) -> tuple[SwarmRunState, Agent]:
        """Open an edit or regenerate run; the member that rewinds its own history first.

        The transcript message is looked up as an Agent looks up its history's
        (MessageNotFoundError for a wrong id or role); the member is the one that holds
        it. The transcript cut and the other members' cuts wait on the run until that
        member commits, so a turn that fails before cuts nothing.
        """
        probe = rewind.begin(self.transcript, run_id or new_run_id())
        index = probe.cut if probe.cut is not None else len(self.transcript)
        target = self.transcript[index]
        name = target.agent
        if target.role == "user":
            name = next(
                (n for n, m in self.members.items() if any(x.id == target.id for x in m.messages)),
                None,
            )
        member = self.members.get(name or "")
        if name is None or member is None or all(m.id != target.id for m in member.messages):
            raise MessageNotFoundError(
                f"no member of the swarm remembers message {rewind.message_id!r}"
            )
        others = {n: m.messages for n, m in self.members.items() if n != name}
        waiting = {n: cut for n, cut in self.cuts.items() if n != name}
        dropped = [message.id for message in self.transcript[index:]]
        self.active = name
        run = self.begin(probe.input if isinstance(probe.input, str) else "", run_id)
        run.cut, run.cuts = index, member_cuts(dropped, others, waiting)
        return run, member

    def cut_of(self, member: str) -> str | None:
        """The cut waiting for `member`'s next turn, if any."""
        return self.cuts.get(member)

    async def commit_member(self, run: SwarmRunState, result: AgentResult) -> None:
        """A member turn ended: add what it committed to the transcript.

        A committed turn made the member's waiting cut (it ran as a Rewind), and the
        rewinding member's commit makes the run's cuts take effect.
        """
        entries = transcript_entries(result, run.run_id, first=not run.handoffs)
        if not entries or result.agent is None:
            return  # the member committed nothing
        cut, run.cut = run.cut, None
        if cut is not None:
            self.cuts.update(run.cuts)
        self.cuts.pop(result.agent, None)
        start = len(self.transcript) if cut is None else cut
        if run.transcript_start is None:
            run.transcript_start = start
        if self.session is not None:
            await self.session.append_transcript(entries, cut=cut, fence=self._fence())
        self.transcript[start:] = entries

    async def _roll_back(self, run: SwarmRunState) -> None:
        """A rollback: the run's messages leave the transcript, its member turns wait to go."""
        start, opened = run.transcript_start, self.opened_by
        if opened is not None and opened in self.members:
            self.active = opened
        if start is None:
            return
        dropped = [message.id for message in self.transcript[start:]]
        histories = {name: member.messages for name, member in self.members.items()}
        self.cuts = member_cuts(dropped, histories, self.cuts)
        if self.session is not None:
            await self.session.append_transcript([], cut=start, fence=self._fence())
        del self.transcript[start:]

    def _fence(self) -> int | None:
        """The turn's fencing token (the same on every member's session manager)."""
        managers = (m.session_manager for m in self.members.values())
        return next((manager.fence for manager in managers if manager is not None), None)

    async def finish(
        self,
        run: SwarmRunState,
        outcome: SwarmOutcome,
        context_id: str | None,
        *,
        drop: bool = False,
    ) -> SwarmResult:
        """Commit the run's end, save it, and build its result (saved before returned).

        `drop` (a rollback) takes a cancelled run's messages back out of the transcript.
        """
        self.active = outcome.agent
        if drop and outcome.status == "cancelled":
            await self._roll_back(run)
        self.suspended = outcome.agent if outcome.status == "suspended" else None
        if outcome.status != "suspended":
            self.run = None
        self.trail = tuple(run.handoffs)
        result = SwarmResult(
            run_id=run.run_id,
            status=outcome.status,
            text=outcome.text,
            agent=outcome.agent,
            handoffs=tuple(run.handoffs),
            results=tuple(run.results),
            tool_calls=run.tool_calls(),
            usage=run.usage(),
            shared_context=self.shared_state.to_dict(),
            interrupts=outcome.interrupts,
            error=outcome.error,
            context_id=context_id,
        )
        if self.session is not None:
            if outcome.error is None or outcome.error.code != ConcurrentWriteError.code:
                await self.session.save(self._record(run if self.suspended else None))
            # else another process moved the conversation on: its record stays, and the
            # member's stale version makes the next turn reload it
            await self.session.put_run(run, result)
        return result

    async def save(self, run: SwarmRunState) -> None:
        """Save progress at a handoff: shared state, the member now active, the trail."""
        self.active = run.member or self.active
        self.trail = tuple(run.handoffs)
        if self.session is not None:
            await self.session.save(self._record(run))

    async def abandon(
        self, run: SwarmRunState, context_id: str | None, *, drop: bool = False
    ) -> None:
        """A run left by an exception or a cancellation: kept only if still suspended."""
        member = self.members.get(run.member or "")
        if member is None or not member.pending_interrupts:
            self.suspended = None
        if self.suspended is not None or self.run is not run:
            return
        outcome = SwarmOutcome(
            status="cancelled", agent=run.member or self.active, error=CANCELLED_ERROR
        )
        try:
            await self.finish(run, outcome, context_id, drop=drop)
        except Exception:
            logger.warning("run=<%s> | could not save an abandoned swarm run", run.run_id)

    def _record(self, run: SwarmRunState | None) -> SwarmRecord:
        return SwarmRecord(
            members=tuple(self.members),
            active=self.active,
            shared=self.shared_state.to_dict(),
            suspended=self.suspended,
            run=run,
            handoffs=self.trail,
            cuts=dict(self.cuts),
        )

    def _adopt_suspension(self, record: SwarmRecord | None) -> None:
        """Suspend the swarm where a member has pending interrupts.

        The members decide, not the record: a crash may have come between a member's
        save and the swarm's.
        """
        suspended = [name for name, member in self.members.items() if member.pending_interrupts]
        run = None if record is None else record.run
        if not suspended:
            if run is not None:
                logger.info("run=<%s> | dropping a swarm run a restart interrupted", run.run_id)
            self.suspended = self.run = None
            return
        name = suspended[0]
        if record is not None and record.suspended in suspended:
            name = record.suspended
        if run is None or run.member != name:
            run = SwarmRunState(
                run_id=new_run_id(), input=None, started_at=time.time(), member=name, iterations=1
            )
        self.suspended = self.active = name
        self.run = run
