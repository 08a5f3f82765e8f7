"""The chunks index's versions: the first one behind the alias, and dropping them all (an
evaluation's or a test's throwaway indices). `bot index reindex` adds the next
(`core.backends.elasticsearch.reindex`)."""

from __future__ import annotations

import contextlib

from elasticsearch import ApiError, AsyncElasticsearch, NotFoundError

from core.backends.elasticsearch.schema import IndexNames
from core.errors import SearchIndexError


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


async def drop_indices(client: AsyncElasticsearch, names: IndexNames) -> None:
    """Delete every index and the template under the index's prefix (evaluations, tests)."""
    # By name: clusters refuse wildcard deletes (action.destructive_requires_name).
    existing = list((await client.indices.get(index=f"{names.prefix}-*")).body)
    if existing:
        await client.indices.delete(index=",".join(existing))
    with contextlib.suppress(NotFoundError):
        await client.indices.delete_index_template(name=names.template)
