from __future__ import annotations

import codecs
import random
import time
import tracemalloc

import pytest

from bench.link_reader import tree_links
from core.errors import UnreadableDocument
from core.ingest.chunker import split_text
from core.ingest.formats import DocumentFormat, parse_document, parse_markdown
from core.ingest.html import parse_html
from core.ingest.sections import ParsedDocument
from core.ingest.site import _EnoughLinks, _LinkReader, _links, fingerprint
from tests.office_maker import SlideSpec, make_pptx, make_xlsx
from tests.parse_timing import LIMITS, LINEAR_PARSE_CPU_S, timed_parse
from tests.pdf_maker import make_pdf
from tests.word_maker import make_docx

MARKDOWN = """---
title: "The Handbook"
layout: page
---
Intro before any heading.

# The Handbook

## Install {#setup}
Run the installer.

## Usage
Use it daily.

### Flags and `--options`
Pass **--fast**.

## Usage
A second usage section.

## <a id="legacy-anchor"></a>Legacy
Old content.

```bash
# not a heading
echo hi
```
"""


def test_markdown_sections_anchors_and_heading_paths() -> None:
    doc = parse_markdown(MARKDOWN, "fallback")
    assert doc.title == "The Handbook"
    by_anchor = {s.anchor: s for s in doc.sections}
    assert doc.sections[0].anchor is None
    assert doc.sections[0].text == "Intro before any heading."
    assert by_anchor["setup"].heading == "Install"
    assert by_anchor["usage"].text == "Use it daily."
    assert by_anchor["flags-and---options"].heading == "Usage › Flags and --options"
    assert by_anchor["usage-1"].text == "A second usage section."
    legacy = by_anchor["legacy-anchor"]
    assert legacy.heading == "Legacy"
    assert "# not a heading" in legacy.text  # a comment inside a code fence is no heading


def test_markdown_title_falls_back_to_h1_then_file_name() -> None:
    assert parse_markdown("# Real Title\n\ntext", "fallback").title == "Real Title"
    assert parse_markdown("## Only h2\n\ntext", "Fallback").title == "Fallback"


HTML = """<!doctype html><html><head><title>API Guide</title>
<script>var secret = "do not index";</script><style>.x{}</style></head>
<body><nav>Home | Docs | Blog</nav>
<main>
<h1>API Guide</h1><p>Welcome.</p>
<h2 id="auth">Authentication</h2><p>Use an <b>API key</b>.</p><ul><li>one</li><li>two</li></ul>
<section id="limits"><h2>Rate limits</h2><p>50 requests per minute.</p></section>
<h3>No id here</h3><p>Inherits the previous anchor.</p>
<!-- a comment -->
</main><footer>Copyright</footer></body></html>"""


def test_html_sections_use_the_pages_own_anchors() -> None:
    doc = parse_html(HTML, "fallback", LIMITS)
    assert doc.title == "API Guide"
    texts = " ".join(s.text for s in doc.sections)
    for dropped in ("do not index", "Home | Docs", "Copyright", "a comment"):
        assert dropped not in texts
    by_heading = {s.heading: s for s in doc.sections}
    assert by_heading["Authentication"].anchor == "auth"
    assert by_heading["Authentication"].text == "Use an API key.\n\none\ntwo"
    assert by_heading["Rate limits"].anchor == "limits"
    assert by_heading["Rate limits › No id here"].anchor == "limits"


def test_an_html_images_alt_text_is_read_in_its_place_unless_it_says_nothing() -> None:
    page = (
        "<h1>Guide</h1><h2>Flow</h2>"
        '<p>Requests go <img src="arrow.svg" alt="through the gateway"> to the API.</p>'
        '<figure><img src="f.png" alt="Request flow: gateway, API, billing worker">'
        "<figcaption>Figure 1</figcaption></figure>"
        '<p><img src="logo.png" alt="logo.png"><img src="x.png" alt="">'
        '<img src="y.png" alt="Decorative swirl" role="presentation">'
        '<img src="z.png" alt="Hidden badge" aria-hidden="true"><img src="w.png">Done.</p>'
    )
    (section,) = parse_html(page, "fallback", LIMITS).sections
    assert section.text == (
        "Requests go through the gateway to the API.\n"
        "Request flow: gateway, API, billing worker\nFigure 1\nDone."
    )


