"""PowerPoint decks and Excel workbooks for test data, written by python-pptx and openpyxl as
the Office applications would save them."""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from xml.sax.saxutils import quoteattr

from openpyxl import Workbook
from openpyxl.chart import BarChart, Reference
from openpyxl.comments import Comment
from pptx import Presentation
from pptx.chart.data import CategoryChartData
from pptx.enum.chart import XL_CHART_TYPE
from pptx.opc.constants import RELATIONSHIP_TYPE as RT
from pptx.opc.package import Part
from pptx.opc.packuri import PackURI
from pptx.oxml import parse_xml
from pptx.oxml.ns import nsdecls
from pptx.util import Inches

from tests.word_maker import (
    DIAGRAM_DATA_TYPE,
    DIAGRAM_NS,
    DIAGRAM_URI,
    rewritten,
    smartart_data,
    tiny_png,
)

_BLANK_LAYOUT = 6  # the default template's layouts: 1 title and content, 5 title only, 6 blank
_TITLE_AND_CONTENT = 1


@dataclass
class SlideSpec:
    """One slide: its title (None: a blank slide, no title placeholder), text boxes in order,
    a table (a None cell: merged into the cell on its left), a group of text boxes, notes."""

    title: str | None = None
    texts: list[str] = field(default_factory=list)
    rows: list[list[str | None]] = field(default_factory=list)
    grouped: list[str] = field(default_factory=list)
    notes: str = ""
    hidden: bool = False
    pictures: list[str] = field(default_factory=list)  # each picture's description (alt text)
    hidden_texts: list[str] = field(default_factory=list)  # text boxes hidden from the show
    chart: str | None = None  # a column chart with this title
    smartart: list[str] = field(default_factory=list)  # a SmartArt graphic's nodes


def make_pptx(slides: list[SlideSpec], title: str | None = None) -> bytes:
    deck = Presentation()
    if title is not None:
        deck.core_properties.title = title
    for spec in slides:
        layout = deck.slide_layouts[_BLANK_LAYOUT if spec.title is None else _TITLE_AND_CONTENT]
        slide = deck.slides.add_slide(layout)
        if spec.title is not None:
            slide.shapes.title.text = spec.title
            body = slide.placeholders[1]  # the content placeholder: the first text, if any
            body.text_frame.text = spec.texts[0] if spec.texts else ""
            texts = spec.texts[1:]
        else:
            texts = spec.texts
        for n, text in enumerate(texts):
            box = slide.shapes.add_textbox(Inches(1), Inches(1 + n), Inches(4), Inches(1))
            box.text_frame.text = text
        for text in spec.hidden_texts:
            box = slide.shapes.add_textbox(Inches(1), Inches(6), Inches(4), Inches(1))
            box.text_frame.text = text
            box._element.nvSpPr.cNvPr.set("hidden", "1")
        if spec.rows:
            frame = slide.shapes.add_table(
                len(spec.rows), len(spec.rows[0]), Inches(1), Inches(4), Inches(6), Inches(2)
            )
            for r, values in enumerate(spec.rows):
                for c, value in enumerate(values):
                    if value is None:
                        frame.table.cell(r, c - 1).merge(frame.table.cell(r, c))
                    else:
                        frame.table.cell(r, c).text = value
        if spec.grouped:
            group = slide.shapes.add_group_shape()
            for n, text in enumerate(spec.grouped):
                box = group.shapes.add_textbox(Inches(5), Inches(1 + n), Inches(3), Inches(1))
                box.text_frame.text = text
        for described in spec.pictures:
            picture = slide.shapes.add_picture(io.BytesIO(tiny_png()), Inches(7), Inches(1))
            picture._element._nvXxPr.cNvPr.set("descr", described)
        if spec.chart is not None:
            data = CategoryChartData()
            data.categories = ["Q1", "Q2"]
            data.add_series("Tickets", (3, 5))
            frame = slide.shapes.add_chart(
                XL_CHART_TYPE.COLUMN_CLUSTERED, Inches(1), Inches(5), Inches(4), Inches(2), data
            )
            frame.chart.has_title = True
            frame.chart.chart_title.text_frame.text = spec.chart
        if spec.smartart:
            name = PackURI(f"/ppt/diagrams/data{len(deck.slides)}.xml")
            data = Part(name, DIAGRAM_DATA_TYPE, deck.part.package, smartart_data(spec.smartart))
            rid = slide.part.relate_to(data, RT.DIAGRAM_DATA)
            slide.shapes._spTree.append(
                parse_xml(
                    f"<p:graphicFrame {nsdecls('p')} {DIAGRAM_NS}><p:nvGraphicFramePr>"
                    '<p:cNvPr id="900" name="Diagram"/><p:cNvGraphicFramePr/><p:nvPr/>'
                    '</p:nvGraphicFramePr><p:xfrm><a:off x="0" y="0"/><a:ext cx="9" cy="9"/>'
                    f'</p:xfrm><a:graphic><a:graphicData uri="{DIAGRAM_URI}">'
                    f'<dgm:relIds r:dm="{rid}" r:lo="" r:qs="" r:cs=""/>'
                    "</a:graphicData></a:graphic></p:graphicFrame>"
                )
            )
        if spec.notes:
            slide.notes_slide.notes_text_frame.text = spec.notes
        if spec.hidden:
            slide.element.set("show", "0")
    out = io.BytesIO()
    deck.save(out)
    return out.getvalue()


