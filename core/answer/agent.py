"""The one agent loop, for every model that can call tools.

Round 1 forces the knowledge-base search (the model writes the query), and no `respond` is
accepted until a search has run (a server may ignore the forced call); later rounds let the model
choose (search again or respond); the last allowed round forces `respond`, and a web search
forces `save_keywords` next. A turn that fails to respond (plain text, or an invalid respond call)
is asked again once; a second failure is an error for the user, never a guess. Tool failures go
back to the model as error results. The model adapter only encodes each turn for its API.
"""

from __future__ import annotations

from core.answer.prompts import RETRY_NUDGE
from core.answer.tool_runner import ToolRunner
from core.answer.tools import RESPOND_TOOL, SEARCH_TOOL, RespondInput
from core.domain.agent import (
    AnswerProgress,
    Exchange,
    ModelTurn,
    ToolResult,
    ToolResults,
    ToolUse,
    TurnRequest,
)
from core.domain.conversation import Trace, Turn
from core.errors import NoResponse, ToolsUnsupported
from core.ports import ChatModel


async def run_agent(
    model: ChatModel,
    question: str,
    history: list[Turn],
    runner: ToolRunner,
    trace: Trace,
    *,
    max_rounds: int,
    on_answer: AnswerProgress | None = None,
) -> RespondInput:
    """The accepted `respond` input; `NoResponse` when the model gave none in time, and
    `ToolsUnsupported` when it answered the forced first call in prose."""
    transcript: list[Exchange] = []
    system = runner.system_prompt()
    for round_number in range(1, max_rounds + 2):
        request = TurnRequest(
            system=system,
            history=history,
            question=question,
            transcript=tuple(transcript),
            web=runner.web,
            required=runner.required_tool(round_number, max_rounds),
        )
        # A respond that may yet be refused (keywords pending) is not shown while written.
        stream = None if runner.keywords_pending else on_answer
        turn = await model.turn(request, trace, stream)
        transcript.append(turn)
        if not turn.uses:
            if round_number == 1 and not model.forced_calls_guaranteed:
                raise ToolsUnsupported("the model answered a forced tool call with plain text")
            runner.failed("the model answered without the respond tool")
            transcript.append(RETRY_NUDGE)
            continue
        outcome = await _run_turn(turn, runner, final=round_number >= max_rounds)
        if isinstance(outcome, RespondInput):
            return outcome
        transcript.append(outcome)
    raise NoResponse(f"no answer within {max_rounds} rounds")


async def _run_turn(
    turn: ModelTurn, runner: ToolRunner, *, final: bool
) -> RespondInput | ToolResults:
    """The turn's accepted answer, or the results of its tool calls (a refused `respond`
    gets the reason as its error result)."""
    respond = next((u for u in turn.uses if u.name == RESPOND_TOOL), None)
    others = [u for u in turn.uses if u is not respond]
    results: list[ToolResult] | None = None
    if respond is not None and runner.keywords_pending:
        # Tools beside the respond (save_keywords, say) run before it is judged.
        results = await _run(runner, others)
    refusal = ""
    if respond is not None:
        searching = any(u.name == SEARCH_TOOL for u in others)
        verdict = await runner.judge_respond(respond.input, final=final, searching=searching)
        if isinstance(verdict, RespondInput):
            return verdict
        refusal = verdict
    if results is None:
        results = await _run(runner, others)
    pending = iter(results)
    return ToolResults(
        tuple(
            (use, ToolResult(refusal, True) if use is respond else next(pending))
            for use in turn.uses
        )
    )


async def _run(runner: ToolRunner, uses: list[ToolUse]) -> list[ToolResult]:
    return await runner.run_all([(u.name, u.input) for u in uses])
