"""What a backend reports about itself: its health checks for `bot doctor`, and what a reindex
did."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class HealthCheck:
    name: str
    ok: bool
    detail: str


@dataclass(frozen=True, slots=True)
class ReindexReport:
    old_index: str
    new_index: str
    chunks: int
    documents: int
    reembedded: bool
    old_deleted: bool
