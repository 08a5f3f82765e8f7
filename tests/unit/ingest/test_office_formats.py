"""Office files as sections: Word (.docx), PowerPoint (.pptx), Excel (.xlsx), and what a
hostile one of each may cost (their zip, their XML, their declared sizes, their length)."""

from __future__ import annotations

import dataclasses
import datetime as dt
import io
import itertools
import random
import re
import zipfile
from collections.abc import Callable

import pytest

from core.errors import UnreadableDocument
from core.ingest.formats import DocumentFormat, parse_document
from core.ingest.sections import ParsedDocument
from tests.office_maker import Formatted, SheetDrawing, SlideSpec, make_pptx, make_xlsx
from tests.parse_timing import LIMITS, LINEAR_PARSE_CPU_S, timed_parse
from tests.word_maker import (
    CHART,
    HIDDEN,
    PICTURE,
    SMARTART,
    TEXT_BOX,
    long_docx,
    make_docx,
    rewritten,
)

# Each format's file with one piece of text, "LAUGH", and the zip member that holds it.
_WITH_ONE_TEXT: dict[DocumentFormat, tuple[Callable[[], bytes], str]] = {
    DocumentFormat.WORD: (lambda: make_docx([("Normal", "LAUGH")]), "word/document.xml"),
    DocumentFormat.SLIDES: (
        lambda: make_pptx([SlideSpec(title="T", texts=["LAUGH"])]),
        "ppt/slides/slide1.xml",
    ),
    DocumentFormat.SHEETS: (
        lambda: make_xlsx({"S": [["LAUGH", "b"], ["c", "d"]]}),
        "xl/worksheets/sheet1.xml",
    ),
}
_OFFICE = list(_WITH_ONE_TEXT)


def test_word_headings_become_sections_with_tables_in_their_place() -> None:
    data = make_docx(
        [
            ("Title", "Ops handbook"),
            ("Normal", "Read this first."),
            ("Heading 1", "Deploying"),
            ("Normal", "Freeze the branch."),
            ("Heading 2", "Rollback"),
            ("Normal", "Run make rollback."),
        ],
        rows=[
            ["Service", "Owner", "Hours"],
            ["billing", "team-pay", "24/7"],
            ["All day", None, "x"],
        ],
    )
    doc = parse_document(data, DocumentFormat.WORD, "fallback.docx", LIMITS)
    assert doc.title == "Ops handbook"  # the Title paragraph, with no title in the properties
    assert [(s.heading, s.anchor) for s in doc.sections] == [
        ("", None),
        ("Deploying", None),
        ("Rollback", None),
    ]
    assert doc.sections[0].text == "Read this first."
    assert doc.sections[2].text == (
        "Run make rollback.\nService | Owner | Hours\nbilling | team-pay | 24/7\nAll day | x"
    )  # a cell merged across two columns is read once
    titled = make_docx([("Normal", "Body.")], title="From the properties")
    assert parse_document(titled, DocumentFormat.WORD, "x", LIMITS).title == "From the properties"
    untitled = make_docx([("Normal", "Body.")])
    assert parse_document(untitled, DocumentFormat.WORD, "notes.docx", LIMITS).title == "notes.docx"


def test_slides_become_sections_with_their_tables_groups_and_notes() -> None:
    deck = make_pptx(
        [
            SlideSpec(title="Release process", texts=["Who ships what, and when."]),
            SlideSpec(
                title="Deploying",
                texts=["Deploy on Tuesdays.", "Freeze the branch first."],
                rows=[
                    ["Service", "Owner", "Hours"],
                    ["billing", "team-pay", "24/7"],
                    ["All day", None, "x"],
                ],
                grouped=["Rollback: make rollback"],
                notes="Remind them\nof the freeze.",
            ),
            SlideSpec(title="Old process", texts=["Deploy on Fridays."], hidden=True),
            SlideSpec(texts=["A slide with no title."]),
        ]
    )
    doc = parse_document(deck, DocumentFormat.SLIDES, "fallback.pptx", LIMITS)
    assert doc.title == "Release process"  # the first slide's, with none in the properties
    assert [(s.heading, s.anchor) for s in doc.sections] == [
        ("Slide 1: Release process", None),
        ("Slide 2: Deploying", None),
        ("Slide 4", None),  # the hidden slide is left out, and the numbers stay the deck's
    ]
    assert doc.sections[1].text == (
        "Deploy on Tuesdays.\nFreeze the branch first.\n"
        "Service | Owner | Hours\nbilling | team-pay | 24/7\nAll day | x\n"  # merged: once
        "Rollback: make rollback\nNotes:\nRemind them\nof the freeze."
    )
    titled = make_pptx([SlideSpec(title="Intro", texts=["Body."])], title="From the properties")
    assert parse_document(titled, DocumentFormat.SLIDES, "x", LIMITS).title == "From the properties"
    untitled = make_pptx([SlideSpec(texts=["Body."])])
    assert parse_document(untitled, DocumentFormat.SLIDES, "deck.pptx", LIMITS).title == "deck.pptx"


