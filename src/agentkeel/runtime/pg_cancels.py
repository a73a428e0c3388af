"""CancelRelay: a cancel for a context, carried to the replica whose turn holds it.

Part of `PostgresRunLease`, on its lease channel: the cancel control message must reach
the process that holds the context's lease, wherever the request came in. A request is
a notification naming the context and the run; the holder (the replica that has it in
its held grants) calls the turn's cancel handler and notifies its answer back, to the
asking replica only. Nobody answering within `_CANCEL_REPLY_SECONDS` means the holder
died meanwhile.
"""

from __future__ import annotations

import asyncio
import itertools
import secrets
from collections.abc import Awaitable, Callable, Mapping
from typing import Protocol

import anyio

from agentkeel.messages import JSONObject
from agentkeel.runtime.coordination import CancelHandler
from agentkeel.runtime.pg_lease_sql import key_of, message
from agentkeel.runtime.pg_notify import PgNotifier
from agentkeel.storage.base import SessionKey

__all__ = ["CancelRelay"]

_CANCEL_REPLY_SECONDS = 2.0


class Holding(Protocol):
    """A held grant's cancel handler (None: the turn takes no cancel)."""

    @property
    def on_cancel(self) -> CancelHandler | None: ...


class CancelRelay:
    """Cancels sent over `notifier`, answered for the grants in `held`.

    Args:
        notifier: The lease channel.
        held: The grants this process holds, by context (the lease's own mapping).
        is_held: Whether some replica holds the context now (one database read).
    """

    def __init__(
        self,
        notifier: PgNotifier,
        held: Mapping[SessionKey, Holding],
        is_held: Callable[[SessionKey], Awaitable[bool]],
    ) -> None:
        self.notifier = notifier
        self.instance = secrets.token_hex(8)
        self._held = held
        self._is_held = is_held
        self._replies: dict[int, asyncio.Future[bool]] = {}
        self._requests = itertools.count(1)
        notifier.on("cancel", self._on_cancel)
        notifier.on("reply", self._on_reply)

    async def cancel(self, key: SessionKey, run_id: str, *, drop: bool = False) -> bool:
        """Tell the holder, here or on another replica, to cancel `run_id` (`drop`: undo it)."""
        held = self._held.get(key)
        if held is not None:
            return held.on_cancel is not None and held.on_cancel(run_id, drop)
        if not await self._is_held(key):
            return False
        request = next(self._requests)
        reply: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._replies[request] = reply
        try:
            request_payload = message(
                "cancel", key, run=run_id, drop=drop, to=self.instance, request=request
            )
            await self.notifier.notify(request_payload)
            with anyio.move_on_after(_CANCEL_REPLY_SECONDS):
                return await reply
            return False  # nobody answered: the holder died meanwhile
        finally:
            self._replies.pop(request, None)

    def _on_cancel(self, data: JSONObject) -> None:
        key = key_of(data)
        held = None if key is None else self._held.get(key)
        if held is None:
            return
        run_id = str(data.get("run"))
        told = held.on_cancel is not None and held.on_cancel(run_id, data.get("drop") is True)
        reply = {"t": "reply", "to": data.get("to"), "request": data.get("request")}
        reply["ok"] = told
        asyncio.get_running_loop().create_task(self.notifier.notify(reply))

    def _on_reply(self, data: JSONObject) -> None:
        if data.get("to") != self.instance:
            return
        request = data.get("request")
        waiting = self._replies.get(request) if isinstance(request, int) else None
        if waiting is not None and not waiting.done():
            waiting.set_result(bool(data.get("ok")))
