"""The loop's small parts: the reader's question sample, configuration checks, shared sentence vectors."""
import time

import numpy as np
import pytest

from rag.benchmarks import Question
from rag.evaluation.run import EvalConfig, SentenceVectors, answer_sample


def questions(n: int) -> list[Question]:
    return [Question(f"q{i}", f"question {i}?", "answer", ("d",)) for i in range(n)]


def test_the_answer_sample_is_stable_sized_and_independent_of_file_order():
    qs = questions(50)
    sample = answer_sample(qs, 7)
    assert len(sample) == 7
    assert answer_sample(list(reversed(qs)), 7) == sample
    assert sample != {q.qid for q in qs[:7]}   # not simply the first questions of the file


def test_without_a_sample_size_every_question_is_answered():
    assert answer_sample(questions(5), None) == {f"q{i}" for i in range(5)}


@pytest.mark.parametrize("kwargs, message", [
    ({"methods": ("longrag", "bm25")}, "methods"),
    ({"methods": ()}, "methods"),
    ({"budgets": (1000, 0)}, "budgets"),
    ({"elite_policy": "gpt"}, "elite_policy"),
])
def test_bad_configuration_is_refused_before_anything_runs(kwargs, message):
    with pytest.raises(ValueError, match=message):
        EvalConfig(**kwargs)


class SlowEncoder:
    """Embeds in 10 ms per text and counts what it was asked to embed."""

    def __init__(self):
        self.embedded: list[str] = []

    def encode(self, texts):
        time.sleep(0.01 * len(texts))
        self.embedded += texts
        return np.ones((len(texts), 4), dtype=np.float32)


def test_sentence_vectors_embed_each_text_once_but_charge_every_reuse():
    encoder = SlowEncoder()
    vectors = SentenceVectors(encoder)
    vectors.encode(["q", "a", "b"])
    assert vectors.saved_seconds() == 0.0
    out = vectors.encode(["q", "a", "c"])
    assert out.shape == (3, 4)
    assert encoder.embedded == ["q", "a", "b", "c"]
    assert vectors.saved_seconds() == pytest.approx(0.02, abs=0.01)   # q and a came from the cache
    assert vectors.saved_seconds() == 0.0                              # reported once