def test_drawings_say_what_their_text_boxes_descriptions_titles_and_smartart_nodes_say() -> None:
    """A diagram's description is often the only place its point is written down; a file
    name or Office's generated caption says nothing, and is left out."""
    word = make_docx(
        [
            ("Heading 1", "Architecture"),
            ("Normal", "Requests pass three services."),
            (PICTURE, "Request flow: load balancer, then API, then the billing worker"),
            (PICTURE, "diagram-final.png"),
            (PICTURE, "A screenshot of a computer\n\nDescription automatically generated"),
            (PICTURE, ""),
            ("Normal", "Each service scales alone."),
            (SMARTART, "Build\nCanary at 5%|then 50%\nasst:Release manager"),
            (TEXT_BOX, "Callout: restart the worker first\nthen page on-call"),
            (CHART, "Deploys per week"),
        ]
    )
    assert parse_document(word, DocumentFormat.WORD, "x.docx", LIMITS).sections[0].text == (
        "Requests pass three services.\n"
        "Request flow: load balancer, then API, then the billing worker\n"
        "Each service scales alone.\n"
        "Build\nCanary at 5% then 50%\nRelease manager\n"  # SmartArt's nodes and assistants
        "Beside the box.\nCallout: restart the worker first\nthen page on-call\n"  # once, not twice
        "Deploys per week"
    )
    deck = make_pptx(
        [
            SlideSpec(
                title="Support",
                texts=["Tickets grew this year."],
                pictures=["Escalation path: tier 1, tier 2, on-call", "image3.png"],
                chart="Tickets per quarter",
                smartart=["Triage", "Fix", "Follow up"],
            )
        ]
    )
    slide = parse_document(deck, DocumentFormat.SLIDES, "x.pptx", LIMITS).sections[0]
    assert slide.text == (
        "Tickets grew this year.\nEscalation path: tier 1, tier 2, on-call\nTickets per quarter\n"
        "Triage\nFix\nFollow up"
    )


def test_sheets_become_sections_whose_rows_name_their_columns() -> None:
    book = make_xlsx(
        {
            "FAQ": [
                ["Question", "Answer", "Since"],
                ["How do I rotate a key?", "Run bot keys rotate.", dt.datetime(2024, 1, 5)],
                [None, None, None],
                ["What does it cost?", 3.0, None, "extra"],
            ],
            "Numbers": [[1, 2.5], [3, 4]],
            "Budget": [["Q3 travel budget"], ["Flights", 1200]],
            "Lookup": [["Key", "Value"], ["secret", "no"]],
        },
        hidden=frozenset({"Lookup"}),
        title="Team FAQ",
    )
    doc = parse_document(book, DocumentFormat.SHEETS, "faq.xlsx", LIMITS)
    assert doc.title == "Team FAQ"
    assert [(s.heading, s.anchor) for s in doc.sections] == [
        ("FAQ", None),
        ("Numbers", None),  # the first row is numbers: data, no header
        ("Budget", None),  # one text cell on top: a caption, no header
    ]  # the hidden sheet is left out
    assert doc.sections[0].text == (
        "Question: How do I rotate a key? | Answer: Run bot keys rotate. | Since: 2024-01-05\n"
        "Question: What does it cost? | Answer: 3 | extra"  # a cell past the header: unnamed
    )
    assert doc.sections[1].text == "1 | 2.5\n3 | 4"
    assert doc.sections[2].text == "Q3 travel budget\nFlights | 1200"
    untitled = make_xlsx({"S": [["a"]]})
    assert parse_document(untitled, DocumentFormat.SHEETS, "faq.xlsx", LIMITS).title == "faq.xlsx"


def test_a_percentage_reads_as_excel_shows_it_not_as_stored() -> None:
    """An answer quoting a sheet must say what its reader sees there: 99.9%, not 0.999."""
    book = make_xlsx(
        {
            "SLA": [
                ["Service", "Uptime", "Error budget", "Share"],
                ["billing", Formatted(0.999, "0.0%"), Formatted(0.15, "#,##0%"), 0.15],
                ["search", Formatted(1, "0%"), Formatted(0.0005, "0.00%;[Red]-0.00%"), "n/a"],
                ["hostile", Formatted(0.2, "0." + "0" * 100_000 + "%"), None, None],
            ]
        }
    )
    lines = parse_document(book, DocumentFormat.SHEETS, "x", LIMITS).sections[0].text.split("\n")
    assert lines[:2] == [
        "Service: billing | Uptime: 99.9% | Error budget: 15% | Share: 0.15",  # unformatted
        "Service: search | Uptime: 100% | Error budget: 0.05% | Share: n/a",
    ]
    assert re.fullmatch(r"Service: hostile \| Uptime: 20\.0{13}\d\d%", lines[2])  # 15 decimals


_THREADED = (
    "[Threaded comment]\n\nYour version of Excel allows you to read this threaded comment; "
    "however, any edits to it will get removed if the file is opened in a newer version of "
    "Excel.\n\nComment:\n    @Sam is this still right?"
)


# What a broken or hostile writer may put in a part
_JUNK = (b"", b"-1", b"9" * 400, b"\xc2\xb2", b"rId999", b"../../../etc/passwd", b"/", b"1e308")
_INSERTED = (b"<?pi x?>", b"<!-- c -->", b'<x:y xmlns:x="urn:x"/>', b"&amp;", b"<![CDATA[x]]>")


