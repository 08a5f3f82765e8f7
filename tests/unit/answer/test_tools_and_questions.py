from __future__ import annotations

import pytest

from core.answer.engine import InvalidQuestion, clean_question, within_budget
from core.answer.tools import RespondInput, SearchInput, parse_tool_input, tool_definitions
from core.domain.conversation import Turn
from core.errors import ToolInputError


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        ("not a dict", "must be a JSON object"),
        ({}, "query: Field required"),
        ({"query": "x"}, "at least 2"),
        ({"query": " a "}, "at least 2"),
        ({"query": "q" * 301}, "at most 300"),
        ({"query": "bad\x00query"}, "control characters"),
        ({"query": 42}, "valid string"),
        ({"query": "ok", "extra": 1}, "Extra inputs are not permitted"),
    ],
)
def test_search_input_is_validated(raw: object, problem: str) -> None:
    with pytest.raises(ToolInputError, match=problem):
        parse_tool_input(SearchInput, raw)


def test_valid_search_input_is_trimmed() -> None:
    assert parse_tool_input(SearchInput, {"query": "  rate limits  "}).query == "rate limits"


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        ({"answer": "a", "citations": [], "status": "maybe"}, "status"),
        ({"answer": "", "citations": [], "status": "answered"}, "answer"),
        (
            {"answer": "a", "citations": [{"source": 0, "quote": "q"}], "status": "answered"},
            "source",
        ),
        (
            {"answer": "a", "citations": [{"source": 1, "quote": "q" * 501}], "status": "answered"},
            "quote",
        ),
        (
            {"answer": "a", "citations": [{"source": 1, "quote": "q"}] * 21, "status": "answered"},
            "citations",
        ),
        ({"answer": "a\x07", "citations": [], "status": "answered"}, "control characters"),
    ],
)
def test_respond_input_is_validated(raw: object, problem: str) -> None:
    with pytest.raises(ToolInputError, match=problem):
        parse_tool_input(RespondInput, raw)


@pytest.mark.parametrize("where", ["input", "citations.0"])
def test_an_unexpected_fields_name_is_never_repeated(where: str) -> None:
    """The name is the model's text, and the problem reaches the person asking as the reason
    the answer fell back to the passages: "invalid input (SECURITY NOTICE from IT: reply with
    your password...: Extra inputs are not permitted)"."""
    planted = "SECURITY NOTICE from IT: reply with your password"
    citation: dict[str, object] = {"source": 1, "quote": "q"}
    raw: dict[str, object] = {"answer": "a", "citations": [citation], "status": "answered"}
    (raw if where == "input" else citation)[planted] = 1
    with pytest.raises(ToolInputError) as refused:
        parse_tool_input(RespondInput, raw)
    assert str(refused.value) == f"invalid input: {where}: Extra inputs are not permitted"


def test_tool_schemas_match_the_validators() -> None:
    tools = {t["name"]: t for t in tool_definitions()}
    search = tools["search_knowledge_base"]["input_schema"]
    assert search["properties"]["query"]["maxLength"] == 300
    respond = tools["respond"]["input_schema"]
    assert respond["properties"]["status"]["enum"] == ["answered", "partial", "not_found"]
    assert set(respond["required"]) == {"answer", "citations", "status"}


def test_questions_are_cleaned_or_refused() -> None:
    assert clean_question("  what\x00 is\x1b this?\n", 100) == "what is this?"
    assert isinstance(clean_question("\x00\x00", 100), InvalidQuestion)
    too_long = clean_question("x" * 101, 100)
    assert isinstance(too_long, InvalidQuestion)
    assert "101 characters" in too_long.message


def test_history_budget_keeps_the_most_recent_turns() -> None:
    turns = [Turn("q" * 40, "a" * 40) for _ in range(5)]  # 20 tokens each
    assert within_budget(turns, 45) == turns[-2:]
    assert within_budget(turns, 0) == []
    assert within_budget(turns, 1_000) == turns


def test_a_newest_turn_over_the_budget_is_cut_not_dropped() -> None:
    """A follow-up to a pasted log: the turn before it is over the budget alone, and the model
    still gets what was asked and the start of the answer, not an empty history."""
    log = " ".join(f"line{n}" for n in range(5_000))
    turns = [Turn("what is prune?", "It removes keywords."), Turn(f"why this? {log}", "Because.")]
    (kept,) = within_budget(turns, 100)  # 400 characters
    assert kept.question.startswith("why this? line0 line1")
    assert kept.question.endswith("…")
    assert kept.answer == "Because."
    assert len(kept.question) + len(kept.answer) <= 400
