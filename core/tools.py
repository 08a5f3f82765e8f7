"""The tools the model may call, their JSON schemas, and strict validation of what it sends.

Model output is untrusted input: every tool call is validated (types, lengths, allowed values,
no control characters) before anything runs, and a bad call comes back to the model as an
`is_error` result it can act on, never as an exception that ends the answer.
"""

from __future__ import annotations

import re
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

SEARCH_TOOL = "search_knowledge_base"
RESPOND_TOOL = "respond"

MAX_QUERY_CHARS = 300
MAX_ANSWER_CHARS = 12_000
MAX_QUOTE_CHARS = 500
MAX_CITATIONS = 20

_M = TypeVar("_M", bound="BaseModel")
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def required_tool(round_number: int, max_rounds: int, failures: int) -> str | None:
    """Which tool the model must call this round; None lets it choose among all tools.

    Round 1 must search (the knowledge base is always consulted, with the model's own query);
    the last allowed round, and any round after a failed answer, must respond.
    """
    if round_number == 1:
        return SEARCH_TOOL
    if round_number >= max_rounds or failures:
        return RESPOND_TOOL
    return None


class ToolInputError(ValueError):
    """A tool call's input is invalid; the message is written for the model to fix its call."""


def _no_control_characters(value: str) -> str:
    if _CONTROL.search(value):
        raise ValueError("must not contain control characters")
    return value


class SearchInput(BaseModel):
    model_config = ConfigDict(extra="forbid")
    query: str = Field(min_length=2, max_length=MAX_QUERY_CHARS)

    @field_validator("query")
    @classmethod
    def _clean(cls, value: str) -> str:
        value = _no_control_characters(value).strip()
        if len(value) < 2:
            raise ValueError("must have at least 2 non-blank characters")
        return value


class CitedSource(BaseModel):
    model_config = ConfigDict(extra="forbid")
    source: int = Field(ge=1, le=1_000)
    quote: str = Field(max_length=MAX_QUOTE_CHARS)

    @field_validator("quote")
    @classmethod
    def _clean(cls, value: str) -> str:
        return _no_control_characters(value)


class RespondInput(BaseModel):
    model_config = ConfigDict(extra="forbid")
    answer: str = Field(min_length=1, max_length=MAX_ANSWER_CHARS)
    citations: list[CitedSource] = Field(default_factory=list, max_length=MAX_CITATIONS)
    status: Literal["answered", "partial", "not_found"]

    @field_validator("answer")
    @classmethod
    def _clean(cls, value: str) -> str:
        return _no_control_characters(value)


def parse_tool_input(model: type[_M], raw: Any) -> _M:
    if not isinstance(raw, dict):
        raise ToolInputError("the input must be a JSON object")
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'input'}: {e['msg']}" for e in exc.errors()
        )
        raise ToolInputError(f"invalid input: {problems}") from None


SEARCH_DESCRIPTION = (
    "Search the team's knowledge base (its own documentation). Write a focused query in your own "
    "words: the key terms, product names, error codes or option names the answer would contain; "
    "not the user's whole message. Returns numbered sources; cite them by number. You may search "
    "again with a different query if the results do not answer the question."
)
RESPOND_DESCRIPTION = (
    "Give the final answer to the user. `answer` is Markdown; put [n] right after each claim, "
    "where n is the number of a source you retrieved that supports it. `citations` lists every "
    "source you cite, each with a short quote copied exactly from that source that supports the "
    "claim. `status`: answered when the sources answer the question, partial when they answer "
    "only part of it, not_found when they do not answer it (then say so plainly and do not guess)."
)


def tool_definitions() -> list[dict[str, Any]]:
    """Tool definitions in the Anthropic Messages format (the OpenAI path converts them)."""
    return [
        {
            "name": SEARCH_TOOL,
            "description": SEARCH_DESCRIPTION,
            "input_schema": {
                "type": "object",
                "properties": {
                    "query": {
                        "type": "string",
                        "description": "Search terms, 2 to 300 characters.",
                        "minLength": 2,
                        "maxLength": MAX_QUERY_CHARS,
                    }
                },
                "required": ["query"],
                "additionalProperties": False,
            },
        },
        {
            "name": RESPOND_TOOL,
            "description": RESPOND_DESCRIPTION,
            "input_schema": {
                "type": "object",
                "properties": {
                    "answer": {"type": "string", "maxLength": MAX_ANSWER_CHARS},
                    "citations": {
                        "type": "array",
                        "maxItems": MAX_CITATIONS,
                        "items": {
                            "type": "object",
                            "properties": {
                                "source": {"type": "integer", "minimum": 1},
                                "quote": {"type": "string", "maxLength": MAX_QUOTE_CHARS},
                            },
                            "required": ["source", "quote"],
                            "additionalProperties": False,
                        },
                    },
                    "status": {"type": "string", "enum": ["answered", "partial", "not_found"]},
                },
                "required": ["answer", "citations", "status"],
                "additionalProperties": False,
            },
        },
    ]
