"""agentkeel: serve AI agents to web and API clients.

The client owns the wire; the server owns the memory. This module re-exports the public
API; everything else is reached through its subpackage (`agentkeel.models.openai`,
`agentkeel.storage.file`, ...).
"""

from agentkeel.agent import Agent, StreamItem
from agentkeel.checkpoint import Checkpointer, FileCheckpointer, InMemoryCheckpointer
from agentkeel.context import RunContext
from agentkeel.conversation import (
    ConversationManager,
    KeepAllConversationManager,
    SlidingWindowConversationManager,
)
from agentkeel.errors import (
    AgentkeelError,
    ConfigurationError,
    ContextNotFoundError,
    CorruptSessionError,
    InterruptNotFoundError,
    InterruptPendingError,
    InvalidContextIdError,
    InvalidRequestError,
    ModelError,
    RunInProgressError,
    StateValueError,
    StorageError,
)
from agentkeel.events import (
    ErrorEvent,
    InterruptEvent,
    RunEvent,
    StatusEvent,
    StepEvent,
    ThinkingEvent,
    TokenEvent,
    ToolCallEvent,
    ToolResultEvent,
)
from agentkeel.interrupts import (
    Approve,
    CancelRun,
    Decision,
    InputAnswer,
    Interrupt,
    Reject,
    interrupt,
)
from agentkeel.loop import RunLimits
from agentkeel.messages import Message
from agentkeel.middleware import AgentMiddleware
from agentkeel.models.scripted import ScriptedModel, ScriptedToolCall, ScriptedTurn
from agentkeel.result import AgentResult, ToolCallRecord, Usage
from agentkeel.session import SessionManager
from agentkeel.state import AgentState, InvocationState, SharedState
from agentkeel.storage import InMemoryStorage, LocalFileStorage, SessionStorage
from agentkeel.tools import Tool, tool

__all__ = [
    "Agent",
    "AgentMiddleware",
    "AgentResult",
    "AgentState",
    "AgentkeelError",
    "Approve",
    "CancelRun",
    "Checkpointer",
    "ConfigurationError",
    "ContextNotFoundError",
    "ConversationManager",
    "CorruptSessionError",
    "Decision",
    "ErrorEvent",
    "FileCheckpointer",
    "InMemoryCheckpointer",
    "InMemoryStorage",
    "InputAnswer",
    "Interrupt",
    "InterruptEvent",
    "InterruptNotFoundError",
    "InterruptPendingError",
    "InvalidContextIdError",
    "InvalidRequestError",
    "InvocationState",
    "KeepAllConversationManager",
    "LocalFileStorage",
    "Message",
    "ModelError",
    "Reject",
    "RunContext",
    "RunEvent",
    "RunInProgressError",
    "RunLimits",
    "ScriptedModel",
    "ScriptedToolCall",
    "ScriptedTurn",
    "SessionManager",
    "SessionStorage",
    "SharedState",
    "SlidingWindowConversationManager",
    "StateValueError",
    "StatusEvent",
    "StepEvent",
    "StorageError",
    "StreamItem",
    "ThinkingEvent",
    "TokenEvent",
    "Tool",
    "ToolCallEvent",
    "ToolCallRecord",
    "ToolResultEvent",
    "Usage",
    "interrupt",
    "tool",
]
