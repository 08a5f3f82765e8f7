"""Should the bot answer a message nobody asked it about? The cheap rules first, then, for the
few messages shaped like questions, the classifier over their embedding.

The embedding is the one the search is about to need anyway (the embedder's query cache keeps
it), so a message that is answered costs no extra model run, and one the rules reject costs none.
"""

from __future__ import annotations

import structlog

from core.domain.question_model import QuestionModel
from core.domain.questions import plain_text, reads_as_question
from core.ports import Embedder

log = structlog.get_logger(__name__)


class QuestionGate:
    def __init__(self, embedder: Embedder, model: QuestionModel | None) -> None:
        """With no model, or one trained on another embedder's vectors, the rules decide alone
        (and say so once in the log)."""
        self._embedder = embedder
        self._model = model
        if model is not None and not model.fits(embedder.model_id, embedder.dimensions):
            log.warning(
                "question_model_unusable",
                trained_for=model.embedder,
                embedder=embedder.model_id,
                detail="rules alone decide what is a question",
            )
            self._model = None

    @property
    def classifier(self) -> bool:
        return self._model is not None

    async def __call__(self, text: str) -> bool:
        if not reads_as_question(text):
            return False
        if self._model is None:
            return True
        vector = await self._embedder.embed_query(plain_text(text))
        return self._model.for_the_docs(vector.tolist())
