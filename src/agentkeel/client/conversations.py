"""The conversation endpoints of SPEC section 3, as methods of `AsyncAgentClient`.

The context list and summary, the transcript, cancel and fork. Each method acts on the
client's own conversation unless it is given another `context_id`; none of them moves
the client to another conversation (``AsyncAgentClient(context_id=...)`` does).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import TYPE_CHECKING

import httpx

from agentkeel.client.records import (
    CancelResult,
    ContextPage,
    ContextSummary,
    MessagePage,
    TranscriptMessage,
)
from agentkeel.client.wire import (
    parse_cancel,
    parse_context,
    parse_context_page,
    parse_fork,
    parse_message_page,
    read_json,
)
from agentkeel.errors import InvalidRequestError
from agentkeel.messages import JSONObject

__all__ = ["ConversationsMixin"]


def _params(**values: str | int | None) -> dict[str, str | int]:
    return {name: value for name, value in values.items() if value is not None}


class ConversationsMixin:
    """Reading and steering conversations; `AsyncAgentClient` supplies the transport."""

    if TYPE_CHECKING:
        _context_id: str | None

        def _url(self, *parts: str) -> str: ...

        async def _request(
            self,
            method: str,
            url: str,
            *,
            body: JSONObject | None = None,
            key: str | None = None,
            params: dict[str, str | int] | None = None,
            retried: bool = True,
        ) -> httpx.Response: ...

    def _context(self, context_id: str | None, what: str) -> str:
        chosen = context_id if context_id is not None else self._context_id
        if chosen is None:
            raise InvalidRequestError(f"there is no conversation to {what} yet")
        return chosen

    async def list_contexts(
        self, *, limit: int | None = None, cursor: str | None = None
    ) -> ContextPage:
        """One page of the caller's conversations with this agent, newest first.

        Args:
            limit: Page size, 1 to 200 (the server's default is 50).
            cursor: The `ContextPage.next_cursor` of the previous page.

        Raises:
            InvalidRequestError: A bad `limit` or `cursor` (the server's ``400``).
        """
        params = _params(limit=limit, cursor=cursor)
        response = await self._request("GET", self._url("contexts"), params=params)
        return parse_context_page(read_json(response))

    async def contexts(self, *, limit: int | None = None) -> AsyncGenerator[ContextSummary, None]:
        """Every conversation of the caller with this agent, newest first, page after page."""
        cursor: str | None = None
        while True:
            page = await self.list_contexts(limit=limit, cursor=cursor)
            for summary in page.contexts:
                yield summary
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    async def get_context(self, context_id: str | None = None) -> ContextSummary:
        """The summary of a conversation: this one, unless `context_id` names another.

        Raises:
            ContextNotFoundError: The server knows no such context for this caller.
        """
        url = self._url("contexts", self._context(context_id, "read"))
        return parse_context(read_json(await self._request("GET", url)))

    async def messages_page(
        self, context_id: str | None = None, *, after: str | None = None, limit: int | None = None
    ) -> MessagePage:
        """One page of a conversation's transcript, oldest first.

        Args:
            context_id: Another conversation than this client's.
            after: Only the messages after this message id.
            limit: Page size, 1 to 500 (the server's default is 100).
        """
        url = self._url("contexts", self._context(context_id, "read"), "messages")
        response = await self._request("GET", url, params=_params(after=after, limit=limit))
        return parse_message_page(read_json(response))

    async def messages(
        self, context_id: str | None = None, *, after: str | None = None, limit: int | None = None
    ) -> AsyncGenerator[TranscriptMessage, None]:
        """The whole transcript (after `after`, when given), page after page.

        The transcript is a view of what the agent remembers: one message per user and
        assistant message of the committed turns, never tool inputs or outputs, thinking
        or state. A server with ``server.transcript: false`` answers 404 (a ServerError
        with code ``not_found``).
        """
        chosen = self._context(context_id, "read")
        while True:
            page = await self.messages_page(chosen, after=after, limit=limit)
            for message in page.messages:
                yield message
            if page.next_cursor is None or not page.messages:
                return
            after = page.messages[-1].id

    async def cancel(self, context_id: str | None = None) -> CancelResult:
        """Stop the conversation's running run on the server, wherever it runs.

        The run ends ``cancelled`` with a valid history, and its stream gets its
        ``done`` frame; a suspended run is abandoned.

        Raises:
            NoActiveRunError: Nothing is running on the context.
        """
        url = self._url("contexts", self._context(context_id, "cancel"), "cancel")
        return parse_cancel(read_json(await self._request("POST", url, body={})))

    async def fork(
        self,
        message_id: str | None = None,
        *,
        new_context_id: str | None = None,
        context_id: str | None = None,
    ) -> str:
        """Copy a conversation into a new one and return the new context's id.

        The copy holds the history up to and including `message_id` (all of it when
        None) and a copy of the AgentState; the source is unchanged, and this client
        stays on it. The request is not retried, so a lost answer never forks twice.

        Args:
            message_id: The last message to keep (an id from `messages`).
            new_context_id: The new conversation's id; None lets the server mint one.
            context_id: The conversation to copy, if not this client's.

        Raises:
            ContextExistsError: `new_context_id` is taken.
            MessageNotFoundError: The conversation holds no message `message_id`.
        """
        body: JSONObject = {}
        if message_id is not None:
            body["messageId"] = message_id
        if new_context_id is not None:
            body["contextId"] = new_context_id
        url = self._url("contexts", self._context(context_id, "fork"), "fork")
        response = await self._request("POST", url, body=body, retried=False)
        return parse_fork(read_json(response))
