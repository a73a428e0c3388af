"""What it costs LocalFileStorage (and PostgreSQL) to save a turn, restore a session, store it.

Prints figures beside baselines measured in the same run; never asserts. Targets:

- saving a turn at 10,000 messages costs at most 1.5x saving one at 10 (guarantee 8);
- restoring a 1,000-message session takes under 20 ms;
- messages.jsonl is at most 1.3x the size of ``json.dumps`` of the same messages.

Run with ``.venv/bin/python bench/persist.py [--rounds N] [--dir PATH]``. Each append
ends in an fsync, which dominates the save cost: pass ``--dir`` to measure the disk the
server will use (the default is the system temp folder). ``--postgres URL`` (default:
the local server's ``test`` database, when one listens) adds PostgresStorage's rows,
beside the file backend's from the same run; ``--postgres ''`` leaves them out.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import socket
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import anyio

from agentkeel import _fs
from agentkeel.messages import (
    JSONObject,
    Message,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
    messages_from_json,
    messages_to_json,
)
from agentkeel.storage import LocalFileStorage, RunRecord, SessionKey

SIZES = (10, 1_000, 10_000)
WORDS = "the quick brown fox jumps over a lazy dog while agents keep their memory".split()


def sentence(seed: int, words: int) -> str:
    return " ".join(WORDS[(seed * 7 + index * 3) % len(WORDS)] for index in range(words))


def make_turn(index: int) -> list[Message]:
    """A user question and an assistant answer; every third turn also calls a tool."""
    user = Message.user(f"Question {index}: " + sentence(index, 25))
    if index % 3:
        return [user, Message.assistant(sentence(index + 1, 110))]
    call = ToolCallPart(id=f"call-{index}", name="search", input={"query": sentence(index, 6)})
    return [
        user,
        Message(
            role="assistant",
            parts=(ThinkingPart(text=sentence(index + 2, 30)), TextPart(text="Searching."), call),
        ),
        Message(
            role="user",
            parts=(
                ToolResultPart(
                    call_id=call.id, name="search", content={"hits": [sentence(index, 12)] * 3}
                ),
            ),
        ),
        Message.assistant(sentence(index + 3, 80)),
    ]


def make_history(size: int) -> list[list[Message]]:
    turns: list[list[Message]] = []
    count = 0
    while count < size:
        batch = make_turn(len(turns))[: size - count]
        turns.append(batch)
        count += len(batch)
    return turns


def state_for(index: int) -> JSONObject:
    return {"turns": index, "profile": {"name": "Ada", "plan": "pro"}, "last_topic": f"t{index}"}


def bench_run(size: int) -> RunRecord:
    """A finished run's record, as a served turn saves it with its messages."""
    now = time.time()
    return RunRecord(
        run_id=f"run-{size}-{now}", status="completed", input="q", started_at=now, text="done"
    )


def median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


def timed(func: Callable[[], object], repeat: int) -> float:
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        func()
        samples.append(time.perf_counter() - start)
    return median_ms(samples)


