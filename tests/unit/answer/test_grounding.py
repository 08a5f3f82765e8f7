"""Holding free text to its sources: each claim kept with the passage sentence that says it,
or left out."""

from __future__ import annotations

import time

import pytest

from core.answer.citations import NumberedSource, SourceRegistry, check_answer
from core.answer.grounding import content_text, ground, sentences, units
from core.answer.holding import ALSO_QUOTED, CLOSEST_QUOTED
from core.config import GroundingSettings
from core.domain.documents import Chunk, SearchHit
from core.domain.text import split_code

LINEAR_CHECK_CPU_S = 2  # the linear check: 0.03 s; the quadratic one: about 15 s
SETTINGS = GroundingSettings()
INGEST = (
    "Run the same command again whenever the documentation changes.\n\n"
    "- unchanged documents are skipped without being parsed;\n"
    "- changed documents have all their passages replaced in one transaction;\n"
    "- with `--prune`, documents that no longer exist are deleted."
)
LIMITS = (
    "Slack allows 50 blocks per message. The bot does not post in channels it was not invited to."
)


def numbered(*texts: str) -> list[NumberedSource]:
    return [
        NumberedSource(
            n, SearchHit(Chunk(f"c{n}", f"d{n}", "kb", f"T{n}", "", f"https://x/{n}", t, 0), 1.0)
        )
        for n, t in enumerate(texts, start=1)
    ]


def test_a_copied_claim_gets_the_marker_and_quote_of_its_passage() -> None:
    grounded = ground("Unchanged documents are skipped.", numbered(LIMITS, INGEST), SETTINGS)
    assert grounded.text == "Unchanged documents are skipped [2]."
    assert [(c.source, c.quote) for c in grounded.citations] == [
        (2, "unchanged documents are skipped without being parsed;")
    ]
    assert (grounded.supported, grounded.unsupported) == (1, 0)


def test_the_quotes_grounding_writes_verify_even_for_a_short_sentence() -> None:
    """Grounding quotes a whole passage sentence, however short: the citation check must
    accept it as verified (it asks short quotes to be whole sentences)."""
    passages = "Restart it. Changed documents are replaced in one transaction."
    sources = numbered(passages)
    grounded = ground("Restart it.", sources, SETTINGS)
    registry = SourceRegistry()
    registry.add([s.hit for s in sources])
    _, citations = check_answer(grounded.text, grounded.citations, registry, decoded=True)
    assert [(c.quote, c.verified) for c in citations] == [("Restart it.", True)]


def test_claims_citing_one_passage_share_a_quote_that_shows_each_of_them() -> None:
    """The quote was the first claim's sentence alone, shown under a marker the second claim
    carried too, as if it were that one's evidence. It now spans both, and still verifies."""
    sources = numbered(INGEST)
    answer = "Unchanged documents are skipped. Changed documents have their passages replaced."
    grounded = ground(answer, sources, SETTINGS)
    assert grounded.text == (
        "Unchanged documents are skipped [1]. Changed documents have their passages replaced [1]."
    )
    [quote] = [c.quote for c in grounded.citations]
    assert quote == (
        "unchanged documents are skipped without being parsed; - changed documents have all "
        "their passages replaced in one transaction;"
    )
    registry = SourceRegistry()
    registry.add([s.hit for s in sources])
    _, citations = check_answer(grounded.text, grounded.citations, registry, decoded=True)
    assert [c.verified for c in citations] == [True]


def test_a_shared_quote_too_long_for_both_claims_is_the_first_claims() -> None:
    far = "Restart the bot after upgrading. " + "Filler words pad this passage out. " * 12
    far += "Prune deletes documents that no longer exist."
    answer = "Restart the bot after upgrading. Prune deletes documents that no longer exist."
    grounded = ground(answer, numbered(far), SETTINGS)
    assert [c.quote for c in grounded.citations] == ["Restart the bot after upgrading."]


def test_a_marker_on_the_wrong_passage_is_moved() -> None:
    grounded = ground(
        "Changed documents are replaced in one transaction [1].", numbered(LIMITS, INGEST), SETTINGS
    )
    assert grounded.text.endswith("[2].")


