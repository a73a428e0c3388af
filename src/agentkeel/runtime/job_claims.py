"""RunJobClaims: how a claimed turn is shared with the replicas its retries reach.

The replica running the turn writes into the claim, as the turn goes: its run id and
the frame id its frames follow once it started (or the error that stopped it), then
its SendResult once it finished. A retry with the same Idempotency-Key on another
replica builds a local `RunJob` that stands for it: started once the claim names the
run (its channel is the run's stream, followed through the fan-out), finished once the
claim holds the result. So the retry streams the same frames, or answers the same
result, and nothing runs twice.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import anyio

from agentkeel.errors import AgentkeelError, RunInProgressError
from agentkeel.keys import SessionKey
from agentkeel.runtime.coordination import StreamFanout
from agentkeel.runtime.shared_claims import Read, Update
from agentkeel.runtime.turns import RunJob

__all__ = ["RunJobClaims"]

_POLL_SECONDS = 0.05
_START_SECONDS = 120.0
"""How long a retry waits for the first request's turn to start (it may wait in line)."""


class RunJobClaims:
    """`ClaimCodec` of the runtime's RunJobs.

    Args:
        fanout: Where a joining replica finds the run's stream.
    """

    def __init__(self, fanout: StreamFanout) -> None:
        self.fanout = fanout
        self._joins: set[asyncio.Task[None]] = set()
        """The joined turns followed to their end (kept referenced while they run)."""

    async def watch(self, run: RunJob, update: Update) -> None:
        """Write the turn's start (or its error), then its result, into the claim."""
        await run.started.wait()
        if run.error is not None:
            code = getattr(run.error, "code", "internal_error")
            await update({"error": str(code), "message": str(run.error)})
            return
        channel = run.channel
        if channel is None:
            return
        await update({"run": channel.run_id, "after": run.start_after})
        await run.finished.wait()
        await update({"result": run.result})

    async def join(self, new_run: Callable[[], RunJob], context: SessionKey, read: Read) -> RunJob:
        """A local RunJob following the claimed turn, wherever it runs."""
        job = new_run()
        job.bound.set()  # the binding's record stays with the replica that started it
        with anyio.fail_after(_START_SECONDS + 5):
            await self._started(job, context, read)
        if job.error is None and not job.finished.is_set():
            task = asyncio.get_running_loop().create_task(self._finished(job, read))
            self._joins.add(task)
            task.add_done_callback(self._joins.discard)
        return job

    async def _started(self, job: RunJob, context: SessionKey, read: Read) -> None:
        try:
            with anyio.fail_after(_START_SECONDS):
                while True:
                    stored = await read()
                    if stored is None:
                        raise RunInProgressError(
                            "the first request with this Idempotency-Key did not start its "
                            "turn; try again"
                        )
                    if "error" in stored:
                        job.error = _error(str(stored["error"]), str(stored.get("message")))
                        job.finished.set()
                        return
                    if "run" in stored:
                        run_id, after = str(stored["run"]), stored.get("after")
                        stream = await self.fanout.latest(context)
                        if stream is not None and stream.run_id == run_id:
                            job.channel = stream
                            job.start_after = after if isinstance(after, int) else 0
                            if "result" in stored and isinstance(stored["result"], dict):
                                job.result = stored["result"]
                                job.finished.set()
                            return
                    await anyio.sleep(_POLL_SECONDS)
        except TimeoutError:
            raise RunInProgressError(
                "the first request with this Idempotency-Key has not started its turn yet; "
                "try again"
            ) from None
        finally:
            job.started.set()

    async def _finished(self, job: RunJob, read: Read) -> None:
        try:
            while not job.finished.is_set():
                stored = await read()
                if stored is None:
                    break
                result = stored.get("result")
                if isinstance(result, dict):
                    job.result = result
                    break
                await anyio.sleep(_POLL_SECONDS)
        finally:
            job.finished.set()


def _error(code: str, message: str) -> AgentkeelError:
    """The error the first request's turn met, as the same class (so the same code)."""
    pending: list[type[AgentkeelError]] = [AgentkeelError]
    while pending:
        kind = pending.pop()
        if kind.code == code:
            try:
                return kind(message)
            except TypeError:
                break
        pending.extend(kind.__subclasses__())
    return AgentkeelError(message)
