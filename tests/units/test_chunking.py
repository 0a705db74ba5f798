"""Sentence-aligned spans and greedy packing, with the embedder's real tokenizer."""
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rag.models.tokens import default_counter
from rag.sources.loaders import load_sources
from rag.units.chunking import Span, pack, sentence_spans, subchunks

HANDBOOK = Path(__file__).resolve().parents[2] / "samples" / "corpus" / "operations" / "field-service-handbook.md"


@pytest.fixture(scope="module")
def counter():
    return default_counter()


@pytest.fixture(scope="module")
def handbook_text():
    [doc] = load_sources([HANDBOOK]).documents
    return doc.text


def assert_covers_in_order(text, spans):
    """Spans are ordered, disjoint, and everything between or around them is whitespace."""
    cursor = 0
    for sp in spans:
        assert cursor <= sp.start < sp.end <= len(text)
        assert not text[cursor:sp.start].strip()
        cursor = sp.end
    assert not text[cursor:].strip()


def test_subchunks_cover_the_text_in_order(counter, handbook_text):
    chunks = subchunks(handbook_text, counter)
    assert len(chunks) > 10
    assert_covers_in_order(handbook_text, chunks)


def test_subchunks_stay_within_max_tokens_when_recounted(counter, handbook_text):
    chunks = subchunks(handbook_text, counter, target_tokens=112, max_tokens=128)
    recounted = counter.count([handbook_text[c.start:c.end] for c in chunks])
    assert all(c.tokens <= 128 for c in chunks)
    assert all(n <= 128 for n in recounted)


def test_subchunks_end_where_a_sentence_ends(counter, handbook_text):
    sentence_ends = {s.end for s in sentence_spans(handbook_text, counter, 10_000)}
    assert {c.end for c in subchunks(handbook_text, counter)} <= sentence_ends


def test_subchunk_offsets_slice_the_original_text(counter):
    text = "  First sentence here.   Second one follows!\n\nThird, after a blank line?  "
    chunks = subchunks(text, counter, target_tokens=4, max_tokens=8)
    assert [text[c.start:c.end] for c in chunks] == [
        "First sentence here.", "Second one follows!", "Third, after a blank line?"]


def test_short_sentences_are_packed_together_up_to_the_target(counter):
    text = "One. Two. Three. Four. Five. Six."
    [chunk] = subchunks(text, counter, target_tokens=112, max_tokens=128)
    assert (chunk.start, chunk.end) == (0, len(text))
    assert chunk.tokens == counter.count_one(text)


LONG_SENTENCE = " ".join(["gateway telemetry buffer overflow recovery"] * 60)


def test_long_sentence_without_punctuation_is_cut_at_token_boundaries_within_max(counter):
    spans = sentence_spans(LONG_SENTENCE, counter, max_tokens=50)
    token_starts = {s for s, _ in counter.pieces(LONG_SENTENCE)[0]}
    assert len(spans) == -(-counter.count_one(LONG_SENTENCE) // 50)
    assert spans[0].start == 0 and spans[-1].end == len(LONG_SENTENCE)
    for a, b in zip(spans, spans[1:]):
        assert a.end == b.start
        assert b.start in token_starts
    assert all(sp.tokens <= 50 for sp in spans)


def test_long_sentence_is_cut_between_words_so_each_piece_recounts_within_max(counter):
    spans = sentence_spans(LONG_SENTENCE, counter, max_tokens=50)
    assert all(LONG_SENTENCE[sp.start - 1] == " " for sp in spans[1:])
    assert [counter.count_one(LONG_SENTENCE[sp.start:sp.end]) for sp in spans] == [sp.tokens for sp in spans]


@pytest.mark.parametrize("text", ["", "   ", "\n\t\n"])
def test_empty_or_blank_text_has_no_spans(counter, text):
    assert sentence_spans(text, counter, 128) == []
    assert subchunks(text, counter) == []


words = st.sampled_from(["gateway", "cache", "the", "firmware", "NW-G400", "rotates", "logs", "at", "64", "MB",
                         "édition", "überprüfung", "resynchronisation", "x"])
sentences = st.builds(lambda ws, end: " ".join(ws) + end, st.lists(words, min_size=1, max_size=40),
                      st.sampled_from([".", "!", "?", ""]))
texts = st.builds(lambda ss, sep: sep.join(ss), st.lists(sentences, min_size=1, max_size=12),
                  st.sampled_from([" ", "  ", "\n", "\n\n"]))


@settings(max_examples=60, deadline=None)
@given(text=texts, max_tokens=st.integers(min_value=4, max_value=64))
def test_subchunks_cover_any_text_within_max_tokens(counter, text, max_tokens):
    chunks = subchunks(text, counter, target_tokens=max_tokens, max_tokens=max_tokens)
    assert_covers_in_order(text, chunks)
    assert all(c.tokens <= max_tokens for c in chunks)


def spans_from(counts):
    out, pos = [], 0
    for n in counts:
        out.append(Span(pos, pos + 5, n))
        pos += 6
    return out


def test_pack_of_nothing_is_nothing():
    assert pack([], 10) == []


@settings(max_examples=300, deadline=None)
@given(counts=st.lists(st.integers(min_value=0, max_value=60), min_size=1, max_size=40),
       max_tokens=st.integers(min_value=1, max_value=50),
       target=st.one_of(st.none(), st.integers(min_value=1, max_value=50)))
def test_pack_keeps_order_and_token_sum_and_respects_max_unless_one_span_is_larger(counts, max_tokens, target):
    spans = spans_from(counts)
    packed = pack(spans, max_tokens, target)
    first = [[s.start for s in spans].index(p.start) for p in packed]
    last = [[s.end for s in spans].index(p.end) for p in packed]
    assert first == [0] + [j + 1 for j in last[:-1]]
    assert last[-1] == len(spans) - 1
    assert sum(p.tokens for p in packed) == sum(counts)
    for i, j, p in zip(first, last, packed):
        assert p.tokens == sum(counts[i:j + 1])
        assert p.tokens <= max_tokens or i == j
