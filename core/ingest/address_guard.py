"""Where a fetch may connect, judged on the addresses a host name resolves to, at connect time.

`fetch_url` judges a redirect's target by its URL, which only helps when the host is an IP
literal: `http://metadata.example/` may resolve to 169.254.169.254, and a public site's own name
may resolve to a public address for its first page and to 127.0.0.1 for the next (DNS
rebinding). So the crawler's connections go through `AddressGuard`, an httpcore network backend
that resolves the host itself, judges every address, and connects to the address it judged,
never to a second lookup of the name:

- never to a link-local address (where cloud metadata endpoints answer) nor a known metadata
  address outside that range;
- to an internal address (loopback, private, shared, unspecified: anything not globally
  routable) only when the fetch started from an internal host. A start host is judged once per
  client, at its first lookup: a public name that later resolves inward is refused.

Requests made outside `fetch_url` (an API client's, with no start host) are judged by the first
rule only. The guard's judgement of the start host goes back to `fetch_url` (`FetchStart`), so
its redirect check lets a site reached by an internal name redirect to an internal address.
Through a proxy (`HTTPS_PROXY`), the proxy connects, and only `fetch_url`'s checks of IP
literals apply. A Git source's http(s) remote is judged here too (`judged`, its host the
start), and git's curl pinned to the addresses judged.
"""

from __future__ import annotations

import contextlib
import ipaddress
import socket
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass

import anyio
import httpcore
import httpx

from core.config import IngestSettings

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Resolver = Callable[[str, int], Awaitable[Sequence[str]]]
# httpcore's own type of a socket option (`httpcore._backends.base.SOCKET_OPTION`)
SocketOption = (
    tuple[int, int, int] | tuple[int, int, bytes | bytearray] | tuple[int, int, None, int]
)

# Cloud metadata endpoints outside the link-local range: AWS's over IPv6, Alibaba Cloud's.
METADATA_ADDRESSES = frozenset(
    ipaddress.ip_address(a) for a in ("fd00:ec2::254", "100.100.100.200")
)


@dataclass(slots=True)
class FetchStart:
    """Where a fetch started, and whether the guard found that host internal: None until the
    guard has judged it (and for good behind a proxy, where the guard never sees the host)."""

    host: str
    internal: bool | None = None


_START: ContextVar[FetchStart | None] = ContextVar("fetch_start", default=None)


class AddressRefused(httpcore.ConnectError):
    """A connection the guard will not make; its message says why (httpx re-raises it as an
    `httpx.ConnectError` with this one as its cause)."""


@contextlib.contextmanager
def fetching_from(url: httpx.URL) -> Iterator[FetchStart]:
    """The connections made inside are for a fetch that started at `url` (the URL the user or
    the source named, before redirects); what the guard made of its host, once it has."""
    start = FetchStart(url.host)
    token = _START.set(start)
    try:
        yield start
    finally:
        _START.reset(token)


async def system_resolver(host: str, port: int) -> list[str]:
    """The host's addresses as the system resolver gives them (an IP literal in any form the
    resolver takes, `2852039166` included, comes back as itself)."""
    found = await anyio.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(sockaddr[0]) for *_, sockaddr in found))


