"""Word files for test data, written by python-docx as Word would save them."""

from __future__ import annotations

import io
import zipfile
from collections.abc import Callable

from docx import Document
from PIL import Image

PICTURE = "picture"  # a block of this style: a paragraph holding one picture, its text the
# picture's description (Word's alt text)


def tiny_png() -> bytes:
    """A 1x1 image, as a picture's file."""
    out = io.BytesIO()
    Image.new("RGB", (1, 1)).save(out, format="PNG")
    return out.getvalue()


def make_docx(
    blocks: list[tuple[str | None, str]],
    title: str | None = None,
    rows: list[list[str | None]] | None = None,
) -> bytes:
    """`blocks`: (style, text) paragraphs in order, a style such as "Heading 1", "Title" or
    "Normal" (None: no style of its own, as most paragraphs Word writes), or PICTURE; `rows`: a
    table after them."""
    document = Document()
    if title is not None:
        document.core_properties.title = title
    for style, text in blocks:
        if style == PICTURE:
            picture = document.add_paragraph().add_run().add_picture(io.BytesIO(tiny_png()))
            picture._inline.docPr.set("descr", text)
        else:
            document.add_paragraph(text, style=style)
    if rows:  # a value of None: the cell before it spans this column too
        table = document.add_table(rows=len(rows), cols=len(rows[0]))
        for row, values in zip(table.rows, rows, strict=True):
            for n, value in enumerate(values):
                cell = row.cells[n]
                if value is None:
                    row.cells[n - 1].merge(cell)
                else:
                    cell.text = value
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def long_docx(paragraphs: int, heading_every: int) -> bytes:
    """A long document, its paragraphs written into the XML directly (python-docx looks a
    style up for each paragraph it adds: 20,000 took 7 s): every `heading_every`-th one a
    "Heading 2" titled `Part N`, the others `Line N.` in the default style."""
    seed = make_docx([("Normal", "End.")])
    body = "".join(
        f'<w:p><w:pPr><w:pStyle w:val="Heading2"/></w:pPr><w:r><w:t>Part {n}</w:t></w:r></w:p>'
        if n % heading_every == 0
        else f"<w:p><w:r><w:t>Line {n}.</w:t></w:r></w:p>"
        for n in range(paragraphs)
    )
    return rewritten(seed, lambda xml: xml.replace(b"<w:body>", b"<w:body>" + body.encode(), 1))


def rewritten(
    package: bytes,
    change: Callable[[bytes], bytes],
    added: dict[str, bytes] | None = None,
    member: str = "word/document.xml",
) -> bytes:
    """An Office file (.docx, .pptx, .xlsx: a zip) with its `member` changed by `change`, and
    `added` members (compressed), as a hostile or unusual file would hold them."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(package)) as src, zipfile.ZipFile(out, "w") as dst:
        for info in src.infolist():
            data = src.read(info)
            dst.writestr(info, change(data) if info.filename == member else data)
        for name, data in (added or {}).items():
            dst.writestr(name, data, zipfile.ZIP_DEFLATED)
    return out.getvalue()
