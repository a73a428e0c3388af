"""RunJobClaims: how a claimed turn is shared with the replicas its retries reach.

The replica running the turn writes into the claim, as the turn goes: its run id and
the frame id its frames follow once it started (or the error that stopped it), then
its SendResult once it finished. A retry with the same Idempotency-Key on another
replica builds a local `RunJob` that stands for it: started once the claim names the
run (its channel is the run's stream, followed through the fan-out), finished once the
claim holds the result. So the retry streams the same frames, or answers the same
result, and nothing runs twice.

The owner also beats in the claim (a counter, once a second) until its turn finished. A
retry that sees the claim unchanged for `STALE_SECONDS` knows its owner died: before
the turn started (it waited in line), the retry takes the claim over and runs the turn
itself (`ClaimAbandoned`); after it started, the turn was lost with its replica (the
context's next holder records it failed, `agentkeel.runtime.lost_runs`), and the retry
answers it ``failed`` (``concurrent_write``), a stream with that done frame alone, so
it can be sent again. An owner whose claim was taken over
while it was paused finds that out when its lease comes, and does not run the turn.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

import anyio

from agentkeel.errors import AgentkeelError, RunInProgressError
from agentkeel.keys import SessionKey
from agentkeel.messages import JSONObject
from agentkeel.runtime.coordination import StreamFanout
from agentkeel.runtime.lost_runs import lost_channel, lost_result
from agentkeel.runtime.shared_claims import ClaimAbandoned, Read, Update
from agentkeel.runtime.turns import RunJob

__all__ = ["BEAT_SECONDS", "STALE_SECONDS", "RunJobClaims"]

logger = logging.getLogger(__name__)

BEAT_SECONDS = 1.0
"""How often the owner of a claimed turn says it is alive."""
STALE_SECONDS = 5.0
"""A claim unchanged for this long has lost its owner (its process died)."""
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
        """Write the turn's start (or its error), then its result, into the claim.

        Until the turn finished, it also beats in the claim, once a second.
        """
        beats = 0

        async def beat() -> bool:
            nonlocal beats
            beats += 1
            return await update({"beat": beats})

        run.still_claimed = beat
        written = run.claim_written = anyio.Event()
        async with anyio.create_task_group() as group:
            group.start_soon(self._beat, run, beat)
            try:
                await self._report(run, update, written)
            finally:
                written.set()
                group.cancel_scope.cancel()

    @staticmethod
    async def _beat(run: RunJob, beat: Callable[[], Awaitable[bool]]) -> None:
        while not run.finished.is_set():
            await anyio.sleep(BEAT_SECONDS)
            try:
                if not await beat():
                    return  # taken over (or forgotten): nothing more to say in it
            except Exception as exc:  # the table is unreachable now: beat again later
                logger.debug("idempotency | a claim's beat was not written: %s", exc)

    @staticmethod
    async def _report(run: RunJob, update: Update, written: anyio.Event) -> None:
        await run.started.wait()
        if run.error is not None:
            code = getattr(run.error, "code", "internal_error")
            await update({"error": str(code), "message": str(run.error)})
            return
        channel = run.channel
        if channel is None:
            return
        await update({"run": channel.run_id, "after": run.start_after})
        written.set()
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
        watch = _Staleness()
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
                        if "result" not in stored and watch.stale(stored):
                            job.channel = lost_channel(context, run_id)  # died mid-run
                            job.result = lost_result(context.context_id, run_id)
                            job.finished.set()
                            return
                        stream = await self.fanout.latest(context)
                        if stream is not None and stream.run_id == run_id:
                            job.channel = stream
                            job.start_after = after if isinstance(after, int) else 0
                            if "result" in stored and isinstance(stored["result"], dict):
                                job.result = stored["result"]
                                job.finished.set()
                            return
                    elif watch.stale(stored):
                        raise ClaimAbandoned(stored)  # its turn never started: run it here
                    await anyio.sleep(_POLL_SECONDS)
        except TimeoutError:
            raise RunInProgressError(
                "the first request with this Idempotency-Key has not started its turn yet; "
                "try again"
            ) from None
        finally:
            job.started.set()

    async def _finished(self, job: RunJob, read: Read) -> None:
        watch = _Staleness()
        try:
            while not job.finished.is_set():
                stored = await read()
                if stored is None:
                    break
                result = stored.get("result")
                if isinstance(result, dict):
                    job.result = result
                    break
                if watch.stale(stored) and job.channel is not None:
                    job.result = lost_result(job.key.context_id, job.channel.run_id)
                    break
                await anyio.sleep(_POLL_SECONDS)
        finally:
            job.finished.set()


class _Staleness:
    """Whether a claim stopped changing: its owner's beats stopped for `STALE_SECONDS`."""

    def __init__(self) -> None:
        self.value: JSONObject | None = None
        self.since = anyio.current_time()

    def stale(self, stored: JSONObject) -> bool:
        now = anyio.current_time()
        if stored != self.value:
            self.value, self.since = stored, now
            return False
        return now - self.since >= STALE_SECONDS


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
