"""Hostile text on its way to Slack, Discord and a terminal: links and pings.

The property every case asserts, on the final rendered output (Slack blocks and fallback text,
Slack plain messages, every Discord embed field, the console's raw terminal output with its OSC 8
hyperlinks): every URL-like token is one of the answer's sources, and no ping survives. The URL
finder here is written independently of `core.answer.citations`, so the test does not just
replay the code's own idea of a URL. Each payload goes through the three ways text reaches a
renderer: a model's answer (`check_answer`), an extractive answer built from a hostile document
(`extractive_answer`), and an `Answer` handed straight to the renderer (whatever built it).
"""

from __future__ import annotations

import html
import io
import itertools
import json
import re

import pytest
from rich.console import Console

from adapters.console.render import render_answer
from adapters.discord.render import answer_embeds
from adapters.slack.render import answer_messages, plain_messages
from core.answer.citations import NumberedSource, SourceRegistry, check_answer
from core.answer.extractive import extractive_answer
from core.answer.tools import CitedSource
from core.domain.conversation import Answer, AnswerMode, AnswerStatus, Citation
from core.domain.documents import Chunk, SearchHit

SOURCE = "https://docs.example.com/guide#setup"
ALLOWED = {SOURCE, "https://docs.example.com/guide"}

# Every form a link to somewhere else can take in Markdown, Slack mrkdwn, HTML or plain text,
# and the tricks that hide one from a naive check.
HOSTILE_LINKS = [
    "[https://evil.example/login](https://docs.example.com/not-a-source)",  # the case
    "[docs](https://evil.example/login)",
    "[https://docs.example.com/guide](https://evil.example/login)",
    '[docs](https://docs.example.com/guide "https://evil.example/login")',
    "[docs](<https://evil.example/login>)",
    "[x](HTTPS://EVIL.EXAMPLE/login)",
    "![logo](https://evil.example/pixel.png)",
    "[x][1]\n\n[1]: https://evil.example/login",
    "[x][evil]\n\n[evil]: <evil.example/login> 'title'",
    '<a href="https://evil.example/login">docs</a>',
    "<a href='evil.example/login'>https://evil.example/x</a>",
    "https://evil.example/login",
    "(https://evil.example/login).",
    "HTTPS://EVIL.EXAMPLE/LOGIN",
    "<https://evil.example/login>",
    "<https://evil.example/login|the docs>",
    "<https://docs.example.com/guide|https://evil.example/login>",
    "&lt;https://evil.example/login|docs&gt;",
    "evil.example/login",
    "evil.example:8443",
    "www.evil.example",
    "WWW.EVIL.EXAMPLE/path",
    "go to evil.com now",
    "//evil.example/login",
    "[p](//evil.example/login)",
    "javascript:alert(document.cookie)",
    "[click](javascript:alert(1))",
    "[click](JAVASCRIPT:alert(1))",
    "data:text/html;base64,PHNjcmlwdD4=",
    "[x](data:text/html,<script>alert(1)</script>)",
    "[mail](mailto:phish@evil.example)",
    "<mailto:phish@evil.example|support>",
    "https://docs.example.com@evil.example/",
    "https://docs.example.com:pass@evil.example/login",
    "docs.example.com@evil.example/login",
    "https://evil\u200b.example/login",
    "ht\u200btps://evil.example/login",
    "www\u200b.evil.example",
    "https://evil.example\u202e/nigol",
    "https://d\u043ecs.example.com/guide",  # Cyrillic o: a lookalike of the source's host
    "https://xn--dcs-5cd.example.com/guide",
    "d\u043ecs.example.com/guide",  # the same lookalike, scheme-less
    "xn--80ak6aa92e.com/login",
    "evil\uff0eexample/login",  # full-width dot
    "https\uff1a//evil.example/login",
    "`<https://evil.example/login|docs>`",
    "`[docs](https://evil.example/login)`",
    "```\ncurl https://evil.example/login\n```",
    "# Read https://evil.example/login",
    "**[docs](https://evil.example/login)**",
    "[[docs](https://evil.example/login)](https://docs.example.com/guide)",
    "[docs](https://docs.example.com/guide)https://evil.example/login",
    "https://docs.example.com/guide.evil.example/login",
    "https://docs.example.com/guide?next=https://evil.example/login",
    "mailto:phish@evil.example",
    "[support](phish@evil.com)",
    "evil.example./login",
    "EVIL.EXAMPLE.:8443",
    "[x](evil.example./login)",
    # A user part of characters a URL is usually cut at: clients link the whole run, to the host
    # after the `@`, which alone reads as an e-mail address.
    "https://'@evil.example",
    'https://"@evil.example',
    "https://)@evil.example",
    "https://]@evil.example",
    "https://|@evil.example",
    "https://`@evil.example",
]
PINGS = [
    "<!channel>",
    "<!here>",
    "<!everyone>",
    "<!here|here>",
    "@everyone",
    "@here",
    "@channel",
    "@Everyone",
    "<@U123>",
    "<@U123|bob>",
    "<@&role>",
    "<@&123456>",
    "<@!123456>",
    "<@123456>",
    "<#C1>",
    "<#123456>",
    "<!subteam^S1|eng>",
    "<<!here>!channel>",
    "@every\u200bone",
    "<!chan\u200bnel>",
    "</ask:123456>",
    "<!date^1392734382^{date}|Feb 18>",
]