def test_a_marker_of_thousands_of_digits_is_text_not_a_crash() -> None:
    """Python refuses int() of over 4,300 digits: a hostile model's `[999…]` must not end the
    answer."""
    huge = "[" + "9" * 5000 + "]"
    grounded = ground(
        f"Unchanged documents are skipped. See {huge}. Also [1, {'9' * 5000}].",
        numbered(LIMITS, INGEST),
        SETTINGS,
    )
    assert grounded.text == "Unchanged documents are skipped [2]."


def test_unsupported_claims_are_left_out_and_counted() -> None:
    answer = "Yes, the bot supports Microsoft Teams. Slack allows 50 blocks per message [1]."
    grounded = ground(answer, numbered(LIMITS), SETTINGS)
    assert grounded.text == "Slack allows 50 blocks per message [1]."
    assert (grounded.supported, grounded.unsupported) == (1, 1)


@pytest.mark.parametrize(
    "claim",
    [
        "Slack allows 60 blocks per message.",  # a number the source doesn't have
        "The bot does post in channels it was invited to.",  # the source says the opposite
        "Slack allows no blocks per message.",
    ],
)
def test_changed_numbers_and_flipped_polarity_are_not_support(claim: str) -> None:
    assert ground(claim, numbered(LIMITS), SETTINGS).supported == 0


@pytest.mark.parametrize(
    ("source", "claim"),
    [
        (
            "Production deploys happen without approval from the on-call engineer.",
            "Production deploys happen with approval from the on-call engineer.",
        ),
        (
            "Production deploys happen with approval from the on-call engineer.",
            "Production deploys happen without approval from the on-call engineer.",
        ),
        (
            "Nobody may deploy to production on Fridays.",
            "Anybody may deploy to production on Fridays.",
        ),
        (
            "No one may deploy to production on Fridays.",
            "Everyone may deploy to production on Fridays.",
        ),
        (
            "Noone may deploy to production on Fridays.",
            "Everyone may deploy to production on Fridays.",
        ),
        (
            "Nothing is deleted when you run prune in dry-run mode.",
            "Everything is deleted when you run prune in dry-run mode.",
        ),
        (
            "Learned keywords are stored nowhere else.",
            "Learned keywords are stored somewhere else.",
        ),
        (
            "Prune removes learned keywords that were used.",
            "Prune removes unused learned keywords.",
        ),
    ],
)
def test_opposite_polarity_words_are_not_support(source: str, claim: str) -> None:
    assert ground(claim, numbered(source), SETTINGS).supported == 0


@pytest.mark.parametrize(
    ("source", "claim"),
    [
        (
            "Prune removes learned keywords that nobody used for ninety days.",
            "Prune removes unused learned keywords.",
        ),
        ("Nothing is deleted in dry-run mode.", "Nothing is deleted in dry-run mode."),
        (
            "Unchanged documents are skipped without being parsed.",
            "Unchanged documents are skipped.",
        ),
    ],
)
def test_the_same_polarity_said_another_way_is_support(source: str, claim: str) -> None:
    assert ground(claim, numbered(source), SETTINGS).supported == 1


@pytest.mark.parametrize("answer_word", ["No.", "No!", "Not really.", "Nope, no."])
def test_a_bare_no_is_an_unsupported_claim_not_framing(answer_word: str) -> None:
    """A yes/no no passage says is left out like "Yes." is: "No." is not read as the
    abbreviation of "number", nor kept as framing for having no content words."""
    source = "The bot does not post in channels it was not invited to."
    grounded = ground(f"{answer_word} {source[:-1]} [1].", numbered(source), SETTINGS)
    assert grounded.text == f"{source[:-1]} [1]."


def test_no_before_a_number_is_an_abbreviation() -> None:
    text = "See No. 5 for details. Next."
    assert [s for s, _ in sentences(text)] == ["See No. 5 for details.", "Next."]


def test_lists_keep_their_lead_in_and_bullets() -> None:
    answer = (
        "To re-ingest, you can follow these steps:\n\n1. Skip unchanged documents.\n"
        "2. Invent a new flag called --turbo.\n3. Replace passages in one transaction."
    )
    grounded = ground(answer, numbered(INGEST), SETTINGS)
    assert grounded.text == (
        "To re-ingest, you can follow these steps:\n1. Skip unchanged documents [1].\n"
        "3. Replace passages in one transaction [1]."
    )


