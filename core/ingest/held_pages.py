"""Page bodies between the crawl that downloaded them and the indexing that reads them.

A crawl reads each page to find its links, and the pages are indexed only once it is over (the
whole list says what is gone). Held in memory until then, a crawl could take
`crawl.max_pages` × `ingest.max_file_bytes` (500 × 20 MB with the defaults); past
`crawl.max_held_bytes` the bodies wait in a temporary folder instead, each read back (and
deleted) when its page is indexed, the folder removed with the crawl.
"""

from __future__ import annotations

import hashlib
import tempfile
from pathlib import Path

from core.ingest.formats import DocumentFormat


class HeldPages:
    def __init__(self, budget_bytes: int) -> None:
        self._budget = budget_bytes
        self._in_memory: dict[str, tuple[bytes, DocumentFormat]] = {}
        self._held = 0
        self._on_disk: dict[str, tuple[Path, DocumentFormat]] = {}
        self._folder: tempfile.TemporaryDirectory[str] | None = None

    @property
    def in_memory_bytes(self) -> int:
        return self._held

    @property
    def spilled(self) -> int:
        """Pages waiting on disk: past the budget, which an operator may want to raise."""
        return len(self._on_disk)

    def put(self, name: str, data: bytes, fmt: DocumentFormat) -> None:
        if self._held + len(data) <= self._budget:
            self._in_memory[name] = (data, fmt)
            self._held += len(data)
            return
        if self._folder is None:
            self._folder = tempfile.TemporaryDirectory(prefix="bot-crawl-")
        # The name is a URL: hashed, it is a file name whatever it holds.
        path = Path(self._folder.name) / hashlib.sha256(name.encode()).hexdigest()
        path.write_bytes(data)
        self._on_disk[name] = (path, fmt)

    def pop(self, name: str) -> tuple[bytes, DocumentFormat] | None:
        if (kept := self._in_memory.pop(name, None)) is not None:
            self._held -= len(kept[0])
            return kept
        if (spilled := self._on_disk.pop(name, None)) is None:
            return None
        path, fmt = spilled
        data = path.read_bytes()
        path.unlink()
        return data, fmt

    def clear(self) -> None:
        self._in_memory.clear()
        self._held = 0
        self._on_disk.clear()
        if self._folder is not None:
            self._folder.cleanup()
            self._folder = None