@dataclass(frozen=True)
class Formatted:
    """A cell's value shown by Excel through a number format (`0.0%`)."""

    value: object
    number_format: str


@dataclass
class SheetDrawing:
    """What one sheet draws over its cells, each at a row (0: the first): a bar chart, titled
    or not, text boxes (a paragraph per line, `|` a line break inside one), and pictures with
    their descriptions. Written in that order, so their rows alone give the reading order."""

    chart_row: int = 0
    chart: str | None = None
    text_boxes: list[tuple[int, str]] = field(default_factory=list)
    hidden_text_boxes: list[tuple[int, str]] = field(default_factory=list)  # the pane's eye shut
    waterfall: tuple[int, str] | None = None  # an Office 2016 chart (chartex) and its title
    pictures: list[tuple[int, str]] = field(default_factory=list)


_SHEET_DRAWING_NS = (
    'xmlns:xdr="http://schemas.openxmlformats.org/drawingml/2006/spreadsheetDrawing" '
    'xmlns:a="http://schemas.openxmlformats.org/drawingml/2006/main"'
)


def make_xlsx(
    sheets: dict[str, list[list[object]]],
    hidden: frozenset[str] = frozenset(),
    title: str = "",
    drawings: dict[str, SheetDrawing] | None = None,
    chart_sheets: dict[str, str] | None = None,
    notes: dict[str, dict[str, str]] | None = None,
) -> bytes:
    """`sheets`: name -> rows of cell values (None: an empty cell; `Formatted`: a value with
    its number format), in order. A sheet in
    `drawings` gets its chart from openpyxl, its text boxes and pictures written in its drawing
    part as Excel writes them (openpyxl writes neither), and its drawing named by a relative
    path, as Excel names it (openpyxl's own are absolute). `chart_sheets`: name -> title of
    the chart alone on a sheet of its own, after the other sheets (a hidden name hides it).
    `notes`: a sheet's name -> its notes by cell (`B7`), as openpyxl writes them."""
    drawings = drawings or {}
    book = Workbook()
    book.remove(book.active)
    if title:
        book.properties.title = title
    for name, rows in sheets.items():
        sheet = book.create_sheet(name)
        for row in rows:
            sheet.append([v.value if isinstance(v, Formatted) else v for v in row])
            for column, value in enumerate(row, start=1):
                if isinstance(value, Formatted):  # the row just appended is the last one
                    sheet.cell(sheet.max_row, column).number_format = value.number_format
        if name in hidden:
            sheet.sheet_state = "hidden"
        for cell, text in (notes or {}).get(name, {}).items():
            sheet[cell].comment = Comment(text, "Jane Doe")
        if name in drawings:
            chart = BarChart()
            chart.title = drawings[name].chart
            chart.add_data(Reference(sheet, min_col=1, min_row=1, max_row=1))
            sheet.add_chart(chart, f"D{drawings[name].chart_row + 1}")
    for name, chart_title in (chart_sheets or {}).items():
        chart_sheet = book.create_chartsheet(name)
        chart = BarChart()
        chart.title = chart_title
        chart.add_data(Reference(book.worksheets[0], min_col=1, min_row=1, max_row=1))
        chart_sheet.add_chart(chart)
        if name in hidden:
            chart_sheet.sheet_state = "hidden"
    out = io.BytesIO()
    book.save(out)
    data = out.getvalue()
    for number, (name, drawing) in enumerate(
        ((name, drawings[name]) for name in sheets if name in drawings), start=1
    ):
        sheet_number = list(sheets).index(name) + 1
        drawn = "".join(
            [*(_text_box(row, text) for row, text in drawing.text_boxes)]
            + [_text_box(row, text, hidden=True) for row, text in drawing.hidden_text_boxes]
            + [_picture(row, described) for row, described in drawing.pictures]
            + ([_waterfall(*drawing.waterfall)] if drawing.waterfall else [])
        )
        if drawing.waterfall:
            data = rewritten(
                data,
                lambda xml, number=number: xml.replace(
                    b"</Relationships>",
                    _CHARTEX_RELATIONSHIP.format(number=number).encode() + b"</Relationships>",
                ),
                added={f"xl/charts/chartEx{number}.xml": _chartex(drawing.waterfall[1])},
                member=f"xl/drawings/_rels/drawing{number}.xml.rels",
            )
        data = rewritten(
            data,
            lambda xml, drawn=drawn: xml.replace(
                b"<oneCellAnchor>", drawn.encode() + b"<oneCellAnchor>", 1
            ),
            member=f"xl/drawings/drawing{number}.xml",
        )
        data = rewritten(
            data,
            lambda xml, number=number: xml.replace(
                f'Target="/xl/drawings/drawing{number}.xml"'.encode(),
                f'Target="../drawings/drawing{number}.xml"'.encode(),
            ),
            member=f"xl/worksheets/_rels/sheet{sheet_number}.xml.rels",
        )
    return data