# --- an independent finder of what a client could open -------------------------------------

_DOTS = "[.\uff0e\u3002\uff61]"
_SCHEMED = re.compile(
    # With a user part, a client links up to a space or `<`, whatever stands before the `@`.
    r"[a-z][a-z0-9+.-]*\s*[:\uff1a]\s*//[^\s<>/?#@]*@[^\s<>|)\]\"'`*]*"
    r"|[a-z][a-z0-9+.-]*\s*[:\uff1a]\s*//[^\s<>|)\]\"'`*]*"
    r"|(?:javascript|vbscript|data|mailto|file|tel)\s*:[^\s<>|)\]\"'`*]*",
    re.IGNORECASE,
)
# A scheme-less host starts where a word does (`(?<![\w-])`): a match inside a word implies one
# from its start, and without the anchor a run of thousands of digits is scanned from each of
# them (quadratic: 20 s for the 5,000-digit marker below).
_SCHEMELESS = re.compile(
    rf"www\d*{_DOTS}[^\s<>|)\]\"'`*]+"
    rf"|(?<![\w-])[\w-]+(?:{_DOTS}[\w-]+)*{_DOTS}[^\W\d_]{{2,}}{_DOTS}?(?::\d+)?[/?#:][^\s<>|)\]\"'`*]*"
    rf"|(?<![\w-])[\w-]+(?:{_DOTS}[\w-]+)*{_DOTS}(?:com|net|org|io)\b",
    re.IGNORECASE,
)
_OSC8 = re.compile(r"\x1b]8;[^;\x1b]*;([^\x1b\x07]*)(?:\x1b\\|\x07)")
_SGR = re.compile(r"\x1b\[[0-9;]*m")
_PING = re.compile(r"<\s*[@#!]|</\w+:\d|@\s*(?:everyone|here|channel)\b", re.IGNORECASE)


def _invisible_free(text: str) -> str:
    return re.sub(r"[\u200b-\u200f\u202a-\u202e\u2060-\u2064\ufeff]", "", text)


def linked_urls(rendered: str) -> list[str]:
    """Every URL-like token a client could open, scheme-less ones as the client reads them."""
    text = _invisible_free(html.unescape(rendered))
    found = [m.group(1) for m in _OSC8.finditer(text) if m.group(1)]
    text = _SGR.sub("", _OSC8.sub(" ", text))
    for match in _SCHEMED.finditer(text):
        found.append(match.group(0).rstrip(".,;:!?"))
    rest = _SCHEMED.sub(" ", text)
    found += [f"https://{m.group(0).rstrip('.,;:!?')}" for m in _SCHEMELESS.finditer(rest)]
    return found


# A source's link may carry a text fragment for its quote (`core.domain.text_fragments`): it
# opens the same page. Its terms are percent-encoded whole, so nothing in them can end the link,
# start another URL or ping; one with anything else in it is an unknown URL.
_TEXT_DIRECTIVE = re.compile(r":~:text=[A-Za-z0-9%._~]+(?:,[A-Za-z0-9%._~]+)?$")


