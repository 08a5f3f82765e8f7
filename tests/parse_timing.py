"""A parse timed by the CPU of the thread it runs in: neither a busy neighbour nor another
test's threads still running in this process make a bound on it fail."""

from __future__ import annotations

import dataclasses
import time

from core.config import IngestSettings
from core.errors import UnreadableDocument
from core.ingest.formats import DocumentFormat, parse_document
from core.ingest.sections import ParseLimits

LIMITS = ParseLimits.from_settings(IngestSettings())
# Far above what the linear parses take (1-2 s of CPU), far below the quadratic originals.
LINEAR_PARSE_CPU_S = 10


def timed_parse(data: bytes, fmt: DocumentFormat, **limits: float) -> tuple[float, object]:
    """The parse's CPU seconds and its document, or the `UnreadableDocument` it raised."""
    started = time.thread_time()
    try:
        timeout_s = limits.get("timeout_s", LIMITS.timeout_s)
        doc: object = parse_document(
            data, fmt, "x", dataclasses.replace(LIMITS, timeout_s=timeout_s)
        )
    except UnreadableDocument as exc:
        doc = exc
    return time.thread_time() - started, doc