def _cell(row: int) -> str:
    return (
        "<xdr:from><xdr:col>0</xdr:col><xdr:colOff>0</xdr:colOff>"
        f"<xdr:row>{row}</xdr:row><xdr:rowOff>0</xdr:rowOff></xdr:from>"
    )


_HIDDEN = ' hidden="1"'  # a drawing's attribute when the Selection Pane hides it
_CHARTEX_NS = "http://schemas.microsoft.com/office/drawing/2014/chartex"
_MC_NS = "http://schemas.openxmlformats.org/markup-compatibility/2006"
_R_NS = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
_CHARTEX_RELATIONSHIP = (
    '<Relationship Id="rIdCx" Target="../charts/chartEx{number}.xml"'
    ' Type="http://schemas.microsoft.com/office/2014/relationships/chartEx"/>'
)


def _waterfall(row: int, title: str) -> str:
    """An Office 2016 chart as Excel writes it: the chart for readers that know its schema,
    and a shape saying it is unavailable for those that do not."""
    return (
        f'<mc:AlternateContent xmlns:mc="{_MC_NS}">'
        f'<mc:Choice xmlns:cx1="http://schemas.microsoft.com/office/drawing/2015/9/8/chartex"'
        ' Requires="cx1">'
        f"<xdr:oneCellAnchor {_SHEET_DRAWING_NS}>{_cell(row)}"
        '<xdr:ext cx="9" cy="9"/><xdr:graphicFrame macro=""><xdr:nvGraphicFramePr>'
        '<xdr:cNvPr id="92" name="Chart 2"/><xdr:cNvGraphicFramePr/></xdr:nvGraphicFramePr>'
        f'<xdr:xfrm/><a:graphic><a:graphicData uri="{_CHARTEX_NS}">'
        f'<cx:chart xmlns:cx="{_CHARTEX_NS}" xmlns:r="{_R_NS}" r:id="rIdCx"/>'
        "</a:graphicData></a:graphic></xdr:graphicFrame><xdr:clientData/></xdr:oneCellAnchor>"
        "</mc:Choice><mc:Fallback>"
        + _text_box(row, "This chart isn't available in your version of Excel.")
        + "</mc:Fallback></mc:AlternateContent>"
    )


def _chartex(title: str) -> bytes:
    """A chartex part whose title is taken from a cell, as its `txData` keeps it."""
    return (
        f'<cx:chartSpace xmlns:cx="{_CHARTEX_NS}"><cx:chartData/><cx:chart>'
        f"<cx:title><cx:tx><cx:txData><cx:f>Sheet!$A$1</cx:f><cx:v>{title}</cx:v>"
        "</cx:txData></cx:tx></cx:title><cx:plotArea/></cx:chart></cx:chartSpace>"
    ).encode()


def _text_box(row: int, text: str, *, hidden: bool = False) -> str:
    paragraphs = "".join(
        "<a:p>"
        + "<a:br/>".join(f"<a:r><a:t>{piece}</a:t></a:r>" for piece in line.split("|"))
        + "</a:p>"
        for line in text.split("\n")
    )
    return (
        f"<xdr:oneCellAnchor {_SHEET_DRAWING_NS}>{_cell(row)}"
        '<xdr:ext cx="9" cy="9"/><xdr:sp macro="" textlink=""><xdr:nvSpPr>'
        f'<xdr:cNvPr id="90" name="TextBox 1"{_HIDDEN if hidden else ""}/>'
        '<xdr:cNvSpPr txBox="1"/></xdr:nvSpPr><xdr:spPr/>'
        f"<xdr:txBody><a:bodyPr/><a:lstStyle/>{paragraphs}</xdr:txBody></xdr:sp>"
        "<xdr:clientData/></xdr:oneCellAnchor>"
    )


def _picture(row: int, described: str) -> str:
    return (
        f"<xdr:oneCellAnchor {_SHEET_DRAWING_NS}>{_cell(row)}"
        '<xdr:ext cx="9" cy="9"/><xdr:pic><xdr:nvPicPr>'
        f'<xdr:cNvPr id="91" name="Picture 1" descr={quoteattr(described)}/><xdr:cNvPicPr/>'
        "</xdr:nvPicPr><xdr:blipFill/><xdr:spPr/></xdr:pic>"
        "<xdr:clientData/></xdr:oneCellAnchor>"
    )