@pytest.mark.parametrize(
    "framing",
    [
        "## Re-ingesting also wipes the whole production database",
        "Yes, it also deletes all your own documents, back them up first:",
        "**No, passages are never replaced:**",
        "Yes:",
    ],
)
def test_a_heading_or_lead_in_that_states_something_is_checked(framing: str) -> None:
    """Kept unchecked as framing, an unsupported heading or lead-in was shown in full with a
    supported claim under it."""
    answer = f"{framing}\n- Skip unchanged documents."
    grounded = ground(answer, numbered(INGEST), SETTINGS)
    assert grounded.text == "- Skip unchanged documents [1]."
    assert grounded.unsupported == 1


@pytest.mark.parametrize(
    "framing", ["Steps:", "## Setup", "### Re-ingesting the documentation", "Here is an example:"]
)
def test_a_short_heading_or_lead_in_is_framing(framing: str) -> None:
    answer = f"{framing}\n- Skip unchanged documents."
    grounded = ground(answer, numbered(INGEST), SETTINGS)
    assert grounded.text == f"{framing}\n- Skip unchanged documents [1]."
    assert grounded.unsupported == 0


@pytest.mark.parametrize(
    "instruction",
    [
        "Delete the index first:",
        "First, wipe the database:",
        "**Then disable pruning:**",
        "Please back up everything:",
    ],
)
def test_a_short_lead_in_that_tells_the_reader_to_do_something_is_checked(
    instruction: str,
) -> None:
    """Three content words or fewer made a lead-in framing, shown unchecked: "Delete the index
    first:" was shown above cited steps, as if they said it. An instruction is a claim; no
    passage saying it, it is left out and counts against the answer."""
    answer = f"{instruction}\n- Skip unchanged documents."
    grounded = ground(answer, numbered(INGEST), SETTINGS)
    assert grounded.text == "- Skip unchanged documents [1]."
    assert grounded.unsupported == 1


def test_a_short_instruction_a_passage_says_is_kept_with_its_marker() -> None:
    answer = "Skip unchanged documents:\n- Replace passages in one transaction."
    grounded = ground(answer, numbered(INGEST), SETTINGS)
    assert grounded.text == (
        "Skip unchanged documents [1]:\n- Replace passages in one transaction [1]."
    )
    assert (grounded.supported, grounded.unsupported) == (2, 0)


@pytest.mark.parametrize(
    "label",
    [
        "Run this:",
        "Read it like this:",
        "Run the following command:",
        "Follow these steps:",
        "First, note the following:",
        "Important details:",
        "Try something like this:",
        # Labels a review found read as instructions by a looser rule (29 of 39).
        "Short answer:",
        "Supported formats:",
        "According to the documentation:",
        "Keep in mind:",
        "Key takeaways:",
        "Good question:",
        "Voici les étapes :",
        "Kurz gesagt:",
    ],
)
def test_a_lead_in_that_only_introduces_what_follows_is_still_framing(label: str) -> None:
    assert [u.claim for u in units(label, SETTINGS)] == [False]


@pytest.mark.parametrize("lead_in", [ALSO_QUOTED, CLOSEST_QUOTED])
def test_the_cores_own_lead_in_to_quoted_passages_is_framing(lead_in: str) -> None:
    """The evaluation counts claims shown without a marker with `units`: the lead-in the core
    writes before the passages it quotes is a label, not an uncited claim."""
    assert [u.claim for u in units(lead_in, SETTINGS)] == [False]


def test_a_supported_heading_is_kept_with_its_marker() -> None:
    answer = "## Changed documents have their passages replaced in one transaction\nThat is all."
    grounded = ground(answer, numbered(INGEST), SETTINGS)
    assert grounded.text == (
        "## Changed documents have their passages replaced in one transaction [1]"
    )