async def bench(root: Path, rounds: int, postgres: str) -> None:
    storage = LocalFileStorage(root)
    keys = {size: SessionKey(definition="bench", context_id=f"ctx-{size}") for size in SIZES}
    histories: dict[int, list[Message]] = {}
    for size, key in keys.items():
        turns = make_history(size)
        for index, batch in enumerate(turns):
            await storage.append(key, batch, state_for(index))
        histories[size] = [message for batch in turns for message in batch]

    # Restore: a fresh storage object each time, so nothing comes from a cache.
    restores: list[float] = []
    restored = None
    while len(restores) < 30 or restored is None:
        start = time.perf_counter()
        restored = await LocalFileStorage(root).load(keys[1_000])
        restores.append(time.perf_counter() - start)
    count = len(restored.messages)
    encoded = json.dumps(messages_to_json(restored.messages))
    decode_ms = timed(lambda: messages_from_json(json.loads(encoded)), 30)
    restore_ms = median_ms(restores)
    print(f"restore a {count:,}-message session (load, median of 30): {restore_ms:.3f} ms")
    print(f"  baseline: json.loads + decode of the same history: {decode_ms:.3f} ms")
    print(f"  target < 20 ms: {ok(restore_ms < 20)}")

    # Save: one turn (user + assistant + a changed state), interleaved across the sizes.
    # The same turns without a state change show what state.json's atomic write adds.
    # The same with the turn's run record, as a served turn saves it (PostgreSQL's rows
    # are measured that way).
    saves: dict[int, list[float]] = {size: [] for size in SIZES}
    plain: dict[int, list[float]] = {size: [] for size in SIZES}
    ran: dict[int, list[float]] = {size: [] for size in SIZES}
    for round_index in range(rounds):
        for size, key in keys.items():
            batch = make_turn(1 + round_index * 3)  # a two-message turn
            start = time.perf_counter()
            await storage.append(key, batch, state_for(100_000 + round_index))
            middle = time.perf_counter()
            await storage.append(key, batch, None)
            saves[size].append(middle - start)
            plain[size].append(time.perf_counter() - middle)
            start = time.perf_counter()
            await storage.append(key, batch, state_for(200_000 + round_index), run=bench_run(size))
            ran[size].append(time.perf_counter() - start)
    probe = root / "fsync-probe.jsonl"
    fsync_ms = timed(lambda: _fs.append_lines(probe, [b"x" * 600]), rounds)
    probe.unlink()

    print(f"save one turn (append of 2 messages + state), median of {rounds}:")
    for size in SIZES:
        payload = messages_to_json(histories[size])
        dumps_ms = timed(functools.partial(json.dumps, payload), 5)
        print(
            f"  history {size:>6,} messages: {median_ms(saves[size]):7.3f} ms"
            f" (state unchanged: {median_ms(plain[size]):.3f} ms,"
            f" with the run record: {median_ms(ran[size]):.3f} ms)"
            f"   | baseline json.dumps of the whole history: {dumps_ms:8.3f} ms"
        )
    print(f"  baseline: one 600-byte append + fsync in the same folder: {fsync_ms:.3f} ms")
    ratio = median_ms(saves[10_000]) / median_ms(saves[10])
    print(f"  ratio save@10k / save@10 = {ratio:.2f}  (target <= 1.5: {ok(ratio <= 1.5)})")

    # Disk: messages.jsonl of the largest session against json.dumps of its messages.
    folder = storage.path(keys[10_000])
    snapshot = await LocalFileStorage(root).load(keys[10_000])
    if snapshot is None:
        print("the 10,000-message session did not load")
        return
    disk = (folder / "messages.jsonl").stat().st_size
    as_json = len(json.dumps(messages_to_json(snapshot.messages)).encode())
    compact = len(json.dumps(messages_to_json(snapshot.messages), separators=(",", ":")))
    count = len(snapshot.messages)
    print(f"disk for {count:,} messages: {disk:,} bytes ({disk / count:.1f} bytes per message)")
    print(f"  baseline json.dumps: {as_json:,} bytes ({as_json / count:.1f} per message)")
    print(
        f"  ratio disk / json.dumps = {disk / as_json:.3f}  (target <= 1.3: "
        f"{ok(disk / as_json <= 1.3)}); against compact JSON: {disk / compact:.3f}"
    )
    files = sorted(str(path.relative_to(folder)) for path in folder.rglob("*") if path.is_file())
    print(f"files per session (any length): {len(files)} {files}")
    if postgres:
        import sys

        sys.path.append(str(Path(__file__).resolve().parent))  # `make bench` runs with -P
        from _postgres import bench_postgres

        file_ms = {size: median_ms(ran[size]) for size in SIZES}
        await bench_postgres(postgres, rounds, make_history, make_turn, state_for, file_ms)


def ok(passed: bool) -> str:
    return "ok" if passed else "MISSED"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=200, help="turns saved per size")
    parser.add_argument("--dir", type=Path, default=None, help="where to write (a temp dir)")
    parser.add_argument("--postgres", default=None, help="a PostgreSQL URL ('' for none)")
    args = parser.parse_args()
    postgres = args.postgres
    if postgres is None:
        postgres = LOCAL_POSTGRES if _listening(5432) else ""
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        print(f"LocalFileStorage in {tmp} (pid {os.getpid()})")
        anyio.run(bench, Path(tmp), args.rounds, postgres)


LOCAL_POSTGRES = "postgresql://postgres@127.0.0.1:5432/test"


def _listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except OSError:
        return False
    return True


if __name__ == "__main__":
    main()
