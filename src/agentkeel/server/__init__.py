"""The agentkeel HTTP server: every agent of a framework on the native wire (SPEC 3, 4).

`create_app` builds the ASGI app, `serve_framework` runs it with uvicorn, and
`A2AServer` serves one agent built in code with the same machinery. `serve_framework`
is imported on first use, so building an app never imports uvicorn.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentkeel.server.app import A2AServer, create_app

if TYPE_CHECKING:
    from agentkeel.server.serve import serve_framework

__all__ = ["A2AServer", "create_app", "serve_framework"]


def __getattr__(name: str) -> object:
    if name == "serve_framework":
        from agentkeel.server.serve import serve_framework

        return serve_framework
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
