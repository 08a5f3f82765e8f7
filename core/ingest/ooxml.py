"""What Office's zip-packaged files (.docx, .pptx, .xlsx) share as hostile input.

Each is a zip archive of XML: a small file can declare gigabytes of XML, so what it unpacks to is
judged before anything is unpacked, by the sizes its directory declares, which Python's zipfile
then holds every member to. A table's row is one line, its cells joined the same way in each.
"""

from __future__ import annotations

import io
import zipfile
from collections.abc import Iterable

from core.errors import UnreadableDocument

CELL_SEPARATOR = " | "


def check_unpacked(data: bytes, max_bytes: int) -> None:
    """Refuse an archive whose members declare more than `max_bytes` unpacked, in total."""
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        unpacked = sum(member.file_size for member in archive.infolist())
    if unpacked > max_bytes:
        raise UnreadableDocument(
            f"unpacks to {unpacked:,} bytes, over the limit of {max_bytes:,} "
            "(ingest.max_unpacked_bytes)"
        )


def row_line(cells: Iterable[str]) -> str:
    """A table row as one line: its non-empty cells, stripped, in order."""
    return CELL_SEPARATOR.join(text for cell in cells if (text := cell.strip()))
