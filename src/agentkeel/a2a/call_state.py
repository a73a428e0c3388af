"""What the A2A binding reads of a call: its principal, transport and message key.

A2A has no Idempotency-Key header; a message's `messageId` plays its part, so that a
client retrying a message (even at the same instant) joins the first one's task instead
of running the turn twice.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from a2a.types import Message

from agentkeel.a2a.protojson import message_json
from agentkeel.messages import JSONObject

__all__ = ["PRINCIPAL_STATE", "TRANSPORT_STATE", "claim_of"]

PRINCIPAL_STATE = "agentkeel.principal"
"""Key of the caller's principal in ``ServerCallContext.state`` (None: auth is off)."""

TRANSPORT_STATE = "agentkeel.transport"
"""The call context's A2A transport (``JSONRPC``, ``HTTP+JSON`` or ``GRPC``)."""


def claim_of(message: Message, state: Mapping[str, Any]) -> tuple[str | None, JSONObject]:
    """A new message's idempotency key (None without a `messageId`) and its JSON body.

    The key is the message's transport, `messageId` and content.

    The same message sent again over the same transport (a client retrying, even at
    the same instant) has the same key and joins the first one's task. A different
    message that reuses a `messageId`, or the same one sent over another transport, is
    a message of its own and runs: A2A has the sender make ids unique, and a sender
    that reuses one (the conformance kit names its messages per scenario, the same on
    each transport) must not have a real message refused, or answered with another
    message's task.
    """
    body = message_json(message)
    if not message.message_id:
        return None, body
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"))
    digest = hashlib.sha256(canonical.encode()).hexdigest()[:24]
    transport = state.get(TRANSPORT_STATE) or "JSONRPC"
    return f"{transport}:{message.message_id}#{digest}", body