def test_pdf_pages_become_sections() -> None:
    data = make_pdf([["Quarterly report", "Revenue grew."], ["Outlook is stable."]], title="Q3")
    doc = parse_document(data, DocumentFormat.PDF, "fallback", LIMITS)
    assert doc.title == "Q3"
    assert [(s.heading, s.anchor) for s in doc.sections] == [
        ("Page 1", "page=1"),
        ("Page 2", "page=2"),
    ]
    assert "Revenue grew." in doc.sections[0].text


@pytest.mark.parametrize(
    ("data", "fmt", "reason"),
    [
        (b"", DocumentFormat.MARKDOWN, "empty file"),
        (b"   \n\t\n", DocumentFormat.TEXT, "empty file"),
        (b"abc\x00\x01\x02", DocumentFormat.TEXT, "binary content"),
        (b"caf\xe9 au lait", DocumentFormat.MARKDOWN, r"not valid UTF-8 \(byte 3\)"),
        (b"<html><script>x</script></html>", DocumentFormat.HTML, "no text"),
        (b"%PDF-1.4 garbage", DocumentFormat.PDF, "not a readable PDF|no extractable text"),
        (make_pdf([[]]), DocumentFormat.PDF, "no extractable text"),
        (b"PK\x03\x04 not a zip", DocumentFormat.WORD, "can't parse as docx: BadZipFile"),
        (b"PK\x03\x04 not a zip", DocumentFormat.SLIDES, "can't parse as pptx: BadZipFile"),
        (b"PK\x03\x04 not a zip", DocumentFormat.SHEETS, "can't parse as xlsx: BadZipFile"),
        (make_docx([("Heading 1", "Only a heading")]), DocumentFormat.WORD, "no text"),
        (make_pptx([SlideSpec(title="Only a title")]), DocumentFormat.SLIDES, "no text"),
        (make_xlsx({"Empty": [[None, ""]]}), DocumentFormat.SHEETS, "no text"),
    ],
)
def test_bad_content_is_refused_with_a_reason(
    data: bytes, fmt: DocumentFormat, reason: str
) -> None:
    with pytest.raises(UnreadableDocument, match=reason):
        parse_document(data, fmt, "x", LIMITS)


