"""Every cache a long-lived process keeps across requests is bounded in bytes, whatever the lengths of the words and
texts it is asked about (docs/serving-rules.md states each bound and its measured size)."""
import random
import string
import sys
import tracemalloc

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bench.cache_bytes import documents
from rag.retrieval.extracts import TERMS_CACHE_BYTES, _sentence_terms
from rag.retrieval.hop_queries import FACTS_CACHE_BYTES, _sentence_facts
from rag.text import analysis
from rag.text.analysis import STEM_CACHE_WORDS, STEM_CACHED_CHARS, content_terms, stem
from rag.text.bounded_cache import bytes_bounded, deep_size

STEM_CACHE_MAX_BYTES = 32 << 20  # the bound docs/serving-rules.md states for the stem cache (30.6 MiB measured)


def _growth(run) -> int:
    """Bytes still allocated after `run()` that were not before it."""
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        run()
        return tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()


def _words(n: int, length: int, letters: str, seed: int) -> list[str]:
    rng = random.Random(seed)
    return ["".join(rng.choice(letters) for _ in range(length)) for _ in range(n)]


def test_a_server_asked_distinct_long_words_keeps_none_of_them():
    twice = _words(1, 1990, string.ascii_lowercase, 1)[0] * 2

    def ask():
        for i in range(1990):   # each request brings a new 1,990-letter word (the issue's), read from its body
            stem(twice[i:i + 1990])
    assert _growth(ask) < 64 << 10


@pytest.mark.slow
def test_the_stem_cache_at_its_worst_stays_within_its_stated_bound():
    # The longest words it keeps, in characters of four bytes each (mathematical bold letters are letters).
    bold = "".join(chr(0x1D400 + i) for i in range(52))
    words = _words(STEM_CACHE_WORDS + 4096, STEM_CACHED_CHARS - 1, bold, 2)
    analysis._stem_cached.cache_clear()

    def fill():
        for w in words:
            stem(w + "s")   # a plural: the key and its stem, a new string, are both kept
    try:
        grown = _growth(fill)
    finally:
        analysis._stem_cached.cache_clear()
    assert analysis._stem_cached.cache_info().currsize == 0
    assert grown <= STEM_CACHE_MAX_BYTES


@pytest.mark.parametrize("cached, bound", [(_sentence_facts, FACTS_CACHE_BYTES), (_sentence_terms, TERMS_CACHE_BYTES)],
                         ids=["seed facts", "sentence terms"])
def test_a_text_keyed_cache_keeps_at_most_its_bound_in_bytes(cached, bound):
    for text in documents():
        cached(text)
        assert cached.cache.currsize <= bound
    assert documents()[-1] in cached.cache and documents()[0] not in cached.cache
    cached.cache.clear()


@pytest.mark.slow
@pytest.mark.parametrize("cached", [_sentence_facts, _sentence_terms], ids=["seed facts", "sentence terms"])
def test_a_text_keyed_cache_bound_holds_in_traced_bytes(cached):
    texts = [text[:30_000] for text in documents()[:16]]   # ~13 MB of entries through a 4 MiB bound
    content_terms(" ".join(texts))   # the words' stems are cached before memory is traced
    small = bytes_bounded(4 << 20)(cached.__wrapped__)
    assert _growth(lambda: [small(text) for text in texts]) <= (4 << 20) + (256 << 10)
    assert texts[-1] in small.cache and texts[0] not in small.cache


@pytest.mark.parametrize("cached", [_sentence_facts, _sentence_terms], ids=["seed facts", "sentence terms"])
def test_a_text_keyed_cache_counts_at_least_what_an_entry_holds(cached):
    text = documents()[0]
    content_terms(text)
    cached.cache.clear()
    grown = _growth(lambda: cached(text))
    assert grown + sys.getsizeof(text) <= cached.cache[text][0]
    cached.cache.clear()


@settings(max_examples=200, deadline=None)
@given(keys=st.lists(st.text(max_size=300), max_size=60), bound=st.integers(0, 20_000))
def test_a_bytes_bounded_cache_answers_as_its_function_and_never_holds_more_than_its_bound(keys, bound):
    @bytes_bounded(bound)
    def shout(text: str) -> tuple[str, ...]:
        return tuple(text.upper().split())

    for key in keys:
        assert shout(key) == tuple(key.upper().split())
        assert shout.cache.currsize <= bound
    assert shout.cache.currsize == sum(cost for cost, _ in shout.cache.values())
    for key in list(shout.cache):
        assert shout.cache[key][0] >= deep_size((key, shout(key)))
