"""noida-db (PyPI), a local emulator of Elasticsearch 8.15's REST API, as a test server.

Started on a free loopback port with its own data directory; `stop()` makes it go away under
its clients, and `start()` again on the same port and directory brings it back with its data,
which is what the fault tests need.
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
from importlib.resources import files
from pathlib import Path

import httpx

_STARTUP_S = 20.0
_POLL_S = 0.05


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class NoidaServer:
    def __init__(self, data_dir: Path, port: int | None = None) -> None:
        self.data_dir = data_dir
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._process: subprocess.Popen[bytes] | None = None

    @staticmethod
    def binary() -> Path:
        path = Path(str(files("noida_db").joinpath("noida-db")))
        os.chmod(path, 0o755)
        return path

    def start(self) -> NoidaServer:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        log = (self.data_dir / "server.log").open("ab")
        self._process = subprocess.Popen(
            [
                str(self.binary()),
                "start",
                "--only",
                "elasticsearch",
                "--elasticsearch-port",
                str(self.port),
                "--data-dir",
                str(self.data_dir),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + _STARTUP_S
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise RuntimeError(f"noida-db exited: see {self.data_dir / 'server.log'}")
            try:
                if httpx.get(self.url, timeout=1).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(_POLL_S)
        self.stop()
        raise RuntimeError(f"noida-db did not answer on {self.url} within {_STARTUP_S} s")

    def stop(self, *, graceful: bool = False) -> None:
        """Kill the server; `graceful` lets it save its data first. (noida-db saves writes
        after a short delay, so a hard kill can lose the last acknowledged ones, which
        Elasticsearch's translog would keep: tests that restart a cluster stop it gracefully.)"""
        if self._process is not None and self._process.poll() is None:
            if graceful:
                self._process.terminate()
            else:
                self._process.kill()
            self._process.wait()
        self._process = None
