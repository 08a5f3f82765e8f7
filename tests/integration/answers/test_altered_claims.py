"""`bench.altered_claims`, small: the same measure on the bundled docs, against a stand-in model
that copies a passage's sentence with one word turned round ("enable" for "disable"), and the
same sentences copied as they stand. The figures are deterministic (the same docs, model and
questions), so they are asserted: a change to the sentence check that lets the alterations it
catches through, or stops keeping honest copies, fails here."""

from __future__ import annotations

import httpx

from bench.altered_claims import shown_alterations
from bench.common import bundled_docs_labels
from tests.fakes.llama_server import AlteringModel, LlamaServer
from tests.integration.answers.helpers import engine, local_model


async def _measured(settings, index, *, alter: bool) -> dict:
    _, grounded = bundled_docs_labels()
    model = AlteringModel(alter=alter)
    server = LlamaServer(model).start()
    try:
        async with httpx.AsyncClient(timeout=10) as http:
            bot = engine(settings, index, model=local_model(http, server.url))
            return await shown_alterations(bot, sorted(grounded), model)
    finally:
        server.stop()


async def test_an_answer_turned_round_in_one_word_is_not_shown(settings, index) -> None:
    altered = await _measured(settings, index, alter=True)
    faithful = await _measured(settings, index, alter=False)
    assert altered["altered_known"] >= 5  # the measure measures something
    assert altered["shown_known"] == 0
    assert faithful["altered"] == altered["altered"]
    assert faithful["shown"] >= 0.8 * faithful["altered"]
