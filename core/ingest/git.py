"""Git repositories as a source (GitHub, GitLab, any remote, or a local path), through the
`git` command: every host and credential helper works, and nothing of the repository runs.

A shallow clone lives in the data dir and is fetched and reset on each sync. By default it
is partial (`--filter=blob:none`) with a sparse checkout of the file types a document can come
from: the contents of images, binaries and code are never downloaded, however large the
repository (the server's support is needed; one without it sends everything, as before).

The commit a sync finished on is remembered beside it, so the next sync reads only the files
`git diff` names between that commit and the new one, and those the last sync could not index
(a parse deadline, a failed embedding or write); everything else is reported unchanged without
being read. The memory is written only when the sync completed, so a crash re-reads what it missed.

Each file links to its web view at the branch (GitHub's and GitLab's patterns for their remotes,
a wiki's page URL for its `.wiki.git`, or `web_url`), with the heading's anchor. Symlinks and
submodules are skipped (a link may point anywhere on this machine), and so are Git LFS pointers.

An http(s) remote's host is judged as the fetcher's hosts are (`address_guard`): looked up
here, never a link-local or metadata address, never an internal one beside a public one, and
git's curl is pinned to the addresses judged (`http.curloptResolve`), so a second lookup (DNS
rebinding) cannot send it elsewhere. git follows no redirect, whose target nobody judged.
Through a proxy, the proxy looks the host up and connects, as for the fetcher.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import os
import re
import shutil
import signal
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from urllib.parse import quote, urlsplit

import httpcore
import httpx

from core.config import IngestSettings
from core.domain.urls import redact_url, redact_urls_in
from core.errors import SourceUnavailable, UnreadableDocument
from core.ingest.address_guard import AddressGuard, GuardedTransport, fetching_from
from core.ingest.formats import DocumentFormat
from core.ingest.globs import PathFilter
from core.ingest.memory import load_json, save_json
from core.ingest.sources import (
    EXTENSIONS,
    Discovery,
    NotModified,
    Skipped,
    SourceItem,
    printable,
    read_item,
    title_from_name,
    too_big,
    unsupported_type,
    userinfo,
)

LFS_POINTER = b"version https://git-lfs.github.com/spec/"
_BLOB = "blob"
_SYMLINK_MODE = "120000"
# The web view of a file on the hosts whose URL patterns are public; {repo} is owner/name.
WEB_VIEWS = {
    "github.com": "https://github.com/{repo}/blob/{branch}/{path}",
    "gitlab.com": "https://gitlab.com/{repo}/-/blob/{branch}/{path}",
}
WIKI_VIEWS = {
    "github.com": "https://github.com/{repo}/wiki/{page}",
    "gitlab.com": "https://gitlab.com/{repo}/-/wikis/{stem}",
}
# What git prints on a failure is quoted in the error up to this many characters.
_DETAIL_CHARS = 300
_READ_BYTES = 1 << 16  # git's output is read in pieces of this size
# The git commands that connect to the remote: its host is judged and pinned for each. A
# checkout of a partial clone downloads the files it writes (git fetches them in a child
# process, which inherits the command's `-c` settings).
_NETWORK = frozenset({"clone", "fetch", "ls-remote", "checkout", "reset"})
_DEFAULT_PORTS = {"http": 80, "https": 443}
_EVERY_FILE = "/*\n"  # the sparse checkout of `documents_only: false`
# The proxy variables curl reads for each scheme (never HTTP_PROXY: a CGI header may set it),
# then for any scheme.
_PROXY_VARIABLES = {"http": ("http_proxy",), "https": ("https_proxy", "HTTPS_PROXY")}
_ANY_PROXY = ("all_proxy", "ALL_PROXY")
# How git's curl says a request was answered with a redirect it did not follow.
_REDIRECTED = re.compile(r"returned error: (3\d\d)")
# git's first request to a smart-HTTP remote, whose redirect git itself would have followed
_REF_LISTING = "info/refs?service=git-upload-pack"
# How git before 2.27 refuses a filtered fetch into a clone that is not partial yet.
_NO_FILTERED_FETCH = "--filter can only be used"
# How git says the remote refused the credentials it sent (or wanted some and had none): with
# prompts off it asks for a user name it can't read, or says authentication failed.
_CREDENTIALS_REFUSED = (
    "could not read Username",
    "could not read Password",
    "Authentication failed",
)
_REFUSED_ADVICE = (
    "the remote refused the credentials, or wants some (a private repository): set token_env "
    "to the variable holding a token with read access"
)


@dataclass(frozen=True, slots=True)
class _Entry:
    mode: str
    kind: str
    path: str


def _not_read(entry: _Entry) -> str | None:
    """Why an entry of the tree is never read, whatever its name: it points elsewhere."""
    if entry.kind != _BLOB:
        return "a submodule (not followed)"
    if entry.mode == _SYMLINK_MODE:
        return "a symlink (not followed)"
    return None


def sparse_patterns() -> str:
    """The sparse checkout of `ingest.git.documents_only`: every file whose suffix a reader
    takes, in any letter case (git's patterns are case-sensitive, the readers' lookup not). A
    folder named like a document (`notes.md/`) comes whole, as .gitignore rules read."""
    return "".join(
        "*" + "".join(f"[{c.lower()}{c.upper()}]" if c.isalpha() else c for c in suffix) + "\n"
        for suffix in EXTENSIONS
    )


def without_credentials(remote: str) -> tuple[str, str | None]:
    """An HTTP remote's `user:password@` taken out of it: given to git in the URL, they would
    be written into the clone's `.git/config` and stay on disk there. They go as a header, as
    a token does; the URL git keeps is the one without them."""
    found = userinfo(remote) if urlsplit(remote).scheme in ("http", "https") else None
    if found is None:
        return remote, None
    return redact_url(remote), ":".join(found)


def remote_of(location: str) -> str:
    """What `git clone` is given: URLs and scp-like `git@host:path` as written, a local path
    as a file:// URL (a shallow clone of a plain path is refused by git)."""
    if "://" in location or (":" in location and not Path(location).exists()):
        return location
    return Path(location).expanduser().resolve().as_uri()


