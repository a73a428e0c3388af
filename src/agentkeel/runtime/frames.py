"""One frame of a run: its per-run id, its data, and its SSE bytes, encoded once.

A `RunChannel` (`agentkeel.runtime.channels`) holds a run's frames; once the run is no
context's latest, `Packed` keeps them as their bytes alone.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import overload

from agentkeel.messages import JSONObject

__all__ = ["Frame", "Packed"]


_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def _frame_encoder() -> Callable[[JSONObject], str]:
    """`_ENCODER.encode`, with the C encoder it builds per call built once instead.

    ``JSONEncoder.encode`` makes a new C encoder for every value it encodes, which costs
    about as much as encoding a token frame; this one is made once, with the same
    options (compact, not ASCII-escaped, NaN refused), so it gives the same text.
    Without the C accelerator it is `_ENCODER.encode` itself.
    """
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:
        return _ENCODER.encode
    markers: dict[int, object] = {}  # what the circular check has entered
    encode = make(
        markers, _ENCODER.default, json.encoder.encode_basestring, None, ":", ",", False, False,
        False,
    )  # fmt: skip

    def dumps(data: JSONObject) -> str:
        try:
            return "".join(encode(data, 0))
        except BaseException:
            markers.clear()  # an encode that failed halfway leaves its entries behind
            raise

    return dumps


_dumps = _frame_encoder()


@dataclass(frozen=True, slots=True)
class Frame:
    """One frame: its per-run id, its data object, and its SSE bytes."""

    id: int
    data: JSONObject
    encoded: bytes
    done: bool
    """Whether this is a segment's last frame."""

    @classmethod
    def build(cls, frame_id: int, data: JSONObject, text: str | None = None) -> Frame:
        """Encode `data` once; every reader sends the same bytes.

        `text`, when given, is `data` already encoded as compact JSON (a token frame's,
        built around its text by `wire.token_frame_json`). Compact JSON never holds a
        raw line break (they are escaped inside strings), so it is always one ``data:``
        line and can be framed without `encode_frame`'s split.
        """
        if text is None:
            text = _dumps(data)
        encoded = b"id: %d\ndata: %s\n\n" % (frame_id, text.encode("utf-8"))
        return cls(frame_id, data, encoded, data.get("done") is True)

    @classmethod
    def decode(cls, encoded: bytes) -> Frame | None:
        """The frame whose SSE bytes are `encoded` (None: not a frame's, or malformed)."""
        head, _, data = encoded.partition(b"\ndata: ")
        if not head.startswith(b"id: "):
            return None
        try:
            frame_id, decoded = int(head.removeprefix(b"id: ")), json.loads(data)
        except ValueError:
            return None
        if not isinstance(decoded, dict):
            return None
        return cls(frame_id, decoded, encoded, decoded.get("done") is True)


class Packed(Sequence[Frame]):
    """A finished run's frames as their SSE bytes alone, decoded again when read.

    An idempotency claim keeps its run's channel for as long as the claim lasts, also
    once the context ran other turns; as frames, that is two objects per token for the
    garbage collector to scan in each full collection. A tuple of bytes is none.
    """

    __slots__ = ("_encoded",)

    def __init__(self, frames: Sequence[Frame]) -> None:
        self._encoded = tuple(frame.encoded for frame in frames)

    @property
    def encoded(self) -> tuple[bytes, ...]:
        """Each frame's SSE bytes, as kept (nothing is decoded)."""
        return self._encoded

    def __len__(self) -> int:
        return len(self._encoded)

    @overload
    def __getitem__(self, index: int) -> Frame: ...
    @overload
    def __getitem__(self, index: slice) -> list[Frame]: ...
    def __getitem__(self, index: int | slice) -> Frame | list[Frame]:
        if isinstance(index, slice):
            return [self._frame(encoded) for encoded in self._encoded[index]]
        return self._frame(self._encoded[index])

    @staticmethod
    def _frame(encoded: bytes) -> Frame:
        frame = Frame.decode(encoded)
        if frame is None:
            raise ValueError("internal error: a packed frame does not decode")
        return frame
