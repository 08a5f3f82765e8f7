"""Train the question classifier on labelled chat messages and measure it honestly.

One labelled set is held out and never seen in training or in choosing the threshold: its
figures are what a team should expect on its own channels. Every other figure is
cross-validated (each message scored by a model that did not train on it). The threshold is the
lowest whose cross-validated precision reaches the target, because precision is what a busy
channel notices.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, ValidationError

from core.domain.question_model import QuestionModel
from core.domain.questions import plain_text, reads_as_question
from core.errors import DatasetError
from core.ports import Embedder

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

THRESHOLDS = tuple(round(0.5 + 0.05 * step, 2) for step in range(10))  # 0.50 ... 0.95


class LabelledMessage(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    text: str
    answer: bool  # should the bot answer it in an `auto` channel?
    set: str


@dataclass(frozen=True, slots=True)
class SetFigures:
    name: str
    messages: int
    precision: float
    recall: float
    rules_precision: float
    rules_recall: float
    measured: str  # "cross-validated" or "held out"


@dataclass(frozen=True, slots=True)
class QuestionTraining:
    model: QuestionModel
    figures: list[SetFigures]


@dataclass(frozen=True, slots=True)
class TrainingOptions:
    held_out: str
    regularisation: float  # scikit-learn's C: larger trusts the training messages more
    folds: int
    target_precision: float
    seed: int


def load_messages(path: Path) -> list[LabelledMessage]:
    messages = []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise DatasetError(f"{path}: {exc.strerror or exc}") from exc
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            messages.append(LabelledMessage.model_validate_json(line))
        except ValidationError as exc:
            reason = exc.errors()[0]["msg"]
            raise DatasetError(f"{path}:{number}: not a labelled message ({reason})") from exc
    if not messages:
        raise DatasetError(f"{path}: no labelled messages")
    return messages


def precision_recall(said: Sequence[bool], truth: Sequence[bool]) -> tuple[float, float]:
    hits = sum(s and t for s, t in zip(said, truth, strict=True))
    return hits / max(1, sum(said)), hits / max(1, sum(truth))


async def train_question_model(
    messages: list[LabelledMessage], embedder: Embedder, options: TrainingOptions
) -> QuestionTraining:
    import numpy as np
    from sklearn.model_selection import StratifiedKFold, cross_val_predict

    train = [m for m in messages if m.set != options.held_out]
    test = [m for m in messages if m.set == options.held_out]
    if not test:
        raise DatasetError(f"no labelled set named {options.held_out!r} to hold out")
    if len({m.answer for m in train}) < 2:
        raise DatasetError("training needs messages of both kinds")
    vectors = await embedder.embed_documents([plain_text(m.text) for m in train])
    labels = np.array([m.answer for m in train])
    rules = np.array([reads_as_question(m.text) for m in train])
    folds = StratifiedKFold(options.folds, shuffle=True, random_state=options.seed)
    scored = cross_val_predict(
        _classifier(options), vectors, labels, cv=folds, method="predict_proba"
    )[:, 1]
    threshold = _threshold(scored, rules, labels, options.target_precision)
    fitted = _classifier(options).fit(vectors, labels)
    model = QuestionModel(
        embedder=embedder.model_id,
        weights=tuple(float(w) for w in fitted.coef_[0]),
        bias=float(fitted.intercept_[0]),
        threshold=threshold,
        trained_on=dict(sorted(Counter(m.set for m in train).items())),
        held_out=options.held_out,
    )
    figures = [
        _figures(name, [m for m in train if m.set == name], scored[mask] >= threshold, rules[mask])
        for name in sorted({m.set for m in train})
        if (mask := np.array([m.set == name for m in train])).any()
    ]
    test_vectors = await embedder.embed_documents([plain_text(m.text) for m in test])
    test_rules = np.array([reads_as_question(m.text) for m in test])
    test_said = np.array([model.for_the_docs(v.tolist()) for v in test_vectors])
    held = _figures(options.held_out, test, test_said, test_rules, measured="held out")
    return QuestionTraining(model, [*figures, held])


def model_json(model: QuestionModel) -> str:
    """The model as the packaged `core/domain/question_model.json` holds it."""
    return json.dumps(model.model_dump(mode="json"), indent=1) + "\n"


def _classifier(options: TrainingOptions):  # type: ignore[no-untyped-def]  # scikit-learn is untyped
    from sklearn.linear_model import LogisticRegression

    return LogisticRegression(
        C=options.regularisation, class_weight="balanced", max_iter=10_000, random_state=0
    )


def _threshold(
    scored: npt.NDArray[np.float64],
    rules: npt.NDArray[np.bool_],
    labels: npt.NDArray[np.bool_],
    target: float,
) -> float:
    """The lowest threshold whose cross-validated precision (rules and classifier together)
    reaches the target; the highest tried when none does."""
    for threshold in THRESHOLDS:
        said = rules & (scored >= threshold)
        if precision_recall(said.tolist(), labels.tolist())[0] >= target:
            return threshold
    return THRESHOLDS[-1]


def _figures(
    name: str,
    rows: list[LabelledMessage],
    classifier: npt.NDArray[np.bool_],
    rules: npt.NDArray[np.bool_],
    measured: str = "cross-validated",
) -> SetFigures:
    truth = [m.answer for m in rows]
    precision, recall = precision_recall((rules & classifier).tolist(), truth)
    rules_precision, rules_recall = precision_recall(rules.tolist(), truth)
    return SetFigures(name, len(rows), precision, recall, rules_precision, rules_recall, measured)