def _mangled(xml: bytes, rng: random.Random) -> bytes:
    how = rng.choice(["truncate", "attribute", "text", "repeat", "insert"])
    tags = [m.start() for m in re.finditer(rb"<[A-Za-z]", xml)] or [0]
    if how == "truncate" and xml:
        return xml[: rng.randrange(len(xml))]
    if how == "attribute" and (values := [m.span(1) for m in re.finditer(rb'="([^"]*)"', xml)]):
        start, end = rng.choice(values)
        return xml[:start] + rng.choice(_JUNK) + xml[end:]
    if how == "text" and (texts := [m.span(1) for m in re.finditer(rb">([^<]+)<", xml)]):
        start, end = rng.choice(texts)
        return xml[:start] + rng.choice(_JUNK) + xml[end:]
    if how == "repeat" and (empty := list(re.finditer(rb"<[A-Za-z][^>]*/>", xml))):
        element = rng.choice(empty)
        return xml[: element.end()] + element[0] * 1_000 + xml[element.end() :]
    # Inserted before an element, or as the root's first child
    root = re.search(rb"<[A-Za-z][^>]*>", xml)
    at = root.end() if how == "insert" and root and rng.random() < 0.5 else rng.choice(tags)
    return xml[:at] + rng.choice(_INSERTED) + xml[at:]


def _drawn_workbook() -> bytes:
    return make_xlsx(
        {"S": [["Rows."]]},
        drawings={
            "S": SheetDrawing(
                chart="Chart",
                text_boxes=[(2, "Box")],
                pictures=[(3, "Picture of the flow")],
                waterfall=(4, "Fall"),
            )
        },
        notes={"S": {"B1": "Note."}},
    )


# Per format: a file whose graphics this project reads itself (not python-docx, python-pptx or
# openpyxl: a part they parse is theirs to refuse), its text read whole, those parts, and how
# many manglings of them to try (a workbook has the most ways in).
_OWN_PARTS: dict[DocumentFormat, tuple[Callable[[], bytes], str, tuple[str, ...], int]] = {
    DocumentFormat.SHEETS: (
        _drawn_workbook,
        "Chart\nBox\nPicture of the flow\nFall\nRows.\nNote on B1: Note.",
        (
            "xl/drawings/drawing1.xml",
            "xl/drawings/_rels/drawing1.xml.rels",
            "xl/charts/chart1.xml",
            "xl/charts/chartEx1.xml",
            "xl/comments/comment1.xml",
        ),
        600,
    ),
    DocumentFormat.WORD: (
        lambda: make_docx([("Normal", "Rows."), (CHART, "Chart"), (SMARTART, "Node")]),
        "Rows.\nChart\nNode",
        ("word/charts/chart8.xml", "word/diagrams/data9.xml"),  # as word_maker names them
        200,
    ),
    DocumentFormat.SLIDES: (
        lambda: make_pptx([SlideSpec(title="T", texts=["Rows."], smartart=["Node"])]),
        "Rows.\nNode",
        ("ppt/diagrams/data1.xml",),
        200,
    ),
}


@pytest.mark.parametrize("fmt", list(_OWN_PARTS))
def test_a_mangled_graphic_or_notes_part_never_costs_the_rest(fmt: DocumentFormat) -> None:
    """Seeded manglings of the parts this project reads itself, three at a time: truncated,
    attributes and text replaced by junk (huge numbers, superscripts, paths), elements
    repeated, instructions and comments inserted. Each loses at most its own text. (It finds
    both hostile-anchor crashes the review found, with either fix undone.)"""
    make, whole, parts, manglings = _OWN_PARTS[fmt]
    package = make()
    with zipfile.ZipFile(io.BytesIO(package)) as archive:
        assert set(parts) <= set(archive.namelist())
    assert parse_document(package, fmt, "x", LIMITS).sections[0].text == whole
    rng = random.Random(18)
    for _ in range(manglings):
        part = rng.choice(parts)
        mangled = rewritten(
            package, lambda xml: _mangled(_mangled(_mangled(xml, rng), rng), rng), member=part
        )
        seconds, doc = timed_parse(mangled, fmt)
        assert seconds < LINEAR_PARSE_CPU_S
        assert isinstance(doc, ParsedDocument), (part, doc)
        assert "Rows." in doc.sections[0].text.split("\n"), (part, doc)


