"""OpenAIEmbedder: any OpenAI-compatible ``POST /v1/embeddings`` (OpenAI, Ollama, vLLM...).

Failures become `EmbeddingError` with our own message (the status and whether to try
again); the provider's body never reaches a client, as for the model providers.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import anyio
import httpx
import numpy as np

from agentkeel.memory.embedders import normalise
from agentkeel.memory.errors import EmbeddingError
from agentkeel.memory.records import Vector

__all__ = ["OpenAIEmbedder"]

logger = logging.getLogger(__name__)

_RETRY = frozenset({408, 409, 429, 500, 502, 503, 504})


class OpenAIEmbedder:
    """Embeddings from an OpenAI-compatible server.

    Args:
        model: The embedding model's name (stored with every vector).
        base_url: The API root, ending in ``/v1``.
        api_key: Sent as a bearer token when given.
        dimensions: Asked of models that can shorten their vectors; else learned from
            the first answer.
        timeout: Seconds per request.
        max_retries: Retries on 429, 5xx and connection errors.
        transport: An httpx transport (tests use one on a loopback server).
    """

    def __init__(
        self,
        model: str = "text-embedding-3-small",
        *,
        base_url: str = "https://api.openai.com/v1",
        api_key: str | None = None,
        dimensions: int | None = None,
        timeout: float = 30.0,
        max_retries: int = 2,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        if not model:
            raise EmbeddingError("an embedding model needs a name")
        self._model = model
        self._url = base_url.rstrip("/") + "/embeddings"
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._dimensions = dimensions
        self._learned = dimensions or 0
        self._timeout = timeout
        self._retries = max(0, max_retries)
        self._transport = transport

    @property
    def model(self) -> str:
        """The model name given."""
        return self._model

    @property
    def dimension(self) -> int:
        """The configured dimension, or the one learned from the first answer (0 before)."""
        return self._learned

    async def embed(self, texts: Sequence[str]) -> list[Vector]:
        """One request for all `texts`; vectors come back in the order of the texts."""
        if not texts:
            return []
        body: dict[str, object] = {"model": self._model, "input": list(texts)}
        if self._dimensions:
            body["dimensions"] = self._dimensions
        data = await self._post(body)
        vectors = self._parse(data, len(texts))
        self._learned = int(vectors[0].shape[0])
        return vectors

    async def _post(self, body: dict[str, object]) -> object:
        async with httpx.AsyncClient(timeout=self._timeout, transport=self._transport) as http:
            for attempt in range(self._retries + 1):
                last = attempt == self._retries
                try:
                    response = await http.post(self._url, json=body, headers=self._headers)
                except httpx.HTTPError as exc:
                    if last:
                        raise EmbeddingError(
                            f"the embeddings server could not be reached ({type(exc).__name__})"
                        ) from None
                else:
                    if response.status_code == 200:
                        try:
                            return response.json()
                        except ValueError:
                            raise EmbeddingError("the embeddings server sent no JSON") from None
                    logger.info("status=<%d> | embeddings request failed", response.status_code)
                    if response.status_code not in _RETRY or last:
                        advice = " (try again later)" if response.status_code in _RETRY else ""
                        raise EmbeddingError(
                            f"the embeddings server answered {response.status_code}{advice}"
                        )
                await anyio.sleep(0.2 * 2**attempt)
        raise EmbeddingError("the embeddings server did not answer")  # pragma: no cover

    def _parse(self, data: object, count: int) -> list[Vector]:
        rows = data.get("data") if isinstance(data, dict) else None
        if not isinstance(rows, list) or len(rows) != count:
            raise EmbeddingError("the embeddings server's answer has the wrong shape")
        ordered: list[Vector | None] = [None] * count
        for position, row in enumerate(rows):
            if not isinstance(row, dict) or not isinstance(row.get("embedding"), list):
                raise EmbeddingError("the embeddings server's answer has the wrong shape")
            index = row.get("index", position)
            if not isinstance(index, int) or not 0 <= index < count:
                raise EmbeddingError("the embeddings server's answer has the wrong shape")
            ordered[index] = normalise(np.asarray(row["embedding"], dtype=np.float32))
        if any(v is None for v in ordered) or len({v.shape for v in ordered if v is not None}) != 1:
            raise EmbeddingError("the embeddings server's vectors differ in size")
        return [v for v in ordered if v is not None]
