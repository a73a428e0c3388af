"""RunFacade: the whole of what a binding asks of the runtime.

A binding (the native wire, A2A, and the bindings of SPEC 10 to come) parses its own
protocol into a `SendRequest` and maps the run's frames back into its own shapes;
everything in between is these few calls. `ServerRuntime` implements it; keeping it
this narrow is what lets a binding move between processes, and coordination backends
change, without the binding noticing.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from agentkeel.framework import Framework
from agentkeel.hooks.events import HookEvent
from agentkeel.hooks.registry import HookCallback
from agentkeel.messages import JSONValue, Message
from agentkeel.runtime.coordination import Announcements, RunStream
from agentkeel.runtime.wire import SendRequest
from agentkeel.storage.base import RunRecord, SessionKey

if TYPE_CHECKING:
    from agentkeel.runtime.channels import Frame
    from agentkeel.runtime.runs import RunJob

__all__ = ["RunFacade"]


class RunFacade(Protocol):
    """Submit a turn, follow a run's frames from an id, cancel it, read its record, forget it."""

    @property
    def framework(self) -> Framework:
        """The definitions and settings served (a binding builds its routes from them)."""
        ...

    @property
    def announcements(self) -> Announcements | None:
        """Words about runs to every replica (None: one process, nobody else to tell)."""
        ...

    @property
    def agent_hooks(self) -> list[tuple[type[HookEvent], HookCallback[Any]]]:
        """Hook callbacks every served agent gets: a binding appends its own here."""
        ...

    async def submit(
        self,
        key: SessionKey,
        request: SendRequest,
        *,
        idempotency_key: str | None = None,
        body: JSONValue = None,
        sent_context_id: str | None = None,
    ) -> RunJob:
        """Queue a turn; return once its run started (raise what stopped it)."""
        ...

    async def submit_claimed(
        self,
        key: SessionKey,
        request: SendRequest,
        *,
        idempotency_key: str | None = None,
        body: JSONValue = None,
        sent_context_id: str | None = None,
    ) -> tuple[RunJob, bool]:
        """`submit`, and whether this request started the run.

        False: it joined the run that an earlier request with the same key started.
        """
        ...

    def on_delete(self, forget: Callable[[SessionKey], Awaitable[None]]) -> None:
        """Have `forget` delete what the binding keeps for a context when it is deleted."""
        ...

    def on_segment(self, listener: Callable[[RunStream], None]) -> Callable[[], None]:
        """Call `listener` as each segment of a run starts; returns what stops it.

        New or resumed, before the segment's first frame: how push delivery follows
        tasks without polling.
        """
        ...

    def follow(self, stream: RunStream, after: int) -> AsyncGenerator[Sequence[Frame], None]:
        """The run's frames after id `after`, in batches, up to a done frame."""
        ...

    async def latest(self, key: SessionKey) -> RunStream | None:
        """The context's latest run, live or finished, while its frames are retained.

        What a reconnect without a run id follows (SPEC 3's stream endpoint, the AI
        SDK's resume).
        """
        ...

    async def exists(self, key: SessionKey) -> bool:
        """Whether the context has anything (to tell "no such context" from "no run")."""
        ...

    async def live(self, key: SessionKey, run_id: str) -> RunStream | None:
        """The run's stream while a segment of it runs, else None."""
        ...

    async def resumed(self, key: SessionKey, run_id: str) -> tuple[RunStream, int] | None:
        """Wait for a suspended run to resume: its stream and where its new frames start."""
        ...

    async def cancel(self, key: SessionKey, run_id: str) -> bool:
        """Cancel a running run, wherever it runs; whether it was running."""
        ...

    async def cancel_context(self, key: SessionKey) -> str:
        """Stop the context's run wherever it runs, or abandon its suspended one.

        Returns the run's id; raises ContextNotFoundError or NoActiveRunError.
        """
        ...

    async def run_record(self, key: SessionKey, run_id: str) -> RunRecord | None:
        """The stored record of a run (None while its first segment runs)."""
        ...

    async def transcript(self, key: SessionKey) -> list[Message]:
        """The messages SPEC 3's transcript shows (committed turns, with their ids)."""
        ...

    async def delete_context(self, key: SessionKey) -> bool:
        """Forget a context everywhere; False if it is unknown.

        How a binding drops a conversation it created only for one request (the Chat
        Completions binding without a conversation id).
        """
        ...
