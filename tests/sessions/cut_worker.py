"""Appends, edits and regenerates one session forever, to be SIGKILLed at a random instant.

Each write is one turn of `SessionStorage.append`: a new exchange, a regenerate (cut
before the last answer, a new answer) or an edit (cut before a user message, a new
exchange). The AgentState records what the turn commits — how many turns and how long
the history is after it — so a checker can tell whether the cut, the messages and the
state landed together. Usage: python cut_worker.py DATA_DIR [STORAGE_URL].
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

import anyio

from agentkeel import LocalFileStorage, Message
from agentkeel.keys import SessionKey
from agentkeel.messages import JSONObject
from agentkeel.storage.base import SessionStorage

DATA = Path(sys.argv[1])
URL = sys.argv[2] if len(sys.argv) > 2 else None
KEY = SessionKey(definition="cut", context_id="ctx-cut")


def storage() -> SessionStorage:
    if URL is None:
        return LocalFileStorage(DATA / "sessions")
    from agentkeel.storage.postgres import from_url

    return from_url(URL, None)


async def main() -> None:
    store = storage()
    await store.open()
    snapshot = await store.load(KEY)
    version = 0 if snapshot is None else snapshot.version
    texts = [] if snapshot is None else [m.text for m in snapshot.messages]
    generation = random.randrange(10**9)
    print("ready", flush=True)  # the killer's clock starts here, not at interpreter start
    while True:
        generation += 1
        action = random.choice(("append", "append", "regenerate", "replace"))
        cut: int | None = None
        new = [Message.user(f"u{generation}"), Message.assistant(f"a{generation}")]
        if action == "regenerate" and texts:
            cut = len(texts) - 1
            new = [Message.assistant("a" + texts[cut - 1][1:] + "-again")]
        elif action == "replace" and texts:
            cut = 2 * random.randrange(len(texts) // 2)
        kept = texts if cut is None else texts[:cut]
        after = [*kept, *(m.text for m in new)]
        state: JSONObject = {
            "count": version + 1,
            "length": len(after),
            "pad": "x" * random.randrange(9000),
        }
        version = await store.append(KEY, new, state, expected_version=version, cut=cut)
        texts = after


if __name__ == "__main__":
    anyio.run(main)
