"""Git sources on repositories the tests make: a shallow clone in the data dir, Markdown,
reStructuredText and AsciiDoc with links to the web view at the heading, include/exclude
patterns, and a second sync that reads only what `git diff` names (renames, deletions and a
file moved out of the include pattern pruned)."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest
from aiohttp import web
from typer.testing import CliRunner

import core.ingest.git as git_module
from bot.cli import app
from core.backends.elasticsearch.documents import now_millis, record_id, record_source
from core.config import IngestSettings, SourceSettings
from core.config_loader import load_settings
from core.domain.documents import PENDING_CHECKSUM, Outcome
from core.domain.urls import redact_url
from core.errors import ConfigError, SourceUnavailable
from core.ingest.address_guard import AddressGuard
from core.ingest.git import GitConnector, default_web_view, sparse_patterns, web_link
from core.ingest.pipeline import Ingestor
from core.ingest.sources import EXTENSIONS
from core.ingest.sync import INTERRUPTED, SourceSyncer, sync_statuses
from tests.fakes.dns import Resolver
from tests.fakes.faults import RefusingEmbedder
from tests.fakes.git_http import GitHost, git_host
from tests.fakes.threaded import served_in_a_thread

PUBLIC = "93.184.215.14"  # a globally routable address (never reached here)
WEB = "https://git.example.com/acme/handbook/blob/{branch}/{path}"
# A refusal is one round trip; the bound is for a busy 2-core machine.
REFUSED_WITHIN_S = 30
runner = CliRunner()

INSTALL_MD = """# Install

Download the installer from the releases page.

## Configure the proxy

Set `HTTPS_PROXY` before running the installer behind a corporate proxy.
"""
GUIDE_RST = """User guide
==========

Welcome.

Rotating keys
-------------

Rotate the signing keys every ninety days with ``keys rotate``.
"""
OPS_ADOC = """= Operations
:toc:

[[restarts]]
== Restarting the workers

Drain the queue, then restart each worker with `systemctl restart worker`.

== Paging policy

Page the on-call engineer only for customer-facing outages.
"""


def git(repo: Path, *args: str) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "Test",
        "GIT_AUTHOR_EMAIL": "test@example.com",
        "GIT_COMMITTER_NAME": "Test",
        "GIT_COMMITTER_EMAIL": "test@example.com",
    }
    done = subprocess.run(
        ["git", *args], cwd=repo, env=env, check=True, capture_output=True, text=True
    )
    return done.stdout


def write(repo: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text, encoding="utf-8")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    repo = tmp_path / "handbook"
    repo.mkdir()
    git(repo, "init", "--quiet", "--initial-branch", "main")
    write(
        repo,
        {
            "README.md": "# Handbook\n\nThe team's handbook.\n",
            "docs/install.md": INSTALL_MD,
            "docs/guide.rst": GUIDE_RST,
            "docs/ops.adoc": OPS_ADOC,
            "docs/faq.md": "# FAQ\n\nAsk in #help.\n",
            "docs/drafts/wip.md": "# Work in progress\n\nNot ready.\n",
            "docs/app.py": "print('not a document')\n",
            "docs/big.md": "version https://git-lfs.github.com/spec/v1\noid sha256:abc\nsize 9\n",
        },
    )
    (repo / "docs" / "passwd.md").symlink_to("/etc/passwd")
    git(repo, "add", "-A")
    git(repo, "commit", "--quiet", "-m", "first")
    return repo


def source(repo: Path, **options: object) -> SourceSettings:
    return SourceSettings.model_validate(
        {
            "type": "git",
            "location": [str(repo)],
            "include": ["docs/**"],
            "exclude": ["docs/drafts/"],
            "web_url": WEB,
            **options,
        }
    )


@pytest.fixture
def syncer(ingestor: Ingestor, index, backend, settings, tmp_path: Path) -> SourceSyncer:  # type: ignore[no-untyped-def]
    import httpx

    return SourceSyncer(
        ingestor, index, backend.locks, httpx.AsyncClient(), settings.ingest, tmp_path / "data"
    )


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The files each sync actually read from the clone (the real reader, counted)."""
    seen: list[str] = []
    real = git_module.read_item

    async def counted(item, **kwargs):  # type: ignore[no-untyped-def]
        seen.append(item.display)
        return await real(item, **kwargs)

    monkeypatch.setattr(git_module, "read_item", counted)
    return seen


async def urls(index, query: str) -> list[str]:  # type: ignore[no-untyped-def]
    return [hit.chunk.url for hit in await index.search(query, k=3)]


async def test_a_repository_is_cloned_shallow_and_each_format_links_to_its_heading(
    repo: Path, syncer: SourceSyncer, index, reads: list[str], tmp_path: Path
) -> None:
    git(repo, "commit", "--quiet", "--allow-empty", "-m", "second")  # history to leave behind
    report = await syncer.sync("handbook", source(repo))
    assert report.counts[Outcome.ADDED] == 4  # install.md, guide.rst, ops.adoc, faq.md
    skipped = {s.display: s.reason for s in report.skipped}
    assert skipped == {
        "docs/app.py": "unsupported file type '.py'",
        "docs/big.md": "a Git LFS pointer (the file itself is not in the clone)",
        "docs/passwd.md": "a symlink (not followed)",
    }
    assert "docs/drafts/wip.md" not in reads
    assert "README.md" not in reads
    clone = tmp_path / "data" / "git" / "handbook"
    assert (clone / ".git" / "shallow").is_file()
    assert git(clone, "rev-list", "--count", "HEAD").strip() == "1"

    base = "https://git.example.com/acme/handbook/blob/main/docs"
    assert f"{base}/install.md#configure-the-proxy" in await urls(index, "corporate proxy")
    assert f"{base}/guide.rst#rotating-keys" in await urls(index, "rotate signing keys")
    assert f"{base}/ops.adoc#restarts" in await urls(index, "restart each worker")
    assert f"{base}/ops.adoc#_paging_policy" in await urls(index, "page the on-call engineer")


@pytest.mark.parametrize("backend_settings", ["sqlite"], indirect=True)
async def test_without_include_patterns_a_document_that_is_a_symlink_is_still_said(
    repo: Path, syncer: SourceSyncer
) -> None:
    """Only include patterns made a symlink named like a document a skip with its reason;
    without them `passwd.md -> /etc/passwd` vanished, while the README says it is skipped
    with the reason. An unsupported file is still not listed (a repository holds many)."""
    report = await syncer.sync("handbook", source(repo, include=[], exclude=[]))
    skipped = {s.display: s.reason for s in report.skipped}
    assert skipped["docs/passwd.md"] == "a symlink (not followed)"
    assert "docs/app.py" not in skipped


