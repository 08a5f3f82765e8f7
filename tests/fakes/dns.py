"""DNS, standing in: test names mapped to addresses, so a test decides what a name resolves to
(an internal name, a metadata address, a name that moves) without a real resolver."""

from __future__ import annotations

import socket
from collections.abc import Sequence
from dataclasses import dataclass, field


@dataclass
class Resolver:
    """Test names to addresses, any other name unknown; `asked` lists every lookup in order."""

    names: dict[str, list[str]]
    asked: list[str] = field(default_factory=list)

    async def __call__(self, host: str, port: int) -> Sequence[str]:
        self.asked.append(host)
        if host in self.names:
            return self.names[host]
        # An IP literal, in any form the system's resolver reads as one; a name raises.
        found = socket.getaddrinfo(host, port, flags=socket.AI_NUMERICHOST)
        return list(dict.fromkeys(str(sockaddr[0]) for *_, sockaddr in found))
