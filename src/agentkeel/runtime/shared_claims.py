"""SharedClaims: Idempotency-Keys claimed once across every replica.

The claim itself is one atomic insert in a shared table (Redis ``SET NX``, or a
PostgreSQL insert on a unique key): whoever inserts first runs the turn. A request on
another replica finds the claim and joins the run it started: what it needs of that
run (its id, where its frames start, its result) is written into the claim by the
replica running it (`ClaimCodec.watch`), and read back by the joining one
(`ClaimCodec.join`). Within one process, requests with the same key meet in an
in-process `IdempotencyClaims` first, so they share one object and one table lookup.

A claim names its owner (a token of the request that inserted it), and only the owner
writes into it. A replica that dies with a claimed turn still waiting in line leaves a
claim that nobody answers; a retry that sees it stop moving (`ClaimAbandoned`, the
codec's call) takes it over with one compare-and-set, so that exactly one retry
becomes the new owner and runs the turn, and the others join that one.
"""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from functools import partial
from typing import Generic, Protocol, TypeVar

import anyio

from agentkeel.keys import SessionKey
from agentkeel.messages import JSONObject
from agentkeel.runtime.coordination import IdempotencyScope
from agentkeel.runtime.errors import IdempotencyKeyReusedError
from agentkeel.runtime.idempotency import IdempotencyClaims

__all__ = [
    "ClaimAbandoned",
    "ClaimCodec",
    "ClaimTable",
    "SharedClaims",
    "ValueCodec",
    "claim_name",
    "context_name",
]

logger = logging.getLogger(__name__)

T = TypeVar("T")
Read = Callable[[], Awaitable[JSONObject | None]]
Update = Callable[[JSONObject], Awaitable[bool]]
"""Merges fields into the claim; False once its owner lost it (taken over, or gone)."""


class ClaimAbandoned(Exception):
    """Raised by `ClaimCodec.join`: nobody answers for the claim, whose value is `stored`."""

    def __init__(self, stored: JSONObject) -> None:
        super().__init__("the claim's owner stopped answering")
        self.stored = stored


class ClaimTable(Protocol):
    """Where the claims are shared: a key-value table with an atomic insert."""

    async def insert(
        self, name: str, value: JSONObject, context: str, ttl: float
    ) -> JSONObject | None:
        """Insert `value` unless `name` exists; None when inserted, else the existing value."""
        ...

    async def get(self, name: str) -> JSONObject | None:
        """The claim's value, or None."""
        ...

    async def update(self, name: str, fields: JSONObject, *, owner: str | None = None) -> bool:
        """Merge `fields` into the claim's value if its ``owner`` is `owner` (None: any).

        False when nothing was merged (it is gone, or another owner holds it).
        """
        ...

    async def replace(self, name: str, expected: JSONObject, value: JSONObject) -> bool:
        """Atomically set the claim to `value` if it still equals `expected`."""
        ...

    async def delete(self, name: str) -> None:
        """Drop the claim."""
        ...

    async def delete_context(self, context: str) -> None:
        """Drop every claim made for `context`."""
        ...


class ClaimCodec(Protocol[T]):
    """How a run is described in its claim, and joined from another replica."""

    async def watch(self, run: T, update: Update) -> None:
        """On the replica running `run`: write what joiners need into the claim."""
        ...

    async def join(self, new_run: Callable[[], T], context: SessionKey, read: Read) -> T:
        """On another replica: the local stand-in for the run the claim describes.

        Raises:
            ClaimAbandoned: Its owner stopped answering before its run started.
        """
        ...


class ValueCodec(Generic[T]):
    """For runs that are JSON values themselves (a run id): the claim holds the value."""

    async def watch(self, run: T, update: Update) -> None:
        """Write the value into the claim."""
        await update({"run": run})  # type: ignore[dict-item]

    async def join(self, new_run: Callable[[], T], context: SessionKey, read: Read) -> T:
        """Wait (briefly) for the value to be written, and return it."""
        del new_run, context
        with anyio.fail_after(30):
            while True:
                stored = await read()
                if stored is not None and "run" in stored:
                    return stored["run"]  # type: ignore[return-value]
                await anyio.sleep(0.02)


def claim_name(scope: IdempotencyScope) -> str:
    """The table key of `scope`."""
    parts = [scope.principal, scope.definition, scope.context_id, scope.key]
    return json.dumps(parts, separators=(",", ":"))


