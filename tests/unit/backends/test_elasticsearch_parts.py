"""The pure parts of the Elasticsearch backend: names, mapping checks, ids, messages."""

from __future__ import annotations

import traceback
from pathlib import Path

import pytest
from elastic_transport import ConnectionError as TransportConnectionError

from core.backends.elasticsearch.connection import (
    allows_server_rrf,
    build_client,
    check_major,
    described,
    explain,
    where,
)
from core.backends.elasticsearch.documents import item_reason
from core.backends.elasticsearch.queries import bm25_fields, bm25_query
from core.backends.elasticsearch.schema import (
    IndexNames,
    chunk_properties,
    doc_id_key,
    mapping_conflicts,
)
from core.backends.elasticsearch.versions import by_version, several_behind_alias
from core.config import Bm25Weights, ElasticsearchSettings, SearchSettings, Secrets
from core.domain.documents import SearchFilters
from core.domain.learned import normalise_keyword
from core.errors import InvalidKeyword, SearchIndexError


def test_index_names_and_versions() -> None:
    names = IndexNames("docbot")
    assert names.chunks == "docbot-chunks"
    assert names.version(3) == "docbot-chunks-v3"
    assert names.version_number("docbot-chunks-v12") == 12
    assert names.version_number("docbot-chunks") is None
    assert names.version_number("other-chunks-v1") is None
    assert names.version_number("docbot-chunks-vx") is None


def test_versions_are_ordered_by_number() -> None:
    names = IndexNames("docbot")
    found = ["docbot-chunks-v9", "docbot-chunks-v10", "docbot-chunks-v2"]
    assert by_version(names, found) == ["docbot-chunks-v2", "docbot-chunks-v9", "docbot-chunks-v10"]


def test_an_alias_on_several_indices_says_which_to_keep() -> None:
    names = IndexNames("docbot")
    said = several_behind_alias(names, {"docbot-chunks-v2": 0, "docbot-chunks-v1": 26})
    assert said.startswith(
        "docbot-chunks points at several indices: docbot-chunks-v1 (26 entries), "
        "docbot-chunks-v2 (0 entries); every write fails"
    )
    assert said.endswith(
        'POST _aliases {"actions": [{"remove": {"index": "docbot-chunks-v2", '
        '"alias": "docbot-chunks"}}]}'
    )


def test_ids_are_kept_when_valid_and_hashed_otherwise() -> None:
    assert doc_id_key("abc-00001") == "abc-00001"
    long = "x" * 600
    assert doc_id_key(long) != long
    assert len(doc_id_key(long)) == 64
    assert doc_id_key(long) == doc_id_key(long)
    assert not doc_id_key("_reserved").startswith("_")  # ids may not start with "_"


def test_mapping_conflicts_name_each_field() -> None:
    good = chunk_properties(384)
    assert mapping_conflicts(good, 384) == []
    bad = {**good, "embedding": {"type": "dense_vector", "dims": 768}, "text": {"type": "keyword"}}
    del bad["learned"]
    assert mapping_conflicts(bad, 384) == [
        "text is keyword, expected text",
        "learned is missing",
        "embedding has 768 dimensions, expected 384",
    ]


def test_addresses_in_messages_never_carry_credentials() -> None:
    s = ElasticsearchSettings(url="https://elastic:hunter2@es.example.com:9200")
    assert where(s) == "https://es.example.com:9200"
    assert where(ElasticsearchSettings(cloud_id="prod-docs:ZXUtd2VzdC0x")) == (
        "Elastic Cloud deployment 'prod-docs'"
    )


@pytest.mark.parametrize(
    "url",
    [
        "http://elastic:hunter2@[bad",
        "http://elastic:hunter2@host:notaport",
        "http://elastic:hunter2@host:99999",
    ],
)
def test_a_url_the_client_refuses_is_quoted_without_its_password(url: str) -> None:
    """The client's ValueError quotes the URL whole; neither our message nor the traceback
    that `-v` prints may carry the password."""
    with pytest.raises(SearchIndexError) as caught:
        build_client(ElasticsearchSettings(url=url), Secrets())
    assert (
        str(caught.value)
        == f"elasticsearch settings: Could not parse URL {url.replace('elastic:hunter2@', '')!r}"
    )
    printed = "".join(traceback.format_exception(caught.value))
    assert "hunter2" not in printed
    assert "elastic:" not in printed


def test_client_errors_quoting_a_url_are_explained_without_credentials() -> None:
    s = ElasticsearchSettings(url="https://elastic:hunter2@es.example.com:9200")
    failure = RuntimeError("no route to https://elastic:hunter2@es.example.com:9200/_bulk")
    assert str(explain(failure, s)) == (
        "Elasticsearch at https://es.example.com:9200: "
        "no route to https://es.example.com:9200/_bulk"
    )


