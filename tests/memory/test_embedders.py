"""The embedders: OpenAI-compatible over real HTTP on loopback, the lexical fallback,
the test double; and framework.json's memory section."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from agentkeel.errors import ConfigurationError
from agentkeel.framework import load_framework
from agentkeel.memory import (
    EmbeddingError,
    FileMemoryStore,
    InMemoryMemoryStore,
    LexicalEmbedder,
    StaticEmbedder,
)
from agentkeel.memory.openai import OpenAIEmbedder
from fakes.server import run_asgi_server

pytestmark = pytest.mark.anyio


class EmbeddingsServer:
    """A fake /v1/embeddings: a vector per text from its length; scripted failures."""

    def __init__(self) -> None:
        self.requests: list[dict[str, object]] = []
        self.headers: list[str | None] = []
        self.fail_with: list[int] = []

    async def embeddings(self, request: Request) -> Response:
        body = json.loads(await request.body())
        self.requests.append(body)
        self.headers.append(request.headers.get("authorization"))
        if self.fail_with:
            status = self.fail_with.pop(0)
            return JSONResponse({"error": {"message": "SECRET provider detail"}}, status)
        rows = [
            {"object": "embedding", "index": i, "embedding": [float(len(t)), 1.0, 0.0]}
            for i, t in enumerate(body["input"])
        ]
        return JSONResponse(
            {"object": "list", "data": list(reversed(rows)), "model": body["model"]}
        )


@pytest.fixture
def server() -> Iterator[tuple[str, EmbeddingsServer]]:
    fake = EmbeddingsServer()
    app = Starlette(routes=[Route("/v1/embeddings", fake.embeddings, methods=["POST"])])
    with run_asgi_server(app) as url:
        yield url + "/v1", fake


async def test_openai_embedder_speaks_the_wire(server: tuple[str, EmbeddingsServer]) -> None:
    url, fake = server
    embedder = OpenAIEmbedder("nomic-embed", base_url=url, api_key="k-123", dimensions=3)
    first, second = await embedder.embed(["ab", "abcd"])
    assert fake.requests == [{"model": "nomic-embed", "input": ["ab", "abcd"], "dimensions": 3}]
    assert fake.headers == ["Bearer k-123"]
    assert np.allclose(first, np.array([2, 1, 0]) / np.sqrt(5)), "order by index, normalised"
    assert np.allclose(second, np.array([4, 1, 0]) / np.sqrt(17))
    assert embedder.dimension == 3 and embedder.model == "nomic-embed"


async def test_openai_embedder_retries_then_fails_without_the_body(
    server: tuple[str, EmbeddingsServer],
) -> None:
    url, fake = server
    fake.fail_with = [503]
    embedder = OpenAIEmbedder("m", base_url=url, max_retries=1)
    assert len(await embedder.embed(["x"])) == 1, "one 503 is retried"
    fake.fail_with = [401]
    with pytest.raises(EmbeddingError) as caught:
        await embedder.embed(["x"])
    assert "401" in caught.value.message and "SECRET" not in caught.value.message


async def test_lexical_fallback_matches_shared_words_only() -> None:
    embedder = LexicalEmbedder()
    colour, cats, query = await embedder.embed(
        ["The user's favourite colour is blue", "The user has two cats", "favourite colours?"]
    )
    assert float(query @ colour) > float(query @ cats) + 0.3
    assert embedder.model == "lexical-v1-1024"


async def test_static_double_refuses_unknown_text() -> None:
    embedder = StaticEmbedder({"a": [1, 0], "b": [0, 2]})
    assert np.allclose((await embedder.embed(["b"]))[0], [0, 1])
    with pytest.raises(EmbeddingError):
        await embedder.embed(["c"])
    assert embedder.calls == [("b",), ("c",)]


def _framework(tmp_path: Path, memory: object, **extra: object) -> Path:
    document = {"agents": {"a": {"model": {"provider": "demo"}}}, "memory": memory, **extra}
    path = tmp_path / "framework.json"
    path.write_text(json.dumps(document))
    return path


def test_framework_memory_section(tmp_path: Path) -> None:
    loaded = load_framework(_framework(tmp_path, {}, sessionDir="./s"))
    assert loaded.memory is not None and isinstance(loaded.memory.store, FileMemoryStore)
    assert loaded.memory.store.root == tmp_path / "s" / ".memory"
    lexical = load_framework(_framework(tmp_path, {"embeddings": "lexical", "scope": "agent"}))
    assert lexical.memory is not None and isinstance(lexical.memory.store, InMemoryMemoryStore)
    assert lexical.memory.scope == "agent" and isinstance(lexical.memory.embedder, LexicalEmbedder)
    assert load_framework(_framework(tmp_path, None)).memory is None


@pytest.mark.parametrize(
    ("memory", "message"),
    [
        ({"store": "file"}, "memory.store: 'file' keeps memory under the session folder"),
        ({"store": "redis://x"}, "memory.store: memory store 'redis://x' is not available"),
        ({"store": "postgresql"}, "memory.store: 'postgresql' keeps memory beside the sessions"),
        ({"stor": "memory"}, "memory.stor: unknown key"),
        ({"autoRecall": 99}, "memory.autoRecall"),
        ({"embeddings": {"provider": "openai", "apiKeyEnv": "NO_SUCH_VAR_X"}}, "NO_SUCH_VAR_X"),
    ],
)
def test_framework_memory_errors_name_the_key(tmp_path: Path, memory: object, message: str) -> None:
    with pytest.raises(ConfigurationError) as caught:
        load_framework(_framework(tmp_path, memory))
    assert message in caught.value.message and "framework.json" in caught.value.message
