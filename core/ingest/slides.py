"""PowerPoint decks (.pptx) as sections, read with python-pptx: one section per slide.

A slide's section is headed "Slide N: its title" (the number is how a reader finds it in the
deck, which no browser opens at a slide), and holds its text boxes, tables row by row, charts'
titles, SmartArt's text, the descriptions given to pictures and shapes (`image_text`) and
grouped shapes in the order the slide lists them, then its speaker notes, where decks often
keep what the presenter says and the slide leaves out. Hidden slides and hidden shapes (the
Selection Pane's eye) are left out, as the deck's own slide show leaves them out: they are most
often spares, drafts and outdated versions.

A .pptx is a zip archive, judged before it is unpacked (`ooxml`); python-pptx's XML parser
resolves no entities.
"""

from __future__ import annotations

import io
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

from lxml import etree

from core.errors import UnreadableDocument
from core.ingest.image_text import image_words
from core.ingest.ooxml import Graphics, PartRelations, check_unpacked, row_line
from core.ingest.sections import Deadline, ParsedDocument, ParseLimits, Section, tidy_text

if TYPE_CHECKING:
    from pptx.shapes.base import BaseShape
    from pptx.shapes.placeholder import SlidePlaceholder
    from pptx.slide import Slide

_PRESENTATION = {"p": "http://schemas.openxmlformats.org/presentationml/2006/main"}
# A shape's description: in its non-visual properties, its first child whatever its kind.
_DESCRIPTION = etree.XPath("./*[1]/p:cNvPr/@descr", namespaces=_PRESENTATION)
# A shape the slide show does not show (the Selection Pane's eye), a group's members with it
_HIDDEN_SHAPE = etree.XPath(
    "boolean(./*[1]/p:cNvPr[@hidden='1' or @hidden='true'])", namespaces=_PRESENTATION
)
_HIDDEN = "0"  # a slide's `show` attribute when the deck hides it
_NOTES = "Notes:"


def parse_slides(data: bytes, fallback_title: str, limits: ParseLimits) -> ParsedDocument:
    """Sections in slide order; the title from the deck's properties, else its first slide's
    title, else `fallback_title`. Past `limits.timeout_s` it stops between shapes, or a
    table's rows, with the file skipped."""
    from pptx import Presentation

    check_unpacked(data, limits.max_unpacked_bytes)
    deadline = Deadline(limits.timeout_s)
    graphics = Graphics(deadline)
    deck = Presentation(io.BytesIO(data))
    doc = ParsedDocument(title="")
    first_title = ""
    for number, slide in enumerate(deck.slides, start=1):
        if slide.element.get("show") == _HIDDEN:
            continue
        title_shape = slide.shapes.title  # searched for among the slide's shapes
        title = _plain_line(title_shape.text_frame.text) if title_shape is not None else ""
        first_title = first_title or title
        lines = list(_slide_lines(slide, title_shape, deadline, graphics))
        if notes := _notes(slide):
            lines += [_NOTES, notes]
        if text := tidy_text("\n".join(lines)):
            heading = f"Slide {number}: {title}" if title else f"Slide {number}"
            doc.sections.append(Section(heading=heading, anchor=None, text=text))
    if not doc.sections:
        raise UnreadableDocument("no text")
    doc.title = (deck.core_properties.title or "").strip() or first_title or fallback_title
    return doc


def _notes(slide: Slide) -> str:
    """The speaker notes' text (asking a slide without notes for them would make some)."""
    if not slide.has_notes_slide:
        return ""
    frame = slide.notes_slide.notes_text_frame
    return _plain(frame.text) if frame is not None else ""


def _slide_lines(
    slide: Slide, title: SlidePlaceholder | None, deadline: Deadline, graphics: Graphics
) -> Iterator[str]:
    from pptx.shapes.autoshape import Shape
    from pptx.shapes.graphfrm import GraphicFrame

    title_id = title.shape_id if title is not None else None
    for shape in _flattened(slide.shapes):
        deadline.check()
        if shape.shape_id == title_id:  # already the section's heading
            continue
        if isinstance(shape, Shape) and shape.has_text_frame:
            yield _plain(shape.text_frame.text)
        elif isinstance(shape, GraphicFrame) and shape.has_table:
            for row in shape.table.rows:
                deadline.check()  # a table can hold a whole document
                yield row_line(cell.text for cell in row.cells if not cell.is_spanned)
        elif isinstance(shape, GraphicFrame):  # a chart's title, SmartArt's text
            yield from graphics.lines(shape.element, PartRelations(slide.part))
        # A file whose shapes lack non-visual properties has no description, not an error.
        for described in _DESCRIPTION(shape.element):
            if words := image_words(str(described)):
                yield words


def _flattened(shapes: Iterable[BaseShape]) -> Iterator[BaseShape]:
    """The shapes the slide shows, in its order, a group's members in its place."""
    from pptx.shapes.group import GroupShape

    for shape in shapes:
        if _HIDDEN_SHAPE(shape.element):
            continue
        if isinstance(shape, GroupShape):
            yield from _flattened(shape.shapes)
        else:
            yield shape


def _plain_line(text: str) -> str:
    return " ".join(_plain(text).split())


def _plain(text: str) -> str:
    """python-pptx gives a line break inside a paragraph as a vertical tab."""
    return text.replace("\v", "\n").strip()