@pytest.mark.parametrize(
    ("source", "claim"),
    [
        (
            "The default request timeout is 30 seconds.",
            "The default request timeout is 30 minutes.",
        ),
        ("The API key is required for the Slack adapter.", "The API key is optional for it."),
        ("Run the migration after you stop the bot.", "Run the migration before you stop the bot."),
        (
            "Increase the batch size when ingest is slow.",
            "Decrease the batch size when it is slow.",
        ),
        ("Only admins can delete learned keywords.", "Anyone can delete learned keywords."),
        ("The bot keeps at most 6 turns of history.", "The bot keeps at least 6 turns of history."),
        ("Web search is disabled by default.", "Web search is enabled by default."),
        (
            "Admins can delete learned keywords; members can only view them.",
            "Members can delete learned keywords.",
        ),
        (
            "Admins can delete learned keywords; members can only view them.",
            "Admins can only view learned keywords.",
        ),
        (
            "The default request timeout is 30 seconds, and the maximum is 300 seconds.",
            "The default request timeout is 300 seconds.",
        ),
        (
            "The free tier allows 100 requests per minute; the paid tier allows 1000.",
            "The free tier allows 1000 requests per minute.",
        ),
        (
            "Deleting the index is safe; deleting the state file loses every conversation.",
            "Deleting the index loses every conversation.",
        ),
        (
            "Back up the state file before you upgrade, and never downgrade.",
            "Never back up the state file before you upgrade.",
        ),
        (
            "The Discord adapter supports threads but not forum posts.",
            "The Discord adapter supports forum posts.",
        ),
        (  # a pronoun stands for its noun, not for the words swapped in beside it
            "The scheduler retries failed jobs, and it deletes finished ones.",
            "The scheduler deletes failed jobs.",
        ),
        (
            "Unused keywords are pruned weekly, and used ones are kept.",
            "Used keywords are pruned weekly.",
        ),
        (  # both words in one sentence: the claim says one of them more often, the other less
            "Requests are priced by the input tokens sent and the output tokens generated.",
            "Requests are priced by the output tokens sent and the output tokens generated.",
        ),
    ],
)
def test_a_claim_turned_round_in_one_word_is_left_out(source: str, claim: str) -> None:
    """Each kept 70% of its sentence's words, its figures among the sentence's and its
    polarity the sentence's as a whole, and was shown with a verified marker: an opposite
    (enabled, disabled), a figure's unit, or a word taken from another clause of the sentence
    (its subject, its figure, its "never") now leaves it out."""
    assert ground(claim, numbered(source), SETTINGS).supported == 0


@pytest.mark.parametrize(
    ("source", "claim"),
    [
        (
            "The default request timeout is 30 seconds, and the maximum is 300 seconds.",
            "The default request timeout is 30 seconds, and the maximum is 300 seconds.",
        ),
        (
            "The default request timeout is 30 seconds, and the maximum is 300 seconds.",
            "The maximum is 300 seconds.",
        ),
        (
            "Admins can delete learned keywords; members can only view them.",
            "Members can only view learned keywords.",  # "them", said in the other clause
        ),
        (
            "Back up the state file before you upgrade, and never downgrade.",
            "Back up the state file before you upgrade.",  # the "never" is the other clause's
        ),
        (
            "The Discord adapter supports threads but not forum posts.",
            "The Discord adapter does not support forum posts.",
        ),
        (
            "Unchanged files are skipped, and changed files are re-embedded.",
            "Changed files are re-embedded.",
        ),
        ("Only admins can see all settings.", "Admins can see all settings."),
        ("The API key is required for the Slack adapter.", "The Slack adapter requires the key."),
        # Paraphrases: an "and" without its comma, figures with words after them that are no
        # units or a unit spelled another way, a comparison turned round, a pronoun's noun.
        (
            "The default request timeout is 30 seconds, and the maximum is 300 seconds.",
            "The default request timeout is 30 seconds and the maximum is 300 seconds.",
        ),
        (
            "Admins can add users, and they can remove users too.",
            "Admins can add and remove users.",
        ),
        ("Ports 80 and 443 must be open on the load balancer.", "Ports 443 and 80 must be open."),
        ("The API allows 100 requests per minute and 10 per second.", "It allows 10 per second."),
        (
            "Requests time out after 30 s by default.",
            "Requests time out after 30 seconds by default.",
        ),
        ("The bot needs between 2 and 4 GB of memory.", "The bot needs 2 to 4 GB of memory."),
        (
            "Run the database migration before you start the new bot version.",
            "Start the new bot version after you run the database migration.",
        ),
        (
            "BM25 search is faster than vector search on large indexes.",
            "Vector search is slower than BM25 search on large indexes.",
        ),
        (
            "Ingest reads every Markdown file, and it silently skips files over 10 MB.",
            "Ingest skips files over 10 MB.",
        ),
        (
            "The clock process runs the scheduler, and it prunes unused keywords nightly.",
            "The clock process prunes unused keywords.",
        ),
        ("Hidden sheets are skipped; visible ones are indexed.", "Visible sheets are indexed."),
        # An "and" inside one clause does not part its "not" from what it denies.
        (
            "PDFs and images are not indexed, but their file names are logged.",
            "PDFs and images are not indexed.",
        ),
        (
            "Archived and deleted channels are never indexed, so their messages stay private.",
            "Archived and deleted channels are never indexed.",
        ),
    ],
)
def test_a_claim_saying_one_clause_or_all_of_them_is_kept(source: str, claim: str) -> None:
    """Four of the first eight were left out before: the sentence's "never", "not" or
    "unchanged" in another clause turned the whole sentence round. The rest are paraphrases a
    first version of the clause-by-clause check left out."""
    assert ground(claim, numbered(source), SETTINGS).supported == 1


