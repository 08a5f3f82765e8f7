"""The stores a backend opens beside its index, each closed once, in reverse order of opening."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from core.ports import Closable

S = TypeVar("S", bound=Closable)


class OpenedStores:
    """Stores opened on first use: a command that never answers never opens a conversation
    store. `shared` ones are opened once per backend; `new` ones once per call (two
    platforms' states in one process keep their own delivery windows)."""

    def __init__(self) -> None:
        self._shared: dict[str, Closable] = {}
        self._opened: list[Closable] = []

    def shared(self, name: str, make: Callable[[], S]) -> S:
        if name not in self._shared:
            self._shared[name] = self.new(make)
        return self._shared[name]  # type: ignore[return-value]

    def new(self, make: Callable[[], S]) -> S:
        store = make()
        self._opened.append(store)
        return store

    async def close(self) -> None:
        opened, self._opened, self._shared = self._opened, [], {}
        for store in reversed(opened):
            await store.close()
