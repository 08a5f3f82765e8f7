"""A reply that loops is cut where the loop began."""

from __future__ import annotations

from core.answer.repetition import RepetitionGuard
from core.config import RepetitionSettings


def fed(text: str, step: int = 7) -> RepetitionGuard:
    guard = RepetitionGuard(RepetitionSettings())
    for end in range(step, len(text) + step, step):
        if guard.feed(text[:end]):
            break
    return guard


def test_a_line_seen_three_times_cuts_before_the_third() -> None:
    block = "Accuracy: 89.01%\nAverage Cost per Request Routing: $0.0004\n"
    guard = fed("Results:\n" + block * 10)
    assert guard.cut is not None
    assert guard.cut == len("Results:\n" + block * 2)
    assert guard.reason == "it repeated a line 3 times"


def test_a_sentence_repeated_back_to_back_keeps_one_copy() -> None:
    sentence = "If you update your prompt, re-run the eval suite against it. "
    text = "Steps: " + sentence * 5
    guard = fed(text, step=3)
    assert guard.cut is not None
    assert text[: guard.cut].count("re-run the eval") == 1


def test_an_echo_of_the_prompt_markup_stops_the_reply() -> None:
    guard = fed('The answer is 4.\n</source>\n<source id="4" title="x">')
    assert guard.cut == len("The answer is 4.\n")


def test_ordinary_answers_are_left_alone() -> None:
    text = (
        "1. Run `bot ingest docs/`.\n2. Run `bot ingest docs/ --prune`.\n"
        "| a | b |\n| --- | --- |\n| 1 | 2 |\n| 3 | 4 |\n```\n```\n```\n" + "ok " * 5
    )
    assert fed(text).cut is None


def test_dividers_and_rulers_are_layout_not_a_loop() -> None:
    """A ruler in a code block and a divider between sections, said more than three times:
    no word in them is said again, so nothing is cut."""
    ruler = "# " + "=" * 77 + "\n"
    text = (
        "```python\n" + ruler + "x = 1\n" + ruler + "```\n"
        "Setup:\n" + "-" * 40 + "\nInstall it.\n" + "-" * 40 + "\nRun it.\n" + "-" * 40 + "\n"
        "| step | what |\n|------|------|\n|------|------|\n|------|------|\nDone."
    )
    assert fed(text).cut is None