@pytest.mark.parametrize(
    "tail",
    [" " * 40_000 + "by default [1].", "." * 40_000 + "x", " [1]" * 10_000 + " x", "1," * 20_000],
    ids=["spaces", "stops", "markers", "figures"],
)
def test_a_long_run_in_a_claim_is_checked_in_linear_time(tail: str) -> None:
    """The markers' and sentence ends' patterns tried every space (stop, marker, digit) of a
    run as a start: a reply with 12,000 spaces took 1.4 s of the event loop against 8
    passages, 12,000 stops 3.9 s; 40,000 would take 15 s and more. Timed by this thread's CPU,
    far above the linear check's, far below the old one's."""
    source = "Web search is disabled by default, and admins can enable it per channel."
    started = time.thread_time()
    ground("Web search is disabled" + tail, numbered(*[source] * 8), SETTINGS)
    assert time.thread_time() - started < LINEAR_CHECK_CPU_S


def test_code_copied_without_its_trailing_comment_is_kept() -> None:
    source = "Re-index:\n\n```bash\nbot ingest docs/  # index the folder again\n```"
    assert ground("Run:\n```bash\nbot ingest docs/\n```", numbered(source), SETTINGS).supported


def test_invented_code_is_left_out_and_copied_code_kept() -> None:
    source = "Install it:\n\n```\npip install docbot\nbot ingest docs/\n```"
    invented = "Use this:\n```python\nimport magic\nmagic.solve()\n```"
    copied = "Install it:\n```\npip install docbot\nbot ingest docs/\n```"
    assert ground(invented, numbered(source), SETTINGS).supported == 0
    kept = ground(copied, numbered(source), SETTINGS)
    assert kept.supported == 1
    assert kept.text.endswith("```\n[1]")


@pytest.mark.parametrize(
    "altered",
    [
        "Preview it:\n```\nbot keywords prune\n```",  # the passage's command less its flag
        "Clean up:\n```\nbot keywords prune --dry-run\nbot ingest docs/\n"
        "pip install docbot\nrm -rf ~/.local/share/bot\nbot doctor\n```",  # one line in five
    ],
)
def test_code_altered_from_the_passage_is_left_out(altered: str) -> None:
    """Code is run as written: a line found inside a longer one (a flag dropped) or one
    invented line among copied ones (80% of the lines sufficed) was shown, cited."""
    source = (
        "Preview what would go:\n\n```\nbot keywords prune --dry-run\nbot ingest docs/\n"
        "pip install docbot\nbot doctor\n```"
    )
    assert ground(altered, numbered(source), SETTINGS).supported == 0


@pytest.mark.parametrize(
    "source",
    [
        "Run `bot ingest docs/` to index the folder.",  # an inline span set as a block
        "Index the folder:\n\n```console\n$ bot ingest docs/\n```",  # without its prompt
        "- bot ingest docs/",  # a list's line
    ],
)
def test_code_set_apart_from_its_passage_as_written_is_kept(source: str) -> None:
    grounded = ground("Index it:\n```\nbot ingest docs/\n```", numbered(source), SETTINGS)
    assert grounded.supported == 1


