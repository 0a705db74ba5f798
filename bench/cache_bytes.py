"""The bytes each cache kept across requests holds when full: `stem`'s under tracemalloc for three word shapes, and
the two text-keyed caches' counted bytes (their bound) on distinct 60,000-character documents.

    python bench/cache_bytes.py
"""
from __future__ import annotations

import functools
import random
import string
import sys
import tracemalloc
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.results_file import write_results  # noqa: E402
from rag.retrieval.extracts import _sentence_terms  # noqa: E402
from rag.retrieval.hop_queries import _sentence_facts  # noqa: E402
from rag.text import analysis  # noqa: E402

BOLD = "".join(chr(0x1D400 + i) for i in range(52))   # letters of four bytes each


def texts(n: int, chars: int, seed: int) -> list[str]:
    """Distinct documents of `chars` characters: sentences of names and words from a vocabulary of 5,000."""
    rng = random.Random(seed)
    vocabulary = ["".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(3, 9))) for _ in range(5000)]
    out = []
    for _ in range(n):
        sentences, size = [], 0
        while size < chars:
            words = rng.sample(vocabulary, 12)
            sentence = f"{words[0].title()} {' '.join(words[1:6])} {words[6].title()} {' '.join(words[7:])}."
            sentences.append(sentence)
            size += len(sentence) + 1
        out.append(" ".join(sentences))
    return out


@functools.cache
def documents() -> list[str]:
    """48 distinct documents, 2.9 M characters: at 10-27 bytes a character, far past either bound."""
    return texts(48, 60_000, 3)


def stem_full_mib(letters: str, length: int) -> float:
    """Traced bytes of the stem cache filled with distinct plurals of `length` characters."""
    rng = random.Random(5)
    words = ["".join(rng.choice(letters) for _ in range(length - 1)) for _ in range(analysis.STEM_CACHE_WORDS)]
    analysis._stem_cached.cache_clear()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    for word in words:
        analysis.stem(word + "s")   # made while traced, as a request's words are: the key and its stem are kept
    grown = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    analysis._stem_cached.cache_clear()
    return round(grown / 2**20, 1)


def text_cache(cached) -> dict:
    for text in documents():
        cached(text)
    chars = sum(len(text) for text in cached.cache)
    return {"documents_kept": len(cached.cache), "counted_mib": round(cached.cache.currsize / 2**20, 1),
            "counted_bytes_a_character": round(cached.cache.currsize / chars, 1)}


def main() -> None:
    cap = analysis.STEM_CACHED_CHARS
    figures = {"stem_words": analysis.STEM_CACHE_WORDS, "stem_cached_chars": cap,
               "stem_full_mib": {f"{cap} four-byte letters": stem_full_mib(BOLD, cap),
                                 f"{cap} ASCII letters": stem_full_mib(string.ascii_lowercase, cap),
                                 "8 ASCII letters": stem_full_mib(string.ascii_lowercase, 8)},
               "seed_facts": text_cache(_sentence_facts), "sentence_terms": text_cache(_sentence_terms)}
    print(figures)
    write_results(figures, "cache-bytes")


if __name__ == "__main__":
    main()
