"""One word-boundary clip for every caller (snippets, quotes, web titles, derived keywords)."""

from __future__ import annotations

import pytest

from core.domain.text import (
    clip,
    finished_sentences,
    outside_code,
    printable,
    split_code,
    unmarked,
)


@pytest.mark.parametrize(
    ("text", "limit", "expected"),
    [
        ("short enough", 20, "short enough"),
        ("exactly ten", 11, "exactly ten"),
        ("one two three four", 12, "one two…"),
        ("  spread\n over\tlines  ", 30, "spread over lines"),
        ("unbreakable" * 3, 10, "unbreakab…"),
    ],
)
def test_clip_cuts_at_a_word_boundary_within_the_limit(text: str, limit: int, expected: str):
    clipped = clip(text, limit)
    assert clipped == expected
    assert len(clipped) <= limit


def test_clip_without_an_ellipsis_keeps_the_whole_limit_for_words():
    # Derived keywords are cut this way: no ellipsis, the last whole word kept.
    assert clip("claude prompt caching explained", 20, ellipsis="") == "claude prompt"
    assert clip("claude prompt caching", 21, ellipsis="") == "claude prompt caching"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("clear \x1b[2Jscreen", "clear [2Jscreen"),
        (
            "link \x1b]8;;https://evil.example\x07here\x1b]8;;\x07",
            "link ]8;;https://evil.examplehere]8;;",
        ),
        ("nul\x00 bel\x07 bs\x08 cr\r vt\x0b del\x7f c1\x9b", "nul bel bs cr vt del c1"),
        (
            "bidi \u202eevil\u202c zero\u200bwidth \u2066isolate\u2069",
            "bidi evil zerowidth isolate",
        ),
        ("lone \ud800surrogate", "lone surrogate"),
        ("lines\nand\ttabs stay", "lines\nand\ttabs stay"),
        # The joiners words are spelt with stay: Persian's non-joiner, an emoji family's
        # joiners, a soft hyphen.
        (
            "می\u200cخواهم 👨\u200d👩\u200d👧 hy\u00adphen",
            "می\u200cخواهم 👨\u200d👩\u200d👧 hy\u00adphen",
        ),
        (
            "[/bold] [link=x]markup is text[/link] ünïcödé 日本 🙂",
            "[/bold] [link=x]markup is text[/link] ünïcödé 日本 🙂",
        ),
    ],
)
def test_printable_keeps_what_a_terminal_shows_and_drops_what_it_acts_on(
    text: str, expected: str
) -> None:
    assert printable(text) == expected


def _mark(prose: str) -> str:
    return prose.replace("[1]", "<L>")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("see [1] and `argv[1]`", "see <L> and `argv[1]`"),
        ("``a`b[1]`` [1]", "``a`b[1]`` <L>"),  # a span closes on a run of its own length
        ("an unclosed ` then [1]", "an unclosed ` then <L>"),
        ("`spans\nlines[1]` [1]", "`spans\nlines[1]` <L>"),
        ("`no span\n\nacross paragraphs [1]`", "`no span\n\nacross paragraphs <L>`"),
        ("[1]\n```py\nx = a[1]\n```\n[1]", "<L>\n```py\nx = a[1]\n```\n<L>"),
        ("[1]\n```\nunclosed [1]", "<L>\n```\nunclosed <L>"),  # shown as text by both
        ("[1]\n```\nnpm ci``` [1]", "<L>\n```\nnpm ci``` <L>"),  # closed where it stands
    ],
)
def test_rewrites_reach_prose_and_never_code(text: str, expected: str) -> None:
    assert outside_code(text, _mark) == expected


def test_finding_code_in_text_full_of_backticks_takes_linear_time() -> None:
    """Runs that never close (each length once) must not each re-read the rest of the text."""
    import time

    text = " ".join("`" * n for n in range(2, 400)) + " `x" * 20_000
    started = time.process_time()
    outside_code(text, _mark)
    assert time.process_time() - started < 1.0


@pytest.mark.parametrize(
    ("text", "pieces"),
    [
        ("a `b[1]` c", [("a ", False), ("`b[1]`", True), (" c", False)]),
        ("a ``x ` y`` b", [("a ", False), ("``x ` y``", True), (" b", False)]),
        ("a ` b [1]", [("a ` b [1]", False)]),  # a run nothing closes is text
        ("a `b\n\nc` d", [("a `b\n\nc` d", False)]),  # a span ends with its paragraph
        (
            "x\n```py\ny[0]\n```\nz",
            [("x\n", False), ("```py\ny[0]\n```", True), ("\nz", False)],
        ),
        ("x\n~~~\ny[0]\n~~~", [("x\n~~~\ny[0]\n~~~", False)]),  # no platform's code
    ],
)
def test_split_code_finds_fenced_blocks_and_inline_spans(
    text: str, pieces: list[tuple[str, bool]]
) -> None:
    assert split_code(text) == pieces
    assert "".join(piece for piece, _ in split_code(text)) == text


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("see policy [2].", "see policy ［2］."),
        ("Read it with `sys.argv[1]` and see [2].", "Read it with `sys.argv[1]` and see ［2］."),
        ("```py x = argv[1] ``` [3]", "```py x = argv[1] ``` ［3］"),  # a fence clipped to a line
    ],
)
def test_a_documents_bracketed_numbers_are_unmarked_outside_its_code(text, expected) -> None:
    assert unmarked(text) == expected


@pytest.mark.parametrize(
    ("cut", "kept"),
    [
        (
            "Unchanged files are skipped. Changed ones are re-read, e.g. when",
            "Unchanged files are skipped.",
        ),
        ("See No. 5 of the list. Then the", "See No. 5 of the list."),
        ("No. It is not. And", "No. It is not."),
        ("First line\nsecond half of a cla", "First line"),
        ("nothing finished here", ""),
    ],
)
def test_a_reply_cut_off_keeps_its_finished_sentences(cut: str, kept: str) -> None:
    """An abbreviation's stop ends no sentence: cut there, half a claim was kept."""
    assert finished_sentences(cut) == kept