def test_an_unreachable_cluster_is_said_once_with_what_to_check() -> None:
    """After its retries the client's text nests every attempt ("Connection error caused by:
    ConnectionError(Connection error caused by: ...)"): the line says the cause once, and
    where the address was set."""
    refused = "Cannot connect to host 127.0.0.1:9 ssl:default [Connect call failed]"
    attempt = TransportConnectionError(refused, errors=(ConnectionRefusedError(111, refused),))
    failure = TransportConnectionError(refused, errors=(attempt, attempt))
    s = ElasticsearchSettings(url="http://elastic:hunter2@127.0.0.1:9")
    assert str(explain(failure, s)) == (
        f"can't reach Elasticsearch at http://127.0.0.1:9: {refused}; check elasticsearch.url "
        "or elasticsearch.cloud_id (ELASTICSEARCH_URL, ELASTICSEARCH_CLOUD_ID) and that the "
        "cluster is running"
    )


def test_a_refused_bulk_item_is_named_without_the_document_it_quotes() -> None:
    """A parse failure's reason previews the field's value: the passage's text stays out."""
    item = {
        "status": 400,
        "error": {
            "type": "document_parsing_exception",
            "reason": "[1:15] failed to parse field [position] of type [integer] in document "
            "with id 'abc-00001'. Preview of field's value: 'the internal runbook says'",
        },
    }
    assert item_reason(item) == (
        "document_parsing_exception: [1:15] failed to parse field [position] of type "
        "[integer] in document with id 'abc-00001'."
    )


def test_a_servers_reason_is_one_bounded_line() -> None:
    said = described("illegal_argument_exception", "a\nvery " + "long " * 200)
    assert "\n" not in said
    assert len(said) <= 300
    assert described("", "") == ""


def test_a_ca_file_without_a_pem_certificate_is_a_settings_error(tmp_path: Path) -> None:
    """A DER certificate, or any other file: one line naming the setting, not an SSLError."""
    der = tmp_path / "ca.der"
    der.write_bytes(b"\x30\x82\x03\x0d\x30\x82\x01\xf5\xa0\x03\x02\x01\x02")
    settings = ElasticsearchSettings(url="https://es.example.com:9200", ca_certs=der)
    with pytest.raises(SearchIndexError) as caught:
        build_client(settings, Secrets())
    assert str(caught.value).startswith(
        f"elasticsearch.ca_certs: {der} holds no CA certificate in PEM form"
    )
    assert "openssl x509 -inform der" in str(caught.value)


def test_a_missing_ca_file_is_named(tmp_path: Path) -> None:
    missing = tmp_path / "ca.pem"
    settings = ElasticsearchSettings(url="https://es.example.com:9200", ca_certs=missing)
    with pytest.raises(SearchIndexError, match=r"elasticsearch\.ca_certs: .* does not exist"):
        build_client(settings, Secrets())


@pytest.mark.parametrize("version", ["latest", "", "².1.0"])
def test_a_version_that_is_no_number_is_refused(version: str) -> None:
    s = ElasticsearchSettings(url="http://localhost:9200")
    with pytest.raises(SearchIndexError, match=f"reports version {version!r}, which is no"):
        check_major(version, s)


def test_major_version_check() -> None:
    s = ElasticsearchSettings(url="http://localhost:9200")
    assert check_major("8.15.3", s) == 8
    with pytest.raises(SearchIndexError, match=r"pip install 'elasticsearch\[async\]>=9,<10'"):
        check_major("9.0.1", s)


@pytest.mark.parametrize(
    ("kind", "status", "allowed"),
    [
        ("basic", "active", False),
        ("platinum", "active", True),
        ("enterprise", "active", True),
        ("trial", "active", True),
        ("platinum", "expired", False),
        ("unknown", "400 invalid_index_name_exception", False),
    ],
)
def test_server_rrf_needs_an_active_paid_licence(kind: str, status: str, allowed: bool) -> None:
    assert allows_server_rrf(kind, status) is allowed


def test_bm25_weights_become_combined_fields_boosts() -> None:
    weights = Bm25Weights(title=1.0, heading=0.5, text=0.5, keywords=0.0)
    # combined_fields refuses boosts below 1: scaled so the smallest is 1; weight 0 leaves out.
    assert bm25_fields(SearchSettings(bm25_columns=weights)) == ["title^2", "heading^1", "text^1"]


def test_the_bm25_request_looks_for_the_terms_sqlite_looks_for() -> None:
    # The `english` analyzer alone would keep "how", "do", "i", "my": a question's frame, which
    # matches nearly every passage.
    request = bm25_query("How do I rotate my API key?", SearchFilters(), SearchSettings())
    [clause] = request["bool"]["must"]
    assert clause["combined_fields"]["query"] == "rotate api key"


@pytest.mark.parametrize(
    ("raw", "expected"),
    [("  Error  E1234 ", "error e1234"), ("OAuth", "oauth"), ("ab", "ab"), ("x" * 50, "x" * 50)],
)
def test_keywords_are_normalised(raw: str, expected: str) -> None:
    assert normalise_keyword(raw) == expected


@pytest.mark.parametrize(
    ("raw", "why"),
    [
        ("a", "has 1 characters; use 2 to 50"),
        ("x" * 51, "has 51 characters; use 2 to 50"),
        ("   ", "can't be empty"),
        ("", "can't be empty"),
        ("bad\x00word", "control characters"),
        ("bell\x07", "control characters"),
    ],
)
def test_bad_keywords_are_refused_with_a_reason(raw: str, why: str) -> None:
    with pytest.raises(InvalidKeyword, match=why):
        normalise_keyword(raw)
