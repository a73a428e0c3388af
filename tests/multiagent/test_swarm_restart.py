"""A suspended swarm survives restarts: every step runs in a new process over the same folders."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from sessions import run_step, side_effects

WORKER = Path(__file__).with_name("swarm_worker.py")


def run_worker(data: Path, mode: str, *args: str) -> dict[str, Any]:
    return run_step(WORKER, data, mode, *args)


def checkpoints(data: Path, session_id: str) -> list[Path]:
    return list((data / "checkpoints" / session_id).glob("*.json"))


def suspend(data: Path) -> dict[str, Any]:
    report = run_worker(data, "start")
    assert report["result"]["status"] == "suspended"
    assert report["result"]["agent"] == "billing"
    return report


def test_the_session_folders_follow_the_documented_ids(tmp_path: Path) -> None:
    suspend(tmp_path)
    folders = (tmp_path / "sessions").iterdir()
    # .usage holds the principal's daily token totals and .journal the storage's commit
    # journal (docs/sessions.md): neither is a session
    sessions = sorted(path.name for path in folders if path.name not in (".usage", ".journal"))
    assert sessions == [
        "support--billing:ctx-swarm",
        "support--triage:ctx-swarm",
        "support:ctx-swarm",
    ]
    assert checkpoints(tmp_path, "support--billing:ctx-swarm")
    assert not checkpoints(tmp_path, "support--triage:ctx-swarm")
    swarm_folder = tmp_path / "sessions" / "support:ctx-swarm"
    names = sorted(path.name for path in swarm_folder.iterdir())
    assert names == ["messages.jsonl", "runs.jsonl", "session.json", "swarm.json"]
    # the transcript: the user's prompt and triage's committed answer (billing waits)
    text = (swarm_folder / "messages.jsonl").read_text(encoding="utf-8")
    lines = [json.loads(line)["m"] for line in text.splitlines()]
    assert lines[0]["role"] == "user" and "agent" not in lines[0]
    assert len(lines) > 1 and {(m["role"], m["agent"]) for m in lines[1:]} == {
        ("assistant", "triage")
    }
    state = json.loads((swarm_folder / "swarm.json").read_text())
    assert state["active"] == "billing" and state["suspended"] == "billing"
    assert state["shared"] == {"order": "A-17"}
    assert [h["to"] for h in state["handoffs"]] == ["billing"]
    runs = [json.loads(line) for line in (swarm_folder / "runs.jsonl").read_text().splitlines()]
    assert [(r["status"], r["input"]) for r in runs] == [("suspended", "I want a refund for A-17")]


def test_history_state_and_shared_state_are_restored_in_a_new_process(tmp_path: Path) -> None:
    first = suspend(tmp_path)
    inspected = run_worker(tmp_path, "inspect")
    assert inspected["active"] == "billing"
    assert inspected["shared"] == {"order": "A-17"}
    assert inspected["pending"] == first["result"]["interrupts"]
    assert inspected["handoffs"] == first["result"]["handoffs"]
    triage = inspected["members"]["triage"]
    assert triage["state"] == {"routed": "A-17"}
    assert triage["messages"] == first["members"]["triage"]["messages"]
    assert len(triage["messages"]) == 5
    # the suspended member's run is in its checkpoint, not yet in its history
    assert inspected["members"]["billing"]["messages"] == []


def test_approve_across_a_restart_resumes_in_the_member_then_hands_off(tmp_path: Path) -> None:
    suspended = suspend(tmp_path)
    interrupt = suspended["result"]["interrupts"][0]
    assert interrupt["tool"] == "refund" and interrupt["tool_input"] == {"amount": 30}
    assert side_effects(tmp_path) == []

    done = run_worker(tmp_path, "approve", interrupt["id"])
    result = done["result"]
    assert result["status"] == "completed" and result["text"] == "Your refund of 30 is on its way."
    assert result["run_id"] == suspended["result"]["run_id"]
    assert result["agent"] == "triage" and done["active"] == "triage"
    # the refund read the shared state written by triage in the first process
    assert side_effects(tmp_path) == ["refunded 30 for A-17"]
    assert [(h["from"], h["to"]) for h in result["handoffs"]] == [
        ("triage", "billing"),
        ("billing", "triage"),
    ]
    assert result["tool_names"] == ["note_order", "handoff_to_agent", "refund", "handoff_to_agent"]
    assert result["shared_context"] == {"order": "A-17", "refunded": 30}
    # triage's model got its restored history plus the handoff message
    sent = done["members"]["triage"]["requests"][0]
    assert sent[:5] == suspended["members"]["triage"]["messages"]
    assert sent[5]["parts"][0]["text"].startswith("Refund sent.")
    assert not checkpoints(tmp_path, "support--billing:ctx-swarm")

    again = run_worker(tmp_path, "approve", interrupt["id"])
    assert again == {"error": "interrupt_not_found", "pending": 0}
    assert side_effects(tmp_path) == ["refunded 30 for A-17"]

    later = run_worker(tmp_path, "followup")
    assert later["result"]["status"] == "completed"
    assert later["result"]["text"] == "Anything else about A-17?"  # triage ran last
    assert later["shared"] == {"order": "A-17", "refunded": 30}
    assert later["members"]["triage"]["requests"][0][-1]["parts"][0]["text"] == "followup"


def test_reject_across_a_restart_reaches_the_member_model(tmp_path: Path) -> None:
    interrupt = suspend(tmp_path)["result"]["interrupts"][0]
    done = run_worker(tmp_path, "reject", interrupt["id"])
    assert done["result"]["status"] == "completed"
    assert done["result"]["text"] == "I cannot refund that, sorry."
    assert done["result"]["agent"] == "billing" and done["pending"] == []
    assert side_effects(tmp_path) == []
    results = done["members"]["billing"]["requests"][0][-1]["parts"]
    assert results[0]["content"] == "rejected: over the limit"
    assert results[0]["status"] == "error"
    # the billing member's history now holds the whole run, tool call closed by its result
    roles = [m["role"] for m in done["members"]["billing"]["messages"]]
    assert roles == ["user", "assistant", "user", "assistant"]


def test_a_new_prompt_while_suspended_is_refused_after_a_restart(tmp_path: Path) -> None:
    suspend(tmp_path)
    refused = subprocess.run(
        [sys.executable, str(WORKER), "followup", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert refused.returncode != 0 and "InterruptPendingError" in refused.stderr
    assert run_worker(tmp_path, "inspect")["pending"]
