"""The production backend: Elasticsearch 8, shared by every process of the bot."""

from core.backends.elasticsearch.backend import ElasticsearchBackend

__all__ = ["ElasticsearchBackend"]