def test_a_cells_note_follows_its_row_named_by_its_column() -> None:
    """What a sheet's author wrote on a cell for its readers; not the author's name Excel
    writes before it, not a threaded comment (a discussion, as Word's comments are)."""
    book = make_xlsx(
        {
            "Keys": [
                ["Service", "Owner", "Rotation"],
                ["billing", "team-pay", "monthly"],
                ["search", "team-find", None],
            ]
        },
        notes={
            "Keys": {
                "B1": "The team paged first",
                "C2": "AUTHORED",
                "A3": _THREADED,
                "C3": "Not rotated yet",  # on an empty cell
                "D9": "Past the last row",
            }
        },
    )
    excel = rewritten(  # a note as Excel writes it: the author's name in bold, then the note
        book,
        lambda xml: xml.replace(
            b"<text><t>AUTHORED</t></text>",
            b'<text><r><rPr><b/><sz val="9"/></rPr><t>Jane Doe:</t></r>'
            b'<r><rPr><sz val="9"/></rPr><t xml:space="preserve">\nRotate | monthly</t></r></text>',
        ),
        member="xl/comments/comment1.xml",
    )
    assert excel != book
    (sheet,) = parse_document(excel, DocumentFormat.SHEETS, "x", LIMITS).sections
    assert sheet.text == (
        "Note on Owner: The team paged first\n"
        "Service: billing | Owner: team-pay | Rotation: monthly\n"
        "Note on Rotation: Rotate | monthly\n"
        "Service: search | Owner: team-find\n"
        "Note on Rotation: Not rotated yet\n"
        "Note on D9: Past the last row"
    )


@pytest.mark.parametrize(
    "notes",
    [b"not XML at all", b"<comments><commentList><comment ref='A0'/></commentList></comments>"],
    ids=["not XML", "no cell"],
)
def test_notes_that_cannot_be_read_lose_only_themselves(notes: bytes) -> None:
    book = make_xlsx({"S": [["Rows."]]}, notes={"S": {"A1": "A note."}})
    odd = rewritten(book, lambda _: notes, member="xl/comments/comment1.xml")
    (sheet,) = parse_document(odd, DocumentFormat.SHEETS, "x", LIMITS).sections
    assert sheet.text == "Rows."


def test_what_a_sheet_draws_comes_first_in_its_section_in_reading_order() -> None:
    """Text boxes, charts' titles and pictures' descriptions, which openpyxl's streaming mode
    never reads, sorted by the row each is anchored at: the part lists them as stacked."""
    book = make_xlsx(
        {
            "Deploys": [["Service", "Owner"], ["billing", "team-pay"]],
            "Hidden": [["x"]],
            "Spare": [["y"]],
        },
        drawings={
            "Deploys": SheetDrawing(
                chart_row=1,
                chart="Deploys per week",
                waterfall=(5, "Budget bridge"),  # an Office 2016 chart, not its fallback
                text_boxes=[(6, "How to read|this sheet\nOwners page on-call")],
                pictures=[(3, "Flow: API, then the billing worker"), (4, "image1.png")],
            ),
            "Hidden": SheetDrawing(chart="Never shown"),
            "Spare": SheetDrawing(chart=None),  # an untitled chart says nothing
        },
        chart_sheets={"Trend": "Incidents per month", "Old trend": "Never shown either"},
        hidden=frozenset({"Hidden", "Old trend"}),
    )
    doc = parse_document(book, DocumentFormat.SHEETS, "x.xlsx", LIMITS)
    assert [(s.heading, s.text) for s in doc.sections] == [
        (
            "Deploys",
            "Deploys per week\nFlow: API, then the billing worker\nBudget bridge\n"  # rows 1, 3, 5
            "How to read this sheet\nOwners page on-call\n"  # row 6: a paragraph a line
            "Service: billing | Owner: team-pay",
        ),
        ("Spare", "y"),
        ("Trend", "Incidents per month"),  # a chart sheet: its chart alone
    ]


def test_what_excel_does_not_show_is_not_read() -> None:
    """A drawing hidden in the Selection Pane (form controls are written as such), Word's
    hidden text, a slide's hidden shape: drafts and spares nobody sees in the file."""
    book = make_xlsx(
        {"S": [["Rows."]]},
        drawings={"S": SheetDrawing(text_boxes=[(1, "Shown")], hidden_text_boxes=[(2, "Draft")])},
    )
    assert parse_document(book, DocumentFormat.SHEETS, "x", LIMITS).sections[0].text == (
        "Shown\nRows."
    )
    word = rewritten(  # a table cell's run formatted hidden too
        make_docx(
            [(HIDDEN, "Shown.| Draft: do not ship.| Also shown.")],
            rows=[["Owner", "Note"], ["team-pay", "SECRET"]],
        ),
        lambda xml: xml.replace(b"<w:t>SECRET", b"<w:rPr><w:vanish/></w:rPr><w:t>SECRET"),
    )
    assert parse_document(word, DocumentFormat.WORD, "x", LIMITS).sections[0].text == (
        "Shown. Also shown.\nOwner | Note\nteam-pay"
    )
    deck = make_pptx([SlideSpec(title="T", texts=["Shown."], hidden_texts=["Draft: do not ship"])])
    assert parse_document(deck, DocumentFormat.SLIDES, "x", LIMITS).sections[0].text == "Shown."


@pytest.mark.parametrize("child", [b"<?pi x?>", b"<!-- note -->"], ids=["instruction", "comment"])
def test_a_drawing_holding_what_is_not_an_element_is_read(child: bytes) -> None:
    book = make_xlsx({"S": [["Rows."]]}, drawings={"S": SheetDrawing(chart="Chart")})
    odd = rewritten(
        book,
        lambda xml: xml.replace(b"<oneCellAnchor>", child + b"<oneCellAnchor>", 1),
        member="xl/drawings/drawing1.xml",
    )
    assert odd != book
    (sheet,) = parse_document(odd, DocumentFormat.SHEETS, "x", LIMITS).sections
    assert sheet.text == "Chart\nRows."


