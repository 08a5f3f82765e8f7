"""A few static pages over HTTP on loopback: the remote side of a URL ingest."""

from __future__ import annotations

from http.server import BaseHTTPRequestHandler
from typing import ClassVar


class StaticSite(BaseHTTPRequestHandler):
    pages: ClassVar[dict[str, tuple[str, bytes]]] = {
        "/guide.html": (
            "text/html; charset=utf-8",
            b"<html><head><title>Web Guide</title></head><body>"
            b"<h2 id='deploy'>Deploying</h2><p>Use the Procfile web line.</p></body>",
        ),
        "/notes.md": ("text/markdown", b"# Notes\n\n## Caching\n\nVectors are cached by hash."),
        "/image": ("image/png", b"\x89PNG"),
    }

    def do_GET(self) -> None:
        page = self.pages.get(self.path)
        if page is None:
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Type", page[0])
        self.send_header("Content-Length", str(len(page[1])))
        self.end_headers()
        self.wfile.write(page[1])

    def log_message(self, *args: object) -> None:
        pass
