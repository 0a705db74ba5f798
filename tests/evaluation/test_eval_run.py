"""The loop's small parts: the reader's stratified sample, configuration checks, question files, win counts."""
import json
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rag.evaluation.questions import EvalQuestion, QuestionsError, caller_for, load_questions
from rag.evaluation.run import EvalConfig, answer_sample
from rag.evaluation.summary import wins
from rag.retrieval.callers import Caller


def questions(kinds: list[tuple[str, int]]) -> list[EvalQuestion]:
    return [EvalQuestion(f"q{i}", f"question {i}?", "answer", ("d",), kind=k, hops=h) for i, (k, h) in enumerate(kinds)]


MIXED = questions([("bridge", 2)] * 60 + [("comparison", 2)] * 30 + [("bridge", 3)] * 10)


def test_the_sample_is_stratified_by_type_and_hops_in_proportion():
    sample = answer_sample(MIXED, 10, seed=1)
    strata = Counter(q.stratum for q in MIXED if q.qid in sample)
    assert strata == {("bridge", 2): 6, ("comparison", 2): 3, ("bridge", 3): 1}


def test_the_sample_is_seeded_and_independent_of_file_order():
    assert answer_sample(list(reversed(MIXED)), 10, seed=1) == answer_sample(MIXED, 10, seed=1)
    assert answer_sample(MIXED, 10, seed=1) != answer_sample(MIXED, 10, seed=2)


@given(n=st.integers(min_value=0, max_value=120), seed=st.integers(0, 5))
def test_the_sample_has_exactly_the_size_asked(n, seed):
    assert len(answer_sample(MIXED, n, seed)) == min(n, len(MIXED))


def test_without_a_sample_size_every_question_is_answered():
    assert answer_sample(MIXED[:5], None) == {f"q{i}" for i in range(5)}


@pytest.mark.parametrize("kwargs, message", [
    ({"methods": ("longrag", "bm25")}, "methods"),
    ({"methods": ()}, "methods"),
    ({"budgets": (1000, 0)}, "budgets"),
    ({"elite_policy": "gpt"}, "elite_policy"),
    ({"budgets": (1000,), "answer_budgets": (2000,)}, "answer budgets"),
])
def test_bad_configuration_is_refused_before_anything_runs(kwargs, message):
    with pytest.raises(ValueError, match=message):
        EvalConfig(**kwargs)


def write(tmp_path, *records) -> str:
    path = tmp_path / "questions.jsonl"
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records))
    return path


def test_a_workspace_question_carries_its_asker_and_expectation(tmp_path):
    path = write(tmp_path, {"qid": "a", "question": "Q?", "answer": "x", "gold_doc_ids": ["d1"], "asked_as": "alice",
                            "expect": {"absent_version": "2025"}, "type": "version"},
                 {"qid": "b", "question": "Q?", "gold_doc_ids": ["d2"], "asked_as": ["support"], "expect": "not_found"},
                 {"qid": "c", "question": "Q?", "answer": "y", "gold_doc_ids": ["d1", "d3"]})
    a, b, c = load_questions(path)
    assert (a.asked_as, a.expect, a.absent_version, a.kind) == ("alice", "absent_version", "2025", "version")
    assert (b.asked_as, b.expect, c.expect, c.hops) == (("support",), "not_found", "answer", 2)
    users = {"alice": Caller(frozenset({"field-engineering"}))}
    assert caller_for(a, None, users) == users["alice"]
    assert caller_for(b, None, users) == Caller(frozenset({"support"}))
    with pytest.raises(QuestionsError, match="no asked_as"):
        caller_for(c, None, users)


@pytest.mark.parametrize("record, message", [
    ("{not json", r"questions.jsonl:1: not valid JSON"),
    ({"question": "Q?"}, r"questions.jsonl:1: missing field 'qid'"),
    ({"qid": "a", "question": "Q?", "expect": "maybe"}, "expect must be"),
    ({"qid": "a", "question": "Q?", "expect": "not_found"}, "needs gold_doc_ids"),
    ({"qid": "a", "question": "Q?", "asked_as": []}, "asked_as must be"),
])
def test_a_bad_question_line_is_a_one_line_error_naming_file_and_line(tmp_path, record, message):
    with pytest.raises(QuestionsError, match=message) as err:
        load_questions(write(tmp_path, record))
    assert "\n" not in str(err.value)


def test_wins_count_each_question_once_and_skip_missing_pairs():
    assert wins([1.0, 0.5, 0.0, None, 0.2], [0.0, 0.5, 1.0, 1.0, 0.1]) == {"a_wins": 2, "b_wins": 1, "ties": 1}
