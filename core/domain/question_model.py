"""Is a question-shaped message one the docs could answer? A logistic regression over the
message's embedding, trained on the labelled chat messages by `bot eval questions` and shipped
with the package (`question_model.json`).

It only ever narrows what the rules of `questions.py` let through: "is the staging env down
again?" and "is the staging env refreshed nightly?" are both questions, and only their meaning
tells a status check from a docs question. The threshold is chosen by cross-validation for
precision, since an unwanted answer in a busy channel costs more than a missed one (which can
still @mention the bot).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from importlib import resources
from typing import Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

PACKAGED = "question_model.json"


class QuestionModel(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    embedder: str  # the embedder's model_id: vectors of another model mean nothing here
    weights: tuple[float, ...]
    bias: float
    threshold: float = Field(gt=0, lt=1)
    trained_on: dict[str, int]  # labelled set name -> messages, for `bot doctor` and the notes
    held_out: str  # the labelled set kept out of training, to measure the model honestly

    @model_validator(mode="after")
    def _has_weights(self) -> Self:
        if not self.weights:
            raise ValueError("a question model needs one weight per embedding dimension")
        return self

    @classmethod
    def packaged(cls) -> QuestionModel:
        text = resources.files(__package__).joinpath(PACKAGED).read_text(encoding="utf-8")
        return cls.model_validate_json(text)

    def fits(self, embedder: str, dimensions: int) -> bool:
        return self.embedder == embedder and len(self.weights) == dimensions

    def probability(self, vector: Sequence[float]) -> float:
        score = self.bias + math.fsum(w * x for w, x in zip(self.weights, vector, strict=True))
        return 1.0 / (1.0 + math.exp(-score))

    def for_the_docs(self, vector: Sequence[float]) -> bool:
        return self.probability(vector) >= self.threshold
