"""The `bot` command as a newcomer meets it: every failure is one clear line and a non-zero
exit code (the traceback only with `-v`), and start-up costs no SDK it does not use.

Each case runs the real `bot` executable in a subprocess, as a person would, so the exit code,
stderr and imported modules are the process's own.
"""

from __future__ import annotations

import contextlib
import json
import os
import pty
import re
import select
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

from tests.conftest import REPO

BOT = Path(sys.executable).with_name("bot")
# Imported only by the commands that talk to these services or run the model.
HEAVY_MODULES = ("anthropic", "discord", "slack_bolt", "elasticsearch", "aiohttp", "onnxruntime")
# `--help` needs no array either: numpy alone costs a tenth of a second.
HELP_HEAVY_MODULES = (*HEAVY_MODULES, "numpy")
TIMEOUT_S = 120
# Ctrl-C ends an idle chat at once; the bound is for a busy 2-core machine.
CTRL_C_EXIT_BOUND_S = 10


def run_bot(
    args: list[str], tmp_path: Path, wrapper: Sequence[str] = (), **env: str
) -> subprocess.CompletedProcess[str]:
    """`bot ARGS` with its data in `tmp_path`, run under `wrapper` (a command that runs
    another, such as `setpriv ... --`) when given."""
    environment = {
        **os.environ,
        "BOT_STORAGE__DATA_DIR": str(tmp_path / "data"),
        "BOT_CONFIG": str(REPO / "config.yaml"),
        **env,
    }
    for secret in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "DISCORD_TOKEN", "SLACK_BOT_TOKEN"):
        if secret not in env:
            environment.pop(secret, None)
    return subprocess.run(
        [*wrapper, str(BOT), *args],
        env=environment,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
        stdin=subprocess.DEVNULL,
    )


def unprivileged() -> list[str]:
    """The command prefix under which file permissions hold for a `run_bot` (root reads and
    writes anything unless it gives up the capabilities that let it); skips the test where
    that can't be done."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root without setpriv: file permissions can't be made to hold")
    prefix = [setpriv, "--bounding-set=-dac_override,-dac_read_search,-fowner", "--"]
    probe = subprocess.run([*prefix, "true"], capture_output=True, check=False)
    if probe.returncode != 0:
        pytest.skip(f"can't drop capabilities here: {probe.stderr!r}")
    return prefix


def one_error_line(result: subprocess.CompletedProcess[str]) -> str:
    """The failure as the user sees it: exactly one line on stderr, no traceback."""
    assert "Traceback" not in result.stderr, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("error:")]
    assert len(errors) == 1, result.stderr
    return errors[0]


def test_an_empty_question_exits_2(tmp_path: Path) -> None:
    result = run_bot(["ask", "  "], tmp_path)
    assert result.returncode == 2
    assert "the question is empty" in one_error_line(result)


def test_a_question_too_long_exits_2_with_its_message_alone(tmp_path: Path) -> None:
    question = "how do I ingest " * 2000
    result = run_bot(["ask", question], tmp_path)
    assert result.returncode == 2
    line = one_error_line(result)
    assert "That question is 31,999 characters long; the limit is 4,000" in line
    assert "Extractive answer" not in result.stdout + result.stderr  # no answer header above it
    as_json = run_bot(["ask", question, "--json"], tmp_path)
    assert as_json.returncode == 2
    assert json.loads(as_json.stdout)["status"] == "error"


USAGE_ERRORS = {
    "an option out of range": (
        ["slack", "--http", "--port", "99999"],
        "error: Invalid value for '--port': Input should be less than or equal to 65535 "
        "(see `bot slack --help`)",
    ),
    "a missing argument": (["ask"], "error: Missing argument 'question' (see `bot ask --help`)"),
    "a mistyped command": (
        ["serch", "x"],
        "error: No such command 'serch'. Did you mean 'search'? (see `bot --help`)",
    ),
    "an unknown option": (["ask", "--nope", "x"], "error: No such option: --nope"),
}


@pytest.mark.parametrize(("args", "expected"), USAGE_ERRORS.values(), ids=USAGE_ERRORS.keys())
def test_a_usage_error_is_one_line_pointing_at_the_commands_help(
    tmp_path: Path, args: list[str], expected: str
) -> None:
    result = run_bot(args, tmp_path)
    assert result.returncode == 2
    assert one_error_line(result).startswith(expected)
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr  # no usage box around it


@pytest.mark.parametrize(
    ("args", "usage", "command"),
    [
        ([], "Usage: bot [OPTIONS] COMMAND", "ask"),
        (["index"], "Usage: bot index [OPTIONS] COMMAND", "reindex"),
        (["sources"], "Usage: bot sources [OPTIONS] COMMAND", "list"),
    ],
)
def test_a_group_without_its_command_shows_its_help(
    tmp_path: Path, args: list[str], usage: str, command: str
) -> None:
    """What a newcomer types first: `bot` alone shows what there is, not "Missing command"."""
    result = run_bot(args, tmp_path, COLUMNS="100")
    assert result.returncode == 2
    assert usage in result.stdout
    assert re.search(rf"│ {command} ", result.stdout), result.stdout
    assert result.stderr == ""


@pytest.mark.parametrize("make", ["file", "under_a_file"])
def test_a_data_dir_that_cannot_be_used_is_one_line_naming_the_setting(
    tmp_path: Path, make: str
) -> None:
    blocker = tmp_path / "blocker"
    blocker.write_text("not a folder")
    data_dir = blocker if make == "file" else blocker / "data"
    result = run_bot(["search", "anything"], tmp_path, BOT_STORAGE__DATA_DIR=str(data_dir))
    assert result.returncode == 2
    line = one_error_line(result)
    assert line.startswith(f"error: storage.data_dir: can't use {data_dir}")
    assert ("it is a file" in line) == (make == "file")
    assert line.endswith(
        "; set it (or BOT_STORAGE__DATA_DIR) to a folder this user can write"
    )  # what to do, not only what went wrong


def test_an_index_path_that_is_a_folder_says_so(tmp_path: Path) -> None:
    """`search.sqlite_path: /srv/docbot` said "can't open ... must be readable and writable by
    this user", sending its reader to the permissions of a folder that had none wrong."""
    result = run_bot(["search", "anything"], tmp_path, BOT_SEARCH__SQLITE_PATH=str(tmp_path))
    assert result.returncode == 2
    assert one_error_line(result) == (
        f"error: {tmp_path} is a folder: it must name a file (the folder for them all is "
        "storage.data_dir)"
    )


