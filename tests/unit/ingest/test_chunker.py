from __future__ import annotations

import itertools
import time

from core.ingest.chunker import split_text

PARAGRAPH = "This sentence talks about hybrid search and fusion. " * 6


def test_short_text_is_one_chunk() -> None:
    assert split_text("Just one line.", 1000, 150) == ["Just one line."]


def test_chunks_respect_the_size_and_cover_every_paragraph() -> None:
    paragraphs = [f"Paragraph {i}. {PARAGRAPH}" for i in range(12)]
    chunks = split_text("\n\n".join(paragraphs), 800, 100)
    assert len(chunks) > 1
    assert all(len(c) <= 800 for c in chunks)
    joined = " ".join(chunks)
    assert all(f"Paragraph {i}." in joined for i in range(12))


def test_consecutive_chunks_overlap() -> None:
    sentences = " ".join(f"Sentence number {i} is here." for i in range(200))
    chunks = split_text(sentences, 500, 120)
    for before, after in itertools.pairwise(chunks):
        head = after[:40]
        assert head in before, "the next chunk should start with the end of the previous one"


def test_code_fence_is_kept_whole_and_not_prefixed() -> None:
    code = "```python\n" + "\n".join(f"x{i} = {i}" for i in range(30)) + "\n```"
    text = f"{PARAGRAPH}\n\n{code}\n\nAfter the code."
    chunks = split_text(text, 400, 100)
    fenced = [c for c in chunks if "```python" in c]
    assert len(fenced) == 1
    assert fenced[0].startswith("```python")
    assert fenced[0].count("```") == 2


def test_the_prose_after_a_code_block_does_not_start_with_its_end() -> None:
    """The overlap carried a code block's last characters, its closing fence among them, into
    the next chunk: alone there, the fence opened a code block that swallowed the prose."""
    code = "```python\n" + "\n".join(f"x{i} = {i}" for i in range(30)) + "\n```"
    after = " ".join(["After the code, restart the bot."] * 5)
    chunks = split_text(f"{PARAGRAPH}\n\n{code}\n\n{after}", 400, 100)
    assert chunks[-1] == after
    assert all(chunk.count("```") in (0, 2) for chunk in chunks)


def test_a_code_block_longer_than_a_passage_is_fenced_in_each_piece() -> None:
    """Cut at its lines, a long block's middle passages had no fence: the renderers read its
    `*` and `_` as Markdown and a quote of it as prose, and the model saw prose."""
    lines = [f"    config_{i} = compute(*args, key_{i}=True)" for i in range(60)]
    code = "````python\n" + "\n".join([*lines[:30], "", *lines[30:]]) + "\n````"
    chunks = split_text(f"{PARAGRAPH}\n\n{code}\n\nAfter the code.", 500, 100)
    pieces = [c for c in chunks if "config_" in c]
    assert len(pieces) > 2
    assert all(len(c) <= 500 for c in chunks)
    blocks = [piece.split("\n````")[0] for piece in pieces]
    assert all(piece.count("````") == 2 for piece in pieces)
    assert all(block.startswith("````python\n") for block in blocks)
    inner = [line for block in blocks for line in block.split("\n")[1:]]
    assert inner == [*lines[:30], "", *lines[30:]]


def test_a_single_huge_sentence_is_cut_at_words() -> None:
    words = " ".join(f"word{i}" for i in range(1000))
    chunks = split_text(words, 300, 50)
    assert all(len(c) <= 300 for c in chunks)
    assert "word999" in chunks[-1]
    assert not any(c.startswith(" ") for c in chunks)


def test_overlap_survives_sentences_longer_than_a_chunk() -> None:
    words = " ".join(f"w{i}" for i in range(600))
    chunks = split_text(words, 300, 60)
    for before, after in itertools.pairwise(chunks):
        assert after.split()[0] in before.split()


def test_a_huge_single_line_is_chunked_in_linear_time() -> None:
    started = time.process_time()  # CPU: a busy neighbour does not make it fail
    chunks = split_text("word " * 4_000_000, 1000, 150)  # 20 MB on one line
    assert time.process_time() - started < 20  # about 3 s; quadratic before: minutes
    assert all(len(c) <= 1000 for c in chunks)
    assert len(chunks) > 20_000


def test_short_prose_after_code_carries_none_of_the_code_into_the_next_chunk() -> None:
    """Prose after a block shorter than the overlap let the overlap reach back into the code:
    the next chunk began with code's end and its closing fence, which opens a block there."""
    code = "```python\n" + "\n".join(f"x{i} = compute(a, b)" for i in range(20)) + "\n```"
    text = f"{code}\n\nSee above.\n\n" + " ".join(["word"] * 150)
    chunks = split_text(text, 500, 60)
    assert all(chunk.count("```") in (0, 2) for chunk in chunks)
    assert not any(c.lstrip().startswith(("x", "b)")) for c in chunks[1:])


def test_a_fence_closes_only_on_its_own_character_at_least_as_long() -> None:
    """As CommonMark reads it: an underline of tildes in the code, or a shorter run of
    backticks in a block about Markdown, closed the block there, and the rest was read as
    prose (`*` and `_` as emphasis, the overlap glued on)."""
    lines = [f"    step_{i}(option_{i}=True)  # configure * and _" for i in range(25)]
    code = "\n".join(["````markdown", "Heading", "~~~~~~~", "```", *lines, "````"])
    chunks = split_text(f"Intro.\n\n{code}\n\nAfterwards restart.", 500, 150)
    pieces = [c for c in chunks if "step_" in c]
    assert len(pieces) > 1
    assert all("````markdown\n" in c and c.count("````") == 2 for c in pieces)
    assert "````markdown\nHeading\n~~~~~~~\n```\n    step_0(" in pieces[0]
