"""The committed chat bundle (src/agentkeel/server/static) matches its sources.

Every build (`npm run build` in clients/js) writes ``build-record.json`` beside the bundle:
a hash of the sources it was built from and one of the files it produced (the plugin in
clients/js/vite.config.ts). This test hashes the same files the same way, so it fails when
a source of the page changed without a rebuild, or the bundle was changed by hand.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import agentkeel

ROOT = Path(agentkeel.__file__).resolve().parents[2]
JS = ROOT / "clients" / "js"
STATIC = Path(agentkeel.__file__).resolve().parent / "server" / "static"
SOURCES = ["page", "src", "vite.config.ts", "package-lock.json", "tsconfig.json"]
RECORD = "build-record.json"


def list_files(root: Path, entry: str) -> list[str]:
    found: list[str] = []
    for item in sorted((root / entry).iterdir()):
        path = item.name if entry == "." else f"{entry}/{item.name}"
        skipped = item.name.startswith(".") or item.name == RECORD
        if skipped or item.name.endswith((".test.ts", ".test.tsx")):
            continue
        if item.is_dir():
            found.extend(list_files(root, path))
        elif item.is_file():
            found.append(path)
    return found


def digest(root: Path, entries: list[str]) -> str:
    """sha256 over "<path>\\n<sha256 of its bytes>\\n" per file, sorted by path (as the plugin)."""
    paths: set[str] = set()
    for entry in entries:
        paths.update(list_files(root, entry) if (root / entry).is_dir() else [entry])
    total = hashlib.sha256()
    for path in sorted(paths):
        total.update(f"{path}\n{hashlib.sha256((root / path).read_bytes()).hexdigest()}\n".encode())
    return total.hexdigest()


def test_the_committed_bundle_matches_its_sources() -> None:
    record = json.loads((STATIC / RECORD).read_text())
    assert digest(JS, SOURCES) == record["sources"], (
        "the chat page's sources changed since the bundle was built: "
        "run `cd clients/js && npm run build` and commit src/agentkeel/server/static"
    )
    assert digest(STATIC, ["."]) == record["bundle"], (
        "src/agentkeel/server/static differs from what the recorded build produced: "
        "rebuild it with `cd clients/js && npm run build` instead of editing it"
    )


def test_the_check_sees_a_changed_source(tmp_path: Path) -> None:
    (tmp_path / "page").mkdir()
    (tmp_path / "page" / "app.tsx").write_text("export {};\n")
    (tmp_path / "page" / "app.test.tsx").write_text("ignored\n")
    before = digest(tmp_path, ["page"])
    (tmp_path / "page" / "app.test.tsx").write_text("still ignored\n")
    assert digest(tmp_path, ["page"]) == before
    (tmp_path / "page" / "app.tsx").write_text("export const x = 1;\n")
    assert digest(tmp_path, ["page"]) != before