class AddressGuard(httpcore.AsyncNetworkBackend):
    def __init__(
        self,
        inner: httpcore.AsyncNetworkBackend | None = None,
        resolve: Resolver = system_resolver,
    ) -> None:
        self._inner = inner or httpcore.AnyIOBackend()
        self._resolve = resolve
        self._internal_starts: dict[str, bool] = {}  # start host -> internal, at first lookup

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[SocketOption] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        addresses = await self.judged(host, port, timeout)
        *others, last = addresses  # `judged` never returns an empty list
        for address in others:  # in the resolver's order, as a plain connect tries them
            with contextlib.suppress(httpcore.ConnectError, httpcore.ConnectTimeout):
                return await self._connect(address, port, timeout, local_address, socket_options)
        return await self._connect(last, port, timeout, local_address, socket_options)

    async def judged(self, host: str, port: int, timeout: float | None) -> list[Address]:
        """The addresses of `host` a connection may use; `AddressRefused` when one may not.
        Public for a caller whose connections another program makes (git's curl), which pins
        that program to these addresses: the name looked up again could answer otherwise."""
        addresses = await self._lookup(host, port, timeout)
        await self._judge(host, port, addresses, timeout)
        return addresses

    async def _connect(
        self,
        address: Address,
        port: int,
        timeout: float | None,
        local_address: str | None,
        socket_options: Iterable[SocketOption] | None,
    ) -> httpcore.AsyncNetworkStream:
        """To the judged address itself: a second lookup of the name could answer otherwise."""
        return await self._inner.connect_tcp(
            str(address), port, timeout, local_address, socket_options
        )

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[SocketOption] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        return await self._inner.connect_unix_socket(path, timeout, socket_options)

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)

    async def _lookup(self, host: str, port: int, timeout: float | None) -> list[Address]:
        try:
            with anyio.fail_after(timeout):
                found = await self._resolve(host, port)
        except TimeoutError:
            raise httpcore.ConnectTimeout(f"looking up {host} timed out") from None
        except OSError as exc:
            raise httpcore.ConnectError(f"can't look up {host}: {exc.strerror or exc}") from None
        addresses = [as_judged(ipaddress.ip_address(a)) for a in found]
        if not addresses:
            raise httpcore.ConnectError(f"{host} has no address")
        return addresses

    async def _judge(
        self, host: str, port: int, addresses: list[Address], timeout: float | None
    ) -> None:
        for address in addresses:
            if address.is_link_local or address in METADATA_ADDRESSES:
                raise AddressRefused(f"{host} resolves to {address}, a metadata address")
        fetch = _START.get()
        if fetch is None:
            return
        start = fetch.host
        if host == start:
            internal_start = self._internal_starts.setdefault(start, _all_internal(addresses))
        elif start in self._internal_starts:
            internal_start = self._internal_starts[start]
        else:
            judged = _all_internal(await self._lookup(start, port, timeout))
            internal_start = self._internal_starts.setdefault(start, judged)
        fetch.internal = internal_start
        inward = [a for a in addresses if not a.is_global]
        if inward and not internal_start:
            raise AddressRefused(
                f"{host} resolves to {inward[0]}, an internal address, and this fetch started"
                f" at a public host ({start})"
            )


def fetch_client(settings: IngestSettings) -> httpx.AsyncClient:
    """The HTTP client that fetches documents (URLs, crawls, Confluence), its connections made
    through `AddressGuard`."""
    return httpx.AsyncClient(
        headers={"User-Agent": settings.user_agent},
        timeout=httpx.Timeout(settings.url_timeout_s),
        transport=GuardedTransport(),
    )


class GuardedTransport(httpx.AsyncHTTPTransport):
    """httpx's own transport, with its connection pool made with the guard as its network
    backend: httpx has no parameter for one, so the pool it made is replaced by the same pool
    (httpx's defaults) with the guard."""

    def __init__(self, guard: AddressGuard | None = None) -> None:
        ssl_context = httpx.create_ssl_context()  # made once: loading the CA bundle takes 40 ms
        super().__init__(verify=ssl_context)
        limits = httpx.Limits()
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=ssl_context,
            max_connections=limits.max_connections,
            max_keepalive_connections=limits.max_keepalive_connections,
            keepalive_expiry=limits.keepalive_expiry,
            network_backend=guard or AddressGuard(),
        )


def as_judged(address: Address) -> Address:
    """An address as judged: an IPv4-mapped IPv6 address is its IPv4 address (Python calls
    `::ffff:169.254.169.254` neither link-local nor private)."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def _all_internal(addresses: list[Address]) -> bool:
    return all(not a.is_global for a in addresses)