async def test_a_second_sync_reads_only_what_the_diff_names(
    repo: Path, syncer: SourceSyncer, index, reads: list[str]
) -> None:
    await syncer.sync("handbook", source(repo))
    reads.clear()

    unchanged = await syncer.sync("handbook", source(repo))
    assert reads == ["docs/big.md"]  # skipped last time (an LFS pointer): tried again, alone
    assert unchanged.counts[Outcome.UNCHANGED] == 4
    reads.clear()

    write(repo, {"docs/guide.rst": GUIDE_RST.replace("ninety", "thirty")})
    git(repo, "mv", "docs/ops.adoc", "docs/operations.adoc")
    git(repo, "rm", "--quiet", "docs/install.md")
    git(repo, "mv", "docs/faq.md", "archive-faq.md")  # out of the include pattern
    git(repo, "commit", "--quiet", "-am", "edit, rename, delete, move out")
    changed = await syncer.sync("handbook", source(repo))
    assert sorted(reads) == ["docs/big.md", "docs/guide.rst", "docs/operations.adoc"]
    assert changed.counts[Outcome.UPDATED] == 1
    assert changed.counts[Outcome.ADDED] == 1
    assert changed.counts[Outcome.DELETED] == 3  # ops.adoc, install.md, faq.md
    assert not changed.counts[Outcome.UNCHANGED]
    documents = {d.rsplit("/", 1)[-1] for d in await index.documents()}
    assert documents == {"guide.rst", "operations.adoc"}
    hits = await index.search("rotate the signing keys", k=1)
    assert "thirty days" in hits[0].chunk.text


