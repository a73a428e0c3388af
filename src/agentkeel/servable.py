"""What a server serves, an Agent or a Swarm, as one Protocol, and their shared front.

`Servable` is everything the runtime and the bindings use on what a definition builds
for a context: run a turn (with the run id the runtime chose), stream it, resume a
suspended run, cancel, restore from storage, read the pending interrupts, attach the
context's memory, and reach the agents that do the work (for hooks, budgets, metrics
and toolsets). An Agent and a Swarm both satisfy it, so nothing outside them needs to
tell one from the other.

`ServableFront` is the one implementation of the methods both offer alike: the blocking
and streaming forms of a run, the context manager, `busy` and `pending_interrupts`. A
subclass supplies `_execute` (one run, reporting through a callback), `restore` and
what its pending interrupts are.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable, Iterator, Mapping, Sequence
from types import TracebackType
from typing import (
    TYPE_CHECKING,
    ClassVar,
    Generic,
    Protocol,
    Self,
    TypeAlias,
    TypeVar,
    runtime_checkable,
)

import anyio

from agentkeel._portal import Portal, RunStream, in_event_loop, stream_run
from agentkeel.errors import InvalidRequestError, RestoreRequiredError
from agentkeel.events import RunEvent
from agentkeel.hooks.registry import HookRegistry
from agentkeel.interrupts import Decision, Interrupt
from agentkeel.messages import Message
from agentkeel.result import RunResultFront
from agentkeel.session import SessionHome
from agentkeel.state import InvocationState
from agentkeel.tools.decorator import Tool

if TYPE_CHECKING:
    from agentkeel.agent import Agent

__all__ = [
    "EventHandler",
    "RunStart",
    "Servable",
    "ServableFront",
    "Served",
    "prompt_message",
]

EventHandler = Callable[[RunEvent], None]
"""Receives each run event as it happens."""
RunStart = Callable[[], None]
"""Told once the run started: its BeforeRunEvent hooks passed, so what fails from here
on fails inside the run (the runtime answers the request that asked for it then)."""
ResultT = TypeVar("ResultT", bound=RunResultFront)
ResultT_co = TypeVar("ResultT_co", bound=RunResultFront, covariant=True)


@runtime_checkable
class Servable(Protocol[ResultT_co]):
    """What the runtime and the bindings use on an Agent or a Swarm."""

    name: str
    description: str
    hooks: HookRegistry

    @property
    def busy(self) -> bool:
        """Whether a run is in progress."""

    @property
    def context_id(self) -> str | None:
        """The context id of the attached memory, if any."""

    @property
    def pending_interrupts(self) -> tuple[Interrupt, ...]:
        """Interrupts waiting for a decision."""

    @property
    def suspended_run_id(self) -> str | None:
        """The id of the suspended run a decision resumes (a resumed run keeps it)."""

    @property
    def agents(self) -> Sequence[Agent]:
        """The agents that do the work: the Agent itself, or a Swarm's members."""

    @property
    def tools(self) -> Mapping[str, Tool]:
        """The tools a client may be told of (an agent card's skills)."""

    async def restore(self) -> None:
        """Load memory from storage; again when storage moved on."""

    async def invoke_async(
        self,
        prompt: str | Message,
        *,
        invocation_state: InvocationState | None = None,
        on_event: EventHandler | None = None,
        run_id: str | None = None,
        on_start: RunStart | None = None,
    ) -> ResultT_co:
        """Run one turn, under `run_id` when the caller chose it."""

    async def resume_async(
        self,
        interrupt_id: str,
        decision: Decision,
        *,
        invocation_state: InvocationState | None = None,
        on_event: EventHandler | None = None,
        on_start: RunStart | None = None,
    ) -> ResultT_co:
        """Answer a pending interrupt and continue the suspended run."""

    def cancel(self, *, drop: bool = False) -> bool:
        """Cancel the run in progress; False when nothing runs.

        `drop` (the ``rollback`` policy) leaves the cancelled turn out of the history.
        """

    def attach_session(self, home: SessionHome) -> None:
        """Give a freshly built context its persistent memory."""


Served: TypeAlias = "Servable[RunResultFront]"
"""Whatever a definition builds for a context, whichever result it returns."""


