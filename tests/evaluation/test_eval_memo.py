import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from rag.evaluation.memo import CountMemo, QueryMemo
from rag.models.tokens import default_counter


class Calls:
    """The real embedder, counting how often it embeds."""

    def __init__(self, embedder):
        self.embedder, self.calls = embedder, 0

    def encode_query(self, text):
        self.calls += 1
        return self.embedder.encode_query(text)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.text(max_size=40), max_size=12), st.lists(st.text(max_size=40), max_size=12))
def test_memoised_counts_are_the_counters_own_in_any_order_and_repetition(first, second):
    counter, memo = default_counter(), CountMemo(default_counter())
    for texts in (first, second, first + second):
        assert memo.count(texts).tolist() == counter.count(texts).tolist()


def test_a_question_is_embedded_once_and_every_user_gets_the_same_vector_and_the_time_it_took(embedder):
    calls = Calls(embedder)
    memo = QueryMemo(calls)
    question = "Which film was produced in Hong Kong?"
    vectors = [memo.encode_query(question) for _ in range(4)]
    assert calls.calls == 1 and memo.seconds(question) > 0
    assert all(np.array_equal(v, embedder.encode_query(question)) for v in vectors)
    memo.clear()
    memo.encode_query(question)
    assert calls.calls == 2
