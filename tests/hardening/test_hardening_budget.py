"""Class 5: a token budget bounds the characters handed to the reader, whatever the text looks like."""
import pytest
from hardening_helpers import good, publish_all, write

from rag.models.tokens import CHARS_PER_TOKEN, default_counter
from rag.query.methods import METHODS
from rag.query.workspace import Workspace
from rag.retrieval.callers import Caller
from rag.units.chunking import subchunks

HOSTILE_TEXTS = {
    "one long word": "a" * 200_000,
    "long word of rare characters": "\U0001f600" * 50_000,
    "combining marks on one letter": "a" + "\u0301" * 100_000,
    "zero-width characters": "x" + "\u200b" * 100_000 + "y",
    "spaces between two words": "x" + " " * 100_000 + "y",
    "control characters": "x" + "\x01" * 100_000,
    "a URL without spaces": "https://example.com/" + "path/" * 40_000,
    "digits": "7" * 100_000,
}


@pytest.mark.parametrize("text", HOSTILE_TEXTS.values(), ids=HOSTILE_TEXTS.keys())
def test_a_count_never_falls_below_one_token_per_ten_characters(text):
    counter = default_counter()
    assert counter.count_one(text) * CHARS_PER_TOKEN >= len(text)
    assert counter.count([text, "short"]).tolist() == [counter.count_one(text), counter.count_one("short")]


def test_ordinary_prose_counts_exactly_its_word_pieces():
    counter = default_counter()
    text = "The gateway keeps telemetry in its offline cache for seven days before it evicts the oldest batch."
    assert counter.count_one(text) == len(counter._tok.encode(text, add_special_tokens=False).ids)


@pytest.mark.parametrize("text", HOSTILE_TEXTS.values(), ids=HOSTILE_TEXTS.keys())
def test_sub_chunks_of_any_text_stay_within_their_maximum(text):
    counter = default_counter()
    spans = subchunks(text, counter, 112, 128)
    assert spans, "the text must still be indexed"
    for span in spans:
        assert counter.count_one(text[span.start:span.end]) <= 128
    assert sum(s.end - s.start for s in spans) >= len(text.strip()) * 0.99


@pytest.fixture(scope="module")
def hostile_workspace(tmp_path_factory, embedder):
    tmp = tmp_path_factory.mktemp("budget")
    src = tmp / "src"
    write(src, "word.md", good("giant-word", "Turbine " + "x" * 200_000 + " maintenance."))
    write(src, "marks.md", good("combining", "Turbine maintenance " + "a" + "\u0301" * 50_000))
    write(src, "normal.md", good("normal", "Turbine maintenance happens every spring."))
    catalog, index, _, _ = publish_all(tmp / "ws", [src], embedder.encode)
    return catalog, Workspace(tmp / "ws", embedder=embedder)


@pytest.mark.slow
@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("budget", [50, 300, 2000])
def test_no_method_hands_over_more_characters_than_the_budget_allows(hostile_workspace, embedder, method, budget):
    _, reader = hostile_workspace
    result = reader.retrieve(method, Caller(frozenset({"support"})), "turbine maintenance", budget)
    assert result.tokens <= budget
    assert len(result.context()) <= budget * CHARS_PER_TOKEN
    for item in result.items:
        assert item.tokens == default_counter().count_one(item.text)


@pytest.mark.slow
def test_hostile_documents_are_split_into_units_within_the_cap(hostile_workspace):
    catalog, _ = hostile_workspace
    (largest, parts), = catalog.rows("SELECT max(tokens), count(*) FROM units WHERE status = 'current'")
    assert largest <= 4000 and parts > 3