def test_code_keeps_its_brackets_and_the_marker_line_cites_it() -> None:
    """Indexes in code (`sys.argv[1]`, `[8080, 8443]`) are code, not markers to strip."""
    source = (
        "To read the first argument:\n\n```python\nimport sys\nfirst = sys.argv[1]\n"
        "name = sys.argv[0]\nports = [8080, 8443]\n```"
    )
    block = (
        "```python\nimport sys\nfirst = sys.argv[1]\nname = sys.argv[0]\nports = [8080, 8443]\n```"
    )
    grounded = ground(f"Read it like this:\n\n{block}\n[1]", numbered(source), SETTINGS)
    assert grounded.text == f"Read it like this:\n{block}\n[1]"
    assert grounded.supported == 1


def test_inline_code_keeps_its_brackets() -> None:
    source = "The first argument is sys.argv[1] in every script."
    grounded = ground(
        "The first argument is `sys.argv[1]` in every script [1].", numbered(source), SETTINGS
    )
    assert grounded.text == "The first argument is `sys.argv[1]` in every script [1]."


def test_a_claim_said_twice_is_said_once() -> None:
    answer = "Slack allows 50 blocks per message. Slack allows 50 blocks per message."
    assert ground(answer, numbered(LIMITS), SETTINGS).text.count("Slack") == 1


def test_entities_from_the_escaped_prompt_are_read_as_text() -> None:
    source = "Pings such as <!channel> are defused."
    grounded = ground("Pings such as &lt;!channel&gt; are defused.", numbered(source), SETTINGS)
    assert grounded.supported == 1
    assert "&lt;" not in grounded.text


def test_saying_the_sources_do_not_answer_is_recognised() -> None:
    grounded = ground("The sources do not answer this.", numbered(LIMITS), SETTINGS)
    assert grounded.says_not_found
    assert grounded.supported == 0


@pytest.mark.parametrize(
    ("text", "empty"),
    [("[1] [2]", True), (" [3],[4]. ", True), ("", True), ("Yes [1]", False), ("`[1]`", False)],
)
def test_content_beyond_markers(text: str, empty: bool) -> None:
    assert (content_text(text) == "") is empty


def test_sentences_keep_decimals_abbreviations_and_fences_whole() -> None:
    text = "Accuracy was 89.01% on the set, e.g. for tickets. Next one!\n```\na. b\n```"
    assert [s for s, _ in sentences(text)] == [
        "Accuracy was 89.01% on the set, e.g. for tickets.",
        "Next one!",
        "```\na. b\n```",
    ]


INGEST_COMMAND = "bot ingest docs --base-url https://docs.example.com"


def test_an_unclosed_fence_is_text_and_leaves_what_follows_it_text() -> None:
    """A weak model's unclosed fence: its lines are checked like any text (the platforms show
    them as text), and it makes no code of what follows, the quoted passages included."""
    answer = f"Run this:\n```bash\n{INGEST_COMMAND}"
    grounded = ground(
        answer, numbered(f"Re-ingest with:\n```bash\n{INGEST_COMMAND}\n```"), SETTINGS
    )
    assert grounded.text == f"Run this:\n{INGEST_COMMAND} [1]"
    assert [code for _, code in split_code(grounded.text + "\n\nQuoted below.")] == [False]


def test_a_lead_in_restating_the_question_is_left_out_without_a_mark_against_the_answer() -> None:
    """A weak model's "To answer your question about ...:" says nothing a passage can show; it
    is not shown, and the answer under it is not made partial for it (a yes or a no in a
    lead-in still is: `test_a_heading_or_lead_in_that_states_something_is_checked`)."""
    answer = (
        "To answer your question about re-ingesting changed documents with the bot:\n"
        "- Skip unchanged documents."
    )
    grounded = ground(answer, numbered(INGEST), SETTINGS)
    assert grounded.text == "- Skip unchanged documents [1]."
    assert (grounded.supported, grounded.unsupported) == (1, 0)


