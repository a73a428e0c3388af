"""AgentClient: the blocking form of `AsyncAgentClient`.

It drives an `AsyncAgentClient` on an event loop in a background thread, so the logic
of the wire exists once and both clients behave the same.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Iterator
from functools import partial
from typing import TypeVar, Unpack

from agentkeel._portal import Portal
from agentkeel.client.async_client import AsyncAgentClient
from agentkeel.client.records import (
    AgentInfo,
    CancelResult,
    ClientOptions,
    ClientStreamItem,
    ContextPage,
    ContextSummary,
    MessagePage,
    MultitaskPolicy,
    SendResult,
    TranscriptMessage,
)
from agentkeel.memory.client_methods import MemoryMethods
from agentkeel.messages import JSONValue

__all__ = ["AgentClient"]

_T = TypeVar("_T")


class AgentClient(MemoryMethods):
    """The blocking form of `AsyncAgentClient`, with the same methods and behaviour.

    It drives an `AsyncAgentClient` on an event loop in a background thread (where
    `on_context` runs), so the logic exists once; `close` stops the thread.

    Args:
        base_url: The server, e.g. ``http://127.0.0.1:8000``.
        agent: The agent's name in the server's framework.json.
        **options: `ClientOptions`, as for `AsyncAgentClient`.
    """

    def __init__(self, base_url: str, *, agent: str, **options: Unpack[ClientOptions]) -> None:
        self._portal = Portal("agentkeel-client")

        async def make() -> AsyncAgentClient:  # made on the loop that will use it
            return AsyncAgentClient(base_url, agent=agent, **options)

        try:
            self._client = self._portal.call(make)
        except BaseException:
            self._portal.close()
            raise
        self._portal.bind(self)

    @property
    def context_id(self) -> str | None:
        """The conversation's id; None until the server has minted one (or after reset)."""
        return self._client.context_id

    def reset(self, context_id: str | None = None) -> None:
        """Forget the context id locally: the next turn starts a new conversation.

        With `context_id`, continue that conversation instead.
        """
        self._client.reset(context_id)

    def send(
        self,
        text: str | None = None,
        *,
        replace: str | None = None,
        regenerate: str | None = None,
        multitask: MultitaskPolicy | None = None,
    ) -> SendResult:
        """Run one turn and wait for its result (see `AsyncAgentClient.send`)."""
        return self._portal.call(
            partial(self._client.send, replace=replace, regenerate=regenerate, multitask=multitask),
            text,
        )

    def resume(self, interrupt_id: str, decision: JSONValue) -> SendResult:
        """Answer a pending interrupt and wait for the run (see `AsyncAgentClient.resume`)."""
        return self._portal.call(self._client.resume, interrupt_id, decision)

    def stream(
        self,
        text: str | None = None,
        *,
        replace: str | None = None,
        regenerate: str | None = None,
        multitask: MultitaskPolicy | None = None,
    ) -> Iterator[ClientStreamItem]:
        """Run one turn, yielding its events, then its SendResult (as `AsyncAgentClient.stream`)."""
        items = self._client.stream(
            text, replace=replace, regenerate=regenerate, multitask=multitask
        )
        return self._iterate(items)

    def resume_stream(self, interrupt_id: str, decision: JSONValue) -> Iterator[ClientStreamItem]:
        """Streaming form of `resume`."""
        return self._iterate(self._client.resume_stream(interrupt_id, decision))

    def follow(self, after: int | None = None) -> Iterator[ClientStreamItem]:
        """Listen to the context's latest run (see `AsyncAgentClient.follow`)."""
        return self._iterate(self._client.follow(after))

    def delete_context(self) -> None:
        """Delete the conversation on the server, then forget its id."""
        self._portal.call(self._client.delete_context)

    def list_contexts(self, *, limit: int | None = None, cursor: str | None = None) -> ContextPage:
        """One page of the caller's conversations (see `AsyncAgentClient.list_contexts`)."""
        return self._portal.call(partial(self._client.list_contexts, limit=limit, cursor=cursor))

    def contexts(self, *, limit: int | None = None) -> Iterator[ContextSummary]:
        """Every conversation of the caller with this agent, newest first, page after page."""
        return self._iterate(self._client.contexts(limit=limit))

    def get_context(self, context_id: str | None = None) -> ContextSummary:
        """One conversation's summary (see `AsyncAgentClient.get_context`)."""
        return self._portal.call(self._client.get_context, context_id)

    def messages_page(
        self, context_id: str | None = None, *, after: str | None = None, limit: int | None = None
    ) -> MessagePage:
        """One page of a transcript (see `AsyncAgentClient.messages_page`)."""
        call = partial(self._client.messages_page, after=after, limit=limit)
        return self._portal.call(call, context_id)

    def messages(
        self, context_id: str | None = None, *, after: str | None = None, limit: int | None = None
    ) -> Iterator[TranscriptMessage]:
        """The whole transcript, oldest first, page after page (see `AsyncAgentClient.messages`)."""
        return self._iterate(self._client.messages(context_id, after=after, limit=limit))

    def cancel(self, context_id: str | None = None) -> CancelResult:
        """Stop the running run on the server (see `AsyncAgentClient.cancel`)."""
        return self._portal.call(self._client.cancel, context_id)

    def fork(
        self,
        message_id: str | None = None,
        *,
        new_context_id: str | None = None,
        context_id: str | None = None,
    ) -> str:
        """Copy a conversation into a new one; returns its id (see `AsyncAgentClient.fork`)."""
        call = partial(self._client.fork, new_context_id=new_context_id, context_id=context_id)
        return self._portal.call(call, message_id)

    def agents(self) -> list[AgentInfo]:
        """The agents the server offers (``GET /agents``)."""
        return self._portal.call(self._client.agents)

    def close(self) -> None:
        """Close the connections and stop the background event loop."""
        if not self._portal.running:
            return
        try:
            self._portal.call(self._client.aclose)
        finally:
            self._portal.close()

    def __enter__(self) -> AgentClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _iterate(self, items: AsyncGenerator[_T, None]) -> Iterator[_T]:
        return self._portal.iterate(items)