def _listing_rewritten(book: bytes, sheets: bytes) -> bytes:
    """`book` with its workbook's list of sheets replaced by `sheets`."""
    return rewritten(
        book,
        lambda xml: re.sub(rb"<sheets>.*</sheets>", b"<sheets>" + sheets + b"</sheets>", xml),
        member="xl/workbook.xml",
    )


_SHEET = '<sheet xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships" '


def test_a_workbook_listing_ten_thousand_sheets_is_read_in_linear_time() -> None:
    """openpyxl finds a sheet by name by looking at every sheet: asked once per sheet, that
    was 11 s for 8,000, and an empty sheet never looked at the clock. Each sheet names the
    same part, whose relationships and thousand notes are read once, not 10,000 times."""
    listed = "".join(f'{_SHEET}name="S{n}" sheetId="{n + 1}" r:id="rId1"/>' for n in range(10_000))
    thousand = "".join(
        '<comment ref="B1"><text><t>Once.</t></text></comment>' for _ in range(1_000)
    )
    book = rewritten(
        make_xlsx({"S": [["Rows."]]}, notes={"S": {"B1": "Once."}}),
        lambda xml: re.sub(
            rb"<commentList>.*</commentList>",
            f"<commentList>{thousand}</commentList>".encode(),
            xml,
        ),
        member="xl/comments/comment1.xml",
    )
    seconds, doc = timed_parse(_listing_rewritten(book, listed.encode()), DocumentFormat.SHEETS)
    assert seconds < LINEAR_PARSE_CPU_S
    assert isinstance(doc, ParsedDocument), doc
    assert len(doc.sections) == 10_000
    assert doc.sections[0].text == "Rows.\n" + "\n".join(["Note on B1: Once."] * 1_000)
    assert {s.text for s in doc.sections[1:]} == {"Rows."}


@pytest.mark.parametrize("second", ["visible", "hidden"])
def test_two_sheets_of_one_name_are_each_read_by_their_own_state(second: str) -> None:
    """Excel refuses two sheets of one name; a hostile file may hold them."""
    book = make_xlsx({"A": [["first"]], "B": [["second"]]})
    listed = (
        f'{_SHEET}name="A" sheetId="1" state="visible" r:id="rId1"/>'
        f'{_SHEET}name="A" sheetId="2" state="{second}" r:id="rId2"/>'
    )
    doc = parse_document(
        _listing_rewritten(book, listed.encode()), DocumentFormat.SHEETS, "x", LIMITS
    )
    shown = [("A", "first"), ("A", "second")] if second == "visible" else [("A", "first")]
    assert [(s.heading, s.text) for s in doc.sections] == shown


@pytest.mark.parametrize("fmt", _OFFICE)
def test_an_office_file_that_unpacks_past_the_limit_is_refused_before_it_is_unpacked(
    fmt: DocumentFormat,
) -> None:
    """10 MB of XML compresses to about 10 KB: what the zip declares is judged, not its size."""
    make, member = _WITH_ONE_TEXT[fmt]
    data = rewritten(make(), lambda xml: xml, {"padding.xml": b" " * 10_000_000}, member)
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        declared = sum(info.file_size for info in archive.infolist())
    assert len(data) < 100_000
    limits = dataclasses.replace(LIMITS, max_unpacked_bytes=5_000_000)
    with pytest.raises(UnreadableDocument) as refused:
        parse_document(data, fmt, "x", limits)
    assert str(refused.value) == (
        f"unpacks to {declared:,} bytes, over the limit of 5,000,000 (ingest.max_unpacked_bytes)"
    )


@pytest.mark.parametrize(
    ("fmt", "refusal"),
    [
        (DocumentFormat.WORD, "can't parse as docx: XMLSyntaxError: "),  # libxml2's limit
        (DocumentFormat.SLIDES, "can't parse as pptx: XMLSyntaxError: "),
        (DocumentFormat.SHEETS, "can't parse as xlsx: EntitiesForbidden: "),  # defusedxml
    ],
)
def test_an_office_file_declaring_a_billion_laughs_is_refused_in_bounded_time(
    fmt: DocumentFormat, refusal: str
) -> None:
    """Entities in the XML's DTD, 3 GB once expanded: the XML parser under each reader
    refuses them, and the file is skipped with its reason (for a workbook, the parser's own
    reason, not openpyxl's paragraph about invalid XML)."""
    laughs = ['<!ENTITY l0 "ha">'] + [
        f'<!ENTITY l{n} "{f"&l{n - 1};" * 10}">' for n in range(1, 10)
    ]
    doctype = f"<!DOCTYPE root [{''.join(laughs)}]>".encode()

    def declared(xml: bytes) -> bytes:
        declaration = xml.startswith(b"<?xml")
        head, mark, body = xml.partition(b"?>") if declaration else (b"", b"", xml)
        return head + mark + doctype + body.replace(b"LAUGH", b"&l9;", 1)

    make, member = _WITH_ONE_TEXT[fmt]
    seconds, doc = timed_parse(rewritten(make(), declared, member=member), fmt)
    assert seconds < LINEAR_PARSE_CPU_S
    assert str(doc).startswith(refusal)
    assert "\n" not in str(doc)  # one line


