"""The body of ``POST /v1/chat/completions``, as far as an agent server takes it.

The server owns the memory (SPEC 10), so of the ``messages`` a client sends along only
the last one is the turn: it must be the user's new message. The earlier ones are read
only for a request without a conversation id, which is a conversation of its own seeded
from them (`ChatRequest.seed`). Sampling options (``temperature``, ``max_tokens``,
``tools``...) belong to the agent's configuration and are accepted and ignored, so that
clients which always send them work unchanged.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agentkeel.errors import InvalidRequestError
from agentkeel.messages import Message

__all__ = ["ChatMessage", "ChatRequest", "parse_chat_request"]


class _Open(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True, hide_input_in_errors=True)


class _ContentPart(_Open):
    type: str
    text: str | None = None


class ChatMessage(_Open):
    """One message of the request; only text content is understood."""

    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: str | list[_ContentPart] | None = None

    def text(self, index: int) -> str:
        """The message's text; InvalidRequestError for an image, audio or file part."""
        if self.content is None or isinstance(self.content, str):
            return self.content or ""
        pieces: list[str] = []
        for part in self.content:
            if part.type != "text" or part.text is None:
                raise InvalidRequestError(
                    f"messages[{index}].content: this agent takes text parts, not {part.type!r}"
                )
            pieces.append(part.text)
        return "".join(pieces)


class _StreamOptions(_Open):
    include_usage: bool = False


class ChatRequest(_Open):
    """What the binding reads of a Chat Completions request."""

    model: str = Field(min_length=1)
    messages: list[ChatMessage] = Field(min_length=1)
    stream: bool = False
    stream_options: _StreamOptions | None = None

    @property
    def include_usage(self) -> bool:
        """Whether a stream ends with a usage chunk (``stream_options.include_usage``)."""
        return self.stream_options is not None and self.stream_options.include_usage

    def prompt(self) -> str:
        """The turn: the text of the last message, which must be the user's."""
        index = len(self.messages) - 1
        last = self.messages[index]
        if last.role != "user":
            raise InvalidRequestError(
                f"messages[{index}]: the last message must be the user's new message"
            )
        text = last.text(index)
        if not text.strip():
            raise InvalidRequestError(f"messages[{index}].content: the message has no text")
        return text

    def seed(self) -> list[Message]:
        """The history of a conversation without an id: its user and assistant messages.

        System and developer messages are left out (the agent's own instructions stand),
        and so are tool messages (their calls ran on the client, not here).
        """
        seeded: list[Message] = []
        for index, item in enumerate(self.messages[:-1]):
            if item.role == "user":
                seeded.append(Message.user(item.text(index)))
            elif item.role == "assistant" and item.text(index):
                seeded.append(Message.assistant(item.text(index)))
        return seeded


def parse_chat_request(body: object) -> ChatRequest:
    """Validate a request body; InvalidRequestError names the first offending field."""
    if not isinstance(body, dict):
        raise InvalidRequestError("the request body must be a JSON object")
    try:
        return ChatRequest.model_validate(body)
    except ValidationError as exc:
        first = exc.errors(include_url=False, include_input=False)[0]
        where = ".".join(str(part) for part in first["loc"])
        raise InvalidRequestError(f"{where}: {first['msg']}" if where else first["msg"]) from None
