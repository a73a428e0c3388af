"""Sessions and suspended runs survive a restart: every step runs in a new process."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agentkeel import CorruptSessionError, LocalFileStorage, ScriptedModel, SessionManager
from agentkeel.agent import Agent
from sessions import run_step, side_effects

WORKER = Path(__file__).with_name("worker.py")


def run_worker(data: Path, mode: str, *args: str) -> dict[str, Any]:
    return run_step(WORKER, data, mode, *args)


def session_folder(data: Path) -> Path:
    return data / "sessions" / "assistant:ctx-restart"


def run_record(data: Path, run_id: str) -> dict[str, Any]:
    """The latest record of `run_id` in the session's runs.jsonl."""
    lines = (session_folder(data) / "runs.jsonl").read_text().splitlines()
    records: list[dict[str, Any]] = [json.loads(line) for line in lines]
    mine = [record for record in records if record["run_id"] == run_id]
    assert mine, f"no record of {run_id}"
    return mine[-1]


def test_a_trim_keeps_the_stored_state_in_a_new_process(tmp_path: Path) -> None:
    """Guarantee 12: a sliding-window trim, then a restore elsewhere, still has the state."""
    assert run_worker(tmp_path, "remember")["state"] == {"colour": "blue"}
    for _ in range(3):
        trimmed = run_worker(tmp_path, "trim")
        assert trimmed["result"]["status"] == "completed"
        assert len(trimmed["messages"]) <= 4  # the window trimmed (a rewrite)
    restored = run_worker(tmp_path, "inspect")
    assert restored["state"] == {"colour": "blue"}
    assert restored["messages"] == trimmed["messages"]


def test_history_and_state_are_restored_in_a_new_process(tmp_path: Path) -> None:
    first = run_worker(tmp_path, "remember")
    assert first["result"]["status"] == "completed"
    assert first["state"] == {"colour": "blue"}
    second = run_worker(tmp_path, "recall")
    assert second["state"] == {"colour": "blue"}
    assert second["messages"][:4] == first["messages"]
    # the model of the new process was sent the restored history
    sent = second["requests"][0]
    assert sent[:4] == first["messages"] and sent[4]["parts"][0]["text"] == "recall"


def test_run_records_hold_input_status_tool_calls_timings_and_usage(tmp_path: Path) -> None:
    report = run_worker(tmp_path, "remember")
    run_id = report["result"]["run_id"]
    record = run_record(tmp_path, run_id)
    assert record["input"] == "remember" and record["status"] == "completed"
    assert record["schema_version"] == 1
    assert record["tool_calls"][0]["name"] == "remember"
    assert record["tool_calls"][0]["input"] == {"key": "colour", "value": "blue"}
    assert record["tool_calls"][0]["output"] == "ok"
    assert record["tool_calls"][0]["duration_ms"] >= 0
    assert record["ended_at"] >= record["started_at"] and record["duration_ms"] >= 0
    assert record["usage"] == {"input_tokens": 20, "output_tokens": 10}
    assert record["error"] is None


def suspend(data: Path, mode: str) -> dict[str, Any]:
    report = run_worker(data, mode)
    assert report["result"]["status"] == "suspended"
    assert report["messages"] == []  # nothing committed while suspended
    assert list((data / "checkpoints" / "assistant:ctx-restart").glob("*.json"))
    return report


def test_approve_across_a_restart_runs_the_tool_once(tmp_path: Path) -> None:
    suspended = suspend(tmp_path, "delete")
    interrupt = suspended["result"]["interrupts"][0]
    assert interrupt["kind"] == "approval" and interrupt["tool_input"] == {"path": "a.txt"}
    assert side_effects(tmp_path) == []
    inspected = run_worker(tmp_path, "inspect")
    assert [p["id"] for p in inspected["pending"]] == [interrupt["id"]]
    done = run_worker(tmp_path, "approve", interrupt["id"])
    assert done["result"]["status"] == "completed"
    assert done["result"]["run_id"] == suspended["result"]["run_id"]
    assert side_effects(tmp_path) == ["deleted a.txt"]
    # the context's last checkpoint went, and its folder with it (SPEC section 8)
    assert not (tmp_path / "checkpoints" / "assistant:ctx-restart").exists()
    again = run_worker(tmp_path, "approve", interrupt["id"])
    assert again == {"error": "interrupt_not_found", "pending": 0}
    assert side_effects(tmp_path) == ["deleted a.txt"]
    assert run_record(tmp_path, done["result"]["run_id"])["status"] == "completed"


def test_reject_across_a_restart(tmp_path: Path) -> None:
    interrupt = suspend(tmp_path, "delete")["result"]["interrupts"][0]
    done = run_worker(tmp_path, "reject", interrupt["id"])
    assert done["result"]["status"] == "completed" and done["result"]["tool_names"] == []
    assert side_effects(tmp_path) == []
    results = done["requests"][0][-1]["parts"]
    assert results[0]["content"] == "rejected: not this one" and results[0]["status"] == "error"


def test_input_across_a_restart_and_invocation_state_is_rebuilt(tmp_path: Path) -> None:
    interrupt = suspend(tmp_path, "ask")["result"]["interrupts"][0]
    assert interrupt["kind"] == "input" and interrupt["prompt"] == "What name?"
    done = run_worker(tmp_path, "answer", interrupt["id"])
    assert done["result"]["status"] == "completed"
    assert side_effects(tmp_path) == ["named Ada tracker=rebuilt(resumed=True)"]


def test_cancel_across_a_restart_leaves_valid_history(tmp_path: Path) -> None:
    interrupt = suspend(tmp_path, "delete")["result"]["interrupts"][0]
    done = run_worker(tmp_path, "cancel", interrupt["id"])
    assert done["result"]["status"] == "cancelled"
    assert done["pending"] == []
    last = done["messages"][-1]["parts"][0]
    assert last["kind"] == "tool_result" and last["status"] == "error"
    after = run_worker(tmp_path, "after-decision")
    assert after["result"]["status"] == "completed"


def test_several_approvals_across_restarts(tmp_path: Path) -> None:
    first, second = suspend(tmp_path, "delete-two")["result"]["interrupts"]
    middle = run_worker(tmp_path, "reject", second["id"])
    assert middle["result"]["status"] == "suspended"
    assert [i["id"] for i in middle["result"]["interrupts"]] == [first["id"]]
    done = run_worker(tmp_path, "approve", first["id"])
    assert done["result"]["status"] == "completed"
    assert side_effects(tmp_path) == ["deleted 1.txt"]


def test_an_unknown_interrupt_id_changes_nothing(tmp_path: Path) -> None:
    suspend(tmp_path, "delete")
    assert run_worker(tmp_path, "unknown", "int-forged") == {
        "error": "interrupt_not_found",
        "pending": 1,
    }
    assert side_effects(tmp_path) == []


@pytest.mark.anyio
async def test_a_corrupt_history_is_a_clear_error_naming_the_file(tmp_path: Path) -> None:
    run_worker(tmp_path, "remember")
    run_worker(tmp_path, "recall")
    messages = session_folder(tmp_path) / "messages.jsonl"
    lines = messages.read_bytes().splitlines(keepends=True)
    lines[1] = b"{not json\n"
    messages.write_bytes(b"".join(lines))
    before = messages.read_bytes()
    agent = Agent(
        ScriptedModel([]),
        session_manager=SessionManager(
            "assistant:ctx-restart", LocalFileStorage(tmp_path / "sessions")
        ),
    )
    with pytest.raises(CorruptSessionError) as info:
        await agent.restore()
    assert "messages.jsonl" in str(info.value)
    assert messages.read_bytes() == before