def assert_safe(rendered: str, where: str) -> None:
    unknown = [
        url for url in linked_urls(rendered) if _TEXT_DIRECTIVE.sub("", url, count=1) not in ALLOWED
    ]
    assert not unknown, f"{where}: unknown URLs {unknown} in {rendered!r}"
    # Not made invisible-free: `@\u200beveryone` is how a mention is defused (as discord.py's
    # own escape_mentions does it), and neither platform reads it as one.
    assert not _PING.search(html.unescape(rendered)), f"{where}: a ping in {rendered!r}"


def test_the_finder_finds_what_it_must() -> None:
    """The finder itself: it sees each hostile form (else the property below proves nothing)."""
    for payload in HOSTILE_LINKS:
        if payload.startswith("[x][1]") or "xn--" in payload:
            continue  # found via their definition line / compared exactly, checked below
        assert any(url not in ALLOWED for url in linked_urls(payload)), payload
    assert linked_urls("see https://docs.example.com/guide.") == ["https://docs.example.com/guide"]
    assert linked_urls("README.md and setup.py") == []


# --- the three ways text reaches a renderer --------------------------------------------------


def _chunk(text: str, title: str = "Guide", heading: str = "Setup", url: str = SOURCE) -> Chunk:
    return Chunk("c1", "d1", "kb", title, heading, url, text, 0)


def _model_answer(payload: str) -> Answer:
    registry = SourceRegistry()
    registry.add([SearchHit(_chunk(f"Passage {payload}", title=f"Guide {payload}"), 1.0)])
    text, citations = check_answer(
        f"Intro {payload} [1].\n\n{payload}", [CitedSource(source=1, quote=payload)], registry
    )
    return Answer(text, AnswerStatus.ANSWERED, AnswerMode.AGENT, citations=citations)


def _extractive(payload: str) -> Answer:
    hit = SearchHit(_chunk(f"Body {payload} end", title=payload, heading=payload), 1.0)
    return extractive_answer(
        [NumberedSource(1, hit)], passages=3, quote_chars=400, reason=f"Down ({payload})."
    )


def _raw(payload: str) -> Answer:
    citation = Citation(1, f"Title {payload}", SOURCE, payload, True)
    return Answer(
        f"{payload} [1]\n\n# {payload}", AnswerStatus.PARTIAL, AnswerMode.AGENT, [citation]
    )


def _strings(value: object) -> str:
    """Every string in a JSON-like payload (blocks, an embed), one per line: what a client reads,
    title, url, description, fields, footer alike."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, list):
        return "\n".join(_strings(item) for item in value)
    return ""


def rendered_everywhere(answer: Answer) -> dict[str, str]:
    """The answer as each platform would send it, one string per place a client reads."""
    out: dict[str, str] = {}
    for n, message in enumerate(
        answer_messages(
            answer, "a1", section_chars=3000, message_chars=12000, max_blocks=50, max_sources=10
        )
    ):
        out[f"slack blocks {n}"] = _strings(message.blocks)
        out[f"slack text {n}"] = message.text
    for n, text in enumerate(plain_messages(answer, 3900)):
        out[f"slack plain {n}"] = text
    for n, embed in enumerate(answer_embeds(answer, description_chars=4096, max_sources=10)):
        out[f"discord embed {n}"] = _strings(embed.to_dict())
    terminal = Console(file=io.StringIO(), force_terminal=True, width=200, color_system="standard")
    terminal.print(render_answer(answer))
    out["console"] = terminal.file.getvalue()  # type: ignore[attr-defined]
    return out


BUILDERS = {"model": _model_answer, "extractive": _extractive, "raw": _raw}


@pytest.mark.parametrize(
    ("builder", "payload"),
    list(itertools.product(BUILDERS, HOSTILE_LINKS + PINGS)),
)
def test_only_sources_are_linked_and_nobody_is_pinged(builder: str, payload: str) -> None:
    answer = BUILDERS[builder](payload)
    for where, rendered in rendered_everywhere(answer).items():
        assert_safe(rendered, f"{builder} / {where}")


@pytest.mark.parametrize("builder", BUILDERS)
def test_a_marker_of_thousands_of_digits_is_text_not_a_crash(builder: str) -> None:
    """Python refuses int() of over 4,300 digits: such a `[999…]` is text everywhere, in the
    checks and in every renderer."""
    digits = "9" * 5000
    text = f"See [{digits}] and [1, {digits}]."
    if builder == "model":  # the quote is the model's own, and bounded
        registry = SourceRegistry()
        registry.add([SearchHit(_chunk("Passage"), 1.0)])
        checked, citations = check_answer(text, [CitedSource(source=1, quote="x")], registry)
        assert checked == text  # no group of markers: text as written
        answer = Answer(checked, AnswerStatus.ANSWERED, AnswerMode.AGENT, citations=citations)
    else:
        answer = BUILDERS[builder](text)
    for where, rendered in rendered_everywhere(answer).items():
        assert_safe(rendered, f"{builder} / {where}")


@pytest.mark.parametrize(("first", "second"), list(itertools.combinations(HOSTILE_LINKS[:24], 2)))
def test_hostile_forms_side_by_side_stay_unlinked(first: str, second: str) -> None:
    """Pairs, glued and spaced: one form's leftovers must not complete another into a link."""
    for joined in (f"{first}{second}", f"{first} {second}", f"{first}\n{second}"):
        for where, rendered in rendered_everywhere(_raw(joined)).items():
            assert_safe(rendered, where)


