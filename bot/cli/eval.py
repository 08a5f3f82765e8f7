"""`bot eval`: retrieval and answer benchmarks on BEIR-layout datasets."""

from __future__ import annotations

import asyncio
import contextlib
import json
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table

from bot.cli.app import app, err, out, refuse, state
from bot.cli.output_files import checked_output, checked_output_folder, write_output
from core.errors import ConfigError

if TYPE_CHECKING:
    from core.config import Settings
    from core.evaluation.questions import LabelledMessage, QuestionTraining, TrainingOptions
    from core.insights.feedback_export import ExportCounts

eval_app = typer.Typer(help="Benchmarks on BEIR-layout datasets.", no_args_is_help=True)
app.add_typer(eval_app, name="eval")


_SQLITE_HEADER = b"SQLite format 3\x00"  # the first bytes of every SQLite database file
_LABELS = {"ndcg": "nDCG", "recall": "Recall", "mrr": "MRR", "shown": "Shown"}


def _label(metric: str) -> str:
    name, _, depth = metric.partition("@")
    return f"{_LABELS.get(name, name)}@{depth}"


@eval_app.command("retrieval")
def eval_retrieval(
    dataset: Annotated[Path, typer.Option(help="BEIR folder: corpus.jsonl, queries.jsonl, qrels.")],
    limit: Annotated[int | None, typer.Option(min=1, help="Only the first N queries.")] = None,
    json_path: Annotated[
        Path | None,
        typer.Option("--json", help="Write the figures here.", callback=checked_output),
    ] = None,
    index_path: Annotated[
        Path | None, typer.Option("--index", help="Keep the index here (default: a temp dir).")
    ] = None,
) -> None:
    """nDCG@10, Recall@10, Recall@100, MRR@10 and Shown@top_k (the relevant documents among the
    passages an answer is written from) for bm25, vector and hybrid, side by side."""
    result = asyncio.run(_eval_retrieval(dataset, limit, index_path))
    modes: list[dict[str, Any]] = result["modes"]  # type: ignore[assignment]
    table = Table(
        "mode",
        *(_label(name) for name in modes[0]["metrics"]),
        "p50 ms",
        "p95 ms",
        title=f"{result['dataset']}: {result['queries']} queries, "
        f"{result['documents']} documents, {result['chunks']} chunks",
    )
    for row in modes:
        m = row["metrics"]
        table.add_row(
            row["mode"], *(f"{m[x]:.3f}" for x in m), f"{row['p50_ms']:.1f}", f"{row['p95_ms']:.1f}"
        )
    out.print(table)
    if json_path is not None:
        write_output(json_path, json.dumps(result, indent=2) + "\n")


async def _eval_retrieval(
    folder: Path, limit: int | None, index_path: Path | None
) -> dict[str, object]:
    from bot.progress import RichIngestProgress
    from bot.runtime import opened
    from bot.wiring import build_embedder
    from core.evaluation.retrieval import load_dataset
    from core.evaluation.runs import index_dataset, isolated_settings, retrieval_run

    data = load_dataset(folder, limit)
    if index_path is not None:
        _check_scratch_index(index_path)
    embedder = build_embedder(state.settings)
    with tempfile.TemporaryDirectory(prefix="bot-eval-") as tmp:
        s = isolated_settings(state.settings, data.name, Path(tmp))
        path = (
            None
            if s.search.backend == "elasticsearch"
            else index_path or Path(tmp) / "index.sqlite"
        )
        async with opened(s, path, embedder=embedder) as rt:
            try:
                with RichIngestProgress(err, s.ingest.progress_min_items) as progress:
                    seconds = await index_dataset(data, rt.backend.index, embedder, s, progress)
                counts = {
                    "embeddings_computed": embedder.computed,
                    "embeddings_reused": embedder.reused,
                }
                return await retrieval_run(data, rt.backend.index, s, embedder, seconds, counts)
            finally:
                await rt.backend.drop()


def _check_scratch_index(path: Path) -> None:
    """`--index` is the evaluation's own: never the knowledge base's index, and never a file
    that is not an index at all (SQLite would call it damaged, and the advice for a damaged
    index is to delete it)."""
    s = state.settings
    own = {
        s.index_path: "the knowledge base's own index",
        s.state_path: "the bot's state file",
        s.embedding_cache_path: "the embedding cache",
    }
    for file, what in own.items():
        if path.resolve() == file.resolve():
            raise ConfigError(f"--index {path} is {what}: give the evaluation a new path")
    if path.is_file() and path.stat().st_size > 0 and not _an_index(path):
        raise ConfigError(f"--index {path} exists and is not an SQLite index: give a new path")


