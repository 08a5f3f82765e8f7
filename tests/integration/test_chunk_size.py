"""The passage-size bench's finding, checked against the code: `python -m bench.chunk_size
--sets "docs QA"` measured every size on the Anthropic docs QA set and recorded that the shipped
size ranks it best. Each other size means embedding the whole corpus again (about 100 s each on
CI's two cores), so CI does not re-measure them: it measures the shipped size (whose passages
the docs-quality test embeds anyway, through the run's shared embedding cache) and checks that
the recording still describes the code. A change to chunking or to the embedding text moves the
shipped size's passage count or figure and fails here until the bench is rerun; one that loses
quality fails the floor."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.chunk_size import measure, result_name
from bench.common import RESULTS
from core.config import Settings
from core.domain.documents import SearchMode
from core.evaluation.retrieval import load_dataset
from tests.conftest import SHARED_EVAL

DOCS = "docs QA"
DOCS_NDCG = 0.83  # hybrid nDCG@10 at the shipped size (0.8323 recorded)
# ONNX Runtime's floats differ a little between CPUs: a figure may move in its fourth decimal.
SAME_FIGURE = 0.002


def test_the_recording_ranks_the_shipped_size_best(settings: Settings) -> None:
    recorded = json.loads((RESULTS / result_name([DOCS])).read_text())
    shipped = f"{settings.ingest.chunk_chars}:{settings.ingest.chunk_overlap_chars}"
    ndcg = {size: rows[DOCS]["hybrid"]["ndcg@10"] for size, rows in recorded.items()}
    assert len(ndcg) >= 5
    assert max(ndcg, key=ndcg.__getitem__) == shipped


@pytest.mark.slow
@pytest.mark.skipif(not SHARED_EVAL.exists(), reason=f"{SHARED_EVAL} is not beside this checkout")
async def test_the_shipped_size_measures_what_the_bench_recorded(
    tmp_path: Path, settings: Settings, eval_embedding_cache: Path
) -> None:
    recorded = json.loads((RESULTS / result_name([DOCS])).read_text())
    shipped = f"{settings.ingest.chunk_chars}:{settings.ingest.chunk_overlap_chars}"
    data = {DOCS: ("anthropic_docs_qa", load_dataset(SHARED_EVAL / "anthropic_docs_qa"))}
    rerun = (
        'the code moved since it was recorded: rerun python -m bench.chunk_size --sets "docs QA"'
    )
    assert shipped in recorded, rerun
    expected = recorded[shipped][DOCS]
    # Hybrid at k=10 alone: what is checked (the bench also runs the one-sided modes and
    # recall@100's deeper search).
    ours = await measure(
        shipped, data, tmp_path, eval_embedding_cache, (SearchMode.HYBRID,), deep=False
    )
    assert ours[DOCS]["chunks"] == expected["chunks"], rerun
    figure = ours[DOCS]["hybrid"]["ndcg@10"]
    assert figure == pytest.approx(expected["hybrid"]["ndcg@10"], abs=SAME_FIGURE), rerun
    assert figure >= DOCS_NDCG