_WITH_SMARTART: dict[DocumentFormat, tuple[Callable[[], bytes], str]] = {
    DocumentFormat.WORD: (
        lambda: make_docx([("Normal", "Intro."), (SMARTART, "LAUGH")]),
        "word/document.xml",
    ),
    DocumentFormat.SLIDES: (
        lambda: make_pptx([SlideSpec(title="T", texts=["Intro."], smartart=["LAUGH"])]),
        "ppt/slides/slide1.xml",
    ),
}


# A graphic of each kind whose part is read by ooxml.Graphics: the file, and where its part is.
# (A deck's chart part is parsed by python-pptx as it opens the deck: not ours to refuse.)
_GRAPHIC_PARTS: dict[str, tuple[DocumentFormat, Callable[[], bytes], str]] = {
    "docx SmartArt": (DocumentFormat.WORD, _WITH_SMARTART[DocumentFormat.WORD][0], "/diagrams/"),
    "pptx SmartArt": (
        DocumentFormat.SLIDES,
        _WITH_SMARTART[DocumentFormat.SLIDES][0],
        "/diagrams/",
    ),
    "docx chart": (
        DocumentFormat.WORD,
        lambda: make_docx([("Normal", "Intro."), (CHART, "LAUGH")]),
        "/charts/",
    ),
    "xlsx chart": (DocumentFormat.SHEETS, lambda: _sheet_charted("LAUGH"), "/charts/"),
    "xlsx drawing": (DocumentFormat.SHEETS, lambda: _sheet_charted("LAUGH"), "/drawings/"),
}


def _sheet_charted(title: str) -> bytes:
    return make_xlsx({"S": [["Intro."]]}, drawings={"S": SheetDrawing(chart=title)})


@pytest.mark.parametrize("graphic", list(_GRAPHIC_PARTS))
@pytest.mark.parametrize(
    "data",
    [
        b"not XML at all",
        b'<!DOCTYPE d [<!ENTITY l0 "ha">'
        + b"".join(f'<!ENTITY l{n} "{f"&l{n - 1};" * 10}">'.encode() for n in range(1, 10))
        + b"]><d>&l9;</d>",
    ],
    ids=["not XML", "billion laughs"],
)
def test_a_graphic_whose_part_is_not_xml_loses_its_text_not_the_files(
    graphic: str, data: bytes
) -> None:
    """A chart's and SmartArt's text are read from parts of their own (python-docx leaves
    them alone, as python-pptx does SmartArt), by a parser of ours, as strict as theirs:
    refused in bounded time, and only that graphic's text is lost."""
    fmt, make, where = _GRAPHIC_PARTS[graphic]
    package = make()
    with zipfile.ZipFile(io.BytesIO(package)) as archive:
        (member,) = [n for n in archive.namelist() if where in n and n.endswith(".xml")]
    seconds, doc = timed_parse(rewritten(package, lambda _: data, member=member), fmt)
    assert seconds < LINEAR_PARSE_CPU_S
    assert isinstance(doc, ParsedDocument), doc
    assert [s.text for s in doc.sections] == ["Intro."]


@pytest.mark.parametrize("fmt", list(_WITH_SMARTART))
def test_a_smartart_graphic_named_a_hundred_thousand_times_is_read_once(
    fmt: DocumentFormat,
) -> None:
    make, member = _WITH_SMARTART[fmt]

    def named_again(xml: bytes) -> bytes:
        reference = re.search(rb"<dgm:relIds [^>]*/>", xml)
        assert reference is not None
        return xml.replace(reference[0], reference[0] * 100_000, 1)

    seconds, doc = timed_parse(rewritten(make(), named_again, member=member), fmt)
    assert seconds < LINEAR_PARSE_CPU_S
    assert isinstance(doc, ParsedDocument), doc
    assert [s.text for s in doc.sections] == ["Intro.\nLAUGH"]


@pytest.mark.parametrize(
    "row",
    ["\u00b2", "x", "", "9" * 400, "9" * 5_000],
    ids=["²", "x", "empty", "400 digits", "5,000 digits"],
)
def test_a_drawing_anchored_at_no_row_number_is_read_after_the_others(row: str) -> None:
    book = make_xlsx(
        {"S": [["Rows."]]}, drawings={"S": SheetDrawing(chart="Chart", text_boxes=[(5, "Box")])}
    )
    assert parse_document(book, DocumentFormat.SHEETS, "x", LIMITS).sections[0].text == (
        "Chart\nBox\nRows."
    )
    unplaced = rewritten(
        book,
        lambda xml: xml.replace(b"<row>0</row>", f"<row>{row}</row>".encode(), 1),
        member="xl/drawings/drawing1.xml",
    )
    assert unplaced != book
    (sheet,) = parse_document(unplaced, DocumentFormat.SHEETS, "x", LIMITS).sections
    assert sheet.text == "Box\nChart\nRows."


