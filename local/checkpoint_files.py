"""What a Spark checkpoint directory says, read from its files: the source
offset of each batch, the committed batches and the query's persistent id."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def offsets(checkpoint: Path) -> dict[int, dict[str, Any]]:
    """Batch id -> the source offset Spark recorded for it (``offsets/N``: a
    version line, the batch metadata, then one line per source)."""
    found: dict[int, dict[str, Any]] = {}
    directory = checkpoint / "offsets"
    if not directory.exists():
        return found
    for path in directory.iterdir():
        if not path.name.isdigit():
            continue
        lines = path.read_text(encoding="utf-8").splitlines()
        if len(lines) >= 3:
            found[int(path.name)] = json.loads(lines[2])
    return dict(sorted(found.items()))


def query_id(checkpoint: Path) -> str | None:
    """The streaming query's persistent id (``<checkpoint>/metadata``), or
    None before the first start wrote it."""
    path = checkpoint / "metadata"
    if not path.exists():
        return None
    text = path.read_text(encoding="utf-8").strip()
    if not text:
        return None
    value = json.loads(text.splitlines()[0]).get("id")
    return str(value) if value else None


def committed_batches(checkpoint: Path) -> set[int]:
    commits = checkpoint / "commits"
    if not commits.exists():
        return set()
    return {int(p.name) for p in commits.iterdir() if p.name.isdigit()}
