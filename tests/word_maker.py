"""Word files for test data, written by python-docx as Word would save them."""

from __future__ import annotations

import io
import zipfile
from collections.abc import Callable

from docx import Document
from docx.opc.constants import RELATIONSHIP_TYPE as RT
from docx.opc.packuri import PackURI
from docx.opc.part import Part
from docx.oxml import parse_xml
from docx.oxml.ns import nsdecls
from PIL import Image

PICTURE = "picture"  # a block of this style: a paragraph holding one picture, its text the
# picture's description (Word's alt text)
TEXT_BOX = "text box"  # a block of this style: a paragraph drawing a text box that holds a
# paragraph per line of its text, written twice as Word does (the second a fallback for old
# readers)
CHART = "chart"  # a block of this style: a paragraph holding a chart titled with its text
SMARTART = "smartart"  # a block of this style: a paragraph holding a SmartArt graphic, a node
# per line of its text
HIDDEN = "hidden"  # a block of this style: a paragraph of three runs, its text's parts split
# on "|": shown, formatted hidden, and formatted explicitly not hidden
DIAGRAM_NS = (
    'xmlns:a="http://schemas.openxmlformats.org/drawingml/2006/main" '
    'xmlns:dgm="http://schemas.openxmlformats.org/drawingml/2006/diagram" '
    'xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships"'
)
_MC = "http://schemas.openxmlformats.org/markup-compatibility/2006"
_WPS = "http://schemas.microsoft.com/office/word/2010/wordprocessingShape"
_CHART_NS = "http://schemas.openxmlformats.org/drawingml/2006/chart"
_CHART_TYPE = "application/vnd.openxmlformats-officedocument.drawingml.chart+xml"
DIAGRAM_DATA_TYPE = "application/vnd.openxmlformats-officedocument.drawingml.diagramData+xml"
DIAGRAM_URI = "http://schemas.openxmlformats.org/drawingml/2006/diagram"


def smartart_data(nodes: list[str]) -> bytes:
    """A SmartArt graphic's data part as Office writes it: the document's point, a point per
    node, and between nodes a connector's point whose text no reader sees. A node written
    "asst:..." is an assistant's (an org chart's); a "|" in one is a line break in its text."""

    def point(n: int, text: str, kind: str = "") -> str:
        typed = f' type="{kind}"' if kind else ""
        runs = "<a:br/>".join(f"<a:r><a:t>{line}</a:t></a:r>" for line in text.split("|") if line)
        return f'<dgm:pt modelId="{n}"{typed}><dgm:t><a:bodyPr/><a:p>{runs}</a:p></dgm:t></dgm:pt>'

    points = [point(0, "", "doc")]
    for n, node in enumerate(nodes, start=1):
        assistant = node.startswith("asst:")
        points.append(point(n, node.removeprefix("asst:"), "asst" if assistant else ""))
        points.append(point(100 + n, "connector text", "sibTrans"))
    return (
        f"<dgm:dataModel {DIAGRAM_NS}><dgm:ptLst>{''.join(points)}</dgm:ptLst>"
        "<dgm:cxnLst/><dgm:bg/><dgm:whole/></dgm:dataModel>"
    ).encode()


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
        elif style == TEXT_BOX:
            box = "".join(f"<w:p><w:r><w:t>{line}</w:t></w:r></w:p>" for line in text.split("\n"))
            document.add_paragraph("Beside the box.")._p.append(
                parse_xml(
                    f'<w:r {nsdecls("w", "wp")} {DIAGRAM_NS} xmlns:mc="{_MC}" xmlns:wps="{_WPS}" '
                    'xmlns:v="urn:schemas-microsoft-com:vml"><mc:AlternateContent>'
                    '<mc:Choice Requires="wps"><w:drawing><wp:anchor><wp:docPr id="800" '
                    f'name="Text Box"/><a:graphic><a:graphicData uri="{_WPS}"><wps:wsp>'
                    f"<wps:txbx><w:txbxContent>{box}</w:txbxContent></wps:txbx></wps:wsp>"
                    "</a:graphicData></a:graphic></wp:anchor></w:drawing></mc:Choice>"
                    "<mc:Fallback><w:pict><v:shape><v:textbox><w:txbxContent>"
                    f"{box}</w:txbxContent></v:textbox></v:shape></w:pict></mc:Fallback>"
                    "</mc:AlternateContent></w:r>"
                )
            )
        elif style == CHART:
            name = PackURI(f"/word/charts/chart{len(document.part.rels)}.xml")
            blob = (
                f'<c:chartSpace xmlns:c="{_CHART_NS}" {DIAGRAM_NS}><c:chart><c:title><c:tx>'
                f"<c:rich><a:bodyPr/><a:p><a:r><a:t>{text}</a:t></a:r></a:p></c:rich></c:tx>"
                "</c:title><c:plotArea/></c:chart></c:chartSpace>"
            ).encode()
            rid = document.part.relate_to(
                Part(name, _CHART_TYPE, blob, document.part.package), RT.CHART
            )
            document.add_paragraph()._p.append(
                parse_xml(
                    f'<w:r {nsdecls("w", "wp")} {DIAGRAM_NS} xmlns:c="{_CHART_NS}"><w:drawing>'
                    '<wp:inline><wp:extent cx="100" cy="100"/><wp:docPr id="901" name="Chart"/>'
                    f'<a:graphic><a:graphicData uri="{_CHART_NS}"><c:chart r:id="{rid}"/>'
                    "</a:graphicData></a:graphic></wp:inline></w:drawing></w:r>"
                )
            )
        elif style == SMARTART:
            name = PackURI(f"/word/diagrams/data{len(document.part.rels)}.xml")
            data = Part(
                name, DIAGRAM_DATA_TYPE, smartart_data(text.split("\n")), document.part.package
            )
            rid = document.part.relate_to(data, RT.DIAGRAM_DATA)
            document.add_paragraph()._p.append(
                parse_xml(
                    f"<w:r {nsdecls('w', 'wp')} {DIAGRAM_NS}><w:drawing><wp:inline>"
                    '<wp:extent cx="100" cy="100"/><wp:docPr id="900" name="Diagram"/>'
                    f'<a:graphic><a:graphicData uri="{DIAGRAM_URI}">'
                    f'<dgm:relIds r:dm="{rid}" r:lo="" r:qs="" r:cs=""/>'
                    "</a:graphicData></a:graphic></wp:inline></w:drawing></w:r>"
                )
            )
        elif style == HIDDEN:
            paragraph = document.add_paragraph()
            for piece, hidden in zip(text.split("|"), (None, True, False), strict=True):
                paragraph.add_run(piece).font.hidden = hidden
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
