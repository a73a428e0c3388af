"""Minting and validating ids, and turning an id into a file name that cannot escape.

Context ids come from clients, so they are validated against SPEC section 2 at the
edge *and* encoded by every storage backend: the encoding alone guarantees that no id
names a file outside its folder, whatever validation ran before it.
"""

from __future__ import annotations

import re
import secrets

from agentkeel.errors import InvalidContextIdError, InvalidRequestError

__all__ = [
    "CONTEXT_ID_PATTERN",
    "DEFINITION_NAME_PATTERN",
    "decode_path_segment",
    "encode_path_segment",
    "new_call_id",
    "new_checkpoint_id",
    "new_context_id",
    "new_interrupt_id",
    "new_run_id",
    "validate_context_id",
    "validate_definition_name",
]

CONTEXT_ID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@:-]{0,127}$")
DEFINITION_NAME_PATTERN = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")
_SAFE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._@:-")


def new_context_id() -> str:
    """A fresh context id: ``ctx-`` and 36 hex characters (144 random bits)."""
    return "ctx-" + secrets.token_hex(18)


def new_run_id() -> str:
    """A fresh run id (also the A2A task id)."""
    return "run-" + secrets.token_hex(12)


def new_interrupt_id() -> str:
    """A fresh interrupt id; unguessable so a decision cannot be forged by counting."""
    return "int-" + secrets.token_hex(12)


def new_call_id() -> str:
    """A tool call id for models that do not supply one."""
    return "call-" + secrets.token_hex(8)


def new_checkpoint_id() -> str:
    """A checkpoint id; sortable by creation time within one thread."""
    return "ckpt-" + secrets.token_hex(10)


def validate_context_id(context_id: object) -> str:
    """Return `context_id` if it is a valid SPEC section 2 id, else raise InvalidContextIdError."""
    if (
        not isinstance(context_id, str)
        or not CONTEXT_ID_PATTERN.fullmatch(context_id)
        or ".." in context_id
    ):
        raise InvalidContextIdError(
            "contextId must match ^[A-Za-z0-9][A-Za-z0-9._@:-]{0,127}$ and contain no '..'"
        )
    return context_id


def validate_definition_name(name: object) -> str:
    """Return `name` if it is a valid agent definition name, else raise InvalidRequestError."""
    if not isinstance(name, str) or not DEFINITION_NAME_PATTERN.fullmatch(name):
        raise InvalidRequestError(
            f"agent definition name {name!r} must match ^[a-z0-9][a-z0-9_-]{{0,63}}$"
        )
    return name


def encode_path_segment(value: str) -> str:
    """Encode `value` as one safe file name.

    Every character outside ``[A-Za-z0-9._@:-]`` is percent-encoded (UTF-8 bytes), and so
    is a leading dot, so the result is never ``.``, ``..`` or a hidden file and never
    contains a separator. The mapping is injective, so two ids never share a folder.
    """
    if not value:
        raise InvalidRequestError("an id used as a storage key must not be empty")
    out: list[str] = []
    for index, char in enumerate(value):
        if char in _SAFE and not (index == 0 and char == "."):
            out.append(char)
        else:
            out.extend(f"%{byte:02X}" for byte in char.encode("utf-8"))
    return "".join(out)


def decode_path_segment(segment: str) -> str:
    """Invert encode_path_segment (for listing stored ids)."""
    raw = bytearray()
    index = 0
    while index < len(segment):
        char = segment[index]
        if char == "%":
            raw.append(int(segment[index + 1 : index + 3], 16))
            index += 3
        else:
            raw.extend(char.encode("utf-8"))
            index += 1
    return raw.decode("utf-8")