def test_a_dropped_links_url_label_is_not_left_bare() -> None:
    """The issue's example, exactly: the label is checked, not promoted to a bare URL."""
    from core.answer.citations import check_links

    text = check_links(
        "See [https://evil.example/login](https://docs.example.com/not-a-source)", ALLOWED
    )
    assert text == "See (link removed)"


def test_sources_links_and_labels_survive_intact() -> None:
    """What is allowed stays a link: the checks remove, they don't garble."""
    from core.answer.citations import check_links

    text = (
        "Read [the guide](https://docs.example.com/guide) or https://docs.example.com/guide#setup."
    )
    assert check_links(text, ALLOWED) == text
    answer = Answer(f"{text} [1]", AnswerStatus.ANSWERED, AnswerMode.AGENT,
                    [Citation(1, "Guide", SOURCE, "q", True)])  # fmt: skip
    (message,) = answer_messages(
        answer, "a1", section_chars=3000, message_chars=12000, max_blocks=50, max_sources=10
    )
    blocks = json.dumps(message.blocks)
    assert "<https://docs.example.com/guide|the guide>" in blocks
    assert f"<{SOURCE}|[1]>" in blocks
    (embed,) = answer_embeds(answer, description_chars=4096, max_sources=10)
    assert "[the guide](https://docs.example.com/guide)" in (embed.description or "")
    assert f"[[1]]({SOURCE})" in (embed.description or "")


@pytest.mark.parametrize(
    "text",
    [
        "Edit README.md and setup.py, then run install.sh.",
        "Call funcs[0](x) or see [install](#install).",
        "kubernetes 1.29.3, python 3.12, node.js, e.g. this; i.e. that.",
        "Times like 10:30:45 and std::vector, ratio 16:9.",
        "Mail support@company.example for access.",
    ],
)
def test_ordinary_text_is_left_alone(text: str) -> None:
    from core.answer.citations import check_links

    assert check_links(text, ALLOWED) == text


@pytest.mark.parametrize(
    "url",
    [
        "javascript:alert(1)",
        "data:text/html,hi",
        "https://docs.example.com@evil.example/",
        "https://user:pw@docs.example.com/guide",
        "https://docs.example.com/a b",
        "https://docs.example.com/\u200bguide",
        "https://evil.example/a<!channel>b&x=<@U024BE7LH>",
        "ftp://docs.example.com/guide",
        "/relative/path",
    ],
)
def test_a_source_whose_url_is_no_web_address_is_never_linked(url: str) -> None:
    """A source's own URL (a web result's, an ingested base URL) is linked only when it is
    plain http(s) without userinfo; otherwise the source is listed unlinked."""
    answer = Answer("Fact [1].", AnswerStatus.ANSWERED, AnswerMode.AGENT,
                    [Citation(1, "Guide", url, "q", True)])  # fmt: skip
    host = url.split("@")[-1]
    for where, rendered in rendered_everywhere(answer).items():
        assert url not in html.unescape(rendered), where
        if "@" in url:
            assert host not in rendered, where
    (embed,) = answer_embeds(answer, description_chars=4096, max_sources=10)
    assert "](" not in (embed.description or "") + str(embed.fields[0].value)


