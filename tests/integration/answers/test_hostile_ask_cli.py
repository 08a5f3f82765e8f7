"""`bot ask` as a person runs it, in its own process: a broken model endpoint and an empty index
each give a useful answer on stdout, exit 0, and no traceback on stderr."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from core.config import Settings
from tests.conftest import REPO
from tests.fakes.chat_server import ChatServer, Raw

MARKER = "BODY-MARKER-93c1"  # in the proxy's page: it must reach neither stdout nor stderr
ASK_TIMEOUT_S = 120  # a cold process loads the embedding model; a hang fails, not blocks CI


def run_bot(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    base.pop("BOT_OPENAI__BASE_URL", None)
    bot = Path(sys.executable).with_name("bot")
    return subprocess.run(
        [str(bot), *args],
        env={**base, "BOT_CONFIG": str(REPO / "config.yaml"), "COLUMNS": "200", **env},
        capture_output=True,
        text=True,
        timeout=ASK_TIMEOUT_S,
        check=False,
    )


def test_ask_with_claude_answering_html_prints_the_extractive_answer(
    kb: Settings, tmp_path: Path, chat: ChatServer
) -> None:
    page = f"<html><body><h1>502 Bad Gateway</h1>{MARKER}</body></html>".encode()
    chat.replies = [Raw(page, "text/html")]
    port = chat.server.server_address[1]
    done = run_bot(
        ["ask", "How do I re-ingest changed documents?"],
        {
            "BOT_STORAGE__DATA_DIR": str(tmp_path / "data"),
            "BOT_SEARCH__SQLITE_PATH": str(kb.index_path),
            "BOT_EMBEDDINGS__CACHE_PATH": str(kb.embedding_cache_path),
            "ANTHROPIC_API_KEY": "test-key",
            "BOT_ANTHROPIC__BASE_URL": f"http://127.0.0.1:{port}",
            "BOT_ANTHROPIC__MAX_RETRIES": "0",
        },
    )
    assert done.returncode == 0, done.stderr
    assert len(chat.requests) == 1
    assert chat.requests[0]["path"] == "/v1/messages"
    out = " ".join(done.stdout.split())
    assert out.startswith("Extractive answer (passages quoted, no language model).")
    assert (
        "The language model is unavailable right now (Claude sent text/html (HTTP 200), "
        "not an event stream)." in out
    )
    assert "Sources [1] Ingesting documents" in out
    assert "Traceback" not in done.stderr
    failures = [line for line in done.stderr.splitlines() if "model_unavailable" in line]
    assert len(failures) == 1
    assert "text/html (HTTP 200), not an event stream" in failures[0]
    assert MARKER not in done.stdout + done.stderr


def test_ask_on_an_empty_index_says_where_it_is_and_to_ingest(tmp_path: Path) -> None:
    """Exit 0: the question was answered, truthfully ("there is nothing to search yet"); a
    script that checks for an empty index has `bot search` and `bot doctor`."""
    data = tmp_path / "data"
    done = run_bot(["ask", "How do I deploy?"], {"BOT_STORAGE__DATA_DIR": str(data)})
    assert done.returncode == 0, done.stderr
    out = " ".join(done.stdout.split())
    assert (
        f"The knowledge base is empty: nothing has been ingested into {data / 'index.sqlite'} "
        "yet. Run bot ingest PATH (a folder, a file or a URL) to add documents, then ask again."
    ) in out
    assert "couldn't find anything" not in out
    assert "Traceback" not in done.stderr