async def test_a_sync_that_fails_midway_is_read_again_next_time(
    repo: Path, syncer: SourceSyncer, index, reads: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    await syncer.sync("handbook", source(repo))
    write(repo, {"docs/faq.md": "# FAQ\n\nAsk in #support now.\n"})
    git(repo, "commit", "--quiet", "-am", "faq moved channel")

    async def down(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise RuntimeError("the embedder went away")

    with monkeypatch.context() as patch:
        patch.setattr(syncer.ingestor, "write", down)
        with pytest.raises(RuntimeError):
            await syncer.sync("handbook", source(repo))
    reads.clear()
    report = await syncer.sync("handbook", source(repo))
    # the synced commit was not moved on by the failed run
    assert sorted(reads) == ["docs/big.md", "docs/faq.md"]
    assert report.counts[Outcome.UPDATED] == 1


async def test_a_sync_cancelled_midway_says_so_in_its_status(
    repo: Path, syncer: SourceSyncer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Ctrl-C (or the clock stopping) cancels the sync: `bot sources list` says it was
    interrupted, not how the sync before it went."""
    await syncer.sync("handbook", source(repo))
    write(repo, {"docs/faq.md": "# FAQ\n\nAsk in #support now.\n"})
    git(repo, "commit", "--quiet", "-am", "faq moved channel")

    async def cancelled(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise asyncio.CancelledError

    with monkeypatch.context() as patch:
        patch.setattr(syncer.ingestor, "write", cancelled)
        with pytest.raises(asyncio.CancelledError):
            await syncer.sync("handbook", source(repo))
    status = sync_statuses(tmp_path / "data")["handbook"]
    assert status.error == INTERRUPTED
    assert not status.counts


@pytest.mark.parametrize("backend_settings", ["elasticsearch"], indirect=True)
async def test_a_document_left_pending_is_written_by_the_next_sync(
    repo: Path, syncer: SourceSyncer, index, reads: list[str]
) -> None:
    """On Elasticsearch a new document whose failed write could not be cleared away stays under
    a pending record: the diff names nothing new, yet the next sync reads and adds it."""
    await syncer.sync("handbook", source(repo))
    records = await index.documents()
    faq = next(d for d in records if d.endswith("/docs/faq.md"))
    await index.delete_document(faq)
    pending = dataclasses.replace(records[faq], checksum=PENDING_CHECKSUM)
    await index.client.index(
        index=index.names.chunks,
        id=record_id(faq),
        document=record_source(pending, 0, now_millis()),
        refresh=True,
    )
    reads.clear()
    report = await syncer.sync("handbook", source(repo))
    assert "docs/faq.md" in reads
    assert report.counts[Outcome.ADDED] == 1
    assert (await index.documents())[faq].complete


async def test_another_branch_and_a_changed_location(
    repo: Path, syncer: SourceSyncer, index, tmp_path: Path
) -> None:
    git(repo, "checkout", "--quiet", "-b", "next")
    write(repo, {"docs/next.md": "# Next\n\nOnly on the next branch.\n"})
    git(repo, "add", "-A")
    git(repo, "commit", "--quiet", "-m", "next")
    git(repo, "checkout", "--quiet", "main")
    report = await syncer.sync("handbook", source(repo, branch="next"))
    assert report.counts[Outcome.ADDED] == 5
    links = await urls(index, "only on the next branch")
    assert "https://git.example.com/acme/handbook/blob/next/docs/next.md#next" in links

    other = tmp_path / "other"
    other.mkdir()
    git(other, "init", "--quiet", "--initial-branch", "main")
    write(other, {"docs/solo.md": "# Solo\n\nThe only page.\n"})
    git(other, "add", "-A")
    git(other, "commit", "--quiet", "-m", "solo")
    moved = await syncer.sync("handbook", source(other))  # the clone is replaced, old pruned
    assert moved.counts[Outcome.ADDED] == 1
    assert moved.counts[Outcome.DELETED] == 5  # the old remote's: the source no longer has them
    assert [d.rsplit("/", 1)[-1] for d in await index.documents()] == ["solo.md"]


async def test_a_renamed_default_branch_is_the_one_linked(
    repo: Path, syncer: SourceSyncer, index
) -> None:
    """With no `branch:`, the source follows the remote's default branch; renamed (main ->
    trunk), its links name the new one, not the clone's first name for it, which the web
    view may no longer have."""
    await syncer.sync("handbook", source(repo))
    git(repo, "branch", "-m", "main", "trunk")
    renamed = await syncer.sync("handbook", source(repo))
    assert renamed.counts[Outcome.ADDED] == 4
    assert renamed.counts[Outcome.DELETED] == 4  # the same files, under the old branch's name
    links = await urls(index, "corporate proxy")
    assert (
        "https://git.example.com/acme/handbook/blob/trunk/docs/install.md#configure-the-proxy"
        in links
    )
    assert not [u for u in links if "/blob/main/" in u]


async def test_an_unreachable_repository_fails_the_sync_in_one_line(
    syncer: SourceSyncer, tmp_path: Path
) -> None:
    missing = SourceSettings(type="git", location=[str(tmp_path / "nowhere")])
    with pytest.raises(SourceUnavailable) as failure:
        await syncer.sync("handbook", missing)
    message = str(failure.value)
    assert message.startswith("git clone of file://")
    assert message.endswith("/nowhere' does not appear to be a git repository")  # git's cause
    assert "\n" not in message
    assert sync_statuses(tmp_path / "data")["handbook"].error == message


async def test_a_repository_without_commits_fails_the_sync_saying_so(
    syncer: SourceSyncer, tmp_path: Path
) -> None:
    empty = tmp_path / "empty.git"
    subprocess.run(["git", "init", "--quiet", "--bare", str(empty)], check=True)
    with pytest.raises(SourceUnavailable) as failure:
        await syncer.sync("handbook", SourceSettings(type="git", location=[str(empty)]))
    assert str(failure.value) == f"{empty.as_uri()} has no commits yet: nothing to sync"


@pytest.fixture
async def silent_remote() -> AsyncIterator[str]:
    """A Git server that takes the connection and never answers (a hung or hostile host)."""

    async def never_answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()  # until the client goes away

    server = await asyncio.start_server(never_answer, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    yield f"http://127.0.0.1:{port}/acme/handbook.git"
    server.close()


def running_with(text: str) -> list[str]:
    """The command lines of this machine's processes that mention `text`."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            line = cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:  # ended meanwhile
            continue
        if text in line:
            found.append(line)
    return found


@pytest.mark.parametrize("backend_settings", ["sqlite"], indirect=True)
async def test_a_remote_that_never_answers_fails_at_the_timeout_and_leaves_no_git_behind(
    syncer: SourceSyncer, silent_remote: str
) -> None:
    """git's helper (git-remote-http) waits on the server with git's pipes open: killing git
    alone left it there, and the sync waiting on those pipes for as long as the server
    waited."""
    quick = syncer.settings.model_copy(
        update={"git": syncer.settings.git.model_copy(update={"timeout_s": 1})}
    )
    remote = SourceSettings(type="git", location=[silent_remote])
    async with asyncio.timeout(30):
        with pytest.raises(
            SourceUnavailable, match=r"took longer than 1 s \(ingest.git.timeout_s\)"
        ):
            await dataclasses.replace(syncer, settings=quick).sync("handbook", remote)
    await asyncio.sleep(0.2)  # the kill delivered
    assert running_with(silent_remote) == []


@pytest.mark.parametrize("backend_settings", ["sqlite"], indirect=True)
async def test_the_locks_of_a_git_killed_mid_fetch_do_not_fail_every_later_sync(
    repo: Path, syncer: SourceSyncer, tmp_path: Path
) -> None:
    """A git killed while it held them (the timeout, an OOM kill) leaves its lock files."""
    await syncer.sync("handbook", source(repo))
    clone = tmp_path / "data" / "git" / "handbook" / ".git"
    for lock in ("shallow.lock", "index.lock", "refs/heads/main.lock"):
        (clone / lock).write_text("")
    write(repo, {"docs/faq.md": "# FAQ\n\nAsk in #support now.\n"})
    git(repo, "commit", "--quiet", "-am", "faq moved channel")
    report = await syncer.sync("handbook", source(repo))
    assert report.counts[Outcome.UPDATED] == 1


@pytest.mark.parametrize("backend_settings", ["sqlite"], indirect=True)
async def test_a_cancelled_sync_leaves_no_git_behind(
    syncer: SourceSyncer, silent_remote: str
) -> None:
    """Ctrl-C reaches git through the terminal's process group no longer (it has a session
    of its own): the sync ends it."""
    remote = SourceSettings(type="git", location=[silent_remote])
    task = asyncio.create_task(syncer.sync("handbook", remote))
    async with asyncio.timeout(30):
        while not running_with(silent_remote):
            await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await asyncio.sleep(0.2)
    assert running_with(silent_remote) == []


@pytest.mark.parametrize("backend_settings", ["sqlite"], indirect=True)
async def test_git_runs_without_a_terminal_to_prompt_on(
    syncer: SourceSyncer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """GIT_TERMINAL_PROMPT stops git's own prompts, not ssh's: ssh asks for a key's
    passphrase or a new host key on the terminal, and a sync started from one waited there.
    git (and ssh under it) runs in a session of its own, with no terminal."""
    seen = tmp_path / "ssh-session"
    fake_ssh = tmp_path / "ssh"
    fake_ssh.write_text(f"#!/bin/sh\nps -o sid= -p $$ > {seen}\nexit 255\n")
    fake_ssh.chmod(0o755)
    monkeypatch.setenv("GIT_SSH_COMMAND", str(fake_ssh))
    remote = SourceSettings(type="git", location=["ssh://git@git.example.com/acme/handbook.git"])
    with pytest.raises(SourceUnavailable, match="git clone of ssh://"):
        await syncer.sync("handbook", remote)
    assert int(seen.read_text()) != os.getsid(0)


def test_a_git_source_syncs_under_a_relative_data_dir(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The default data dir, `.bot`, is relative: the clone must land in `.bot/git/NAME`, not
    in a folder of that name inside itself, and the second sync must find it there."""
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.setenv("BOT_STORAGE__DATA_DIR", ".bot")
    monkeypatch.setenv(
        "BOT_SOURCES", json.dumps({"handbook": {"type": "git", "location": [str(repo)]}})
    )
    first = runner.invoke(app, ["sync"])
    assert first.exit_code == 0, first.output
    assert (work / ".bot" / "git" / "handbook" / ".git").is_dir()
    again = runner.invoke(app, ["sync"])
    assert again.exit_code == 0, again.output
    assert "unchanged" in again.output


async def test_a_branch_is_never_read_as_an_option(
    syncer: SourceSyncer, repo: Path, tmp_path: Path
) -> None:
    """A branch like `--upload-pack=CMD` would run CMD on fetch: refused when the settings
    load, and never passed to git where it could be an option."""
    with pytest.raises(ValueError, match="branch: a branch name"):
        source(repo, branch="--upload-pack=touch /tmp/x;git-upload-pack")
    await syncer.sync("handbook", source(repo))  # a clone is there: the next sync fetches
    marker = tmp_path / "PWNED"
    hostile = source(repo).model_copy(
        update={"branch": f"--upload-pack=touch {marker};git-upload-pack"}
    )
    with pytest.raises(SourceUnavailable):
        await syncer.sync("handbook", hostile)
    assert not marker.exists()


def test_the_token_comes_from_the_environment_and_never_shows(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`bot sync` over a remote that refuses: the token is sent as a header from the
    environment, and neither the output nor the status file carry it."""
    sources = {
        "handbook": {
            "type": "git",
            "location": ["http://127.0.0.1:9/acme/handbook.git"],
            "token_env": "HANDBOOK_TOKEN",
        }
    }
    monkeypatch.setenv("BOT_STORAGE__DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("BOT_SOURCES", json.dumps(sources))
    unset = runner.invoke(app, ["sync"])
    assert unset.exit_code == 1
    assert "handbook: the token variable HANDBOOK_TOKEN (token_env) is not set" in unset.output
    monkeypatch.setenv("HANDBOOK_TOKEN", "s3cret-token")
    refused = runner.invoke(app, ["sync"])
    assert refused.exit_code == 1
    assert "handbook: git clone of http://127.0.0.1:9/acme/handbook.git:" in refused.output
    assert "Traceback" not in refused.output
    assert "s3cret" not in refused.output
    assert "s3cret" not in (tmp_path / "data" / "sources-status.json").read_text()


@pytest.mark.parametrize(
    ("remote", "pattern"),
    [
        ("https://github.com/acme/docs.git", "https://github.com/acme/docs/blob/{branch}/{path}"),
        ("git@github.com:acme/docs.git", "https://github.com/acme/docs/blob/{branch}/{path}"),
        (
            "https://gitlab.com/acme/group/docs",
            "https://gitlab.com/acme/group/docs/-/blob/{branch}/{path}",
        ),
        ("https://github.com/acme/docs.wiki.git", "https://github.com/acme/docs/wiki/{page}"),
        ("https://gitlab.com/acme/docs.wiki.git", "https://gitlab.com/acme/docs/-/wikis/{stem}"),
        ("https://git.internal.example/acme/docs.git", None),
        ("file:///srv/docs", None),
    ],
)
def test_the_web_view_of_known_hosts(remote: str, pattern: str | None) -> None:
    assert default_web_view(remote) == pattern


def test_web_links_quote_the_path_and_name_wiki_pages() -> None:
    assert (
        web_link("https://github.com/a/b/blob/{branch}/{path}", "release/2.0", "docs/a b.md")
        == "https://github.com/a/b/blob/release/2.0/docs/a%20b.md"
    )
    assert web_link("https://github.com/a/b/wiki/{page}", "master", "Home-Page.md") == (
        "https://github.com/a/b/wiki/Home-Page"
    )


@pytest.mark.parametrize(
    ("pasted", "written"),
    [
        (
            "https://github.com/acme/guides/tree/main/docs",
            "location: [https://github.com/acme/guides.git], branch: main, include: [docs/**]",
        ),
        (
            "https://github.com/acme/guides/blob/v2/docs/install.md#usage",
            "location: [https://github.com/acme/guides.git], branch: v2,"
            " include: [docs/install.md]",
        ),
        (
            "https://github.com/acme/guides/tree/main",
            "location: [https://github.com/acme/guides.git], branch: main",
        ),
        (
            "https://gitlab.com/acme/platform/guides/-/tree/develop/handbook/?ref_type=heads",
            "location: [https://gitlab.com/acme/platform/guides.git], branch: develop,"
            " include: [handbook/**]",
        ),
    ],
)
def test_a_browsers_page_of_a_repository_is_refused_with_what_to_write(
    tmp_path: Path, pasted: str, written: str
) -> None:
    """A newcomer's first try: the page the browser shows, which git reports only as
    "repository not found"."""
    file = tmp_path / "config.yaml"
    file.write_text(f"sources:\n  guides:\n    type: git\n    location: [{pasted!r}]\n")
    with pytest.raises(ConfigError) as refused:
        load_settings(file, environ={})
    assert str(refused.value) == (
        f"invalid configuration: sources.guides: {pasted} is a web page, not a repository:"
        f" write {written}, from {file}"
    )


@pytest.mark.parametrize(
    "location",
    [
        "https://github.com/acme/guides.git",
        "https://github.com/acme/guides",
        "https://gitlab.com/acme/tree/guides.git",
        "https://git.example.com/acme/guides/tree/main/docs",  # another host's own paths
    ],
)
def test_a_repository_url_is_taken_as_it_is(location: str) -> None:
    assert SourceSettings(type="git", location=[location]).location == [location]


def test_a_git_source_is_one_repository_and_a_web_url_names_the_file() -> None:
    with pytest.raises(ValueError, match="one location"):
        SourceSettings(type="git", location=["a", "b"])
    with pytest.raises(ValueError, match="web_url needs"):
        SourceSettings(type="git", location=["a"], web_url="https://example.com/")


@pytest.mark.parametrize("backend_settings", ["sqlite"], indirect=True)
async def test_a_file_name_that_is_not_utf8_is_indexed_under_a_readable_name(
    repo: Path, syncer: SourceSyncer, index, reads: list[str]
) -> None:
    """A Latin-1 file name (bytes git keeps as they are): its link raised
    UnicodeEncodeError and ended every sync of the repository."""
    latin1 = os.fsdecode(b"docs/caf\xe9.md")
    (repo / latin1).write_bytes(b"# Cafe\n\nThe espresso machine is descaled on Fridays.\n")
    git(repo, "add", "-A")
    git(repo, "commit", "--quiet", "-m", "a Latin-1 name")
    first = await syncer.sync("handbook", source(repo))
    assert first.counts[Outcome.ADDED] == 5
    shown = "docs/caf\ufffd.md"
    assert f"https://git.example.com/acme/handbook/blob/main/{quote(shown)}#cafe" in await urls(
        index, "espresso machine descaled"
    )
    (repo / latin1).write_bytes(b"# Cafe\n\nThe espresso machine is descaled on Mondays.\n")
    git(repo, "commit", "--quiet", "-am", "descale on Mondays")
    reads.clear()
    second = await syncer.sync("handbook", source(repo))
    assert sorted(reads) == ["docs/big.md", shown]  # the diff names it as the sync does
    assert second.counts[Outcome.UPDATED] == 1


async def test_a_file_over_the_size_limit_is_skipped_before_it_is_read(
    repo: Path, syncer: SourceSyncer, reads: list[str]
) -> None:
    write(repo, {"docs/huge.md": "# Huge\n\n" + "word " * 2_000})
    git(repo, "add", "-A")
    git(repo, "commit", "--quiet", "-m", "a big page")
    small = syncer.settings.model_copy(update={"max_file_bytes": 5_000})
    report = await dataclasses.replace(syncer, settings=small).sync("handbook", source(repo))
    skipped = {s.display: s.reason for s in report.skipped}
    assert skipped["docs/huge.md"] == "over the limit of 5,000 bytes (ingest.max_file_bytes)"
    assert "docs/huge.md" not in reads  # its size came from the checkout: never opened
    assert report.counts[Outcome.ADDED] == 4


@pytest.mark.parametrize("backend_settings", ["sqlite"], indirect=True)
async def test_a_listing_over_the_output_limit_fails_the_sync_and_ends_git(
    repo: Path, syncer: SourceSyncer
) -> None:
    """A tree of millions of files was held whole in memory: git's output is bounded."""
    write(
        repo, {f"docs/page-{n:04}.md": f"# Page {n}\n\nRestart worker {n}.\n" for n in range(300)}
    )
    git(repo, "add", "-A")
    git(repo, "commit", "--quiet", "-m", "many pages")
    bounded = with_git(syncer, max_output_bytes=4_096)  # the listing is about 33 KB
    with pytest.raises(SourceUnavailable) as refused:
        await bounded.sync("handbook", source(repo))
    assert str(refused.value) == (
        f"git ls-tree of {repo.as_uri()} printed more than 4,096 bytes"
        " (ingest.git.max_output_bytes)"
    )
    assert running_with(str(repo)) == []
    report = await syncer.sync("handbook", source(repo))  # the shipped limit takes it
    assert report.counts[Outcome.ADDED] == 304


async def test_a_change_that_could_not_be_indexed_is_read_again_next_time(
    repo: Path, index, backend, settings, embedder, reads: list[str], tmp_path: Path
) -> None:
    """One file's embedding fails while the rest of the sync completes: the commit moves on,
    yet that file is read again at the next sync (the diff will not name it again), so its
    change is not lost behind its old indexed copy."""
    import httpx

    refusing = RefusingEmbedder(embedder, "thirty")
    syncer = SourceSyncer(
        Ingestor(index, refusing, settings.ingest),
        index,
        backend.locks,
        httpx.AsyncClient(),
        settings.ingest,
        tmp_path / "data",
    )
    await syncer.sync("handbook", source(repo))
    write(repo, {"docs/guide.rst": GUIDE_RST.replace("ninety", "thirty")})
    git(repo, "commit", "--quiet", "-am", "keys every thirty days")
    with pytest.raises(SourceUnavailable) as failure:  # said as a failure, in one line
        await syncer.sync("handbook", source(repo))
    assert str(failure.value) == (
        "1 document(s) could not be indexed (docs/guide.rst: embedding failed: embedding "
        "service answered 503); the rest was synced, they are read again at the next sync"
    )
    status = sync_statuses(tmp_path / "data")["handbook"]
    assert status.error == str(failure.value)
    assert status.counts["failed"] == 1
    assert status.skipped[0] == "docs/guide.rst: embedding failed: embedding service answered 503"

    refusing.down = False
    reads.clear()
    again = await syncer.sync("handbook", source(repo))
    assert sorted(reads) == ["docs/big.md", "docs/guide.rst"]
    assert again.counts[Outcome.UPDATED] == 1
    hits = await index.search("rotate the signing keys", k=1)
    assert "thirty days" in hits[0].chunk.text
    reads.clear()
    await syncer.sync("handbook", source(repo))
    assert reads == ["docs/big.md"]  # indexed now: not read again


async def test_two_sources_of_one_repository_keep_each_others_documents(
    repo: Path, syncer: SourceSyncer, index
) -> None:
    """Two sources take other files of the same repository (a monorepo's docs and its API
    reference): each sync prunes only what went from its own files, never the other's."""
    guides = source(repo, include=["docs/*.md"], exclude=[])
    reference = source(repo, include=["docs/*.rst", "docs/*.adoc"], exclude=[])
    await syncer.sync("guides", guides)
    await syncer.sync("reference", reference)
    again = await syncer.sync("guides", guides)
    assert again.counts[Outcome.DELETED] == 0
    labels = {d.rsplit("/", 1)[-1]: r.source for d, r in (await index.documents()).items()}
    assert labels == {
        "faq.md": "guides",
        "install.md": "guides",
        "guide.rst": "reference",
        "ops.adoc": "reference",
    }
    git(repo, "rm", "--quiet", "docs/ops.adoc", "docs/faq.md")
    git(repo, "commit", "--quiet", "-m", "one of each gone")
    assert (await syncer.sync("guides", guides)).counts[Outcome.DELETED] == 1
    assert (await syncer.sync("reference", reference)).counts[Outcome.DELETED] == 1
    assert sorted(d.rsplit("/", 1)[-1] for d in await index.documents()) == [
        "guide.rst",
        "install.md",
    ]


async def test_changed_settings_reach_documents_their_source_did_not_change(
    repo: Path, syncer: SourceSyncer, index, reads: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A corrected `web_url` or another chunk size: the diff names no file, yet each is read
    again and re-indexed with its new links and chunks; once, and not for a new schedule."""
    await syncer.sync("handbook", source(repo))
    moved = "https://code.example.com/acme/handbook/src/branch/{branch}/{path}"
    with monkeypatch.context() as patch:
        patch.setattr(syncer.ingestor, "write", _down)
        with pytest.raises(RuntimeError):  # a failed sync leaves the change to the next one
            await syncer.sync("handbook", source(repo, web_url=moved))
    reads.clear()
    relinked = await syncer.sync("handbook", source(repo, web_url=moved))
    assert relinked.counts[Outcome.UPDATED] == 4
    links = {record.url for record in (await index.documents()).values()}
    assert all(link.startswith("https://code.example.com/acme/handbook/src/") for link in links)
    assert "https://code.example.com/acme/handbook/src/branch/main/docs/install.md" in links

    reads.clear()
    await syncer.sync("handbook", source(repo, web_url=moved, schedule="0 4 * * *"))
    assert reads == ["docs/big.md"]  # the schedule changes nothing indexed

    small = syncer.settings.model_copy(update={"chunk_chars": 80, "chunk_overlap_chars": 10})
    rechunked = await dataclasses.replace(
        syncer, ingestor=Ingestor(index, syncer.ingestor._embedder, small), settings=small
    ).sync("handbook", source(repo, web_url=moved))
    assert rechunked.counts[Outcome.UPDATED] == 4


async def _down(*args: object, **kwargs: object) -> None:
    raise RuntimeError("the embedder went away")


@pytest.fixture
def hosted(repo: Path, tmp_path: Path) -> Iterator[tuple[GitHost, str]]:
    """`repo` on a Git host over HTTP that takes `alice:s3cret-password` only."""
    served = tmp_path / "served"
    served.mkdir()
    git(served, "clone", "--quiet", "--bare", str(repo), "handbook.git")
    git(served / "handbook.git", "config", "uploadpack.allowFilter", "true")  # as GitHub's
    with git_host(served, "alice", "s3cret-password") as (host, url):
        yield host, f"{url}/handbook.git"


def _files_holding(folder: Path, secret: str) -> list[Path]:
    return [p for p in folder.rglob("*") if p.is_file() and secret.encode() in p.read_bytes()]


@pytest.mark.parametrize("backend_settings", ["sqlite"], indirect=True)
async def test_credentials_in_the_url_go_as_a_header_and_never_reach_the_disk(
    hosted: tuple[GitHost, str], syncer: SourceSyncer, index, tmp_path: Path
) -> None:
    """Given to git in the URL, they were written into the clone's `.git/config`, where they
    stayed for as long as the clone did."""
    host, url = hosted
    location = url.replace("http://", "http://alice:s3cret-password@")
    first = await syncer.sync("handbook", source(tmp_path, location=[location]))
    assert first.counts[Outcome.ADDED] == 4
    again = await syncer.sync("handbook", source(tmp_path, location=[location]))  # a fetch
    assert again.counts[Outcome.UNCHANGED] == 4
    assert set(host.credentials) == {"alice:s3cret-password"}
    assert _files_holding(tmp_path / "data", "s3cret") == []
    assert "https://git.example.com/acme/handbook/blob/main/docs/install.md#install" in await urls(
        index, "download the installer"
    )


@pytest.mark.parametrize("backend_settings", ["sqlite"], indirect=True)
async def test_a_token_is_sent_as_basic_credentials_the_host_takes(
    hosted: tuple[GitHost, str],
    syncer: SourceSyncer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    host, url = hosted
    host.user, host.password = "x-access-token", "t0ken-value"
    monkeypatch.setenv("HANDBOOK_TOKEN", "t0ken-value")
    synced = await syncer.sync(
        "handbook", source(tmp_path, location=[url], token_env="HANDBOOK_TOKEN")
    )
    assert synced.counts[Outcome.ADDED] == 4
    assert set(host.credentials) == {"x-access-token:t0ken-value"}
    assert _files_holding(tmp_path / "data", "t0ken") == []


@pytest.mark.parametrize("backend_settings", ["sqlite"], indirect=True)
@pytest.mark.parametrize("userinfo", ["alice:wr0ng-password@", ""], ids=["wrong", "none"])
async def test_credentials_the_host_refuses_fail_the_sync_at_once_without_showing_them(
    hosted: tuple[GitHost, str], syncer: SourceSyncer, tmp_path: Path, userinfo: str
) -> None:
    _, url = hosted
    location = url.replace("http://", f"http://{userinfo}")
    started = time.monotonic()
    with pytest.raises(SourceUnavailable) as refused:
        await syncer.sync("handbook", source(tmp_path, location=[location]))
    assert time.monotonic() - started < REFUSED_WITHIN_S  # never waits for a password
    assert "wr0ng" not in str(refused.value)
    # Said as what to do, not only as git's "could not read Username ... prompts disabled".
    assert "the remote refused the credentials, or wants some" in str(refused.value)
    assert "set token_env" in str(refused.value)
    assert _files_holding(tmp_path / "data", "wr0ng") == []


@pytest.mark.parametrize("backend_settings", ["sqlite"], indirect=True)
async def test_where_git_lfs_is_installed_its_files_are_not_downloaded(
    repo: Path, syncer: SourceSyncer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """git-lfs's smudge filter, as `git lfs install` configures it for every repository on the
    host, downloads each LFS file at checkout unless GIT_LFS_SKIP_SMUDGE=1 (a stand-in filter
    that honours the variable as git-lfs does, and records a download)."""
    downloads = tmp_path / "downloads"
    lfs = tmp_path / "git-lfs"
    lfs.write_text(
        '#!/bin/sh\n[ "$GIT_LFS_SKIP_SMUDGE" = 1 ] && exec cat\n'
        f"cat >/dev/null; echo \"$1\" >>{downloads}; printf '# Big\\n\\nDownloaded.\\n'\n"
    )
    lfs.chmod(0o755)
    config = tmp_path / "gitconfig"
    config.write_text(f'[filter "lfs"]\n\tsmudge = {lfs} %f\n\tclean = cat\n\trequired = true\n')
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(config))
    (repo / ".gitattributes").write_text("docs/big.md filter=lfs\n")
    git(repo, "add", ".gitattributes")
    git(repo, "commit", "--quiet", "-m", "LFS")
    report = await syncer.sync("handbook", source(repo))
    skipped = {s.display: s.reason for s in report.skipped}
    assert skipped["docs/big.md"] == "a Git LFS pointer (the file itself is not in the clone)"
    assert not downloads.exists()


# -- the remote's host, judged ----------------------------------------------------------------


@pytest.fixture
def no_proxy_set(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No proxy from this machine's environment or git config: the guard's rules apply."""
    for name in ("http_proxy", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
    for name in ("no_proxy", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
    empty = tmp_path / "empty-gitconfig"
    empty.write_text("")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(empty))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")


def connector(location: str, tmp_path: Path, resolver: Resolver) -> GitConnector:
    return GitConnector(
        location,
        IngestSettings(),
        checkout=tmp_path / "data" / "git" / "handbook",
        include=["docs/**"],
        exclude=[],
        branch=None,
        web_url=WEB,
        token=None,
        known=set(),
        guard=AddressGuard(resolve=resolver),
    )


def on_host(url: str, host: str) -> str:
    """The hosted repository's URL under another host name, with the host's credentials."""
    return url.replace("http://127.0.0.1", f"http://alice:s3cret-password@{host}")


@pytest.mark.usefixtures("no_proxy_set")
async def test_git_connects_to_the_addresses_the_guard_judged(
    hosted: tuple[GitHost, str], tmp_path: Path
) -> None:
    """`git.corp` is known only to the stand-in DNS: git's own lookup fails ("Could not
    resolve host"), so the clone works only because curl was pinned to the judged address."""
    host, url = hosted
    resolver = Resolver({"git.corp": ["127.0.0.1"]})
    found = await connector(on_host(url, "git.corp"), tmp_path, resolver).discover()
    assert "docs/install.md" in {item.display for item in found.items}
    # once, for the clone and its checkout (which downloads the files it writes) both
    assert resolver.asked == ["git.corp"]
    assert host.hosts
    assert {name.partition(":")[0] for name in host.hosts} == {"git.corp"}


@pytest.mark.usefixtures("no_proxy_set")
@pytest.mark.parametrize(
    ("addresses", "reason"),
    [
        (["169.254.169.254"], "git.corp resolves to 169.254.169.254, a metadata address"),
        (["fd00:ec2::254"], "git.corp resolves to fd00:ec2::254, a metadata address"),
        (
            [PUBLIC, "127.0.0.1"],
            "git.corp resolves to 127.0.0.1, an internal address, and this fetch started at a"
            " public host (git.corp)",
        ),
    ],
    ids=["link-local", "metadata", "public-and-internal"],
)
async def test_a_remote_whose_name_resolves_where_no_fetch_may_go_is_refused_before_git_runs(
    hosted: tuple[GitHost, str], tmp_path: Path, addresses: list[str], reason: str
) -> None:
    host, url = hosted
    location = on_host(url, "git.corp")
    with pytest.raises(SourceUnavailable) as refused:
        await connector(location, tmp_path, Resolver({"git.corp": addresses})).discover()
    assert str(refused.value) == f"git clone of {redact_url(location)}: {reason}"
    assert "s3cret" not in str(refused.value)
    assert not (tmp_path / "data" / "git" / "handbook").exists()  # no git ran
    assert host.hosts == []


@pytest.mark.usefixtures("no_proxy_set")
@pytest.mark.parametrize(
    ("host", "shown"),
    [
        ("2852039166", "169.254.169.254"),  # inet_aton's form of it, as curl would connect
        ("[::ffff:169.254.169.254]", "169.254.169.254"),
        ("[fd00:ec2::254]", "fd00:ec2::254"),
    ],
)
async def test_a_remote_at_a_metadata_address_in_any_spelling_is_refused(
    tmp_path: Path, host: str, shown: str
) -> None:
    location = f"http://{host}/acme/handbook.git"
    with pytest.raises(SourceUnavailable) as refused:
        await connector(location, tmp_path, Resolver({})).discover()
    named = host.strip("[]")
    assert str(refused.value) == (
        f"git clone of {location}: {named} resolves to {shown}, a metadata address"
    )


@pytest.mark.usefixtures("no_proxy_set")
async def test_a_remote_url_with_a_port_out_of_range_fails_in_one_line(tmp_path: Path) -> None:
    with pytest.raises(SourceUnavailable) as refused:
        await connector("http://git.corp:99999/handbook.git", tmp_path, Resolver({})).discover()
    assert str(refused.value) == (
        "git clone of http://git.corp:99999/handbook.git: Port out of range 0-65535"
    )


@pytest.mark.usefixtures("no_proxy_set")
@pytest.mark.parametrize("says_where", [True, False], ids=["location", "no-location"])
async def test_a_redirect_is_not_followed_and_says_where_it_leads(
    hosted: tuple[GitHost, str], tmp_path: Path, says_where: bool
) -> None:
    """A redirect's target is nobody's judgement (curl looks it up itself), so git must not
    follow it: the target here is the real repository, which must see no request. The error
    names where it leads, as GitLab sends `/acme/guides` on to `/acme/guides.git`."""
    host, url = hosted

    async def moved(request: web.Request) -> web.StreamResponse:
        if not says_where:
            return web.Response(status=301)
        raise web.HTTPMovedPermanently(f"{url}{request.path_qs.removeprefix('/guides')}")

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", moved)
    with served_in_a_thread(app) as old:
        location = f"{old}/guides"
        with pytest.raises(SourceUnavailable) as refused:
            await connector(location, tmp_path, Resolver({})).discover()
    where, what = (
        (f"to {url}", "that URL") if says_where else ("elsewhere", "the repository's current URL")
    )
    assert str(refused.value) == (
        f"git clone of {location}: the remote redirects {where} (HTTP 301), and a git source"
        f" follows no redirect: set its location to {what}"
    )
    assert host.hosts == []


@pytest.mark.parametrize("configured", ["environment", "git config"])
async def test_through_a_proxy_the_proxy_looks_the_host_up(
    hosted: tuple[GitHost, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    no_proxy_set: None,
    configured: str,
) -> None:
    """The git host stands in for the proxy too (it reads the absolute URL a proxy is sent):
    the remote's name is one only the proxy could look up, and the bot must not try."""
    host, url = hosted
    proxy = url.removesuffix("/handbook.git")
    if configured == "environment":
        monkeypatch.setenv("http_proxy", proxy)
    else:
        gitconfig = tmp_path / "proxy-gitconfig"
        gitconfig.write_text(f'[http "http://docs.behind.proxy"]\n\tproxy = {proxy}\n')
        monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(gitconfig))
    resolver = Resolver({})  # knows no name: a lookup here would fail the sync
    location = on_host(url, "docs.behind.proxy").replace(
        f":{httpx.URL(url).port}/", "/"
    )  # the proxy's default port, 80
    found = await connector(location, tmp_path, resolver).discover()
    assert "docs/install.md" in {item.display for item in found.items}
    assert resolver.asked == []
    assert set(host.hosts) == {"docs.behind.proxy"}


@pytest.mark.parametrize(
    ("no_proxy", "bypassed"),
    [
        ("", False),
        ("*", True),
        ("git.corp", True),
        (".corp", True),
        ("corp", True),
        ("example.com, git.corp ", True),
        ("it.corp", False),
        ("git.corp.evil", False),
    ],
)
def test_no_proxy_names_a_host_as_curl_reads_it(
    monkeypatch: pytest.MonkeyPatch, no_proxy: str, bypassed: bool
) -> None:
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.setenv("no_proxy", no_proxy)
    assert git_module._bypasses_proxy("git.corp") is bypassed


# -- only what a document can come from ----------------------------------------------------


def missing_blobs(clone: Path) -> set[str]:
    """The blobs of HEAD a partial clone left on the server."""
    listed = git(clone, "rev-list", "--objects", "--missing=print", "HEAD").split()
    return {line.removeprefix("?") for line in listed if line.startswith("?")}


def push(repo: Path, files: dict[str, bytes], message: str) -> None:
    """A commit of `files` to `repo`, pushed to the hosted copy of it."""
    for name, data in files.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_bytes(data)
    git(repo, "add", "-A")
    git(repo, "commit", "--quiet", "-m", message)
    git(repo, "push", "--quiet", str(repo.parent / "served" / "handbook.git"), "main")


def with_git(syncer: SourceSyncer, **changes: object) -> SourceSyncer:
    """The syncer with `ingest.git` settings changed."""
    git_settings = syncer.settings.git.model_copy(update=changes)
    ingest = syncer.settings.model_copy(update={"git": git_settings})
    return dataclasses.replace(syncer, settings=ingest)


@pytest.mark.parametrize("backend_settings", ["sqlite"], indirect=True)
async def test_the_contents_of_images_binaries_and_code_are_never_downloaded(
    repo: Path, hosted: tuple[GitHost, str], syncer: SourceSyncer, index, tmp_path: Path
) -> None:
    """Most of a large repository's bytes are assets and code: a clone of the whole tree
    downloaded them all at every sync that brought a new one."""
    push(repo, {"assets/video.bin": os.urandom(2_000_000), "src/app.py": b"print(1)\n"}, "assets")
    location = on_host(hosted[1], "127.0.0.1")
    first = await syncer.sync("handbook", source(tmp_path, location=[location]))
    assert first.counts[Outcome.ADDED] == 4
    clone = tmp_path / "data" / "git" / "handbook"
    left_out = missing_blobs(clone)
    assert git(repo, "rev-parse", "HEAD:assets/video.bin").strip() in left_out
    assert git(repo, "rev-parse", "HEAD:src/app.py").strip() in left_out
    assert git(repo, "rev-parse", "HEAD:docs/install.md").strip() not in left_out
    assert not (clone / "assets").exists()
    assert sum(f.stat().st_size for f in (clone / ".git").rglob("*") if f.is_file()) < 500_000

    push(repo, {"assets/video2.bin": os.urandom(2_000_000), "docs/faq.md": b"# FAQ\n\nNew.\n"}, "2")
    again = await syncer.sync("handbook", source(tmp_path, location=[location]))  # a fetch
    assert again.counts[Outcome.UPDATED] == 1
    assert git(repo, "rev-parse", "HEAD:assets/video2.bin").strip() in missing_blobs(clone)
    assert "new" in (await index.search("FAQ new", k=1))[0].chunk.text.lower()


@pytest.mark.parametrize("backend_settings", ["sqlite"], indirect=True)
async def test_documents_only_turned_on_and_off_changes_an_existing_clone(
    repo: Path, hosted: tuple[GitHost, str], syncer: SourceSyncer, tmp_path: Path
) -> None:
    location = on_host(hosted[1], "127.0.0.1")
    clone = tmp_path / "data" / "git" / "handbook"
    push(repo, {"assets/video.bin": os.urandom(500_000)}, "assets")
    whole = with_git(syncer, documents_only=False)
    await whole.sync("handbook", source(tmp_path, location=[location]))
    assert (clone / "assets" / "video.bin").exists()
    assert missing_blobs(clone) == set()

    push(repo, {"assets/video2.bin": os.urandom(500_000)}, "more")
    await syncer.sync("handbook", source(tmp_path, location=[location]))
    assert not (clone / "assets").exists()  # the sparse checkout of a clone from before
    assert git(repo, "rev-parse", "HEAD:assets/video2.bin").strip() in missing_blobs(clone)

    await whole.sync("handbook", source(tmp_path, location=[location]))
    assert (clone / "assets" / "video2.bin").read_bytes() == (
        repo / "assets" / "video2.bin"
    ).read_bytes()  # downloaded at last, by the checkout
    assert missing_blobs(clone) == set()


def test_the_sparse_checkout_takes_every_supported_suffix_in_any_case(tmp_path: Path) -> None:
    """git's own matching of the patterns: a checkout under them writes every file a reader
    takes, whatever its letter case and folder, and nothing else."""
    repo = tmp_path / "r"
    repo.mkdir()
    git(repo, "init", "--quiet")
    documents = [f"d/x{suffix}" for suffix in EXTENSIONS] + [f"Y{s.upper()}" for s in EXTENSIONS]
    others = ["a.png", "d/b.py", "c.mdz", "md", "e.pdf.bin"]
    write(repo, {name: "text\n" for name in [*documents, *others]})
    git(repo, "add", "-A")
    git(repo, "commit", "--quiet", "-m", "all")
    (repo / ".git" / "info" / "sparse-checkout").write_text(sparse_patterns())
    git(repo, "-c", "core.sparseCheckout=true", "-c", "core.sparseCheckoutCone=false",
        "reset", "--quiet", "--hard", "HEAD")  # fmt: skip
    written = {str(f.relative_to(repo)) for f in repo.rglob("*") if f.is_file()}
    assert {name for name in written if not name.startswith(".git/")} == set(documents)


def test_an_older_git_refusing_a_filtered_fetch_is_told_what_to_do() -> None:
    """git before 2.27 refuses `fetch --filter` into a clone made without one (here, the one an
    earlier version of the bot made)."""
    stderr = (
        "fatal: --filter can only be used with the remote configured in extensions.partialclone\n"
    )
    assert git_module._reason(stderr, 128) == (
        "fatal: --filter can only be used with the remote configured in extensions.partialclone"
        " (git older than 2.27: upgrade it, or set ingest.git.documents_only: false)"
    )
