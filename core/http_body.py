"""Reading an HTTP response's body within a byte limit, decompressed here rather than by httpx.

httpx inflates each network read whole, and through every `Content-Encoding` layer at once: a
body sent as `gzip, gzip, gzip` of 269 bytes became 1 GB in memory from a single read, before
any count of the decoded bytes could stop it. Here the raw bytes are inflated with zlib's own
output bound, so a body is cut off at one byte past the limit whatever its compression ratio.

Only the codings we ask for (`ACCEPT_ENCODING`: gzip and deflate) are read, and one layer at
most: no server needs more to send a document, and any other coding (br, zstd, a stack) is
refused with its name, rather than inflated without a bound or indexed as compressed bytes.
"""

from __future__ import annotations

import zlib

import httpx

# What every request of ours accepts (httpx would add br and zstd when their packages are
# installed, and inflate them without a bound).
ACCEPT_ENCODING = "gzip, deflate"
_GZIP_WBITS = 16 + zlib.MAX_WBITS  # zlib's flag for a gzip header
_WBITS = {"gzip": _GZIP_WBITS, "x-gzip": _GZIP_WBITS, "deflate": zlib.MAX_WBITS}
_IDENTITY = "identity"


class BodyTooLarge(Exception):
    """The decoded body is longer than the limit."""


class UndecodableBody(Exception):
    """The body is compressed in a way we do not read, or is not what its coding says."""


class _Inflater:
    """One coding's decoder, bounded per call."""

    def __init__(self, coding: str) -> None:
        self._wbits = _WBITS[coding]
        self._zlib = zlib.decompressobj(self._wbits)
        self._started = False

    def inflate(self, data: bytes, room: int) -> bytes:
        """At most `room` bytes of output from `data`; input left over is dropped, which is
        safe: the caller refuses the body as soon as it holds `room` bytes here."""
        try:
            out = self._zlib.decompress(data, room)
        except zlib.error as exc:
            if self._wbits == zlib.MAX_WBITS and not self._started:
                # "deflate" sent raw, without its zlib header: what many servers do (httpx and
                # browsers read it too).
                self._wbits = -zlib.MAX_WBITS
                self._zlib = zlib.decompressobj(self._wbits)
                return self.inflate(data, room)
            raise UndecodableBody(f"the body is not valid {_name(self._wbits)}: {exc}") from None
        self._started = True
        return out


def _name(wbits: int) -> str:
    return "gzip" if wbits == _GZIP_WBITS else "deflate"


def codings(response: httpx.Response) -> list[str]:
    """The response's content codings, outermost last, without `identity`."""
    header = response.headers.get("content-encoding", "")
    named = (coding.strip().lower() for coding in header.split(","))
    return [coding for coding in named if coding and coding != _IDENTITY]


async def read_body(response: httpx.Response, max_bytes: int, *, cut: bool = False) -> bytes:
    """The decoded body of a streamed response; raises `BodyTooLarge` as soon as it passes
    `max_bytes` (with `cut`: returns its first `max_bytes` instead, and reads no further),
    `UndecodableBody` for a coding we do not read or a body that is not what its coding
    says."""
    applied = codings(response)
    if len(applied) > 1:
        raise UndecodableBody(f"the body is compressed {len(applied)} times ({', '.join(applied)})")
    if applied and applied[0] not in _WBITS:
        raise UndecodableBody(f"the body is compressed as '{applied[0]}', which is not read")
    inflater = _Inflater(applied[0]) if applied else None
    body = bytearray()
    async for raw in response.aiter_raw():
        body += raw if inflater is None else inflater.inflate(raw, max_bytes - len(body) + 1)
        if len(body) > max_bytes:
            if cut:
                return bytes(body[:max_bytes])
            raise BodyTooLarge
    return bytes(body)