def _an_index(path: Path) -> bool:
    """An SQLite file holding an index (its `documents` table), read without writing to it."""
    import sqlite3

    with path.open("rb") as f:
        if f.read(len(_SQLITE_HEADER)) != _SQLITE_HEADER:
            return False
    try:
        with contextlib.closing(
            sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
        ) as db:
            tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master")}
    except sqlite3.DatabaseError:
        return False
    return "documents" in tables


@eval_app.command("answers")
def eval_answers(
    dataset: Annotated[Path, typer.Option(help="BEIR folder, with answers.jsonl for grading.")],
    limit: Annotated[int | None, typer.Option(min=1, help="Only the first N questions.")] = None,
    json_path: Annotated[
        Path | None,
        typer.Option("--json", help="Write the figures here.", callback=checked_output),
    ] = None,
    base_url: Annotated[
        str | None,
        typer.Option(
            "--base-url",
            help="Score this OpenAI-compatible server (Ollama, llama.cpp, vLLM), e.g. "
            "http://localhost:11434/v1, instead of the configured model.",
        ),
    ] = None,
    model: Annotated[
        str | None, typer.Option("--model", help="The model's name on --base-url.")
    ] = None,
    versus_extractive: Annotated[
        bool,
        typer.Option(
            "--versus-extractive",
            help="Also answer every question with no model (quoted passages), on the same "
            "index, and show both side by side: a model should never do worse.",
        ),
    ] = False,
    baseline: Annotated[
        Path | None,
        typer.Option(
            "--baseline",
            help="A previous run's --json: show each figure's change against it.",
        ),
    ] = None,
) -> None:
    """Ask every question through the engine; score citation hits, sources shown, uncited
    claims and time per question (and correctness with Claude)."""
    settings = state.settings
    if base_url is not None or model is not None:
        if not base_url or not model:
            refuse("--base-url and --model go together: the server and the model to score on it")
        settings = settings.model_copy(
            update={
                "answers": settings.answers.model_copy(update={"provider": "openai"}),
                "openai": settings.openai.model_copy(update={"base_url": base_url, "model": model}),
            }
        )
    before = _baseline(baseline) if baseline is not None else None
    runs = asyncio.run(_eval_answers(settings, dataset, limit, versus_extractive))
    trend = ("baseline", "change") if before is not None else ()
    table = Table("metric", *runs, *trend, title=f"{next(iter(runs.values()))['dataset']}: answers")
    first = next(iter(runs.values()))
    for key in first:
        if key not in ("dataset", "per_question"):
            then = (
                []
                if before is None
                else [_cell(before.get(key)), _change(first[key], before.get(key))]
            )
            table.add_row(key, *(_cell(run[key]) for run in runs.values()), *then)
    out.print(table)
    if json_path is not None:
        figures = runs if versus_extractive else next(iter(runs.values()))
        write_output(json_path, json.dumps(figures, indent=2) + "\n")


def _cell(value: object) -> str:
    return json.dumps(value) if isinstance(value, dict) else str(value)


def _baseline(path: Path) -> dict[str, object]:
    """The figures of a previous `--json`: one run's, or the model run's of a side-by-side."""
    try:
        figures = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        refuse(f"--baseline {path}: {exc.strerror or exc}")
    except json.JSONDecodeError as exc:
        refuse(f"--baseline {path}: not JSON ({exc.msg}, line {exc.lineno})")
    if isinstance(figures, dict) and isinstance(figures.get("model"), dict):
        figures = figures["model"]
    if not isinstance(figures, dict) or "questions" not in figures:
        refuse(f"--baseline {path}: not the --json of a `bot eval answers` run")
    return figures


def _change(now: object, then: object) -> str:
    """now - then for numbers (with a sign), "" where either is missing or not a number."""
    numbers = (int, float)
    if isinstance(now, bool) or not isinstance(now, numbers) or not isinstance(then, numbers):
        return ""
    return f"{now - then:+.4g}"


async def _eval_answers(
    settings: Settings, folder: Path, limit: int | None, versus_extractive: bool
) -> dict[str, dict[str, object]]:
    """The figures of each run, by name: the configured (or given) model, and with
    `versus_extractive` the no-model answers on the same index."""
    from bot.progress import RichIngestProgress
    from bot.runtime import opened
    from bot.wiring import build_embedder, build_engine, build_judge
    from core.evaluation.retrieval import load_dataset
    from core.evaluation.runs import answers_run, index_dataset, isolated_settings

    data = load_dataset(folder, limit)
    embedder = build_embedder(settings)
    with tempfile.TemporaryDirectory(prefix="bot-eval-") as tmp:
        s = isolated_settings(settings, data.name, Path(tmp))
        async with opened(s, Path(tmp) / "index.sqlite", embedder=embedder) as rt:
            with RichIngestProgress(err, s.ingest.progress_min_items) as progress:
                await index_dataset(data, rt.backend.index, embedder, s, progress)
            grounding = s.answers.grounding
            runs = {
                "model": await answers_run(data, folder, rt.engine(), build_judge(s), grounding)
            }
            if versus_extractive:
                none = s.model_copy(
                    update={"answers": s.answers.model_copy(update={"provider": "extractive"})}
                )
                engine = build_engine(none, rt.backend)
                try:
                    runs["extractive"] = await answers_run(data, folder, engine, None, grounding)
                finally:
                    await engine.close()
            return runs