class ServableFront(Generic[ResultT]):
    """The run surface an Agent and a Swarm share; subclasses run the turn itself."""

    _owner: ClassVar[str] = "Agent"
    """The class name in messages (``Agent``, ``Swarm``)."""

    def _init_front(self) -> None:
        """Set up the run lock and the event loop of the blocking methods."""
        self._lock = anyio.Lock()
        variable = self._owner.lower()
        self._portal = Portal(
            f"agentkeel-{variable}",
            refuse_in_loop=f"a synchronous {self._owner} call cannot run inside an event "
            f"loop; use await {variable}.invoke_async(...) or {variable}.resume_async(...)",
        )
        self._portal.bind(self)

    # -- what a subclass supplies ---------------------------------------------------------

    async def restore(self) -> None:
        """Load memory from storage (see the subclass)."""
        raise NotImplementedError

    def _restore_pending(self) -> bool:
        """Whether memory is attached but not loaded yet."""
        raise NotImplementedError

    def _pending(self) -> tuple[Interrupt, ...]:
        """The pending interrupts of the loaded memory."""
        raise NotImplementedError

    async def _execute(
        self,
        prompt: str | Message | None,
        resume: tuple[str, Decision] | None,
        invocation_state: InvocationState,
        emit: EventHandler,
        run_id: str | None,
        on_start: RunStart | None,
    ) -> ResultT:
        raise NotImplementedError

    # -- the shared surface ---------------------------------------------------------------

    @property
    def busy(self) -> bool:
        """Whether a run is in progress (the server's ``reject`` policy reads this)."""
        return self._lock.locked()

    @property
    def pending_interrupts(self) -> tuple[Interrupt, ...]:
        """Interrupts waiting for a decision, also those of a run suspended before a restart.

        With memory attached, they are known only once it is loaded. Outside an event
        loop this property loads it (through the object's own loop, as a blocking call
        would). Inside one it cannot wait, so until ``await restore()`` (or a first run)
        has loaded it, it raises `RestoreRequiredError` rather than answer an empty tuple
        that may be wrong.

        Raises:
            RestoreRequiredError: In async code, before the session was restored.
        """
        if self._restore_pending():
            variable = self._owner.lower()
            if in_event_loop():
                raise RestoreRequiredError(
                    f"the {variable}'s session is not loaded yet, so its pending interrupts "
                    f"are unknown: call `await {variable}.restore()` first"
                )
            self._portal.call(self.restore)
        return self._pending()

    def __call__(self, prompt: str | Message) -> ResultT:
        """Run one turn synchronously (outside an event loop), on the object's own loop."""
        return self._portal.call(self.invoke_async, prompt)

    async def invoke_async(
        self,
        prompt: str | Message,
        *,
        invocation_state: InvocationState | None = None,
        on_event: EventHandler | None = None,
        run_id: str | None = None,
        on_start: RunStart | None = None,
    ) -> ResultT:
        """Run one turn; `on_event` receives every run event as it happens.

        A swarm's events are its members', tagged with `agent`; `invocation_state` is
        shared by reference by every member run of the turn. `run_id` is the new run's
        id when the caller chose it (a server does, to publish the run under it), and
        `on_start` is told once the run started (its BeforeRunEvent hooks passed).
        """
        state = InvocationState() if invocation_state is None else invocation_state
        return await self._execute(prompt, None, state, on_event or _ignore, run_id, on_start)

    def stream(
        self, prompt: str | Message, *, invocation_state: InvocationState | None = None
    ) -> RunStream[RunEvent | ResultT]:
        """Run one turn, yielding its events and then its result (``async for``)."""
        items = self._stream(prompt, None, invocation_state)
        return RunStream(items, owner=self._owner, method="stream")

    def stream_sync(
        self, prompt: str | Message, *, invocation_state: InvocationState | None = None
    ) -> Iterator[RunEvent | ResultT]:
        """The blocking form of `stream`, for plain ``for`` outside an event loop."""
        return self._portal.iterate(self._stream(prompt, None, invocation_state))

    def resume(self, interrupt_id: str, decision: Decision) -> ResultT:
        """Answer a pending interrupt synchronously and continue the suspended run."""
        return self._portal.call(self.resume_async, interrupt_id, decision)

    async def resume_async(
        self,
        interrupt_id: str,
        decision: Decision,
        *,
        invocation_state: InvocationState | None = None,
        on_event: EventHandler | None = None,
        on_start: RunStart | None = None,
    ) -> ResultT:
        """Answer a pending interrupt and continue the same run (same run id).

        In a swarm the member that raised it resumes, then the swarm goes on.
        """
        state = InvocationState() if invocation_state is None else invocation_state
        resume = (interrupt_id, decision)
        return await self._execute(None, resume, state, on_event or _ignore, None, on_start)

    def resume_stream(
        self,
        interrupt_id: str,
        decision: Decision,
        *,
        invocation_state: InvocationState | None = None,
    ) -> RunStream[RunEvent | ResultT]:
        """Streaming form of `resume_async` (``async for``)."""
        items = self._stream(None, (interrupt_id, decision), invocation_state)
        return RunStream(items, owner=self._owner, method="resume_stream")

    def resume_stream_sync(
        self,
        interrupt_id: str,
        decision: Decision,
        *,
        invocation_state: InvocationState | None = None,
    ) -> Iterator[RunEvent | ResultT]:
        """The blocking form of `resume_stream`."""
        return self._portal.iterate(self._stream(None, (interrupt_id, decision), invocation_state))

    def close(self) -> None:
        """Stop the event loop thread of the blocking methods; the async ones still work.

        Idempotent. Without it the loop stops when the object is garbage-collected or
        the interpreter exits.
        """
        self._portal.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def _stream(
        self,
        prompt: str | Message | None,
        resume: tuple[str, Decision] | None,
        invocation_state: InvocationState | None,
    ) -> AsyncGenerator[RunEvent | ResultT, None]:
        state = InvocationState() if invocation_state is None else invocation_state

        async def run(emit: Callable[[RunEvent | ResultT], None]) -> RunEvent | ResultT:
            return await self._execute(prompt, resume, state, emit, None, None)

        return stream_run(run)


def prompt_message(prompt: str | Message | None) -> Message:
    """The user message a prompt makes (a new run starts with it).

    Raises:
        InvalidRequestError: For anything but a string or a user Message.
    """
    if isinstance(prompt, str):
        return Message.user(prompt)
    if isinstance(prompt, Message) and prompt.role == "user":
        return prompt
    raise InvalidRequestError("a prompt must be a string or a user Message")


def _ignore(event: RunEvent) -> None:
    del event
