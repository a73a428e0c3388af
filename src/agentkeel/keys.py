"""SessionKey: which session, in its own module so that every store can name one.

Session storages, checkpointers and the coordination of a runtime all key their data by
the same (definition, contextId, principal) triple (SPEC section 2). It lives here, apart
from any one store's interface, so that none of them imports another to get it.
"""

from __future__ import annotations

from dataclasses import dataclass

from agentkeel.errors import StorageError
from agentkeel.ids import validate_context_id, validate_definition_name

__all__ = ["SessionKey", "require_key"]


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionKey:
    """Which session: an agent definition, a context id and (with auth on) a principal.

    The same context id under two definitions or two principals is two sessions.
    """

    definition: str
    context_id: str
    principal: str | None = None

    def __post_init__(self) -> None:
        validate_definition_name(self.definition)
        validate_context_id(self.context_id)
        if self.principal is not None and not self.principal:
            raise StorageError("a principal must be a non-empty string or None")

    @property
    def session_id(self) -> str:
        """``"<def-name>:<contextId>"``, the seed's session id."""
        return f"{self.definition}:{self.context_id}"

    @classmethod
    def parse(cls, session_id: str, *, principal: str | None = None) -> SessionKey:
        """Split a ``"<def-name>:<contextId>"`` session id."""
        definition, sep, context_id = session_id.partition(":")
        if not sep:
            raise StorageError(f"session id {session_id!r} must look like '<def-name>:<contextId>'")
        return cls(definition=definition, context_id=context_id, principal=principal)


def require_key(key: object, where: str) -> SessionKey:
    """`key` itself when it is a SessionKey; otherwise a TypeError that says what to pass.

    Every public method of a store calls it first: a session id string given by mistake
    would otherwise fail deep inside with an AttributeError that names nothing useful.
    """
    if isinstance(key, SessionKey):
        return key
    hint = (
        f"SessionKey.parse({key!r})"
        if isinstance(key, str)
        else "SessionKey(definition=..., context_id=...)"
    )
    raise TypeError(f"{where} takes a SessionKey, not {type(key).__name__}; pass {hint}")