@eval_app.command("questions")
def eval_questions(
    messages: Annotated[
        Path, typer.Option(help="Labelled chat messages: JSON lines of text, answer, set.")
    ] = Path("tests/data/chat_messages.jsonl"),
    held_out: Annotated[
        str, typer.Option(help="The labelled set kept out of training, to measure on.")
    ] = "held-out-7",
    write: Annotated[
        Path | None,
        typer.Option(
            help="Save the trained model here (the packaged one is "
            "core/domain/question_model.json).",
            callback=checked_output,
        ),
    ] = None,
    regularisation: Annotated[float, typer.Option(min=0.001, help="Logistic regression C.")] = 10.0,
    folds: Annotated[int, typer.Option(min=2, help="Cross-validation folds.")] = 10,
    target_precision: Annotated[
        float, typer.Option(min=0.5, max=1.0, help="Cross-validated precision to reach.")
    ] = 0.98,
    json_path: Annotated[
        Path | None,
        typer.Option("--json", help="Write the figures here.", callback=checked_output),
    ] = None,
) -> None:
    """Train the `auto` channels' question classifier and show precision and recall per
    labelled set: cross-validated on the training sets, and on the set held out."""
    from core.evaluation.questions import TrainingOptions, load_messages, model_json

    options = TrainingOptions(held_out, regularisation, folds, target_precision, seed=0)
    result = asyncio.run(_train_questions(load_messages(messages), options))
    table = Table(
        "set",
        "n",
        "measured",
        "P",
        "R",
        "rules P",
        "rules R",
        title=f"Question detector (threshold {result.model.threshold:.2f})",
        caption="P, R: precision and recall of rules + classifier; rules P, R: the rules alone",
    )
    for f in result.figures:
        table.add_row(
            f.name,
            str(f.messages),
            f.measured,
            f"{f.precision:.3f}",
            f"{f.recall:.3f}",
            f"{f.rules_precision:.3f}",
            f"{f.rules_recall:.3f}",
        )
    out.print(table)
    if write is not None:
        write_output(write, model_json(result.model))
    if json_path is not None:
        figures = {"threshold": result.model.threshold, "sets": [asdict(f) for f in result.figures]}
        write_output(json_path, json.dumps(figures, indent=2) + "\n")


async def _train_questions(
    messages: list[LabelledMessage], options: TrainingOptions
) -> QuestionTraining:
    from bot.wiring import build_embedder
    from core.evaluation.questions import train_question_model

    return await train_question_model(messages, build_embedder(state.settings), options)


@eval_app.command("export-feedback")
def eval_export_feedback(
    folder: Annotated[
        Path,
        typer.Argument(
            help="Write the datasets here (liked/, disliked/).", callback=checked_output_folder
        ),
    ],
    min_votes: Annotated[
        int, typer.Option(min=1, help="Votes an answer needs on its winning side.")
    ] = 1,
    since: Annotated[str, typer.Option(help="How far back: 90d, 2w, or a date.")] = "90d",
) -> None:
    """The questions people voted on, with the documents their answers cited, as datasets
    `bot eval answers --dataset FOLDER/liked` (and `/disliked`) replays: your own failures as
    regression tests."""
    from bot.cli.report import since_epoch

    counts = asyncio.run(_export_feedback(folder, min_votes, since_epoch(since, time.time())))
    out.print(
        f"{counts.liked} liked and {counts.disliked} disliked questions, "
        f"{counts.documents} documents -> {folder}"
    )
    for reason, n in counts.skipped.items():
        out.print(f"  {n} left out: {reason}")


async def _export_feedback(folder: Path, min_votes: int, since: float) -> ExportCounts:
    from bot.runtime import opened
    from core.insights.feedback_export import export_feedback

    s = state.settings
    async with opened(s) as rt:
        log = rt.backend.platform_state(s.slack.dedup_ttl_s, s.insights.store_questions)
        entries = await log.answer_log(since)
        return await export_feedback(entries, rt.backend.index, folder, min_votes)
