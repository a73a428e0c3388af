"""Decoding a request body as JSON, with exactly the acceptance of Python's `json`.

Shared by the server's request limits (every native route) and the AG-UI binding, which
decodes its own bodies (`agentkeel.bindings.agui.body`) and must refuse what the other
routes refuse.
"""

from __future__ import annotations

import json

from pydantic_core import from_json

__all__ = ["decode_json"]


def _reject_constant(name: str) -> float:
    raise ValueError(f"{name} is not JSON")


def decode_json(body: bytes) -> object:
    """`body` as JSON: pydantic's parser first, `json` for what it refuses.

    Clients of the bindings post whole histories with every turn, so decoding is a cost
    that grows with a conversation; jiter builds the value in about 60% of `json`'s time.
    `json` decides the bodies jiter refuses (a byte-order mark, a lone surrogate,
    nesting past 200 levels), so exactly the bodies `json` accepts are accepted.
    ``NaN`` and ``Infinity`` are refused (ValueError), as they are not JSON.
    """
    try:
        return from_json(body, allow_inf_nan=False)
    except ValueError:
        return json.loads(body, parse_constant=_reject_constant)