def test_v_adds_the_traceback_to_the_same_line(tmp_path: Path) -> None:
    blocker = tmp_path / "blocker"
    blocker.write_text("x")
    result = run_bot(["-v", "search", "anything"], tmp_path, BOT_STORAGE__DATA_DIR=str(blocker))
    assert result.returncode == 2
    assert "Traceback" in result.stderr
    assert result.stderr.rstrip().splitlines()[-1].startswith("error: storage.data_dir")


def test_a_bad_cron_fails_every_command_at_load_not_first_the_clock(tmp_path: Path) -> None:
    result = run_bot(["search", "x"], tmp_path, BOT_KEYWORDS__PRUNE_SCHEDULE="17 25 * * *")
    assert result.returncode == 2
    assert "keywords.prune_schedule" in result.stderr
    assert "not a valid cron expression" in result.stderr
    assert "Traceback" not in result.stderr


def test_an_elasticsearch_that_cannot_be_reached_is_one_line_without_the_retries(
    tmp_path: Path,
) -> None:
    with socket.socket() as closed:  # a port nothing listens on once it is closed
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    result = run_bot(
        ["search", "x"], tmp_path, BOT_SEARCH__BACKEND="elasticsearch", ELASTICSEARCH_URL=url
    )
    assert result.returncode == 2
    assert one_error_line(result).startswith(f"error: can't reach Elasticsearch at {url}")
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr


def test_a_clock_that_would_post_updates_needs_a_platform_token(tmp_path: Path) -> None:
    """Without one, the re-check ran every half hour and posted nothing, without a word. (A
    clock that started would run until `run_bot`'s timeout, and fail the test that way.)"""
    data = tmp_path / "data"
    result = run_bot(["clock"], tmp_path, BOT_INSIGHTS__NOTIFY_STALE="true")
    assert result.returncode == 2
    line = one_error_line(result)
    assert line.startswith("error: insights.notify_stale is on, but neither SLACK_BOT_TOKEN")
    assert not data.exists() or not any(data.iterdir())  # refused before anything was opened


