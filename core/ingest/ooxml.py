"""What Office's zip-packaged files (.docx, .pptx, .xlsx) share as hostile input, and as
content.

Each is a zip archive of XML: a small file can declare gigabytes of XML, so what it unpacks to is
judged before anything is unpacked, by the sizes its directory declares, which Python's zipfile
then holds every member to. A table's row is one line, its cells joined the same way in each.
A SmartArt graphic (Word and PowerPoint) keeps its text in a diagram part of its own, which
neither python-docx nor python-pptx reads: `smartart_lines` does.
"""

from __future__ import annotations

import io
import zipfile
from collections.abc import Iterable
from typing import Any

from lxml import etree

from core.errors import UnreadableDocument

CELL_SEPARATOR = " | "
_DRAWING = "http://schemas.openxmlformats.org/drawingml/2006/main"
_DIAGRAM = "http://schemas.openxmlformats.org/drawingml/2006/diagram"
_RELATIONSHIPS = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
# Where a drawing names its SmartArt data part: compiled once, with namespaces of our own (the
# libraries' elements answer `xpath` with their own prefix maps, which differ).
_DIAGRAM_DATA_IDS = etree.XPath(
    ".//dgm:relIds/@r:dm", namespaces={"dgm": _DIAGRAM, "r": _RELATIONSHIPS}
)
# A diagram's points: its nodes hold the text; the others (the document, connectors, layout
# points) hold none a reader sees. A point with no type is a node.
_NODE = "node"
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


def smartart_lines(element: Any, part: Any) -> list[str]:
    """The text of each SmartArt graphic under `element` (a slide's shape, a Word paragraph),
    a line per paragraph of each node, in the diagram's order. `part` is the python-docx or
    python-pptx part holding `element`, whose relationships lead to the diagrams' data."""
    lines: list[str] = []
    for rid in _DIAGRAM_DATA_IDS(element):
        relationship = part.rels.get(str(rid))
        if relationship is None or relationship.is_external:
            continue  # a broken or outside reference: nothing inside the file to read
        try:
            data = etree.fromstring(relationship.target_part.blob, _PARSER)
        except etree.XMLSyntaxError as exc:
            raise UnreadableDocument(f"a SmartArt graphic's data is not XML: {exc}") from None
        for point in data.iterfind(f"{{{_DIAGRAM}}}ptLst/{{{_DIAGRAM}}}pt"):
            if point.get("type", _NODE) != _NODE:
                continue
            for paragraph in point.iterfind(f"{{{_DIAGRAM}}}t/{{{_DRAWING}}}p"):
                text = "".join(t.text or "" for t in paragraph.iter(f"{{{_DRAWING}}}t"))
                if text := " ".join(text.split()):
                    lines.append(text)
    return lines
