"""Matched budgets: a context over its budget stops the run, whatever the items claim about their own size."""
import pytest

from rag.evaluation.run import BudgetExceeded, check_budget
from rag.models.tokens import default_counter
from rag.retrieval.context import ContextItem, RetrievalResult

TEXT = "## Lisa Raymond\n[lisa-raymond · version 1]\nRaymond has 11 Grand Slam titles to her name.\n"


def result(*items: ContextItem, budget: int) -> RetrievalResult:
    return RetrievalResult("longrag", budget, list(items))


def honest(text: str = TEXT) -> ContextItem:
    return ContextItem("lisa-raymond", "1", "Lisa Raymond", text, default_counter().count_one(text), ((0, 10),), 1.0)


def test_a_context_within_the_budget_passes_and_reports_the_recounted_tokens():
    counter = default_counter()
    tokens = counter.count_one(TEXT)
    assert check_budget(result(honest(), honest(), budget=2 * tokens), 2 * tokens, counter) == 2 * tokens


def test_one_token_over_the_budget_stops_the_run():
    counter = default_counter()
    tokens = counter.count_one(TEXT)
    with pytest.raises(BudgetExceeded, match=f"budget {2 * tokens - 1}"):
        check_budget(result(honest(), honest(), budget=2 * tokens - 1), 2 * tokens - 1, counter)


def test_an_item_that_understates_its_tokens_is_caught_by_the_recount():
    liar = ContextItem("lisa-raymond", "1", "Lisa Raymond", TEXT * 5, 1, ((0, 10),), 1.0)
    assert result(liar, budget=10).tokens <= 10   # the item's own claim would pass
    with pytest.raises(BudgetExceeded):
        check_budget(result(liar, budget=10), 10, default_counter())


def test_budget_violations_are_assertion_errors():
    assert issubclass(BudgetExceeded, AssertionError)
