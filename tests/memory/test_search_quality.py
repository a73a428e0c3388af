"""Search quality of the offline embedder on a small labelled set of paraphrases.

Each query is a paraphrase of exactly one of 20 stored facts, sharing few or no words
with it. recall@3 is the share of queries whose fact is among the three best matches;
it is printed. The threshold, 0.85, sits well above what word overlap can reach on this
set (the lexical fallback's figure is printed beside it, and asserted to be lower) and
below the MiniLM model's measured 1.00, so a broken forward pass (wrong pooling, a
missing layer norm, a bad tokenizer) fails it while a numerically different but sound
build does not.
"""

from __future__ import annotations

import numpy as np
import pytest

from agentkeel.memory import Embedder, LexicalEmbedder
from agentkeel.memory.minilm import MiniLMEmbedder, minilm_available

pytestmark = pytest.mark.anyio

FACTS = [
    "The user's favourite colour is blue.",
    "The user is allergic to peanuts.",
    "The user works as a dentist.",
    "The user lives in Oslo.",
    "The user has two cats named Milo and Luna.",
    "The user's birthday is on March 3rd.",
    "The user prefers answers in Norwegian.",
    "The user drives an electric car.",
    "The user is training for a marathon.",
    "The user plays the cello in an orchestra.",
    "The user is vegetarian.",
    "The user's daughter is called Ingrid.",
    "The user is learning Japanese.",
    "The user hates flying and travels by train.",
    "The user's laptop runs Linux.",
    "The user wakes up at five every morning.",
    "The user is saving money to buy a house.",
    "The user supports the football club Rosenborg.",
    "The user reads science fiction novels.",
    "The user is afraid of spiders.",
]
QUERIES = [
    ("Which shade do I like most?", 0),
    ("Can I eat nuts?", 1),
    ("What is my job?", 2),
    ("Which city am I based in?", 3),
    ("What pets do I have?", 4),
    ("When should you congratulate me?", 5),
    ("What language should you reply in?", 6),
    ("What kind of vehicle do I own?", 7),
    ("What race am I preparing for?", 8),
    ("Which musical instrument do I play?", 9),
    ("Do I eat meat?", 10),
    ("What is my child's name?", 11),
    ("Which foreign language am I studying?", 12),
    ("How do I prefer to travel?", 13),
    ("What operating system is on my computer?", 14),
    ("How early do I get up?", 15),
    ("What am I putting money aside for?", 16),
    ("Which team am I a fan of?", 17),
    ("What books do I enjoy?", 18),
    ("Which animals frighten me?", 19),
]
THRESHOLD = 0.85


async def recall_at_3(embedder: Embedder) -> float:
    facts = np.stack(await embedder.embed(FACTS))
    queries = np.stack(await embedder.embed([q for q, _ in QUERIES]))
    top = np.argsort(-(queries @ facts.T), axis=1)[:, :3]
    hits = sum(answer in top[i] for i, (_, answer) in enumerate(QUERIES))
    return hits / len(QUERIES)


async def test_offline_model_finds_paraphrases() -> None:
    if not minilm_available():
        pytest.fail("the offline model is not installed: make install installs it")
    model = await recall_at_3(MiniLMEmbedder())
    lexical = await recall_at_3(LexicalEmbedder())
    print(f"\nrecall@3 on {len(QUERIES)} paraphrases: MiniLM {model:.2f}, lexical {lexical:.2f}")
    assert model >= THRESHOLD
    assert lexical < model, "the set should need meaning, not shared words"


async def test_model_vectors_are_normalised_and_stable() -> None:
    embedder = MiniLMEmbedder()
    first, second = await embedder.embed(["The user lives in Oslo.", "The user lives in Oslo."])
    assert first.shape == (384,) and abs(float(np.linalg.norm(first)) - 1) < 1e-5
    assert np.allclose(first, second, atol=1e-6)
    (padded,) = await embedder.embed(["The user lives in Oslo."])  # alone: no padding
    assert np.allclose(first, padded, atol=1e-5), "padding changed a vector"
