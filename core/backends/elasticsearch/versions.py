"""The chunks index's versions: the first one behind the alias, and dropping them all (an
evaluation's or a test's throwaway indices). `bot index reindex` adds the next
(`core.backends.elasticsearch.reindex`)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from fnmatch import fnmatchcase

from elasticsearch import ApiError, AsyncElasticsearch, NotFoundError

from core.backends.elasticsearch.schema import IndexNames
from core.errors import SearchIndexError


def by_version(names: IndexNames, indices: Iterable[str]) -> list[str]:
    """`indices` oldest version first, by number (a name that is no version of ours first)."""
    return sorted(indices, key=lambda index: (names.version_number(index) or 0, index))


def several_behind_alias(names: IndexNames, entries: dict[str, int]) -> str:
    """What is wrong when the chunks alias points at several indices (each with how many
    entries it holds), and the one request that keeps the fullest: every write fails until
    then, as Elasticsearch has no index to write to."""
    keep = max(by_version(names, entries), key=lambda index: entries[index])
    drop = [index for index in by_version(names, entries) if index != keep]
    listed = ", ".join(
        f"{index} ({entries[index]} entries)" for index in by_version(names, entries)
    )
    actions = ", ".join(
        f'{{"remove": {{"index": "{i}", "alias": "{names.chunks}"}}}}' for i in drop
    )
    return (
        f"{names.chunks} points at several indices: {listed}; every write fails (no write "
        f"index). Keep the one the bot's chunks are in, such as {keep}: "
        f'POST _aliases {{"actions": [{actions}]}}'
    )


async def create_first_version(client: AsyncElasticsearch, names: IndexNames) -> None:
    """The first versioned index behind the chunks alias (the bot only ever swaps versions)."""
    alias = names.chunks
    # `exists` is true for an alias too: another process may have just created it.
    if await client.indices.exists(index=alias) and not await client.indices.exists_alias(
        name=alias
    ):
        raise SearchIndexError(
            f"{names.chunks} is an index, not an alias; the bot keeps its chunks in "
            f"versioned indices behind that alias. Rename or delete it, or set another "
            f"elasticsearch.index_prefix"
        )
    first = names.version(1)
    try:
        await client.indices.create(index=first)
    except ApiError as exc:
        if exc.error != "resource_already_exists_exception":  # another process won the race
            raise
    await client.indices.update_aliases(actions=[{"add": {"index": first, "alias": names.chunks}}])


async def shadowing_templates(
    client: AsyncElasticsearch, names: IndexNames, index: str
) -> list[str]:
    """The index templates that match `index` with a higher priority than the bot's: the one
    of those with the highest priority is applied instead of the bot's, whole (templates of
    different priorities don't merge), so the index gets neither the bot's mapping nor its
    `_meta`."""
    templates = (await client.indices.get_index_template()).body.get("index_templates", [])
    priorities = {t["name"]: int(t["index_template"].get("priority") or 0) for t in templates}
    ours = priorities.get(names.template, 0)
    shadows = []
    for t in templates:
        patterns = t["index_template"].get("index_patterns") or []
        patterns = [patterns] if isinstance(patterns, str) else patterns
        if priorities[t["name"]] > ours and any(fnmatchcase(index, p) for p in patterns):
            shadows.append(str(t["name"]))
    return sorted(shadows)


def overridden(names: IndexNames, index: str, shadows: list[str]) -> str:
    """Why `index` lacks the bot's mapping, and what to change, when templates shadow it."""
    who = (
        f"the index template(s) {', '.join(shadows)}, of a higher priority than "
        f"{names.template}, override the bot's mapping"
        if shadows
        else "an index template overrides the bot's mapping"
    )
    return (
        f"{index} was not created with the bot's mapping: {who}. Lower their priority below "
        f"{names.template}'s, or narrow their index_patterns so they don't match "
        f"{names.chunks}-v*"
    )


async def drop_indices(client: AsyncElasticsearch, names: IndexNames) -> None:
    """Delete every index and the template under the index's prefix (evaluations, tests)."""
    # By name: clusters refuse wildcard deletes (action.destructive_requires_name).
    existing = list((await client.indices.get(index=f"{names.prefix}-*")).body)
    if existing:
        await client.indices.delete(index=",".join(existing))
    with contextlib.suppress(NotFoundError):
        await client.indices.delete_index_template(name=names.template)
