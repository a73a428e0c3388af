"""agentkeel: serve AI agents to web and API clients.

The client owns the wire; the server owns the memory. This module re-exports the public
API; everything else is reached through its subpackage (`agentkeel.models.openai`,
`agentkeel.storage.file`, ...).
"""

from typing import TYPE_CHECKING

from agentkeel.agent import Agent, StreamItem
from agentkeel.checkpoint import Checkpointer, FileCheckpointer, InMemoryCheckpointer
from agentkeel.client import AgentClient, AsyncAgentClient
from agentkeel.context import RunContext
from agentkeel.conversation import (
    ConversationManager,
    KeepAllConversationManager,
    SlidingWindowConversationManager,
)
from agentkeel.errors import (
    AgentkeelError,
    BudgetExceededError,
    ConcurrentWriteError,
    ConfigurationError,
    ContextNotFoundError,
    ContextRefusedError,
    CorruptSessionError,
    InterruptNotFoundError,
    InterruptPendingError,
    InvalidContextIdError,
    InvalidRequestError,
    ModelError,
    OutputInvalidError,
    RestoreRequiredError,
    RunInProgressError,
    SharedAgentError,
    StateValueError,
    StorageError,
    StorageUnavailableError,
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
from agentkeel.multiagent import Swarm, SwarmResult, SwarmSession
from agentkeel.result import AgentResult, ToolCallRecord, Usage
from agentkeel.rewind import Rewind
from agentkeel.servable import Servable
from agentkeel.session import SessionHome, SessionManager
from agentkeel.state import AgentState, InvocationState, SharedState
from agentkeel.storage import InMemoryStorage, LocalFileStorage, SessionStorage
from agentkeel.tools import Tool, tool
from agentkeel.tools.toolset import Toolset
from agentkeel.usage import ModelPrice, TokenBudgets

if TYPE_CHECKING:
    from agentkeel.mcp import MCPServer
    from agentkeel.server import A2AServer, serve_framework

__all__ = [
    "A2AServer",
    "Agent",
    "AgentClient",
    "AgentMiddleware",
    "AgentResult",
    "AgentState",
    "AgentkeelError",
    "Approve",
    "AsyncAgentClient",
    "BudgetExceededError",
    "CancelRun",
    "Checkpointer",
    "ConcurrentWriteError",
    "ConfigurationError",
    "ContextNotFoundError",
    "ContextRefusedError",
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
    "MCPServer",
    "Message",
    "ModelError",
    "ModelPrice",
    "OutputInvalidError",
    "Reject",
    "RestoreRequiredError",
    "Rewind",
    "RunContext",
    "RunEvent",
    "RunInProgressError",
    "RunLimits",
    "ScriptedModel",
    "ScriptedToolCall",
    "ScriptedTurn",
    "Servable",
    "SessionHome",
    "SessionManager",
    "SessionStorage",
    "SharedAgentError",
    "SharedState",
    "SlidingWindowConversationManager",
    "StateValueError",
    "StatusEvent",
    "StepEvent",
    "StorageError",
    "StorageUnavailableError",
    "StreamItem",
    "Swarm",
    "SwarmResult",
    "SwarmSession",
    "ThinkingEvent",
    "TokenBudgets",
    "TokenEvent",
    "Tool",
    "ToolCallEvent",
    "ToolCallRecord",
    "ToolResultEvent",
    "Toolset",
    "Usage",
    "interrupt",
    "serve_framework",
    "tool",
]


def __getattr__(name: str) -> object:
    if name == "MCPServer":  # needs the optional `mcp` SDK
        from agentkeel.mcp import MCPServer

        return MCPServer
    """Import the server's names on first use, so `import agentkeel` stays light."""
    if name in ("A2AServer", "serve_framework"):
        import agentkeel.server as server

        return getattr(server, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
