"""``trigger: "regenerate-message"``: answer the latest turn again (SPEC 3's regenerate).

The native wire regenerates by message id (``"regenerate": "msg-…"``): the history is
cut just before that assistant message, and the model answers again from there. The
AI SDK names the message by the id this binding gave it, the run id (the ``start``
part's ``messageId``), or by nothing (`regenerate()` without an argument: the last
answer).
"""

from __future__ import annotations

from agentkeel.bindings.ai_sdk.request import Regenerate
from agentkeel.errors import InvalidRequestError
from agentkeel.messages import JSONObject
from agentkeel.runtime.facade import RunFacade
from agentkeel.storage.base import SessionKey

__all__ = ["RegenerateUnsupportedError", "regenerate_request"]


class RegenerateUnsupportedError(InvalidRequestError):
    """The runtime served cannot cut a history by message id yet."""

    code = "regenerate_unsupported"


async def regenerate_request(runtime: RunFacade, key: SessionKey, action: Regenerate) -> JSONObject:
    """The native request body that regenerates what `action` names."""
    del runtime, key, action
    raise RegenerateUnsupportedError(
        "regenerating an answer needs message ids in the history, which this server "
        "does not keep yet"
    )
