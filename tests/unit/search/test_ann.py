"""The graph library must load beside the embedder's runtime in either order: usearch 2.26.2 to
2.26.6 crash the process (SIGSEGV) when imported before onnxruntime, which is the order a
process that opens the index before its first query embedding takes."""

from __future__ import annotations

import subprocess
import sys

import pytest


@pytest.mark.parametrize(
    "imports",
    ["import core.search.ann; import onnxruntime", "import onnxruntime; import core.search.ann"],
)
def test_the_graph_library_and_onnxruntime_load_in_either_order(imports: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", f"{imports}; print('loaded')"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "loaded"