# Built to trip the patterns: a prefix that starts a match, then a part repeated so that every
# start (or every backtracking step) re-reads the rest. Before the fix the worst took 15.8 s of
# CPU at 80 KB (`<a href` + `=`*n), 4.7 s (`<a ` + `href=x `*n), and `a．`*n over 60 s; linear
# they take well under 0.2 s each.
HOSTILE_TEXT_SIZE = 80_000
LINEAR_CPU_BOUND_S = 3.0
CRAFTED_TEXT = [
    ("", unit)
    for unit in (
        "<a:",
        "a.",
        "[a](",
        "<a href=x>",
        "www.",
        "1.2.3.",
        "\n[1]: ",
        "//a.",
        "a@",
        "a://'",
    )
] + [
    ("<a href", "="),
    ("<a ", "href=x "),
    ("<a href=", "a"),
    ("<a href=", " "),
    ("", "a\uff0e"),  # a host joined by full-width dots: each part a start
    ("", "\uff0ea"),
    ("", "a\u3002"),
    ("[a](", "a\uff61"),
]


@pytest.mark.parametrize(("prefix", "unit"), CRAFTED_TEXT)
def test_checking_hostile_text_takes_linear_time(prefix: str, unit: str) -> None:
    """No backtracking blow-up on a long answer built to trip the link patterns: CPU time (not
    wall time, which a busy machine stretches), far above the linear cost, far below the
    quadratic one."""
    import time

    from core.answer.citations import check_links

    text = prefix + unit * (HOSTILE_TEXT_SIZE // len(unit))
    started = time.process_time()
    check_links(text, ALLOWED)
    assert time.process_time() - started < LINEAR_CPU_BOUND_S


@pytest.mark.parametrize("unit", ["[", "<", "http:", "[a](", "[[]x", "<<>x", "http:)x"])
def test_holding_back_an_unfinished_tail_takes_linear_time(unit: str) -> None:
    """The streamed preview is cut before a link still being written, on every update: a long
    last line of would-be starts must not be re-read from each (8.5 s of CPU at 20 KB before)."""
    import time

    from core.answer.citations import finished_part

    text = unit * (HOSTILE_TEXT_SIZE // len(unit)) + "]x"
    started = time.process_time()
    finished_part(text)
    assert time.process_time() - started < LINEAR_CPU_BOUND_S


# Sequences a terminal acts on: clear the screen, set the window title, a link of its own (OSC 8),
# NUL, BEL, a bidi override that reorders what is shown.
TERMINAL_ACTS = ("\x1b[2J", "\x1b]0;", "\x1b]8;;https://evil", "\x00", "\x07", "\u202e")


@pytest.mark.parametrize("builder", ["extractive", "raw"])  # a model's quote is refused first
def test_no_escape_sequence_of_the_text_reaches_the_terminal(builder: str) -> None:
    """`bot ask` prints the documents' and the model's text: the terminal shows it, it never
    acts on it (the renderer's own styles and source links are its only sequences)."""
    payload = (
        "\x1b[2Jcleared \x1b]0;title\x07 \x1b]8;;https://evil.example\x07x\x1b]8;;\x07 \x00 "
        "\u202eevil"
    )
    terminal = Console(file=io.StringIO(), force_terminal=True, width=200, color_system="standard")
    terminal.print(render_answer(BUILDERS[builder](payload)))
    printed = terminal.file.getvalue()  # type: ignore[attr-defined]
    assert "cleared" in printed
    for sequence in TERMINAL_ACTS:
        assert sequence not in printed, (sequence, printed)
