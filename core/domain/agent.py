"""A model's turn and the tool results that answer it, in no provider's wire format: the one
agent loop speaks these, and each model adapter encodes them for its own API."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from core.domain.conversation import Turn

# Receives the answer text written so far, while the model is still writing it.
AnswerProgress = Callable[[str], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class ToolUse:
    """One tool call as the model made it: `input` is unvalidated until the tool runner reads
    it. `id` is whatever the server sent (some send empty or repeated ids: results are matched
    to calls by position, never by id)."""

    id: str
    name: str
    input: object


@dataclass(frozen=True, slots=True)
class ToolResult:
    content: str
    is_error: bool


@dataclass(frozen=True, slots=True)
class ModelTurn:
    """What the model said, in order: text parts and tool calls as they came."""

    content: tuple[str | ToolUse, ...]

    @property
    def uses(self) -> list[ToolUse]:
        return [part for part in self.content if isinstance(part, ToolUse)]

    @property
    def text(self) -> str:
        return "".join(part for part in self.content if isinstance(part, str))


@dataclass(frozen=True, slots=True)
class ToolResults:
    """The answer to a turn's tool calls: one result per call, in the calls' order."""

    results: tuple[tuple[ToolUse, ToolResult], ...]


# After the question: the model's turns, our tool results, and plain nudges from us.
Exchange = ModelTurn | ToolResults | str


@dataclass(frozen=True, slots=True)
class TurnRequest:
    """Everything one model turn is asked with; `required` names the tool it must call (None:
    any tool, but some tool)."""

    system: str
    history: Sequence[Turn]
    question: str
    transcript: Sequence[Exchange]
    web: bool
    required: str | None
