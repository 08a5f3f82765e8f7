"""The terminal as a platform: a question from the keyboard, the answer on the screen.

It goes through the same engine call as Slack and Discord, with a conversation key of its own,
so `bot chat` follow-ups use the stored turns exactly as a thread would.
"""

from __future__ import annotations

import getpass
import uuid

from rich.console import Console

from adapters.console.render import answer_json, render_answer
from core.answer.engine import AnswerEngine
from core.domain.conversation import Answer, ChannelKind, Question


class ConsoleSession:
    def __init__(self, engine: AnswerEngine, console: Console, conversation: str | None) -> None:
        self._engine = engine
        self._console = console
        self._user = getpass.getuser()
        self.conversation_key = f"terminal/{self._user}/{conversation or uuid.uuid4().hex}"

    async def ask(self, text: str) -> Answer:
        return await self._engine.answer(
            Question(
                platform="terminal",
                conversation_key=self.conversation_key,
                user=self._user,
                text=text,
                channel_kind=ChannelKind.TERMINAL,
            )
        )

    def show(self, answer: Answer, as_json: bool) -> None:
        if as_json:
            self._console.print_json(answer_json(answer))
        else:
            # Not cropped at the width: the sources' links are printed whole (see `_sources`).
            self._console.print(render_answer(answer), crop=False)
