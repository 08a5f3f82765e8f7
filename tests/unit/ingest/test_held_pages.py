"""A crawl's page bodies past its memory budget wait on disk, and come back as they were."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from core.ingest.formats import DocumentFormat
from core.ingest.held_pages import HeldPages


def test_past_the_budget_pages_wait_on_disk_and_come_back_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    held = HeldPages(budget_bytes=10)
    held.put("https://x/a", b"a" * 8, DocumentFormat.HTML)
    held.put("https://x/b?q=../../etc", b"b" * 8, DocumentFormat.MARKDOWN)  # over: on disk
    held.put("https://x/c", b"c", DocumentFormat.TEXT)  # still fits
    assert (held.in_memory_bytes, held.spilled) == (9, 1)
    [folder] = tmp_path.glob("bot-crawl-*")
    assert len(list(folder.iterdir())) == 1
    assert held.pop("https://x/b?q=../../etc") == (b"b" * 8, DocumentFormat.MARKDOWN)
    assert list(folder.iterdir()) == []  # read back once, then gone
    assert held.pop("https://x/a") == (b"a" * 8, DocumentFormat.HTML)
    assert held.pop("https://x/a") is None
    assert held.in_memory_bytes == 1
    held.put("https://x/d", b"d" * 20, DocumentFormat.HTML)
    held.clear()
    assert (held.in_memory_bytes, held.spilled) == (0, 0)
    assert list(tmp_path.glob("bot-crawl-*")) == []
    assert held.pop("https://x/c") is None