def test_a_parsers_own_error_is_one_line_of_the_skip_reason(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """openpyxl, for one, explains a bad workbook in a paragraph: a skip reason is one line in
    the report, the log and `bot sources list`."""

    def explains(*_: object) -> ParsedDocument:
        raise ValueError("Unable to read workbook.\nThis is most probably because\n  ...")

    monkeypatch.setattr("core.ingest.formats.parse_sheets", explains)
    with pytest.raises(UnreadableDocument) as refused:
        parse_document(b"PK", DocumentFormat.SHEETS, "x", LIMITS)
    assert str(refused.value) == (
        "can't parse as xlsx: ValueError: Unable to read workbook. This is most probably "
        "because ..."
    )


def test_utf8_bom_is_accepted() -> None:
    doc = parse_document(
        "\ufeff# Título\n\nTexto.".encode(),
        DocumentFormat.MARKDOWN,
        "x",
        LIMITS,
    )
    assert doc.title == "Título"


@pytest.mark.parametrize(
    "heading",
    [
        "<a " * 35_000,  # 105 KB: hung on `<a\s+[^>]*...` and `<[^>]+>`
        "[" * 100_000,  # `\[([^\]]*)\]`
        "x" + " " * 100_000 + "y {#id}",  # `\s*\{` tried at every space
    ],
)
def test_heading_parsing_is_linear(heading: str) -> None:
    seconds, doc = timed_parse(f"# {heading}\n\nBody.\n".encode(), DocumentFormat.MARKDOWN)
    assert seconds < LINEAR_PARSE_CPU_S  # the first hung for minutes; linear takes ~1.5 s
    assert isinstance(doc, ParsedDocument)


def test_deeply_nested_html_parses_in_linear_time_and_keeps_its_text() -> None:
    page = "<html><body><h1>Deep</h1>" + "<div>level " * 20_000 + "</body></html>"
    seconds, doc = timed_parse(page.encode(), DocumentFormat.HTML)
    assert seconds < LINEAR_PARSE_CPU_S  # 126 s before
    assert isinstance(doc, ParsedDocument)
    assert doc.sections[0].text.count("level") == 20_000


def test_an_html_element_with_a_million_attributes_is_refused() -> None:
    attributes = " ".join(f"a{i}=1" for i in range(1_000_000))
    seconds, doc = timed_parse(f"<p {attributes}>x</p>".encode(), DocumentFormat.HTML)
    assert seconds < LINEAR_PARSE_CPU_S  # 7 s and 800 MB before
    assert str(doc) == "an element with 1,000,000 attributes (more than 1,000)"


def test_a_nul_byte_anywhere_marks_a_text_file_binary() -> None:
    _, doc = timed_parse(b"a" * 10_000 + b"\x00tail", DocumentFormat.TEXT)
    assert str(doc) == "binary content (NUL byte at offset 10,000) in a text file"


def test_a_slow_pdf_is_stopped_between_pages() -> None:
    data = make_pdf([[f"Page {n} text."] for n in range(50)])
    _, doc = timed_parse(data, DocumentFormat.PDF, timeout_s=1e-6)
    assert str(doc) == "parsing took longer than 1e-06 s (ingest.parse_timeout_s)"


# CPython 3.11's html.parser rescans from every construct it can't close to the end of the page:
# quadratic on these (20,000 `<a` took 1.1 s of CPU, 40,000 took 4.9 s); each is 200,000 units.
UNCLOSED_HTML = {
    "start tags": "<a",
    "start tags with spaces": "<a ",
    "comments": "<!--",
    "comments with a >": "<!-- >",
    "CDATA sections": "<![CDATA[",
    "CDATA sections with a >": "<![CDATA[ >",
    "MS Office sections": "<![if x>",
    "processing instructions": "<?",
    "end tags": "</",
    "named end tags": "</a",
    "declarations": "<!x",
    "doctypes": "<!doctype",
    "unclosed attribute quotes": '<a b="',
    "quotes that pair across tags": '"<a b=" >',
}


@pytest.mark.parametrize("unit", UNCLOSED_HTML.values(), ids=UNCLOSED_HTML.keys())
def test_unclosed_html_markup_parses_in_linear_time(unit: str) -> None:
    page = "<title>T</title><p>Intro.</p>" + unit * 200_000
    seconds, doc = timed_parse(page.encode(), DocumentFormat.HTML)
    assert seconds < LINEAR_PARSE_CPU_S  # hours before; about 1 s now
    assert isinstance(doc, ParsedDocument)
    assert doc.sections[0].text.startswith("T\nIntro.")


# Markdown and AsciiDoc that took minutes (40,000 headings of one title: quadratic in the ids)
# or gigabytes (markdown-it's inline parse).
SLOW_TEXT = {
    "markdown emphasis runs": (DocumentFormat.MARKDOWN, "# Runs\n\n" + "*_" * 2_000_000),
    "asciidoc headings of one title": (
        DocumentFormat.ASCIIDOC,
        "= Doc\n\n" + "== Same\n\nText.\n\n" * 40_000,
    ),
}
PARSE_PEAK_BYTES = 200_000_000  # 2 GB before, for the emphasis runs


@pytest.mark.parametrize(("fmt", "text"), SLOW_TEXT.values(), ids=SLOW_TEXT.keys())
def test_text_formats_parse_in_linear_time_and_bounded_memory(
    fmt: DocumentFormat, text: str
) -> None:
    # Timed and traced in separate parses: tracing every allocation slows a parse ten-fold
    # (40,000 headings: 0.8 s of CPU plain, 7.7 s traced), which a busy CI box took past the bound.
    seconds, doc = timed_parse(text.encode(), fmt)
    tracemalloc.start()
    try:
        timed_parse(text.encode(), fmt)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert seconds < LINEAR_PARSE_CPU_S
    assert peak < PARSE_PEAK_BYTES
    assert isinstance(doc, ParsedDocument)


def test_a_reference_definition_is_not_part_of_the_setext_heading_below_it() -> None:
    """CommonMark's headings, whatever markdown-it rules are left off for speed: a definition
    above a setext heading is not its text, and one above `---` makes no heading at all."""
    text = "[foo]: https://x.org\nInstall\n-------\nRun it.\n\n[a]: https://a.org\n---\nMore.\n"
    doc = parse_markdown(text, "fallback")
    assert [(s.heading, s.anchor) for s in doc.sections if s.heading] == [("Install", "install")]
    assert "More." in doc.sections[-1].text


def test_repeated_asciidoc_titles_get_the_next_free_suffix() -> None:
    text = "= Doc\n\n== Same\n\na\n\n[[_same_3]]\n== Other\n\nb\n\n== Same\n\nc\n\n== Same\n\nd\n"
    doc = parse_document(text.encode(), DocumentFormat.ASCIIDOC, "x", LIMITS)
    assert isinstance(doc, ParsedDocument)
    assert [s.anchor for s in doc.sections] == ["_same", "_same_3", "_same_2", "_same_4"]


@pytest.mark.parametrize("unit", UNCLOSED_HTML.values(), ids=UNCLOSED_HTML.keys())
def test_a_crawls_link_reader_is_linear_on_unclosed_markup_too(unit: str) -> None:
    """The crawl reads each page's links with html.parser as well: in a thread that can't be
    stopped when its time is up, so a quadratic read held the process for hours."""
    page = '<title>T</title><a href="/next">next</a>' + unit * 200_000
    started = time.process_time()
    canonical, links = _links(page.encode(), "https://docs.example.com/a/", limit=100)
    assert time.process_time() - started < LINEAR_PARSE_CPU_S
    assert (canonical, links) == (None, ["https://docs.example.com/next"])


def test_a_crawls_link_reader_decodes_as_the_page_declares() -> None:
    page = '<meta charset="latin-1"><a href="/caf\xe9">x</a>'.encode("latin-1")
    _, links = _links(page, "https://docs.example.com/", limit=10)
    assert links == ["https://docs.example.com/café"]  # read as latin-1, not as broken UTF-8


# Pieces of markup a links page may hold, tricky ones among them: the tag-event reader must
# read from any mix of them what BeautifulSoup's tree gave.
LINK_MARKUP = [
    '<a href="/a">x</a>',
    '<A HREF="b.html">',
    "<a href>",
    "<a>",
    '<a href="x" href="y">',
    '<link rel="canonical" href="/canon">',
    '<link rel="Canonical alternate" href="/c2">',
    '<link rel="alternate canonical" href="/c3">',
    '<link rel=canonical href="mailto:x">',
    '<link rel="canonical">',
    '<link href="/no-rel">',
    '<a href="javascript:alert(1)">',
    '<a href="http://[::1">',
    '<a href="//other.example/p">',
    '<a href="&#104;ttp://e.com/&amp;x">',
    '<script>"<a href=/no>"</script>',
    '<!-- <a href="/c"> -->',
    '<a href="/u?q=1#frag">',
    '<a href="/d"/>',
    "<a href='/sq'>",
    "<a href=/nq>",
    '<div><a href="/un',
    '<a\nhref="/nl">',
    '<![CDATA[<a href="/cd">]]>',
    '<style><a href="/st"></style>',
    '<a href="  /spaces  ">',
    '<a href="/\u00fc/\u00e9">',
    '<a href="http://x.com:99999/">',
    '<textarea><a href="/t">',
    '<title><a href="/ti"></title>',
    '<a href="?page=2">',
    '<a href="ftp://f/">',
    '<a href="HTTPS://UP.example/X">',
]


@pytest.mark.parametrize("seed", range(3))
def test_a_crawls_link_reader_reads_what_beautifulsoups_tree_gave(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(100):
        page = "".join(rng.choice(LINK_MARKUP) for _ in range(rng.randrange(25))).encode()
        for limit in (1, 3, 2000):
            base = "https://docs.example.com/guide/index.html"
            assert _links(page, base, limit) == tree_links(page, base, limit), page


def test_a_crawls_link_reader_stops_once_it_has_what_it_reads() -> None:
    """The links it may follow and the canonical link: the rest of a huge page goes unread."""
    reader = _LinkReader(limit=2)
    with pytest.raises(_EnoughLinks):
        reader.feed('<link rel="canonical" href="/c"><a href="/1"><a href="/2"><a href="/3">')
    assert (reader.canonical, reader.hrefs) == ("/c", ["/1", "/2"])
    # Without a canonical link it reads on, for one may come later (links past the limit
    # are not kept), and stops there.
    reader = _LinkReader(limit=1)
    with pytest.raises(_EnoughLinks):
        reader.feed('<a href="/1"><a href="/2"><link rel="canonical" href="/late"><a href="/3">')
    assert (reader.canonical, reader.hrefs) == ("/late", ["/1"])


def test_unclosed_markup_is_kept_as_text_and_closed_markup_still_parses() -> None:
    page = (
        '<h2 id="x" title="a<b">Real</h2><p>kept <!-- <b>hidden</b> --> text</p>'
        '<![CDATA[ <i>cdata</i> ]]><p>5 <a and <b c="d</p>'
    )
    doc = parse_html(page, "t", LIMITS)
    assert [(s.heading, s.anchor) for s in doc.sections] == [("Real", "x")]
    assert doc.sections[0].text == 'kept text <i>cdata</i>\n5 <a and <b c="d'


RST = """User guide
==========

Welcome to the guide.

Rotating keys
-------------

Rotate with ``keys rotate``; see `the policy <https://example.com/policy>`_.

.. raw:: html

   <script>alert("raw")</script>

.. include:: /etc/passwd

.. csv-table:: Hosts
   :file: /etc/hosts

Rotating keys
-------------

A second section of the same name.
"""


def test_restructuredtext_sections_carry_docutils_ids_and_nothing_is_included() -> None:
    doc = parse_document(RST.encode(), DocumentFormat.RST, "fallback", LIMITS)
    assert doc.title == "User guide"
    sections = [(s.heading, s.anchor) for s in doc.sections]
    assert sections == [
        ("", None),
        ("Rotating keys", "rotating-keys"),
        ("Rotating keys", "rotating-keys-1"),
    ]
    text = " ".join(s.text for s in doc.sections)
    assert "Rotate with keys rotate; see the policy." in text
    assert "alert" not in text  # raw HTML is off
    assert "root:" not in text
    assert "localhost" not in text


ASCIIDOC = """// a comment before the title
= Operations Handbook
Jane Doe <jane@example.com>
:toc:
:idprefix: sec-
:idseparator: -

Read this before your first on-call shift.

[[restarts]]
== Restarting the workers

Drain the queue, then run `systemctl restart worker` on each host (see <<paging,paging>>).

----
== not a heading inside a listing
----

////
a comment block
////

include::/etc/passwd[]
sys::[echo pwned]
image::diagram.png[The queue]

=== Under *load* ===

Scale out with link:https://example.com/scale[the scaling guide] first.

[#paging]
== Paging policy

++++
<script>alert("pass")</script>
++++

Page for customer-facing outages; `max_file_bytes` stays as written.

== Restarting the workers

Twice.
"""


def test_asciidoc_sections_get_asciidoctor_ids_and_no_directive_runs() -> None:
    doc = parse_document(ASCIIDOC.encode(), DocumentFormat.ASCIIDOC, "fallback", LIMITS)
    assert doc.title == "Operations Handbook"
    assert [(s.heading, s.anchor) for s in doc.sections] == [
        ("", None),
        ("Restarting the workers", "restarts"),
        ("Restarting the workers › Under load", "sec-under-load"),
        ("Paging policy", "paging"),
        ("Restarting the workers", "sec-restarting-the-workers"),
    ]
    text = "\n".join(s.text for s in doc.sections)
    assert "systemctl restart worker on each host (see paging)" in text
    assert "== not a heading inside a listing" in text  # a listing's text, kept as text
    assert "Scale out with the scaling guide first." in text
    assert "max_file_bytes stays as written" in text
    for never in ("comment", "root:", "pwned", "alert", "diagram.png", "Jane Doe"):
        assert never not in text


def test_asciidoc_default_ids_follow_asciidoctor() -> None:
    doc = parse_document(
        b"= T\n\n== Getting started: the basics\n\nA.\n\n== Getting started: the basics\n\nB.\n",
        DocumentFormat.ASCIIDOC,
        "fallback",
        LIMITS,
    )
    assert [s.anchor for s in doc.sections] == [
        "_getting_started_the_basics",
        "_getting_started_the_basics_2",
    ]


@pytest.mark.parametrize(
    "line",
    [
        "x " + "https:" * 200_000,
        "== t" + " =" * 200_000,
        "== t" + " " * 200_000 + "[[x]]",
        "<<a" * 200_000,
        "[a]" * 300_000,
        "a:b[c]" * 200_000,
    ],
)
def test_asciidoc_lines_parse_in_linear_time(line: str) -> None:
    seconds, _ = timed_parse(line.encode(), DocumentFormat.ASCIIDOC)
    assert seconds < LINEAR_PARSE_CPU_S  # a regex search per `https:` took minutes


def test_a_pages_fingerprint_is_its_words_whatever_each_copy_carries() -> None:
    """Two URLs of one page are merged only when their fingerprints match: what a server
    writes into each copy (a CSRF token, a script nonce, its spacing) must not keep them
    apart, and a word changed must."""
    page = (
        '<html><head><meta name="csrf" content="{token}"><script nonce="{token}">var t="{token}";'
        "</script></head><body>{space}<h1>Guide</h1><p>Configure the workspace.</p></body></html>"
    )
    first = fingerprint(page.format(token="a1b2", space="").encode())
    assert fingerprint(page.format(token="z9y8", space="\n  ").encode()) == first
    assert fingerprint(page.format(token="a1b2", space="").replace("the", "a").encode()) != first
    assert fingerprint(b"<p>Guide</p><p>Configure</p>") == fingerprint(b"<b>Guide Configure")
    assert fingerprint(b"<p>replaced</p>") != fingerprint(b"<p>kept</p>")
    assert fingerprint(b"before<script>x") != fingerprint(b"before")  # a script never closed


@pytest.mark.parametrize(
    ("first", "second"),
    [
        (b"<p>Under load < 5 use 16 workers.</p>", b"<p>Under load < 5 use 8 workers.</p>"),
        (b'<p>See <img src="a.png" alt="16 workers"></p>', b'<p>See <img src="a.png" alt="8"></p>'),
        (b"<!-- <script --><p>16 workers</p>", b"<!-- <script --><p>8 workers</p>"),
        (b"<p>A</p><!-- never closed <p>16</p>", b"<p>A</p><!-- never closed <p>8</p>"),
    ],
)
def test_pages_the_index_reads_apart_have_fingerprints_apart(first: bytes, second: bytes) -> None:
    """Equal fingerprints merge two pages into one: each of these pairs was hashed the same
    (a bare `<` read as a tag, an image's alt text left out, everything after a `<script` in a
    comment skipped), while the index keeps their texts apart."""
    assert fingerprint(first) != fingerprint(second)


@pytest.mark.parametrize(
    "unit",
    [*UNCLOSED_HTML.values(), "<script", "<script>", "</script", "<"],
    ids=[*UNCLOSED_HTML.keys(), "script", "script-tag", "script-end", "lt"],
)
def test_a_pages_fingerprint_is_linear_on_hostile_markup(unit: str) -> None:
    """It runs on every crawled page, in a thread that can't be stopped when its time is up."""
    started = time.process_time()
    fingerprint(("<p>Hi</p>" + unit * 200_000).encode())
    assert time.process_time() - started < LINEAR_PARSE_CPU_S


def test_an_html_tables_cells_are_kept_apart() -> None:
    """Cells without spacing between them ran together into one word ("max_pagesPages"): no
    search for either word found it, and no quote of the row matched the page."""
    page = (
        "<h1>Crawl</h1><table><tr><th>Setting</th><th>Meaning</th></tr>"
        "<tr><td>max_pages</td><td>Pages in one crawl</td></tr></table>"
    )
    [section] = parse_html(page, "crawl", LIMITS).sections
    assert section.text == "Setting | Meaning\nmax_pages | Pages in one crawl"


def test_an_html_code_block_keeps_its_spacing_as_a_fenced_block() -> None:
    """A `<pre>`'s spacing was collapsed like prose's: Python lost its indentation in every
    quote of it, and the chunker, which keeps a fenced block whole, cut it like prose."""
    page = (
        "<h1>Hooks</h1><p>Write   it like this:</p><div class='highlight'><pre>\n"
        "<span class='k'>def</span> on_sync(report):\n"
        "    <span class='k'>if</span> report.failed:\n"
        "        <span class='k'>raise</span>  SystemExit(1)\n\n"
        "TABLE = [1,   2]\n</pre></div><p>Then   restart.</p>"
    )
    [section] = parse_html(page, "hooks", LIMITS).sections
    assert section.text == (
        "Write it like this:\n```\ndef on_sync(report):\n    if report.failed:\n"
        "        raise  SystemExit(1)\n\nTABLE = [1,   2]\n```\nThen restart."
    )
    block = section.text.split("\n", 1)[1].rsplit("\n", 1)[0]
    assert block in split_text(section.text, size=100, overlap=10)  # whole, though cut around


def test_an_html_code_block_holding_a_fence_line_is_read_as_text() -> None:
    """A line of it that opens a fence would end the block there, and what follows would be
    read as code: it is read as prose instead, as every other block is."""
    page = "<h1>Fences</h1><pre>Write\n```   python\nprint(1)\n```</pre><p>Done.</p>"
    [section] = parse_html(page, "fences", LIMITS).sections
    assert section.text == "Write\n``` python\nprint(1)\n```\nDone."


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-be", "utf-32"])
def test_a_text_file_saved_as_utf16_or_utf32_is_read(encoding: str) -> None:
    """Notepad's "Unicode" (UTF-16 with its byte order mark) was skipped as "binary content
    (NUL byte at offset 3)": the file's owner could not tell why."""
    text = "# Setup\n\nInstall the agent, then restart — the café's VPN too.\n"
    data = text.encode(encoding)
    if encoding == "utf-16-be":
        data = codecs.BOM_UTF16_BE + data
    [section] = parse_document(data, DocumentFormat.MARKDOWN, "x", LIMITS).sections
    assert section.text == "Install the agent, then restart — the café's VPN too."
    with pytest.raises(UnreadableDocument, match=r"binary content \(NUL byte at offset 1\)"):
        parse_document(text.encode("utf-16-le"), DocumentFormat.MARKDOWN, "x", LIMITS)


def test_a_huge_code_block_is_read_and_cut_in_linear_time() -> None:
    """A `<pre>` is read whole, and its pieces fenced one by one: 200,000 lines, one of them
    5 MB long, must cost a parse and a cut in time linear in its size."""
    lines = [f"    step_{i}(option={i})  # * and _ <b>" for i in range(200_000)]
    lines[100_000] = "x" * 5_000_000
    page = "<h1>Big</h1><pre>" + "\n".join(lines).replace("<b>", "&lt;b&gt;") + "</pre><p>End.</p>"
    started = time.process_time()
    [section] = parse_html(page, "big", LIMITS).sections
    chunks = split_text(section.text, 1_000, 150)
    assert time.process_time() - started < LINEAR_PARSE_CPU_S
    assert all(len(chunk) <= 1_000 for chunk in chunks)
    assert all(chunk.startswith("```\n") for chunk in chunks[:-1])
