"""A Git host over HTTP on loopback: git's own smart-HTTP server (`git http-backend`, run as
the CGI program it is) behind Basic authentication, as GitHub or GitLab serve a private
repository. It records the credentials and the host name each request carried, so a test sees
what the bot sent, and where.
"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from aiohttp import web

from tests.fakes.threaded import served_in_a_thread

HTTP_BACKEND = "/usr/lib/git-core/git-http-backend"
_CHALLENGE = {"WWW-Authenticate": 'Basic realm="git"'}


@dataclass
class GitHost:
    """Repositories under `root`, each served at `/<name>.git`, to `user:password` only."""

    root: Path
    user: str
    password: str
    # The `user:password` of every request that carried Basic credentials, right or wrong.
    credentials: list[str] = field(default_factory=list)
    # The host each request named (its Host header: the remote's, also through a proxy).
    hosts: list[str] = field(default_factory=list)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        self.hosts.append(request.host)
        sent = request.headers.get("Authorization", "")
        if sent.startswith("Basic "):
            self.credentials.append(base64.b64decode(sent.removeprefix("Basic ")).decode())
        if sent != "Basic " + base64.b64encode(f"{self.user}:{self.password}".encode()).decode():
            return web.Response(status=401, headers=_CHALLENGE, text="credentials needed")
        body = await request.read()
        environment = {
            "GIT_PROJECT_ROOT": str(self.root),
            "GIT_HTTP_EXPORT_ALL": "1",
            "PATH_INFO": request.path,
            "QUERY_STRING": request.query_string,
            "REQUEST_METHOD": request.method,
            "CONTENT_TYPE": request.headers.get("Content-Type", ""),
            "CONTENT_LENGTH": str(len(body)),
            "REMOTE_USER": self.user,
            "REMOTE_ADDR": "127.0.0.1",
            "GATEWAY_INTERFACE": "CGI/1.1",
        }
        if "Git-Protocol" in request.headers:
            environment["GIT_PROTOCOL"] = request.headers["Git-Protocol"]
        process = await asyncio.create_subprocess_exec(
            HTTP_BACKEND,
            env=environment,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
        )
        out, _ = await process.communicate(body)
        head, _, payload = out.partition(b"\r\n\r\n")
        response = web.Response(body=payload)
        for line in head.decode("latin-1").split("\r\n"):
            name, _, value = line.partition(": ")
            if name.lower() == "status":
                response.set_status(int(value.split()[0]))
            elif name:
                response.headers[name] = value
        return response


@contextmanager
def git_host(root: Path, user: str, password: str) -> Iterator[tuple[GitHost, str]]:
    """The host and its base URL while the block runs."""
    host = GitHost(root, user, password)
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", host.handle)
    with served_in_a_thread(app) as url:
        yield host, url