def context_name(context: SessionKey) -> str:
    """The table's name for the context a claim's run belongs to."""
    return json.dumps(
        [context.principal, context.definition, context.context_id], separators=(",", ":")
    )


@dataclass(eq=False, slots=True)
class _Local(Generic[T]):
    """One claim as seen from here, shared by this process's requests with the same key."""

    ready: anyio.Event = field(default_factory=anyio.Event)
    run: T | None = None
    failed: BaseException | None = None


class SharedClaims(Generic[T]):
    """`IdempotencyStore` over a `ClaimTable` that every replica shares.

    Args:
        table: The shared table.
        codec: How runs are written into claims and joined.
        ttl: Seconds a claim is kept.
    """

    def __init__(self, table: ClaimTable, codec: ClaimCodec[T], ttl: float) -> None:
        self.table = table
        self.codec = codec
        self.ttl = ttl
        self._local: IdempotencyClaims[_Local[T]] = IdempotencyClaims(ttl)
        self._watchers: set[asyncio.Task[None]] = set()

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Prepare the table while inside, when it needs it (a PostgreSQL table is created)."""
        prepare = getattr(self.table, "running", None)
        if callable(prepare):
            async with prepare():
                yield
        else:
            yield

    async def claim(
        self,
        scope: IdempotencyScope,
        fingerprint: str,
        new_run: Callable[[], T],
        *,
        context: SessionKey,
    ) -> tuple[T, bool]:
        """The first claim anywhere runs `new_run`; every other one joins its run."""
        while True:
            local, first_here = await self._local.claim(scope, fingerprint, _Local, context=context)
            if not first_here:
                await local.ready.wait()
                if local.run is not None:
                    return local.run, False
                if isinstance(local.failed, IdempotencyKeyReusedError):
                    raise local.failed
                continue  # the first request here failed to claim: try again
            try:
                return await self._claim_shared(scope, fingerprint, new_run, context, local)
            except BaseException as exc:
                local.failed = exc
                await self._local.release(scope, local)
                raise
            finally:
                local.ready.set()

    async def _claim_shared(
        self,
        scope: IdempotencyScope,
        fingerprint: str,
        new_run: Callable[[], T],
        context: SessionKey,
        local: _Local[T],
    ) -> tuple[T, bool]:
        name = claim_name(scope)
        owner = secrets.token_hex(8)
        claimed: JSONObject = {"fp": fingerprint, "owner": owner}
        existing = await self.table.insert(name, claimed, context_name(context), self.ttl)
        while existing is not None:
            if existing.get("fp") != fingerprint:
                raise IdempotencyKeyReusedError(
                    "this Idempotency-Key was used for a different request; "
                    "use a new key for a new message"
                )
            try:
                local.run = await self.codec.join(new_run, context, lambda: self.table.get(name))
                return local.run, False
            except ClaimAbandoned as abandoned:
                if await self.table.replace(name, abandoned.stored, claimed):
                    logger.warning("idempotency | took over a claim its owner abandoned")
                    break
                existing = await self.table.get(name)  # another retry took it: join that one
                if existing is None:
                    existing = await self.table.insert(
                        name, claimed, context_name(context), self.ttl
                    )
        run = local.run = new_run()
        task = asyncio.get_running_loop().create_task(self._watch(name, run, owner))
        self._watchers.add(task)
        task.add_done_callback(self._watchers.discard)
        return run, True

    async def _watch(self, name: str, run: T, owner: str) -> None:
        try:
            await self.codec.watch(run, partial(self.table.update, name, owner=owner))
        except Exception:
            logger.exception("idempotency | could not share how a claimed run goes")

    async def release(self, scope: IdempotencyScope, run: T) -> None:
        """Give the key back if `run` holds it (it never started)."""
        for local in self._local_claims(scope):
            if local.run == run:
                await self._local.release(scope, local)
                await self.table.delete(claim_name(scope))

    def _local_claims(self, scope: IdempotencyScope) -> list[_Local[T]]:
        found = self._local._claims.get(scope)
        return [] if found is None else [found.job]

    async def forget_context(self, context: SessionKey) -> None:
        """Drop the claims of `context`, here and in the table."""
        await self._local.forget_context(context)
        await self.table.delete_context(context_name(context))

    def sweep(self) -> int:
        """Drop the expired claims kept here (the table expires its own)."""
        return self._local.sweep()
