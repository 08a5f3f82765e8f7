"""What a source keeps between syncs (a crawl's validators, the commit a clone was synced at, a
space's page versions, how each sync went): small JSON files in the data dir.

Written whole and renamed into place, so a crash leaves the previous file intact; a missing or
damaged file reads as nothing, and the next sync then reads everything, as a first one does."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


def load_json(path: Path) -> Any:
    """The file's JSON value, or None when it is missing, unreadable or not JSON."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def save_json(path: Path, value: Any, *, indent: int | None = None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_suffix(f".{os.getpid()}.tmp")
    temporary.write_text(json.dumps(value, indent=indent), encoding="utf-8")
    os.replace(temporary, path)