def default_web_view(remote: str) -> str | None:
    """The web view pattern of a GitHub or GitLab remote (https or scp-like); None elsewhere."""
    if "://" in remote:
        parts = urlsplit(remote)
        host, path = (parts.hostname or "").lower(), parts.path
    elif "@" in remote and ":" in remote:
        host, _, path = remote.partition("@")[2].partition(":")
        host = host.lower()
    else:
        return None
    repo = path.strip("/").removesuffix(".git")
    if repo.endswith(".wiki") and host in WIKI_VIEWS:
        return WIKI_VIEWS[host].replace("{repo}", repo.removesuffix(".wiki"))
    if host in WEB_VIEWS and repo.count("/") >= 1:
        return WEB_VIEWS[host].replace("{repo}", repo)
    return None


_SYMREF = "ref: refs/heads/"  # how `git ls-remote --symref` names the branch HEAD points at


def web_link(pattern: str, branch: str, path: str) -> str:
    posix = PurePosixPath(path)
    return pattern.format(
        branch=quote(branch, safe="/"),
        path=quote(path, safe="/"),
        stem=quote(str(posix.with_suffix("")), safe="/"),
        page=quote(posix.stem, safe=""),
    )


class GitConnector:
    def __init__(
        self,
        location: str,
        settings: IngestSettings,
        *,
        checkout: Path,
        include: list[str],
        exclude: list[str],
        branch: str | None,
        web_url: str | None,
        token: str | None,
        known: set[str],
        guard: AddressGuard | None = None,
    ) -> None:
        """`checkout`: the clone's folder in the data dir (its memory file sits beside it);
        `known`: the doc ids the index holds, the only ones a diff may call unchanged;
        `guard`: what judges the remote's host (one per sync: a start host is judged once)."""
        self._remote, in_url = without_credentials(remote_of(location))
        self._shown = redact_url(self._remote)
        self._settings = settings
        # Absolute: the clone runs in the checkout's parent folder, where a relative path
        # (the default data dir, `.bot`) would name a folder inside itself.
        self._checkout = checkout.resolve()
        self._memory = checkout.with_name(checkout.name + ".synced.json")
        self._filter = PathFilter(include, exclude)
        self._explicit = bool(include)
        self._branch = branch
        self._web_url = web_url or default_web_view(self._remote)
        # The Basic credentials sent with every request: a token (`token_env`) as GitHub and
        # GitLab take one, else those the location's URL carried.
        credentials = f"x-access-token:{token}" if token else in_url
        self._authorization = (
            f"Basic {base64.b64encode(credentials.encode()).decode()}" if credentials else None
        )
        self._known = known
        self._guard = guard or AddressGuard()
        self._pins: list[str] | None = None  # judged at the sync's first network command
        self._changed: set[str] | None = None  # None: read every file
        self._commit = ""  # what this sync reads: the commit and the branch it is on
        self._synced_branch = ""
        self._items: list[SourceItem] = []  # what this sync discovered

    async def discover(self) -> Discovery:
        await self._update()
        branch = (await self._git("symbolic-ref", "--short", "HEAD")).strip()
        self._commit = (await self._git("rev-parse", "HEAD")).strip()
        self._changed = await self._changed_since(*self._synced(branch))
        scope = f"git:{self._shown}#{branch}/"
        found = Discovery(items=[], skipped=[], scopes=[scope])
        for entry in await self._tree():
            self._add(found, entry, scope, branch)
        found.items.sort(key=lambda item: item.doc_id)
        self._synced_branch = branch
        self._items = found.items
        return found

    async def fetch(self, item: SourceItem) -> tuple[bytes, DocumentFormat]:
        unchanged = self._changed is not None and item.display not in self._changed
        if unchanged and item.doc_id in self._known:
            raise NotModified(item.doc_id)
        data, fmt = await read_item(
            item,
            max_bytes=self._settings.max_file_bytes,
            client=None,
            deadline_s=self._settings.url_deadline_s,
        )
        if data.startswith(LFS_POINTER):
            raise UnreadableDocument("a Git LFS pointer (the file itself is not in the clone)")
        return data, fmt

    def also_skipped(self) -> list[Skipped]:
        return []

    async def completed(self, settled: set[str]) -> None:
        """The sync indexed this commit: the next one diffs against it, and reads again the
        files it could not index (the diff will not name them again)."""
        retry = sorted(item.display for item in self._items if item.doc_id not in settled)
        record = {
            "remote": self._shown,
            "branch": self._synced_branch,
            "commit": self._commit,
            "retry": retry,
        }
        save_json(self._memory, record)

    # -- the clone -------------------------------------------------------------------------

    async def _update(self) -> None:
        """Clone, or fetch and reset the clone that is there; a clone of another remote (the
        location changed) or a damaged one is replaced."""
        depth = str(self._settings.git.depth)
        # A fetch with the filter makes a clone from before it partial too.
        partial = ["--filter=blob:none"] if self._settings.git.documents_only else []
        if (self._checkout / ".git").is_dir():
            _remove_stale_locks(self._checkout / ".git")
            try:
                origin = (await self._git("remote", "get-url", "origin")).strip()
            except SourceUnavailable:
                origin = ""
            if origin == self._remote:
                following = self._branch or await self._default_branch()
                await self._git(
                    "fetch", "--quiet", "--no-tags", "--depth", depth, *partial,
                    "--end-of-options", "origin", following or "HEAD",  # never read as an option
                )  # fmt: skip
                self._write_sparse_patterns()
                if following:
                    # Under the remote's name for it: the links and the scope name the branch,
                    # and a remote's default branch may be renamed (master -> main) or changed.
                    await self._git("checkout", "--quiet", "--force", "-B", following, "FETCH_HEAD")
                else:
                    await self._git("reset", "--quiet", "--hard", "FETCH_HEAD")
                return
        shutil.rmtree(self._checkout, ignore_errors=True)
        self._checkout.parent.mkdir(parents=True, exist_ok=True)
        branch = ["--branch", self._branch] if self._branch else []
        await self._git(
            "clone", "--quiet", "--no-tags", "--single-branch", "--no-checkout", "--depth", depth,
            *partial, *branch, "--", self._remote, str(self._checkout), cwd=self._checkout.parent,
        )  # fmt: skip
        try:
            await self._git("rev-parse", "--verify", "--quiet", "HEAD")
        except SourceUnavailable:
            raise SourceUnavailable(f"{self._shown} has no commits yet: nothing to sync") from None
        self._write_sparse_patterns()
        await self._git("reset", "--quiet", "--hard", "HEAD")  # the checkout, sparse or whole

    def _write_sparse_patterns(self) -> None:
        """Before each checkout, which applies them to every file: this version's patterns,
        or every file (`documents_only: false`), whatever an earlier sync wrote."""
        info = self._checkout / ".git" / "info"
        info.mkdir(parents=True, exist_ok=True)
        patterns = sparse_patterns() if self._settings.git.documents_only else _EVERY_FILE
        (info / "sparse-checkout").write_text(patterns, encoding="utf-8")

    async def _default_branch(self) -> str | None:
        """The branch the remote's HEAD names now (`ls-remote --symref`); None when the server
        does not say (the clone's own branch name is kept then)."""
        listed = await self._git("ls-remote", "--symref", "origin", "HEAD")
        for line in listed.splitlines():
            ref, _, name = line.partition("\t")
            if name == "HEAD" and ref.startswith(_SYMREF):
                branch = ref.removeprefix(_SYMREF)
                return branch if branch and not branch.startswith("-") else None
        return None

    def _synced(self, branch: str) -> tuple[str | None, set[str]]:
        """The commit the last completed sync of this remote and branch read, and the files
        it could not index."""
        record = load_json(self._memory)
        if not isinstance(record, dict):
            return None, set()
        same = record.get("remote") == self._shown and record.get("branch") == branch
        commit = record.get("commit")
        if not (same and isinstance(commit, str) and commit):
            return None, set()
        retry = record.get("retry")
        return commit, {p for p in retry if isinstance(p, str)} if isinstance(
            retry, list
        ) else set()

    async def _changed_since(self, synced: str | None, retry: set[str]) -> set[str] | None:
        """The paths added or modified since `synced`, and `retry`; None (read everything)
        when there is no synced commit or the clone no longer has it."""
        if synced is None:
            return None
        try:
            out = await self._git(
                "diff", "--name-only", "--no-renames", "--diff-filter=d", "-z", synced, "HEAD"
            )
        except SourceUnavailable:
            return None
        return {printable(path) for path in out.split("\0") if path} | retry

    async def _tree(self) -> list[_Entry]:
        """Every path of the commit, without sizes: `ls-tree -l` would download each blob a
        partial clone left out, to measure it."""
        out = await self._git("ls-tree", "-r", "-z", "--full-tree", "HEAD")
        entries = []
        for line in out.split("\0"):
            if not line:
                continue
            meta, _, path = line.partition("\t")
            mode, kind, _sha = meta.split(maxsplit=2)
            entries.append(_Entry(mode, kind, path))
        return entries

    def _add(self, found: Discovery, entry: _Entry, scope: str, branch: str) -> None:
        if not self._filter.takes(entry.path):
            return
        # A path is bytes to git: one that is not UTF-8 (kept as lone surrogates) is named,
        # linked and stored as `printable` makes it, since no encoder takes it as it is (a
        # link to it raised UnicodeEncodeError, which ended the whole sync); the file itself
        # is still read under its own bytes.
        name = printable(entry.path)
        suffix = PurePosixPath(name).suffix
        fmt = EXTENSIONS.get(suffix.lower())
        why = _not_read(entry)
        if why is None and fmt is None:
            why = unsupported_type(suffix, name)
        if why is not None:
            # Said when the include patterns name it, or when its name says a document (a
            # symlink `setup.md`, a submodule `docs.md`) that a reader would expect indexed;
            # the repository's images and code are not listed one by one.
            if self._explicit or fmt is not None:
                found.skipped.append(Skipped(name, why))
            return
        limit = self._settings.max_file_bytes
        with contextlib.suppress(OSError):  # not checked out: the read says why
            if (self._checkout / entry.path).lstat().st_size > limit:
                found.skipped.append(Skipped(name, str(too_big(limit))))
                return
        link = (
            web_link(self._web_url, branch, name)
            if self._web_url
            else (self._checkout / entry.path).as_uri()  # as_uri quotes the bytes
        )
        found.items.append(
            SourceItem(
                doc_id=scope + name,
                url=link,
                display=name,
                fallback_title=title_from_name(PurePosixPath(name).name),
                path=self._checkout / entry.path,
                fmt=fmt,
            )
        )

    async def _git(self, *args: str, cwd: Path | None = None) -> str:
        """One git command, bounded by `ingest.git.timeout_s`; a failure is one line with
        git's own reason (credentials removed)."""
        env = {
            **os.environ,
            "GIT_TERMINAL_PROMPT": "0",  # never wait for a password on stdin
            "GIT_ASKPASS": "",
            "LC_ALL": "C",
            # Where git-lfs is installed, its smudge filter would download every LFS file of
            # the checkout (gigabytes, or a failed checkout when it can't): it writes the
            # pointers instead, which the reader skips with the reason.
            "GIT_LFS_SKIP_SMUDGE": "1",
        }
        if self._authorization:
            env |= {
                "GIT_CONFIG_COUNT": "1",
                "GIT_CONFIG_KEY_0": "http.extraHeader",
                "GIT_CONFIG_VALUE_0": f"Authorization: {self._authorization}",
            }
        where = cwd or self._checkout
        pins: list[str] = []
        if args[0] in _NETWORK:
            if self._pins is None:
                self._pins = await self._judge_remote(args[0], where)
            pins = self._pins
        command = [
            "git", "-c", "core.symlinks=false", "-c", "protocol.ext.allow=never",
            "-c", "http.followRedirects=false", *pins,
            # Always on, whatever the clone's config: a checkout with it off would leave out
            # what an earlier sparse one did (`documents_only: false` writes "everything").
            "-c", "core.sparseCheckout=true", "-c", "core.sparseCheckoutCone=false", *args,
        ]  # fmt: skip
        try:
            # A session of its own: no terminal for ssh to ask for a password or a host key
            # on (GIT_TERMINAL_PROMPT covers only git's own prompts), and one process group
            # to end, git's helpers (git-remote-https, ssh) with it.
            process = await asyncio.create_subprocess_exec(
                *command,
                cwd=where,
                env=env,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                start_new_session=True,
            )
        except FileNotFoundError:
            if not where.is_dir():
                raise SourceUnavailable(f"git {args[0]}: the folder {where} is missing") from None
            raise SourceUnavailable("git sources need the git command (not installed)") from None
        timeout = self._settings.git.timeout_s
        limit = self._settings.git.max_output_bytes
        try:
            (out, over), (err, _) = await asyncio.wait_for(
                asyncio.gather(
                    _collect(process, process.stdout, limit),
                    _collect(process, process.stderr, limit),
                ),
                timeout,
            )
            await process.wait()
        except TimeoutError:
            _end_group(process)
            await process.wait()
            raise SourceUnavailable(
                f"git {args[0]} of {self._shown} took longer than {timeout:g} s "
                "(ingest.git.timeout_s)"
            ) from None
        except BaseException:  # cancelled (Ctrl-C, the clock stopping): git must not outlive it
            _end_group(process)
            raise
        if over:
            raise SourceUnavailable(
                f"git {args[0]} of {self._shown} printed more than {limit:,} bytes"
                " (ingest.git.max_output_bytes)"
            )
        if process.returncode != 0:
            cause = _reason(err.decode("utf-8", "replace"), process.returncode)
            if moved := _REDIRECTED.search(cause):
                cause = await self._redirected(moved[1])
            detail = redact_urls_in(cause)
            raise SourceUnavailable(f"git {args[0]} of {self._shown}: {detail[:_DETAIL_CHARS]}")
        return out.decode("utf-8", "surrogateescape")

    async def _redirected(self, status: str) -> str:
        """Why a command failed on a redirect git did not follow, with where it leads: asked
        once more through the guard, not followed (GitLab sends a URL without `.git` on to the
        one with it, so a newcomer's location fails here first)."""
        target = await self._moved_to()
        return (
            f"the remote redirects {f'to {target}' if target else 'elsewhere'} (HTTP {status}),"
            " and a git source follows no redirect: set its location to "
            + ("that URL" if target else "the repository's current URL")
        )

    async def _moved_to(self) -> str | None:
        """The remote URL git was sent on to: the redirect of its first request (the ref
        listing), as git would have read it; None when that can't be told."""
        listing = f"{self._remote.rstrip('/')}/{_REF_LISTING}"
        headers = {"Authorization": self._authorization} if self._authorization else {}
        transport = GuardedTransport(self._guard)
        try:
            async with httpx.AsyncClient(
                transport=transport, timeout=self._settings.url_timeout_s
            ) as client:
                with fetching_from(httpx.URL(self._remote)):
                    async with client.stream("GET", listing, headers=headers) as response:
                        location = response.headers.get("location")
                        if not (response.is_redirect and location):
                            return None
                        target = response.url.join(location)
        except httpx.HTTPError:
            return None
        moved = str(target.copy_with(query=None))
        return redact_url(moved.removesuffix("/" + _REF_LISTING.partition("?")[0]))

    async def _judge_remote(self, command: str, where: Path) -> list[str]:
        """The config that pins git's curl to the judged addresses of an http(s) remote's
        host, for every command of this sync (judged once: a later answer of the name is
        never asked for); `SourceUnavailable` when the guard refuses the host or can't look
        it up."""
        parts = urlsplit(self._remote)
        host = parts.hostname
        if parts.scheme not in _DEFAULT_PORTS or not host:
            return []  # ssh, git://, a local path: no HTTP request to send elsewhere
        if await self._through_proxy(parts.scheme, host, where):
            return []
        try:
            port = parts.port or _DEFAULT_PORTS[parts.scheme]
            start = httpx.URL(self._remote)
        except (ValueError, httpx.InvalidURL) as exc:
            raise SourceUnavailable(f"git {command} of {self._shown}: {exc}") from None
        try:
            with fetching_from(start):
                addresses = await self._guard.judged(host, port, self._settings.url_timeout_s)
        except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
            raise SourceUnavailable(f"git {command} of {self._shown}: {exc}") from None
        if ":" in host:
            return []  # an IPv6 literal: curl looks nothing up
        listed = ",".join(f"[{a}]" if a.version == 6 else str(a) for a in addresses)
        return ["-c", f"http.curloptResolve={host}:{port}:{listed}"]

    async def _through_proxy(self, scheme: str, host: str, where: Path) -> bool:
        """Whether git's curl reaches the remote through a proxy: from the environment, as
        curl reads it, or git's `http.proxy` for this URL."""
        variables = (*_PROXY_VARIABLES[scheme], *_ANY_PROXY)
        if any(os.environ.get(name) for name in variables):
            return not _bypasses_proxy(host)
        try:
            configured = await self._git(
                "config", "--get-urlmatch", "http.proxy", self._remote, cwd=where
            )
        except SourceUnavailable:  # none set (exit code 1)
            return False
        return bool(configured.strip())


