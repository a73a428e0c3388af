"""What a `DefaultChatTransport` request asks for, taken from its body (SPEC 10).

The AI SDK sends the chat's whole message list (or, with `prepareSendMessagesRequest`,
the last message only). The server owns the memory, so nothing but the last message is
read, and of it only what the turn needs: a user message's text, or the answer to a
pending tool approval. The earlier messages are not parsed at all: a history that lies
about earlier turns cannot reach the model, and a long chat costs no more to parse
than a short one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agentkeel.errors import InvalidRequestError
from agentkeel.messages import MESSAGE_ID_PATTERN

__all__ = [
    "ApprovalAnswer",
    "ChatAction",
    "ChatRequest",
    "ChatTransportBody",
    "Edit",
    "NewMessage",
    "Regenerate",
    "parse_chat_request",
]

_ID = Field(min_length=1, max_length=256)


class _Loose(BaseModel):
    """The AI SDK adds fields over time (metadata, provider options): unknown ones pass."""

    model_config = ConfigDict(extra="ignore", frozen=True, hide_input_in_errors=True)


class _Approval(_Loose):
    id: str = _ID
    approved: bool | None = None
    reason: str | None = Field(default=None, max_length=10_000)


class _Part(_Loose):
    type: str
    text: str | None = None
    state: str | None = None
    approval: _Approval | None = None


class _LastMessage(_Loose):
    id: str = _ID
    role: Literal["system", "user", "assistant"]
    parts: list[_Part]


class ChatTransportBody(_Loose):
    """A `DefaultChatTransport` request body; only the last message is read."""

    id: str = _ID
    messages: list[object]
    """Not parsed: only the last message is read (see the module's docstring)."""
    trigger: Literal["submit-message", "regenerate-message"] = "submit-message"
    message_id: str | None = Field(default=None, alias="messageId", max_length=256)


@dataclass(frozen=True, slots=True)
class NewMessage:
    """A user message to answer: its text parts joined, and the client's id for it."""

    message_id: str
    text: str


@dataclass(frozen=True, slots=True)
class Edit:
    """`sendMessage({text, messageId})` on a transcript message: replace it with `text`."""

    message_id: str
    text: str


@dataclass(frozen=True, slots=True)
class ApprovalAnswer:
    """`addToolApprovalResponse`: the decision on the pending approval `approval_id`."""

    approval_id: str
    approved: bool
    reason: str | None


@dataclass(frozen=True, slots=True)
class Regenerate:
    """`regenerate()`: answer again from before an assistant message (None: the last)."""

    message_id: str | None


ChatAction = NewMessage | Edit | ApprovalAnswer | Regenerate


@dataclass(frozen=True, slots=True)
class ChatRequest:
    """The chat id (the contextId) and what the request asks for."""

    chat_id: str
    action: ChatAction


def _invalid(exc: ValidationError, prefix: str) -> InvalidRequestError:
    first = exc.errors(include_url=False, include_input=False)[0]
    where = ".".join(str(part) for part in (prefix, *first["loc"]) if part != "")
    return InvalidRequestError(f"{where}: {first['msg']}" if where else first["msg"])


def _answered(message: _LastMessage) -> ApprovalAnswer | None:
    """The approval this assistant message answers (the last one, if several)."""
    for part in reversed(message.parts):
        approval = part.approval
        if part.state == "approval-responded" and approval is not None:
            if approval.approved is None:
                raise InvalidRequestError("an approval response needs approval.approved")
            return ApprovalAnswer(approval.id, approval.approved, approval.reason)
    return None


def _action(body: ChatTransportBody, last: _LastMessage) -> ChatAction:
    if last.role == "user":
        edited = body.message_id
        if edited is not None and not MESSAGE_ID_PATTERN.fullmatch(edited):
            raise InvalidRequestError(
                "editing a message (sendMessage with a messageId) needs its msg- id, as the "
                "transcript gives it; send a new message instead"
            )
        texts = [part.text for part in last.parts if part.type == "text" and part.text is not None]
        if not texts or not "".join(texts).strip():
            raise InvalidRequestError("the last message has no text part (only text is understood)")
        if edited is not None:
            return Edit(edited, "".join(texts))
        return NewMessage(last.id, "".join(texts))
    if last.role == "assistant" and (answer := _answered(last)) is not None:
        return answer
    raise InvalidRequestError(
        "the last message is neither a user message nor an answer to a tool approval"
    )


def parse_chat_request(body: object) -> ChatRequest:
    """Validate a `DefaultChatTransport` body; InvalidRequestError names what is wrong."""
    if not isinstance(body, dict):
        raise InvalidRequestError("the request body must be a JSON object")
    try:
        parsed = ChatTransportBody.model_validate(body)
    except ValidationError as exc:
        raise _invalid(exc, "") from None
    if parsed.trigger == "regenerate-message":
        return ChatRequest(parsed.id, Regenerate(parsed.message_id))
    if not parsed.messages:
        raise InvalidRequestError("messages: the request carries no message")
    try:
        last = _LastMessage.model_validate(parsed.messages[-1])
    except ValidationError as exc:
        raise _invalid(exc, f"messages.{len(parsed.messages) - 1}") from None
    return ChatRequest(parsed.id, _action(parsed, last))
