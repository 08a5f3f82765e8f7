"""Word documents (.docx) as sections, read with python-docx.

A section is the text under one heading, a heading being a paragraph in one of Word's built-in
heading styles ("Heading 1" to "Heading 9", which python-docx names the same in any language of
Word), without the text formatted hidden, which Word neither shows nor prints; tables are read
row by row in their place among the paragraphs, and what a paragraph draws after its text: its
text boxes' text, its pictures' descriptions (`image_text`), its charts' titles and its
SmartArt's text. A .docx has no anchor a browser can open at, so its passages link to the file
itself.

A .docx is a zip archive, judged before it is unpacked (`ooxml`). Entities a hostile
document.xml declares are refused by the XML parser under python-docx (libxml2's amplification
limit), the file skipped with that reason.
"""

from __future__ import annotations

import io
import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from lxml import etree

from core.errors import UnreadableDocument
from core.ingest.image_text import image_words
from core.ingest.ooxml import (
    MARKUP_COMPATIBILITY,
    Graphics,
    PartRelations,
    check_unpacked,
    row_line,
)
from core.ingest.sections import Deadline, ParsedDocument, ParseLimits, Section, tidy_text

if TYPE_CHECKING:
    from docx.table import _Cell
    from docx.text.paragraph import Paragraph

_HEADING_STYLE = re.compile(r"Heading [1-9]")
_NAMESPACES = {
    "w": "http://schemas.openxmlformats.org/wordprocessingml/2006/main",
    "wp": "http://schemas.openxmlformats.org/drawingml/2006/wordprocessingDrawing",
    "mc": MARKUP_COMPATIBILITY,
}
# Compiled once: python-docx's own `xpath` compiles its expression at every call.
_DRAWS = etree.XPath("boolean(.//w:drawing | .//w:pict)", namespaces=_NAMESPACES)
# A text box's own paragraphs. Word writes each box twice, the second as a fallback for old
# readers (VML), left out here as in the pictures' descriptions.
_TEXT_BOX_PARAGRAPHS = etree.XPath(
    ".//w:txbxContent[not(ancestor::mc:Fallback)]/w:p", namespaces=_NAMESPACES
)
# Text formatted hidden (Word's Hidden font effect: template instructions, drafts), which Word
# neither shows nor prints. Compiled once, and looked for in the whole body first: most
# documents have none, and then no paragraph is looked at for it (that cost 11% of a parse).
_HIDES = etree.XPath(
    "boolean(.//w:rPr/w:vanish[not(@w:val='0' or @w:val='false' or @w:val='off')])",
    namespaces=_NAMESPACES,
)
_DESCRIPTIONS = etree.XPath(
    ".//wp:docPr[not(ancestor::mc:Fallback)]/@descr", namespaces=_NAMESPACES
)
_TITLE_STYLE = "Title"


def parse_word(data: bytes, fallback_title: str, limits: ParseLimits) -> ParsedDocument:
    """Sections in document order; the title from the document's properties, else its first
    paragraph in the Title style, else `fallback_title`. Past `limits.timeout_s` it stops
    between paragraphs, or a table's rows, with the file skipped."""
    from docx import Document
    from docx.text.paragraph import Paragraph

    check_unpacked(data, limits.max_unpacked_bytes)
    deadline = Deadline(limits.timeout_s)
    graphics = Graphics(deadline)
    document = Document(io.BytesIO(data))
    # Style names by id, read once: `Paragraph.style` looks the style up among all of them for
    # every paragraph (2 ms each here, so 20 s for 10,000 paragraphs); the paragraph's own
    # element gives the id at once (none: the default paragraph style, never a heading).
    names = {style.style_id: style.name for style in document.styles}
    title = (document.core_properties.title or "").strip()
    doc = ParsedDocument(title="")
    heading, lines = "", []
    shown = _shown if _HIDES(document.element.body) else _text
    for block in document.iter_inner_content():
        deadline.check()
        if not isinstance(block, Paragraph):  # a table: each row a line
            for row in block.rows:
                deadline.check()  # a table can hold a whole document
                lines.append(row_line(_row_texts(row.cells, shown)))
            continue
        text = shown(block).strip()
        style = names.get(block._p.style or "") or ""
        if text and style and _HEADING_STYLE.fullmatch(style):
            _close(doc, heading, lines)
            heading, lines = text, []
        elif text and style == _TITLE_STYLE and not title:
            title = text
        elif text:
            lines.append(text)
        lines.extend(_drawn(block, document.part, graphics, shown))
    _close(doc, heading, lines)
    if not doc.sections:
        raise UnreadableDocument("no text")
    doc.title = title or fallback_title
    return doc


def _drawn(
    paragraph: Paragraph, part: Any, graphics: Graphics, shown: Callable[[Paragraph], str]
) -> list[str]:
    """What the paragraph draws, out of python-docx's paragraph text: its text boxes'
    paragraphs (callouts, sidebars), its pictures' descriptions (`image_text`), its charts'
    titles and its SmartArt's text. Most paragraphs draw nothing, and one look says so."""
    from docx.text.paragraph import Paragraph

    if not _DRAWS(paragraph._p):
        return []
    boxed = (
        shown(Paragraph(p, paragraph._parent)).strip() for p in _TEXT_BOX_PARAGRAPHS(paragraph._p)
    )
    described = (image_words(str(text)) for text in _DESCRIPTIONS(paragraph._p))
    charted = graphics.lines(paragraph._p, PartRelations(part))
    return [*filter(None, boxed), *filter(None, described), *charted]


def _text(paragraph: Paragraph) -> str:
    """python-docx's text of the paragraph: a document with nothing hidden shows it all."""
    return paragraph.text


def _shown(paragraph: Paragraph) -> str:
    """The paragraph's text as Word shows it: without the runs formatted hidden."""
    from docx.text.run import Run

    if not _HIDES(paragraph._p):
        return paragraph.text
    pieces: list[str] = []
    for item in paragraph.iter_inner_content():  # its runs, and its hyperlinks' runs
        runs = [item] if isinstance(item, Run) else item.runs
        pieces.extend(run.text for run in runs if not run.font.hidden)
    return "".join(pieces)


def _row_texts(cells: Sequence[_Cell], shown: Callable[[Paragraph], str]) -> list[str]:
    """The row's cells once each, as Word shows them: python-docx gives a cell merged across
    columns once per column, as the same object."""
    texts, previous = [], None
    for cell in cells:
        if cell is not previous:
            texts.append("\n".join(shown(p) for p in cell.paragraphs).strip())
        previous = cell
    return texts


def _close(doc: ParsedDocument, heading: str, lines: list[str]) -> None:
    if text := tidy_text("\n".join(lines)):
        doc.sections.append(Section(heading=heading, anchor=None, text=text))
