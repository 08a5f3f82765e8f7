"""reStructuredText to sections, through docutils' own HTML5 writer and the HTML reader.

docutils is the reference implementation, so headings get the ids Sphinx, GitHub and PyPI give
them (`<section id=...>`), which the HTML reader turns into each section's anchor. A document is
hostile input: `.. include::`, `.. raw::` and `.. csv-table:: :file:` are off, no docutils.conf
is read from wherever the bot runs, no line longer than docutils' own DoS bound is parsed, and
its system messages stay out of the text (and out of stderr)."""

from __future__ import annotations

import io
from typing import Any

from core.ingest.html import parse_html
from core.ingest.sections import ParsedDocument, ParseLimits

_SAFE_SETTINGS: dict[str, Any] = {
    "file_insertion_enabled": False,  # .. include::, :file: options
    "raw_enabled": False,  # .. raw:: html
    "_disable_config": True,  # no docutils.conf from the working directory or $HOME
    "report_level": 5,  # no system messages in the output
    "halt_level": 5,  # a markup error is text, not an exception
    "embed_stylesheet": False,
    "stylesheet_path": "",
    "input_encoding": "unicode",
    "output_encoding": "unicode",
}


def parse_rst(text: str, fallback_title: str, limits: ParseLimits) -> ParsedDocument:
    from docutils.core import publish_parts

    settings = {**_SAFE_SETTINGS, "warning_stream": io.StringIO()}
    parts = publish_parts(text, writer="html5", settings_overrides=settings)
    html = parts["whole"]
    if isinstance(html, bytes):  # not with output_encoding "unicode"; typed as either
        html = html.decode("utf-8", "replace")
    return parse_html(html, fallback_title, limits)