def _bypasses_proxy(host: str) -> bool:
    """Whether curl's `no_proxy` (or `NO_PROXY`) names `host`: `*`, the host itself, or a
    domain it is under (a leading dot optional)."""
    listed = os.environ.get("no_proxy") or os.environ.get("NO_PROXY") or ""
    names = [name.strip().lstrip(".").lower() for name in listed.split(",") if name.strip()]
    return any(name in ("*", host) or host.endswith("." + name) for name in names)


def _remove_stale_locks(git_dir: Path) -> None:
    """The lock files a git killed mid-fetch left (`shallow.lock`, `index.lock`, a ref's):
    git removes them when it ends, but not when killed (the timeout's SIGKILL, an OOM kill, a
    crash), and every later fetch then failed with "Unable to create '.../shallow.lock': File
    exists" until someone deleted it. No git is at work in the clone now: the sync holds its
    source's run lock, and the clone is this source's alone."""
    for lock in git_dir.rglob("*.lock"):
        with contextlib.suppress(OSError):  # gone meanwhile, or not ours to remove: git says
            lock.unlink()


async def _collect(
    process: asyncio.subprocess.Process, stream: asyncio.StreamReader | None, limit: int
) -> tuple[bytes, bool]:
    """At most `limit` bytes of git's stdout or stderr, and whether it printed more: then git
    and its helpers are ended at once (a tree of millions of files would otherwise be held
    whole in memory, and git would block on a pipe nobody reads)."""
    assert stream is not None  # both are pipes
    data = bytearray()
    while chunk := await stream.read(_READ_BYTES):
        data += chunk
        if len(data) > limit:
            _end_group(process)
            return bytes(data[:limit]), True
    return bytes(data), False


def _end_group(process: asyncio.subprocess.Process) -> None:
    """Kill git and every helper it started. Killing git alone is not enough: a helper
    (`git-remote-https` waiting on a server that never answers) keeps git's stdout and stderr
    open, and asyncio's `wait()` waits for those pipes to close, so the sync would hang for as
    long as the server does, timeout or not."""
    with contextlib.suppress(ProcessLookupError):  # the group has ended already
        os.killpg(process.pid, signal.SIGKILL)


def _reason(stderr: str, code: int | None) -> str:
    """git's cause of a failure: its first `fatal:` or `error:` line, not its last (after a
    cause, git adds advice such as "Please make sure you have the correct access rights / and
    the repository exists.")."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    causes = [line for line in lines if line.startswith(("fatal:", "error:"))]
    cause = (causes or lines or [f"exit code {code}"])[0]
    if _NO_FILTERED_FETCH in cause:
        return f"{cause} (git older than 2.27: upgrade it, or set ingest.git.documents_only: false)"
    if any(said in cause for said in _CREDENTIALS_REFUSED):
        return f"{_REFUSED_ADVICE} ({cause})"
    return cause
