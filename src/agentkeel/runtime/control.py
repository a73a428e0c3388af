"""Run control: stopping a context's run on the server, wherever it runs (SPEC 3 and 5).

A cancel is a control message through the coordination's `RunLease`: the process that
holds the context's lease (this one, or another replica) cancels the Agent's run in its
own task group, so the model call and the running tools stop there, the run ends
``cancelled`` with a valid history (an open tool call gets an error result), and its
stream gets its ``done`` frame. A suspended run has nothing running: cancelling it is
a resume with ``cancel``, which abandons the interrupt.

The ``interrupt`` and ``rollback`` policies send the same message for a turn that
arrives while another runs; ``rollback`` also asks for the cancelled turn to be
dropped from the history. The new turn then waits in the context's line as a queued
one does, so it runs once the cancelled run released the context.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentkeel.errors import ContextNotFoundError, NoActiveRunError
from agentkeel.runtime.wire import SendRequest
from agentkeel.storage.base import SessionKey

if TYPE_CHECKING:
    from agentkeel.runtime.runs import ServerRuntime

__all__ = ["cancel_context", "preempt"]


async def cancel_context(runtime: ServerRuntime, key: SessionKey) -> str:
    """Stop the context's running run, or abandon its suspended one; returns the run id.

    Raises:
        ContextNotFoundError: No such context (or another principal's).
        NoActiveRunError: Nothing is running or suspended on the context.
    """
    # the live run first: a new context's first turn, running on another replica, has
    # nothing in storage yet, but the fan-out knows it runs (and whose it is: the key
    # holds the principal)
    stream = await runtime.latest(key)
    if stream is not None and stream.active:
        if await runtime.coordination.lease.cancel(key, stream.run_id):
            runtime.metrics.cancels.inc(key.definition, "cancel")
            return stream.run_id
    if not await runtime.exists(key):
        raise ContextNotFoundError(f"no context {key.context_id!r} for agent {key.definition!r}")
    entry = await runtime.cache.acquire(key)  # restored from storage if need be
    try:
        pending = entry.agent.pending_interrupts
    finally:
        runtime.cache.release(entry)
    if not pending:
        raise NoActiveRunError(f"nothing is running on context {key.context_id}")
    body = {"contextId": key.context_id, "resume": {"interruptId": pending[0].id, "cancel": True}}
    job = await runtime.submit(key, SendRequest.model_validate(body))
    if job.channel is None:
        raise RuntimeError("internal error: a started turn has no channel")
    runtime.metrics.cancels.inc(key.definition, "cancel")
    await job.finished.wait()  # only records to write: answer once they are
    return job.channel.run_id


async def preempt(runtime: ServerRuntime, key: SessionKey, *, drop: bool) -> None:
    """Cancel the context's running run for a turn that takes it over.

    `drop` (``rollback``) leaves the cancelled turn out of the history; without it
    (``interrupt``) what the run completed stays. Nothing running: nothing happens.
    """
    stream = await runtime.latest(key)
    if stream is None or not stream.active:
        return
    if await runtime.coordination.lease.cancel(key, stream.run_id, drop=drop):
        runtime.metrics.cancels.inc(key.definition, "rollback" if drop else "interrupt")
