"""``trigger: "regenerate-message"``: answer again (SPEC 3's regenerate, by message id).

The native wire regenerates by message id (``"regenerate": "msg-…"``): the history is
cut just before that assistant message, and the model answers again from there. The
AI SDK names the answer by the id this binding gave it, the run id (the ``start``
part's ``messageId``), or by nothing (the last answer). Every transcript message names
the run that wrote it, so the run id leads to the first assistant message of that run:
the whole answer (its tool calls too) goes, and the person's message before it stays.
The transcript is read from the server, not from the request, so this works after a
reload and on any replica.
"""

from __future__ import annotations

from collections.abc import Sequence

from agentkeel.bindings.ai_sdk.request import Regenerate
from agentkeel.errors import MessageNotFoundError
from agentkeel.messages import JSONObject, Message
from agentkeel.runtime.facade import RunFacade
from agentkeel.storage.base import SessionKey

__all__ = ["answer_to_regenerate", "regenerate_request"]


def answer_to_regenerate(messages: Sequence[Message], run_id: str | None) -> str | None:
    """The id of the first assistant message of run `run_id` (None: of the latest turn)."""
    if run_id is not None:
        return next((m.id for m in messages if m.role == "assistant" and m.run_id == run_id), None)
    asked = max((i for i, m in enumerate(messages) if m.role == "user"), default=-1)
    return next((m.id for m in messages[asked + 1 :] if m.role == "assistant"), None)


async def regenerate_request(runtime: RunFacade, key: SessionKey, action: Regenerate) -> JSONObject:
    """The native request body that regenerates what `action` names.

    Raises:
        MessageNotFoundError: The conversation holds no such answer.
    """
    target = answer_to_regenerate(await runtime.transcript(key), action.message_id)
    if target is None:
        named = "the last answer" if action.message_id is None else repr(action.message_id)
        raise MessageNotFoundError(f"the conversation holds no answer {named} to regenerate")
    return {"contextId": key.context_id, "regenerate": target}