def test_discord_that_cannot_be_reached_or_refuses_the_token_is_one_line(
    tmp_path: Path,
) -> None:
    """No machine here reaches Discord, so the connection fails (a machine that does reach it
    gets the token refused): either way one line that says what to check, never the token."""
    token = "MTIz.not-a-real.token-value"
    result = run_bot(["discord"], tmp_path, DISCORD_TOKEN=token)
    assert result.returncode == 2
    line = one_error_line(result)
    assert "can't reach Discord" in line or "DISCORD_TOKEN was refused" in line
    assert token not in result.stderr + result.stdout


def test_search_names_the_filter_that_matched_nothing(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# Widgets\n\nWidgets are configured in widgets.yaml.\n")
    assert run_bot(["ingest", str(docs), "--source", "handbook"], tmp_path).returncode == 0
    result = run_bot(["search", "widgets", "--source", "nosuch"], tmp_path)
    assert result.returncode == 0
    assert "No document has the source 'nosuch'" in result.stdout
    assert "handbook (1 passages)" in result.stdout
    assert "Has anything been ingested" not in result.stdout


def test_text_that_is_not_utf8_is_read_with_replacement_characters(tmp_path: Path) -> None:
    """A Latin-1 terminal sends `café` as the byte E9, which reaches Python as a lone surrogate:
    the tokenizer refused it ("unexpected TypeError") and SQLite too ("surrogates not
    allowed"). Each such byte is read as U+FFFD, as `bot chat` reads such a line."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# Coffee\n\nThe coffee machine is on the third floor.\n")
    assert run_bot(["ingest", str(docs)], tmp_path).returncode == 0
    latin1 = "coffee caf\udce9"  # subprocess sends it as the byte E9, as such a terminal does
    search = run_bot(["search", latin1, "--source", "caf\udce9"], tmp_path)
    assert search.returncode == 0, search.stderr
    assert "No document has the source 'caf\ufffd'" in search.stdout
    found = run_bot(["search", latin1], tmp_path)
    assert (found.returncode, found.stderr) == (0, ""), found.stderr
    assert "third floor" in found.stdout
    ask = run_bot(["ask", latin1, "--conversation", "caf\udce9"], tmp_path)
    assert ask.returncode == 0, ask.stderr
    assert "third floor" in ask.stdout


def test_search_on_an_empty_index_says_where_it_is_and_fails(tmp_path: Path) -> None:
    """A setup to finish, not a result: exit 2 with the one line saying what to do, so a
    script (a deploy's smoke test) can tell an empty index from a query that matched nothing."""
    result = run_bot(["search", "widgets"], tmp_path)
    assert result.returncode == 2
    line = one_error_line(result)
    assert line.startswith("error: the knowledge base is empty: nothing has been ingested into ")
    assert f"{tmp_path / 'data' / 'index.sqlite'} yet" in line
    assert "bot ingest" in line
    assert result.stdout == ""
    as_json = run_bot(["search", "widgets", "--json"], tmp_path)
    assert (as_json.returncode, json.loads(as_json.stdout)) == (2, [])


def _modules_after(
    args: list[str], tmp_path: Path, watched: tuple[str, ...] = HEAVY_MODULES
) -> set[str]:
    """Runs the CLI in-process in a fresh interpreter and lists the heavy modules it loaded."""
    probe = (
        "import sys\n"
        f"sys.argv = ['bot', *{args!r}]\n"
        "from bot.cli import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        f"print('LOADED', sorted(m for m in {watched!r} if m in sys.modules))\n"
    )
    environment = {
        **os.environ,
        "BOT_STORAGE__DATA_DIR": str(tmp_path / "data"),
        "BOT_CONFIG": str(REPO / "config.yaml"),
    }
    result = subprocess.run(
        [sys.executable, "-c", probe],
        env=environment,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=True,
    )
    line = next(x for x in result.stdout.splitlines() if x.startswith("LOADED"))
    return set(eval(line.removeprefix("LOADED ")))


def test_help_imports_no_sdk_and_no_model_runtime(tmp_path: Path) -> None:
    assert _modules_after(["--help"], tmp_path, HELP_HEAVY_MODULES) == set()


def test_reingesting_an_unchanged_folder_loads_no_sdk_and_no_model(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# A\n\nAlpha.\n")
    assert run_bot(["ingest", str(docs)], tmp_path).returncode == 0
    assert _modules_after(["ingest", str(docs)], tmp_path) == set()


def test_ctrl_c_at_the_chat_prompt_ends_it_at_once(tmp_path: Path) -> None:
    """Ctrl-C typed in a real terminal (a pty whose line discipline turns it into SIGINT for
    the process): the chat ends within seconds with 130, like any command interrupted."""
    environment = {
        **os.environ,
        "BOT_STORAGE__DATA_DIR": str(tmp_path / "data"),
        "BOT_CONFIG": str(REPO / "config.yaml"),
    }
    pid, terminal = pty.fork()
    if pid == 0:  # the child: the pty is its controlling terminal
        # As a terminal's shell starts it: a run in the background of a shell without job
        # control (CI) inherits SIGINT ignored, and exec keeps it so.
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.execve(str(BOT), [str(BOT), "chat"], environment)
    try:
        shown = _read_until(terminal, b"> ", TIMEOUT_S)
        assert b"> " in shown, shown
        os.write(terminal, b"\x03")
        deadline = time.monotonic() + CTRL_C_EXIT_BOUND_S
        while (ended := os.waitpid(pid, os.WNOHANG))[0] == 0:
            assert time.monotonic() < deadline, _read_until(terminal, b"", 0.5)
            _read_until(terminal, b"", 0.1)  # keep the pty drained
        assert os.waitstatus_to_exitcode(ended[1]) == 130
    finally:
        with contextlib.suppress(ProcessLookupError, ChildProcessError):
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        os.close(terminal)


def test_ctrl_c_at_the_chat_prompt_of_a_pipe_ends_it_with_130(tmp_path: Path) -> None:
    """Standard input a pipe still open (`docker run -i` without `-t`, a script feeding the
    chat): SIGINT at the prompt used to abort the interpreter's shutdown on stdin's buffer
    lock, which the reading thread held ("Fatal Python error", a thread dump, exit 134)."""
    environment = {
        **os.environ,
        "BOT_STORAGE__DATA_DIR": str(tmp_path / "data"),
        "BOT_CONFIG": str(REPO / "config.yaml"),
    }
    process = subprocess.Popen(
        [str(BOT), "chat"],
        env=environment,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        # As a shell starts it (a CI runner may have SIGINT ignored, and exec keeps that).
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        assert process.stdout is not None
        shown = _read_until(process.stdout.fileno(), b"> ", TIMEOUT_S)
        assert b"> " in shown, shown
        process.send_signal(signal.SIGINT)
        # Not `communicate()`: it closes stdin, and the end of input would free the lock.
        process.wait(timeout=CTRL_C_EXIT_BOUND_S)
        assert process.stderr is not None
        said = process.stderr.read()
        assert process.returncode == 130, said
        assert b"Fatal Python error" not in said
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        for stream in (process.stdin, process.stdout, process.stderr):
            if stream is not None:
                stream.close()


def _read_until(terminal: int, wanted: bytes, timeout_s: float) -> bytes:
    """What the pty shows until `wanted` appears or the time is up (then whatever came)."""
    seen = b""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and not (wanted and wanted in seen):
        ready, _, _ = select.select([terminal], [], [], 0.1)
        if ready:
            try:
                seen += os.read(terminal, 4096)
            except OSError:  # the child closed the pty
                break
    return seen


def test_asking_with_no_claude_key_loads_no_anthropic_sdk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Which model's `ground_answers` applies is read from the settings: telling it from the
    model's class imported the Anthropic SDK for every deployment."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# A\n\nAlpha is the first letter.\n")
    assert run_bot(["ingest", str(docs)], tmp_path).returncode == 0
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    assert "anthropic" not in _modules_after(["ask", "what is alpha?"], tmp_path, ("anthropic",))
