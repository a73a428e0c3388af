"""Every error agentkeel raises, each carrying the `code` it has on the wire.

The hierarchy::

    AgentkeelError                      internal_error
    ├── ConfigurationError              invalid_config
    ├── InvalidRequestError             invalid_request
    │   └── InvalidContextIdError       invalid_context_id
    ├── StateValueError                 invalid_state_value
    ├── ModelError                      model_error
    │   ├── ModelAuthError              model_auth_failed
    │   ├── ModelBadRequestError        model_bad_request
    │   ├── ContextOverflowError        context_overflow
    │   ├── ModelRateLimitError         model_rate_limited
    │   └── ModelUnavailableError       model_unavailable
    ├── MaxStepsExceededError           max_steps_exceeded
    ├── OutputInvalidError              output_invalid
    ├── BudgetExceededError             budget_exceeded
    ├── InterruptError                  interrupt_error
    │   ├── InterruptNotFoundError      interrupt_not_found
    │   └── InterruptPendingError       interrupt_pending
    ├── RunInProgressError              context_busy
    ├── RestoreRequiredError            restore_required
    ├── ContextNotFoundError            context_not_found
    ├── ContextExistsError              context_exists
    ├── MessageNotFoundError            message_not_found
    ├── NoActiveRunError                no_active_run
    ├── ContextRefusedError             context_forbidden
    ├── SharedAgentError                agent_shared
    └── StorageError                    storage_error
        ├── StorageUnavailableError     storage_unavailable
        ├── ConcurrentWriteError        concurrent_write
        └── CorruptSessionError         corrupt_session

A run never raises a model or tool failure at its caller: it ends with
``status="failed"`` and an ``error`` carrying the same code. The exceptions are raised
for what the caller did wrong (bad input, a decision for an unknown interrupt) and for
storage that cannot be trusted.
"""

from __future__ import annotations

from typing import ClassVar

__all__ = [
    "AgentkeelError",
    "BudgetExceededError",
    "ConcurrentWriteError",
    "ConfigurationError",
    "ContextExistsError",
    "ContextNotFoundError",
    "ContextOverflowError",
    "ContextRefusedError",
    "CorruptSessionError",
    "InterruptError",
    "InterruptNotFoundError",
    "InterruptPendingError",
    "InvalidContextIdError",
    "InvalidRequestError",
    "MessageNotFoundError",
    "MaxStepsExceededError",
    "ModelAuthError",
    "ModelBadRequestError",
    "ModelError",
    "ModelRateLimitError",
    "ModelUnavailableError",
    "NoActiveRunError",
    "OutputInvalidError",
    "RestoreRequiredError",
    "RunInProgressError",
    "SharedAgentError",
    "StateValueError",
    "StorageError",
    "StorageUnavailableError",
]


class AgentkeelError(Exception):
    """Base of every agentkeel error; `code` is the stable name clients see on the wire."""

    code: ClassVar[str] = "internal_error"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class ConfigurationError(AgentkeelError):
    """A configuration (framework.json, constructor arguments) that cannot work."""

    code = "invalid_config"


class InvalidRequestError(AgentkeelError):
    """Input from a caller that breaks the contract of the entry point it was given to."""

    code = "invalid_request"


class InvalidContextIdError(InvalidRequestError):
    """A context id outside SPEC section 2's pattern; nothing was created for it."""

    code = "invalid_context_id"


class StateValueError(AgentkeelError):
    """An AgentState value that is not JSON-serializable; names the offending key."""

    code = "invalid_state_value"

    def __init__(self, message: str, *, key: str) -> None:
        super().__init__(message)
        self.key = key


class ModelError(AgentkeelError):
    """A model provider failed; `retryable` says whether trying again may help."""

    code = "model_error"
    retryable: ClassVar[bool] = False

    def __init__(self, message: str, *, status_code: int | None = None) -> None:
        super().__init__(message)
        self.status_code = status_code


class ModelAuthError(ModelError):
    """The provider refused the credentials (401/403)."""

    code = "model_auth_failed"


class ModelBadRequestError(ModelError):
    """The provider rejected the request as malformed (400/404/422)."""

    code = "model_bad_request"


class ContextOverflowError(ModelBadRequestError):
    """The conversation no longer fits the model's context window."""

    code = "context_overflow"


