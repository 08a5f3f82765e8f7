"""Word files for test data, written by python-docx as Word would save them."""

from __future__ import annotations

import io

from docx import Document


def make_docx(
    blocks: list[tuple[str, str]],
    title: str | None = None,
    rows: list[list[str | None]] | None = None,
) -> bytes:
    """`blocks`: (style, text) paragraphs in order, a style such as "Heading 1", "Title" or
    "Normal"; `rows`: a table after them."""
    document = Document()
    if title is not None:
        document.core_properties.title = title
    for style, text in blocks:
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