def _damaged(package: bytes, member: str, how: str) -> bytes:
    """`package` stored (its XML legible in place) with `member` damaged: its checksum, or
    its central directory entry's flags (encrypted) or compression method (one no reader has),
    or nothing ("none")."""
    with zipfile.ZipFile(io.BytesIO(package)) as archive:
        members = {info.filename: archive.read(info) for info in archive.infolist()}
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as stored:
        for name, data in members.items():
            stored.writestr(name, data)
    data = bytearray(out.getvalue())
    if how == "none":
        return bytes(data)
    if how == "checksum":
        start = data.index(members[member][:40])
        data[start + 1] ^= 0x20  # a letter of its first tag, case changed
        return bytes(data)
    entry = data.rindex(member.encode()) - 46  # its name in the central directory, last
    assert data[entry : entry + 4] == b"PK\x01\x02"
    if how == "encrypted":
        data[entry + 8] |= 0x01
    else:  # an unknown compression method
        data[entry + 10 : entry + 12] = (99).to_bytes(2, "little")
    return bytes(data)


@pytest.mark.parametrize("how", ["checksum", "encrypted", "unknown method"])
@pytest.mark.parametrize("member", ["xl/drawings/drawing1.xml", "xl/charts/chart1.xml"])
def test_a_sheets_damaged_drawing_loses_its_own_text_not_the_files(member: str, how: str) -> None:
    """zipfile refuses each damage with an error of its own (BadZipFile, RuntimeError,
    NotImplementedError): the rows, read by openpyxl, are still read."""
    package = _sheet_charted("Deploys")
    intact = _damaged(package, member, "none")
    assert parse_document(intact, DocumentFormat.SHEETS, "x", LIMITS).sections[0].text == (
        "Deploys\nIntro."
    )
    damaged = _damaged(package, member, how)
    refused = (zipfile.BadZipFile, RuntimeError, NotImplementedError)
    with zipfile.ZipFile(io.BytesIO(damaged)) as archive, pytest.raises(refused):
        archive.read(member)
    (sheet,) = parse_document(damaged, DocumentFormat.SHEETS, "x", LIMITS).sections
    assert sheet.text == "Intro."


def test_a_sheets_large_chart_drawn_twenty_thousand_times_is_read_once() -> None:
    """Each drawing is looked at, its deadline checked, and the chart they all name (21 MB,
    nearly all of it comments after its root) unpacked and read once."""

    def drawn_again(xml: bytes) -> bytes:
        anchor = re.search(rb"<oneCellAnchor>.*</oneCellAnchor>", xml)
        assert anchor is not None
        return xml.replace(anchor[0], anchor[0] * 20_000, 1)  # 12 MB of XML

    book = rewritten(_sheet_charted("LAUGH"), drawn_again, member="xl/drawings/drawing1.xml")
    book = rewritten(book, lambda xml: xml + b"<!---->" * 3_000_000, member="xl/charts/chart1.xml")
    seconds, doc = timed_parse(book, DocumentFormat.SHEETS)
    assert seconds < LINEAR_PARSE_CPU_S
    assert isinstance(doc, ParsedDocument), doc
    assert [s.text for s in doc.sections] == ["LAUGH\nIntro."]


def test_a_workbook_named_a_quarter_of_a_million_times_is_listed_once() -> None:
    def named_again(xml: bytes) -> bytes:
        named = re.search(rb'<Relationship [^>]*officeDocument"[^>]*/>', xml)
        assert named is not None
        copies = (named[0].replace(b'Id="rId1"', f'Id="x{n}"'.encode()) for n in range(250_000))
        return xml.replace(named[0], named[0] + b"".join(copies), 1)

    book = rewritten(make_xlsx({"S": [["Intro."]]}), named_again, member="_rels/.rels")
    seconds, doc = timed_parse(book, DocumentFormat.SHEETS)
    assert seconds < LINEAR_PARSE_CPU_S
    assert isinstance(doc, ParsedDocument), doc
    assert [s.text for s in doc.sections] == ["Intro."]


def test_a_charts_title_taken_from_a_cell_is_read_as_the_cell_held_it() -> None:
    deck = make_pptx([SlideSpec(title="T", texts=["Intro."], chart="Typed title")])
    with zipfile.ZipFile(io.BytesIO(deck)) as archive:
        (member,) = [n for n in archive.namelist() if n.startswith("ppt/charts/chart")]
    cell = (
        b'<c:tx><c:strRef><c:f>Sheet1!$B$1</c:f><c:strCache><c:ptCount val="1"/>'
        b'<c:pt idx="0"><c:v>Tickets per quarter</c:v></c:pt></c:strCache></c:strRef></c:tx>'
    )
    from_cell = rewritten(
        deck, lambda xml: re.sub(rb"<c:tx>.*?</c:tx>", cell, xml, count=1), member=member
    )
    (slide,) = parse_document(from_cell, DocumentFormat.SLIDES, "x.pptx", LIMITS).sections
    assert slide.text == "Intro.\nTickets per quarter"


