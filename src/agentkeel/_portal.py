"""One event loop in a thread of its own, for the blocking methods of async objects.

`AgentClient`, `Agent` and `Swarm` are async at heart. Their blocking methods run the
async ones through a `Portal`: an event loop started in a background thread on first
use, kept for the object's life, and stopped by `close()` (or the object's context
manager, or a finalizer when it is garbage-collected or the interpreter exits). One
loop for every call means what a run leaves on the loop (worker threads for file I/O
and sync tools, connections a model keeps) is reused by the next call, instead of a
new loop, and new threads, per call.

`stream_run` turns a run that reports through a callback into the async generator a
``stream`` method returns, and `RunStream` wraps that generator so that ``for item in
agent.stream(...)`` fails with a message saying what to write instead.
"""

from __future__ import annotations

import concurrent.futures
import math
import threading
import weakref
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Iterator
from contextlib import ExitStack
from typing import NoReturn, TypeVar

import anyio
import anyio.from_thread
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from agentkeel.errors import InvalidRequestError, RunInProgressError

__all__ = ["Portal", "RunStream", "in_event_loop", "stream_run"]

_T = TypeVar("_T")


class Portal:
    """A lazily started event loop thread that runs coroutines for blocking callers.

    Args:
        name: The thread's name (``agentkeel-agent``), to tell threads apart in a dump.
        refuse_in_loop: When set, a blocking call made from inside an event loop is
            refused with `RunInProgressError` carrying this hint (blocking there would
            stall that loop); None lets such calls through.
    """

    def __init__(self, name: str, *, refuse_in_loop: str | None = None) -> None:
        self._name = name
        self._refuse_in_loop = refuse_in_loop
        self._lock = threading.Lock()
        self._stack: ExitStack | None = None
        self._portal: anyio.from_thread.BlockingPortal | None = None
        self._closed = False

    @property
    def running(self) -> bool:
        """Whether the loop thread is up."""
        return self._portal is not None

    def call(self, func: Callable[..., Awaitable[_T]], *args: object) -> _T:
        """Run ``await func(*args)`` on the loop and return its result (or raise its error)."""
        return self._started().call(func, *args)

    def iterate(self, items: AsyncGenerator[_T, None]) -> Iterator[_T]:
        """Iterate an async generator from blocking code, as lazily as ``async for`` would.

        One task on the loop consumes `items` from start to end (so a task group or a
        cancel scope inside them is entered and left by the same task) and hands each
        item over an unbuffered channel. Leaving the loop early (``break``, an
        exception) cancels that task, which closes `items` on the loop, and waits for it.
        """
        portal = self._started()

        async def channel() -> tuple[
            MemoryObjectSendStream[_T], MemoryObjectReceiveStream[_T], anyio.CancelScope
        ]:
            send, receive = anyio.create_memory_object_stream[_T](0)
            return send, receive, anyio.CancelScope()

        send, receive, stop = portal.call(channel)

        async def pump() -> None:
            with stop:
                async with send:
                    try:
                        async for item in items:
                            await send.send(item)
                    finally:
                        # Inside `stop` and unshielded: a generator suspended at a `yield`
                        # in its own task group must leave that group's scope before any
                        # scope opened after it is left (its group still waits for its
                        # tasks, cancelled or not).
                        await items.aclose()

        async def halt() -> None:
            stop.cancel()

        future = portal.start_task_soon(pump)
        try:
            while True:
                try:
                    item = portal.call(receive.receive)
                except anyio.EndOfStream:
                    future.result()  # the error that ended the iterator, if any
                    return
                yield item
        finally:
            if self._portal is portal:  # not closed meanwhile (closing ended the task)
                if not future.done():
                    portal.call(halt)
                    concurrent.futures.wait([future])  # the run has ended before we go on
                portal.call(receive.aclose)

    def close(self) -> None:
        """Stop the loop and its thread; idempotent. Blocking calls are refused afterwards."""
        with self._lock:
            self._closed = True
            stack, self._stack, self._portal = self._stack, None, None
        if stack is not None:
            stack.close()

    def bind(self, owner: object) -> None:
        """Close this portal when `owner` is garbage-collected or the interpreter exits."""
        weakref.finalize(owner, self.close)

    def _started(self) -> anyio.from_thread.BlockingPortal:
        if self._refuse_in_loop is not None:
            _refuse_inside_event_loop(self._refuse_in_loop)
        with self._lock:
            if self._closed:
                raise InvalidRequestError(
                    f"{self._name} was closed: its blocking methods cannot run any more "
                    "(its async methods still work)"
                )
            if self._portal is None:
                stack = ExitStack()
                self._portal = stack.enter_context(
                    anyio.from_thread.start_blocking_portal(name=self._name)
                )
                self._stack = stack
            return self._portal


def in_event_loop() -> bool:
    """Whether the caller runs inside an event loop (where blocking would stall it)."""
    try:
        anyio.get_current_task()
    except RuntimeError:
        return False
    return True


def _refuse_inside_event_loop(hint: str) -> None:
    if in_event_loop():
        raise RunInProgressError(hint)


async def stream_run(
    run: Callable[[Callable[[_T], None]], Awaitable[_T]],
) -> AsyncGenerator[_T, None]:
    """Yield what `run` emits through its callback as it happens, then what it returns.

    `run` runs in a task of its own, so a slow consumer never holds up the run. Closing
    the generator early (``break`` then ``aclose()``) cancels the run and waits for it
    to end (a run ends ``cancelled`` with a valid history), and returns cleanly rather
    than wrapping the close in an exception group.
    """
    send, receive = anyio.create_memory_object_stream[_T](math.inf)

    async def produce() -> None:
        async with send:
            send.send_nowait(await run(send.send_nowait))

    async with anyio.create_task_group() as group, receive:
        group.start_soon(produce)
        try:
            async for item in receive:
                yield item
        except GeneratorExit:
            group.cancel_scope.cancel()


class RunStream(AsyncIterator[_T]):
    """A run's items as an async iterator; ``for`` over it says to use ``async for``.

    Args:
        items: The async generator of the run's items.
        owner: The class name for the error message (``Agent``, ``Swarm``).
        method: The streaming method's name (``stream``, ``resume_stream``).
    """

    def __init__(self, items: AsyncGenerator[_T, None], *, owner: str, method: str) -> None:
        self._items = items
        self._owner = owner
        self._method = method

    def __aiter__(self) -> RunStream[_T]:
        return self

    async def __anext__(self) -> _T:
        return await self._items.__anext__()

    async def aclose(self) -> None:
        """Stop the run's stream early (the run itself ends as a cancelled consumer's does)."""
        await self._items.aclose()

    def __iter__(self) -> NoReturn:
        """Refuse plain ``for``, naming the two ways that work."""
        raise TypeError(
            f"{self._owner}.{self._method}() is asynchronous: iterate it with "
            f"`async for item in {self._owner.lower()}.{self._method}(...)`, or, outside an "
            f"event loop, with `for item in {self._owner.lower()}.{self._method}_sync(...)`"
        )
