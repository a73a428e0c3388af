"""Durations as framework.json writes them (``"30d"``, ``"15m"``): one parser for every key.

``retention.*`` and a coordination URL's ``lease`` parameter read the same shapes, so
the parser lives on its own, below both.
"""

from __future__ import annotations

import re

__all__ = ["parse_duration"]

_DURATION = re.compile(r"^(\d+)(ms|s|m|h|d|w)$")
_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_duration(text: str | None) -> float | None:
    """Seconds in ``"30d"``, ``"1h"``, ``"15m"``, ``"10s"`` or ``"500ms"``; None stays None.

    Raises:
        ValueError: For any other shape.
    """
    if text is None:
        return None
    match = _DURATION.fullmatch(text)
    if match is None:
        raise ValueError(f"{text!r} is not a duration like '30d', '1h', '15m', '10s' or '500ms'")
    return int(match.group(1)) * _UNITS[match.group(2)]