def test_a_long_word_file_is_read_in_linear_time() -> None:
    """python-docx looked each paragraph's style up among all the document's: 2 ms a
    paragraph, 20 s for 10,000 (a long handbook), the limit of 30 s for 15,000."""
    seconds, doc = timed_parse(long_docx(20_000, heading_every=50), DocumentFormat.WORD)
    assert seconds < LINEAR_PARSE_CPU_S  # 30 s before (the limit), 1 s after
    assert isinstance(doc, ParsedDocument)
    assert len(doc.sections) == 400
    assert doc.sections[-1].heading == "Part 19950"
    assert doc.sections[-1].text.endswith("Line 19999.\nEnd.")


def test_a_long_word_file_hiding_text_in_every_paragraph_is_read_in_linear_time() -> None:
    """Each paragraph then read run by run: 20,000 of them, each with a hidden run."""
    hiding = rewritten(
        long_docx(20_000, heading_every=50),
        lambda xml: xml.replace(
            b"</w:t></w:r></w:p>",
            b'</w:t></w:r><w:r><w:rPr><w:vanish/></w:rPr><w:t xml:space="preserve"> hidden</w:t>'
            b"</w:r></w:p>",
        ),
    )
    seconds, doc = timed_parse(hiding, DocumentFormat.WORD)
    assert seconds < LINEAR_PARSE_CPU_S
    assert isinstance(doc, ParsedDocument)
    assert len(doc.sections) == 400
    assert "hidden" not in doc.sections[-1].text
    assert doc.sections[-1].text.endswith("Line 19999.\nEnd.")


def test_a_sheet_declaring_the_largest_size_is_read_by_its_rows() -> None:
    """A sheet's XML may declare 16,384 columns around two: openpyxl padded every row to the
    declared width, 2 ms a row here, so 15,000 rows of a few hundred KB reached the parse
    deadline (30 s)."""
    rows: list[list[object]] = [["Name", "Role"], *([f"P{n}", "Lead"] for n in range(15_000))]
    book = make_xlsx({"S": rows})
    declared = rewritten(
        book,
        lambda xml: re.sub(rb'<dimension ref="[^"]*"/>', b'<dimension ref="A1:XFD15001"/>', xml),
        member="xl/worksheets/sheet1.xml",
    )
    assert declared != book
    seconds, doc = timed_parse(declared, DocumentFormat.SHEETS)
    assert seconds < LINEAR_PARSE_CPU_S  # the deadline before, 1 s after
    assert isinstance(doc, ParsedDocument)
    assert doc.sections[0].text.endswith("Name: P14999 | Role: Lead")


_FIFTY = [f"Line {n}." for n in range(50)]
_LONG: dict[str, tuple[DocumentFormat, Callable[[], bytes]]] = {
    "docx paragraphs": (DocumentFormat.WORD, lambda: make_docx([("Normal", t) for t in _FIFTY])),
    "docx table": (DocumentFormat.WORD, lambda: make_docx([], rows=[[t] for t in _FIFTY])),
    "pptx shapes": (DocumentFormat.SLIDES, lambda: make_pptx([SlideSpec(texts=_FIFTY)])),
    "pptx table": (
        DocumentFormat.SLIDES,
        lambda: make_pptx([SlideSpec(texts=["x"], rows=[[t] for t in _FIFTY])]),
    ),
    "xlsx rows": (DocumentFormat.SHEETS, lambda: make_xlsx({"S": [[t] for t in _FIFTY]})),
    "xlsx notes": (DocumentFormat.SHEETS, lambda: _fifty_notes_on_one_row()),
    "xlsx drawings": (
        DocumentFormat.SHEETS,
        lambda: make_xlsx(
            {"S": [["x"]]}, drawings={"S": SheetDrawing(text_boxes=list(enumerate(_FIFTY)))}
        ),
    ),
}


def _fifty_notes_on_one_row() -> bytes:
    """A sheet of one row whose notes part holds fifty notes on cells of no row."""
    book = make_xlsx({"S": [["x"]]}, notes={"S": {"A1": "One."}})
    notes = "".join(
        f'<comment ref="B{n + 2}"><text><t>{t}</t></text></comment>' for n, t in enumerate(_FIFTY)
    )
    return rewritten(
        book,
        lambda xml: re.sub(
            rb"<commentList>.*</commentList>", f"<commentList>{notes}</commentList>".encode(), xml
        ),
        member="xl/comments/comment1.xml",
    )


@pytest.mark.parametrize(("fmt", "make"), _LONG.values(), ids=_LONG.keys())
def test_a_slow_office_file_is_stopped_between_its_pieces(
    fmt: DocumentFormat, make: Callable[[], bytes]
) -> None:
    """Paragraphs, shapes, table rows and sheet rows: a file that is all one of them (a deck
    with one huge table) is checked piece by piece."""
    data = make()
    looks = itertools.count()  # each look at the clock is 10 ms later: the 7th is past 50 ms
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("core.ingest.sections.time.monotonic", lambda: 0.01 * next(looks))
        _, doc = timed_parse(data, fmt, timeout_s=0.05)
    assert str(doc) == "parsing took longer than 0.05 s (ingest.parse_timeout_s)"
    assert next(looks) < 10  # stopped as soon as it was late, not after the 50 pieces
