"""Each asker's recent questions on Elasticsearch: one document per asker holding the times of
their questions in the window, read and replaced under its sequence number (retried on a
conflict), so every bot process draws on one count and two questions at once can't both take
the last place. Two requests per question, whatever the cap."""

from __future__ import annotations

from core.backends.elasticsearch.schema import hashed_id
from core.backends.elasticsearch.state import MS_PER_S, Store, now_ms


class ElasticsearchAskerWindows(Store):
    async def admit(self, asker: str, cap: int, window_s: float) -> float:
        index, doc_id = self._names.askers, hashed_id(asker)
        window_ms = int(window_s * MS_PER_S)

        async def attempt() -> float:
            now = now_ms()
            current = await self._get(index, doc_id)
            kept = (current or {}).get("_source", {}).get("asked", {}).get("items", [])
            asked = sorted(int(at) for at in kept if int(at) > now - window_ms)
            if len(asked) >= cap:  # free again once all but cap - 1 have left the window
                return (asked[len(asked) - cap] + window_ms - now) / MS_PER_S
            document = {"asker": asker, "asked": {"items": [*asked, now]}, "updated_at": now}
            await self._write_unless_changed(index, doc_id, current, document)
            return 0.0

        wait = await self._until_written(attempt, "an asker's count")  # no user id in logs
        # Askers with nothing in the window go now and then: the index holds about a window's.
        await self._purge_now_and_then(index, "updated_at", now_ms() - window_ms)
        return wait
