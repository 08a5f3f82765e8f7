"""What Office's zip-packaged files (.docx, .pptx, .xlsx) share as hostile input, and as
content.

Each is a zip archive of XML: a small file can declare gigabytes of XML, so what it unpacks to is
judged before anything is unpacked, by the sizes its directory declares, which Python's zipfile
then holds every member to. A table's row is one line, its cells joined the same way in each.
A SmartArt graphic (Word and PowerPoint) keeps its text in a diagram part of its own, which
neither python-docx nor python-pptx reads: `SmartArt` does.
"""

from __future__ import annotations

import io
import zipfile
from collections.abc import Iterable, Iterator
from typing import Any

from lxml import etree

from core.errors import UnreadableDocument
from core.ingest.sections import Deadline

CELL_SEPARATOR = " | "
_DRAWING = "http://schemas.openxmlformats.org/drawingml/2006/main"
_DIAGRAM = "http://schemas.openxmlformats.org/drawingml/2006/diagram"
_RELATIONSHIPS = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
MARKUP_COMPATIBILITY = "http://schemas.openxmlformats.org/markup-compatibility/2006"
# Where a drawing names its SmartArt data part: compiled once, with namespaces of our own (the
# libraries' elements answer `xpath` with their own prefix maps, which differ). A copy kept for
# readers of older Office (`mc:Fallback`) is left out.
_DIAGRAM_DATA_IDS = etree.XPath(
    ".//dgm:relIds[not(ancestor::mc:Fallback)]/@r:dm",
    namespaces={"dgm": _DIAGRAM, "r": _RELATIONSHIPS, "mc": MARKUP_COMPATIBILITY},
)
# A diagram's points: its nodes and assistants (an org chart's) hold the text; the others (the
# document, connectors, layout points) hold none a reader sees. A point with no type is a node.
_NODE = "node"
_TEXT_POINTS = (_NODE, "asst")
_TEXT, _BREAK = f"{{{_DRAWING}}}t", f"{{{_DRAWING}}}br"  # a run's text; a line break
# As python-docx's and python-pptx's own: no entity is resolved, nothing fetched.
_PARSER = etree.XMLParser(resolve_entities=False, no_network=True, remove_comments=True)


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


class SmartArt:
    """The text of one file's SmartArt graphics. Each data part is read once, however many
    drawings name it (Word's fallback copies, or a hostile file naming one part a million
    times), with the file's parse deadline checked before each. A data part that is not XML
    loses that graphic's text, not the file's."""

    def __init__(self, deadline: Deadline) -> None:
        self._deadline = deadline
        self._read: set[str] = set()

    def lines(self, element: Any, part: Any) -> list[str]:
        """A line per paragraph of each node of the graphics under `element` (a slide's shape,
        a Word paragraph), in the order their data lists them (the order they were written,
        mostly the reading order). `part` is the python-docx or python-pptx part holding
        `element`: its relationships lead to the diagrams' data."""
        lines: list[str] = []
        for rid in _DIAGRAM_DATA_IDS(element):
            relationship = part.rels.get(str(rid))
            if relationship is None or relationship.is_external:
                continue  # a broken or outside reference: nothing inside the file to read
            target = relationship.target_part
            if str(target.partname) in self._read:
                continue
            self._read.add(str(target.partname))
            self._deadline.check()
            try:
                data = etree.fromstring(target.blob, _PARSER)
            except etree.XMLSyntaxError:
                continue
            lines.extend(_node_lines(data))
        return lines


def _node_lines(data: Any) -> Iterator[str]:
    for point in data.iterfind(f"{{{_DIAGRAM}}}ptLst/{{{_DIAGRAM}}}pt"):
        if point.get("type", _NODE) not in _TEXT_POINTS:
            continue
        for paragraph in point.iterfind(f"{{{_DIAGRAM}}}t/{{{_DRAWING}}}p"):
            pieces = paragraph.iter(_TEXT, _BREAK)
            text = "".join((piece.text or "") if piece.tag == _TEXT else " " for piece in pieces)
            if text := " ".join(text.split()):
                yield text
