"""The method registry: every method is a budget-independent ranking plus a packing, so one ranking serves
every budget and gives exactly what a retrieval at that budget gives."""
import pytest
from test_longrag import uncommitted

from rag.models.tokens import default_counter
from rag.query.methods import METHODS
from rag.retrieval.callers import Caller
from rag.retrieval.request import Request, Tools

QUESTIONS = ["How long can the offline cache hold telemetry?", "Which fuse protects the field wiring?"]
BUDGETS = (200, 1000, 4000)


@pytest.fixture(scope="module")
def sample(published_sample):
    return published_sample


@pytest.mark.parametrize("name", list(METHODS))
def test_one_ranking_packed_at_each_budget_equals_a_retrieval_at_that_budget(sample, embedder, name):
    snap, tools = uncommitted(*sample), Tools(embedder, default_counter())
    caller = Caller(frozenset({"support", "field-engineering", "everyone"}))
    for question in QUESTIONS:
        packed = METHODS[name].at_budgets(snap, Request(caller, question, max(BUDGETS)), tools, BUDGETS)
        assert [r.budget for r, _ in packed] == list(BUDGETS)
        for (result, seconds), budget in zip(packed, BUDGETS):
            direct = METHODS[name].run(snap, Request(caller, question, budget), tools)
            assert [(i.doc_id, i.doc_version, i.text) for i in result.items] == \
                   [(i.doc_id, i.doc_version, i.text) for i in direct.items]
            assert result.tokens <= budget and seconds > 0
        assert packed[-1][0].items, f"{name} found nothing for {question!r}"
