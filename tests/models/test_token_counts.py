"""The remembered count (by blank-separated runs) equals the tokenizer's own count, on real corpora and odd text."""
from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from rag.models import tokens
from rag.models.tokens import TokenCounter

SAMPLES = Path(__file__).resolve().parents[2] / "samples"
# Characters the normalizer drops, blanks Python splits at but BERT does not, combining marks, CJK, long words.
ODD = ["a", "Z", "9", " ", "\t", "\n", "\r", "\x0b", "\x0c", "\x1c", "\x00", "\x85", "\u200b", "\u00a0", "\u3000",
       "\u2028", "中", "é", "e\u0301", "\u0301", "\u0344", "-", ".", "(", "ﬁ", "Ⅻ", "²", "\ufffd", "ǅ", "İ", "ß",
       "\U0001F600", "x" * 120]


def corpus_texts() -> list[str]:
    texts = [json.loads(line)["text"] for f in sorted(SAMPLES.glob("benchmarks/*/docs.jsonl")) for line in f.open()]
    return texts + [f.read_text(errors="replace") for f in sorted(SAMPLES.rglob("*.md"))]


@pytest.mark.slow
def test_counts_by_runs_equal_the_tokenizers_on_every_bundled_corpus():
    counter, texts = TokenCounter(), corpus_texts()
    assert len(texts) > 2000
    assert counter.count_cached(texts).tolist() == counter.count(texts).tolist()


def test_counts_by_runs_equal_the_tokenizers_on_odd_text_repeated_and_after_starting_over(monkeypatch):
    rng = random.Random(7)
    texts = ["".join(rng.choice(ODD) for _ in range(rng.randint(0, 40))) for _ in range(3000)]
    counter = TokenCounter()
    expected = counter.count(texts).tolist()
    assert counter.count_cached(texts).tolist() == expected
    assert counter.count_cached(texts[::-1]).tolist() == expected[::-1]  # every text remembered now
    joined = [f"{a} {b}" for a, b in zip(texts, texts[1:])]  # new texts of remembered runs
    assert counter.count_cached(joined).tolist() == counter.count(joined).tolist()
    monkeypatch.setattr(tokens, "RUNS_KEPT", 50)
    monkeypatch.setattr(tokens, "TEXTS_KEPT", 30)
    small = TokenCounter()
    for lo in [*range(0, 400, 20), *range(0, 400, 20)]:  # past the bounds it starts over, and stays exact
        assert small.count_cached(texts[lo:lo + 20]).tolist() == expected[lo:lo + 20]
        assert len(small._runs) <= max(50, len({r for t in texts[lo:lo + 20] for r in tokens._RUN.findall(t)}))
        assert len(small._texts) <= 30
