"""Checks both shared backends (Redis, PostgreSQL alone) must pass, beside the suites.

- a segment that starts on one replica wakes a request waiting for it on another
  sooner than that request's own once-a-second read of the pointer would;
- a claim's owner alone writes into it, and of two takeovers of an abandoned claim
  (compare-and-set) exactly one wins.
"""

from __future__ import annotations

import anyio

from agentkeel.keys import SessionKey
from agentkeel.messages import JSONObject
from agentkeel.runtime.shared_claims import ClaimTable
from agentkeel.runtime.shared_streams import SharedStreams

__all__ = ["check_announced_segment", "check_claim_owner_and_takeover"]


async def check_announced_segment(
    first: SharedStreams, second: SharedStreams, key: SessionKey
) -> None:
    """B waits 0.8 s for a segment A starts after 0.2 s: only the announcement is in time."""
    woke: list[bool] = []

    async def wait() -> None:
        woke.append(await second.next_segment(key, "run-seg", 0.8))

    with anyio.fail_after(10):
        async with anyio.create_task_group() as group:
            group.start_soon(wait)
            await anyio.sleep(0.2)  # B read the pointer: nothing runs yet
            stream = await first.run(key, "run-seg", resumed=False)
            stream.begin()
            first.put(stream)
    assert woke == [True]


async def check_claim_owner_and_takeover(table: ClaimTable) -> None:
    """Updates by a stale owner are refused; one of two racing takeovers wins."""
    claimed: JSONObject = {"fp": "f", "owner": "a"}
    assert await table.insert("k", claimed, "ctx", 60.0) is None
    assert await table.update("k", {"beat": 1}, owner="a")
    assert not await table.update("k", {"beat": 2}, owner="b")
    stale = await table.get("k")
    assert stale == {"fp": "f", "owner": "a", "beat": 1}
    won: list[bool] = []

    async def take_over(owner: str) -> None:
        won.append(await table.replace("k", stale, {"fp": "f", "owner": owner}))

    async with anyio.create_task_group() as group:
        group.start_soon(take_over, "b")
        group.start_soon(take_over, "c")
    assert sorted(won) == [False, True]
    winner = (await table.get("k") or {}).get("owner")
    assert winner in ("b", "c")
    assert not await table.update("k", {"run": "late"}, owner="a")  # the old owner is out
    assert await table.update("k", {"run": "r"}, owner=str(winner))
    assert (await table.get("k") or {}).get("run") == "r"