class ModelRateLimitError(ModelError):
    """The provider is throttling (429) and retries ran out."""

    code = "model_rate_limited"
    retryable = True


class ModelUnavailableError(ModelError):
    """The provider could not be reached or failed on its side (5xx, timeouts)."""

    code = "model_unavailable"
    retryable = True


class MaxStepsExceededError(AgentkeelError):
    """A run used its whole step budget without the model finishing."""

    code = "max_steps_exceeded"


class OutputInvalidError(AgentkeelError):
    """The model's answer failed validation against the output type, retries included."""

    code = "output_invalid"


class BudgetExceededError(AgentkeelError):
    """A token budget is spent; `retry_after` is the seconds until it renews, if it does.

    A run that meets one ends ``failed`` with this code before its next model call; a
    new turn of a principal over its daily budget is refused with it (HTTP 429).
    """

    code = "budget_exceeded"

    def __init__(self, message: str, *, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class InterruptError(AgentkeelError):
    """A human-in-the-loop decision that cannot be applied."""

    code = "interrupt_error"


class InterruptNotFoundError(InterruptError):
    """No pending interrupt has this id (unknown, or already decided); nothing changed."""

    code = "interrupt_not_found"


class InterruptPendingError(InterruptError):
    """A new message reached a context whose run waits for a decision; names the interrupt."""

    code = "interrupt_pending"

    def __init__(self, message: str, *, interrupt_id: str) -> None:
        super().__init__(message)
        self.interrupt_id = interrupt_id


class RunInProgressError(AgentkeelError):
    """The agent (one context) is already running a turn and the policy is to refuse."""

    code = "context_busy"


class RestoreRequiredError(AgentkeelError):
    """Async code asked for what only the stored session knows before loading it.

    ``await agent.restore()`` (or a first run) loads it; the message says so.
    """

    code = "restore_required"


class ContextNotFoundError(AgentkeelError):
    """No such context for this principal."""

    code = "context_not_found"


class ContextExistsError(AgentkeelError):
    """A fork was asked to create a context whose id is taken; nothing was created."""

    code = "context_exists"


class MessageNotFoundError(AgentkeelError):
    """A message id that the conversation does not hold (or not in the role asked for).

    ``replace`` needs a user message and ``regenerate`` an assistant message of the
    context; ``fork`` any of its messages. Nothing was cut or copied.
    """

    code = "message_not_found"


class NoActiveRunError(AgentkeelError):
    """A cancel reached a context with nothing running; nothing changed."""

    code = "no_active_run"


class ContextRefusedError(AgentkeelError):
    """A factory refuses to build an agent for this context (``403 context_forbidden``).

    Raise it from a definition's factory, e.g. when the context id names a user the
    caller may not act for; the message reaches the client, so keep secrets out of it.
    """

    code = "context_forbidden"


class SharedAgentError(AgentkeelError):
    """A factory returned an Agent it had already built for another context.

    One instance would share its memory (history, AgentState) between conversations,
    so the server refuses it; `definition` names the definition whose factory did it.
    """

    code = "agent_shared"

    def __init__(self, message: str, *, definition: str) -> None:
        super().__init__(message)
        self.definition = definition


class StorageError(AgentkeelError):
    """A storage backend failed to read or write."""

    code = "storage_error"


class StorageUnavailableError(StorageError):
    """The storage cannot be reached now (a database down or cut off); try again later.

    Nothing of the failed operation was stored. The server answers ``503`` and recovers
    by itself when the storage is back.
    """

    code = "storage_unavailable"


class ConcurrentWriteError(StorageError):
    """A write expected a session version (or held a fencing token) that is no longer current.

    Another writer (another replica, or the holder of a newer lease) committed first; nothing
    of the refused write was stored. Reload the session and run the turn again.
    """

    code = "concurrent_write"

    def __init__(self, message: str, *, expected: int | None, actual: int | None) -> None:
        super().__init__(message)
        self.expected = expected
        self.actual = actual


class CorruptSessionError(StorageError):
    """A stored file cannot be decoded; `path` names it. Nothing is overwritten."""

    code = "corrupt_session"

    def __init__(self, message: str, *, path: str) -> None:
        super().__init__(message)
        self.path = path
