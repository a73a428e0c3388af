"""The error codes of the wire, with their HTTP statuses, read off the error classes.

Every `AgentkeelError` subclass that names a code of its own is an answer the server may
give; its status is what `error_status` says for it. The OpenAPI document lists this
table under ``x-error-codes``, so a new error class is documented the day it is written.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from importlib import import_module
from typing import Any

from agentkeel.errors import AgentkeelError
from agentkeel.server.errors import HTTPError, error_status

__all__ = ["ERROR_MODULES", "WIRE_ERRORS", "error_codes", "placeholder", "wire_error_classes"]

WIRE_ERRORS: dict[str, int] = {"internal_error": 500, "method_not_allowed": 405}
"""Codes the app writes without an error class (the last-resort guard, Starlette's 405)."""


def _subclasses(cls: type[AgentkeelError]) -> Iterator[type[AgentkeelError]]:
    for sub in cls.__subclasses__():
        yield sub
        yield from _subclasses(sub)


ERROR_MODULES = (
    "agentkeel.errors",
    "agentkeel.memory.errors",
    "agentkeel.runtime.coordination",
    "agentkeel.runtime.errors",
    "agentkeel.server.auth",
    "agentkeel.server.errors",
    "agentkeel.server.memory",
    "agentkeel.storage.postgres_schema",
)
"""Every module that defines an error class with a code (the OpenAPI test checks the list)."""


_NOT_NATIVE = ("agentkeel.client", "agentkeel.bindings")
"""The client re-raises the server's codes; a binding answers in its protocol's shape."""


def wire_error_classes() -> Iterator[type[AgentkeelError]]:
    """The error classes the server may answer with: each names a code of its own.

    The client's errors (`agentkeel.client`) re-raise the server's codes and are left out.
    """
    for module in ERROR_MODULES:
        import_module(module)  # the document must not depend on what was imported before
    for cls in _subclasses(AgentkeelError):
        if "code" in vars(cls) and not cls.__module__.startswith(_NOT_NATIVE):
            yield cls


def placeholder(cls: type[AgentkeelError]) -> AgentkeelError:
    """An instance of `cls` with placeholder keyword arguments, to ask its status."""
    kwargs: dict[str, Any] = {}
    for name, param in inspect.signature(cls).parameters.items():
        if param.kind is param.KEYWORD_ONLY and param.default is param.empty:
            kwargs[name] = None if name in ("expected", "actual") else "x"
    return cls("x", **kwargs)


def error_codes() -> dict[str, tuple[int, str]]:
    """Every error code of the wire: its HTTP status and what it means (the class's docstring).

    The status is what `error_response` answers for the class, so the table cannot say
    something the server does not do. A code whose classes disagree on the status keeps
    the HTTP error's (or else the most general class's, which its subclasses share);
    the OpenAPI test checks `error_status` against `error_response` for every class.
    """
    codes: dict[str, tuple[int, str]] = {}
    # the server's own HTTP errors first: where a library error has an HTTP twin (memory's
    # errors), the twin is what the server answers
    ordered = sorted(wire_error_classes(), key=lambda cls: not issubclass(cls, HTTPError))
    for cls in ordered:
        code = cls.code
        if code in codes:
            continue
        status = error_status(placeholder(cls))
        doc = (inspect.getdoc(cls) or "").split("\n\n")[0].replace("\n", " ")
        codes[code] = (status, doc)
    for code, status in WIRE_ERRORS.items():
        codes.setdefault(code, (status, "the server answered with its generic guard"))
    return dict(sorted(codes.items()))
