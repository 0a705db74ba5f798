"""Per-question metrics on hand-made cases: SQuAD normalisation, exact match, F1, supporting-sentence recall."""
import pytest

from rag.evaluation.metrics import exact_match, f1, normalize_answer, sentence_recall
from rag.retrieval.context import ContextItem


def item(doc_id: str, text: str) -> ContextItem:
    return ContextItem(doc_id, "1", doc_id, f"## {doc_id}\n[{doc_id} · version 1]\n{text}\n", 0, ((0, len(text)),), 1.0)


@pytest.mark.parametrize("raw, normalised", [
    ("The Eiffel Tower", "eiffel tower"),
    ("  a  Tale of   Two Cities. ", "tale of two cities"),
    ("U.S.A.", "usa"),
    ("an apple, the pear & a plum!", "apple pear plum"),
    ("Theatre", "theatre"),          # an article inside a word stays
    ("", ""),
])
def test_squad_normalisation_lowercases_and_drops_punctuation_articles_and_extra_spaces(raw, normalised):
    assert normalize_answer(raw) == normalised


def test_exact_match_is_after_normalisation_against_the_answer_or_any_alias():
    assert exact_match("the Liezel Huber.", ["Liezel Huber"]) == 1.0
    assert exact_match("NYC", ["New York City", "NYC"]) == 1.0
    assert exact_match("Liezel", ["Liezel Huber"]) == 0.0


def test_f1_counts_shared_tokens_against_the_best_gold_answer():
    # prediction "huber won" vs gold "liezel huber": 1 common token, precision 1/2, recall 1/2 → F1 1/2
    assert f1("Huber won", ["Liezel Huber"]) == pytest.approx(0.5)
    assert f1("Huber won", ["nobody", "Liezel Huber"]) == pytest.approx(0.5)
    assert f1("the Liezel Huber", ["Liezel Huber"]) == 1.0
    assert f1("Cara Black", ["Liezel Huber"]) == 0.0


def test_f1_of_empty_answers_follows_squad():
    assert f1("", [""]) == 1.0
    assert f1("", ["Liezel Huber"]) == 0.0
    assert f1("the", ["Liezel Huber"]) == 0.0   # only an article: normalises to nothing


def test_f1_counts_repeated_tokens_only_as_often_as_gold_has_them():
    # "paris paris" vs "paris": common 1, precision 1/2, recall 1 → 2/3
    assert f1("Paris Paris", ["Paris"]) == pytest.approx(2 / 3)


def test_sentence_recall_is_the_share_of_supporting_sentences_shown_in_their_own_document():
    items = [item("a", "Huber won four titles.  She  was born in 1976."), item("b", "Raymond has 11 titles.")]
    supporting = (("a", "She was born in 1976."), ("b", "Raymond has 11 titles."), ("b", "Not shown here."))
    assert sentence_recall(items, supporting) == pytest.approx(2 / 3)


def test_a_supporting_sentence_in_another_document_does_not_count():
    assert sentence_recall([item("a", "Raymond has 11 titles.")], (("b", "Raymond has 11 titles."),)) == 0.0


def test_sentence_recall_is_none_without_sentence_level_facts():
    assert sentence_recall([item("a", "text")], ()) is None
