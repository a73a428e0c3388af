"""AgentClient: talk to a served agent over the native wire (SPEC sections 3 and 4).

The client owns the wire; the server owns the memory. So a client holds exactly one
piece of conversation state, the opaque context id, and no history: a turn posts the
message with that id, and the server continues the conversation it stores under it.
What the server remembers can be read back as a transcript (`messages`), and steered
with `cancel`, `fork`, and the ``replace`` and ``regenerate`` arguments of a turn.

A flaky network is safe: every turn carries an ``Idempotency-Key`` that a retried POST
reuses, so the server answers with the original run instead of running it twice; and a
stream that drops before its ``done`` frame reconnects with ``Last-Event-ID``, tracking
frame ids so that every event reaches the caller exactly once. Error answers become the
typed errors of `agentkeel.errors`, chosen by their wire ``code``. `AsyncAgentClient`
is the implementation; `AgentClient` is its blocking form.

The package's modules: `records` (what the clients return), `wire` (reading answers),
`errors`, `conversations` (SPEC section 3's conversation endpoints), `async_client` and
`blocking_client`.
"""

from agentkeel.client.async_client import AsyncAgentClient
from agentkeel.client.blocking_client import AgentClient
from agentkeel.client.errors import ConnectionLostError, ServerError
from agentkeel.client.records import (
    DEFAULT_TIMEOUT,
    AgentInfo,
    CancelResult,
    ClientOptions,
    ClientStreamItem,
    ContextPage,
    ContextStatus,
    ContextSummary,
    MessagePage,
    MultitaskPolicy,
    SendResult,
    TranscriptMessage,
    approve,
    cancel,
    reject,
)

__all__ = [
    "DEFAULT_TIMEOUT",
    "AgentClient",
    "AgentInfo",
    "AsyncAgentClient",
    "CancelResult",
    "ClientOptions",
    "ClientStreamItem",
    "ConnectionLostError",
    "ContextPage",
    "ContextStatus",
    "ContextSummary",
    "MessagePage",
    "MultitaskPolicy",
    "SendResult",
    "ServerError",
    "TranscriptMessage",
    "approve",
    "cancel",
    "reject",
]