# Markdown as written, wrapped at a column: the "not" on the next line belongs to the sentence.
WRAPPED = (
    "Each web page comes back as a numbered source. After a web search Claude must save\n"
    "keywords for what it found (`save_keywords`): the answer is\n"
    "not accepted until it has.\n\n"
    "- documents removed upstream are\n"
    "  not deleted without `--prune`.\n"
    "## Limits\n"
    "Up to 8 passages are shown."
)


@pytest.mark.parametrize(
    "claim",
    [
        "After a web search the answer is accepted before Claude saves keywords for what it found.",
        "Documents removed upstream are deleted.",
    ],
)
def test_a_wrapped_sentence_is_one_sentence_its_negation_included(claim: str) -> None:
    """Read line by line, "the answer is" supported the claim without its "not", and the quote
    shown for it stopped just before the "not"."""
    assert ground(claim, numbered(WRAPPED), SETTINGS).supported == 0


def test_a_wrapped_sentence_supports_what_it_says_with_a_quote_that_verifies() -> None:
    claim = "After a web search the answer is not accepted until Claude saves keywords."
    sources = numbered(WRAPPED)
    grounded = ground(claim, sources, SETTINGS)
    assert grounded.supported == 1
    assert "not accepted until it has" in grounded.citations[0].quote
    registry = SourceRegistry()
    registry.add([s.hit for s in sources])
    _, citations = check_answer(grounded.text, grounded.citations, registry, decoded=True)
    assert [c.verified for c in citations] == [True]


def test_a_heading_and_a_list_item_stay_apart_from_the_lines_around_them() -> None:
    """Only a paragraph's own lines are joined: "## Limits" is not the end of the item above
    it, nor the start of the sentence below it."""
    grounded = ground("Up to 8 passages are shown.", numbered(WRAPPED), SETTINGS)
    assert [c.quote for c in grounded.citations] == ["Up to 8 passages are shown."]


def test_invented_code_padded_with_lines_of_punctuation_is_left_out() -> None:
    """Four lines of `-` are "in" any passage: they made four of five lines found."""
    source = "Install it:\n\n```\npip install docbot\nbot ingest docs/\n```\n- a list item"
    padded = "Clean up:\n```\nrm -rf .bot/\n-\n-\n-\n-\n```"
    assert ground(padded, numbered(source), SETTINGS).supported == 0
    letter = "Then:\n```\nb\n```"  # one letter is inside a word of any passage, not a line of it
    assert ground(letter, numbered(source), SETTINGS).supported == 0


def test_a_figure_is_a_claim_however_few_words_carry_it() -> None:
    """ "- Up to 500." has no content word: it was kept as framing, shown unchecked."""
    answer = "Limits:\n- Up to 500.\n- Skip unchanged documents."
    grounded = ground(answer, numbered(INGEST), SETTINGS)
    assert grounded.text == "Limits:\n- Skip unchanged documents [1]."
    assert grounded.unsupported == 1
    # A number alone is a list's numbering (cut from "**2. Develop your test cases**").
    assert [u.claim for u in units("**2.", SETTINGS)] == [False]


def test_a_documents_best_passage_is_quoted_when_the_answer_cites_another() -> None:
    """The answer with no model quotes each top document's best passage; an answer citing the
    same document's second passage left that best one out (compared by document), so a weak
    model's answer showed less than none would."""
    from core.answer.holding import SourceHolding
    from core.config import AnswerSettings
    from core.domain.conversation import AnswerMode, Trace

    best = "Re-ingesting skips unchanged documents and replaces changed ones in one transaction."
    second = "An interrupted ingest resumes: run the same command again."
    hits = [
        SearchHit(Chunk(chunk, doc, "kb", doc, "", url, text, 0), 1.0)
        for chunk, doc, url, text in [
            ("a1", "Ingesting", "https://x/a#1", best),
            ("a2", "Ingesting", "https://x/a#2", second),
            ("b1", "Searching", "https://x/b", LIMITS),
        ]
    ]
    registry = SourceRegistry()
    sources = registry.add(hits)
    answer = SourceHolding(AnswerSettings()).held(
        "An interrupted ingest resumes when you run the same command again [2].",
        sources,
        registry,
        Trace(),
        AnswerMode.SEARCH_THEN_ANSWER,
    )
    assert [c.url for c in answer.citations] == ["https://x/a#2", "https://x/a#1", "https://x/b"]
    assert best in answer.text
