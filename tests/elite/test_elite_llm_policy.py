import json

import pytest
from elite_helpers import HashEncoder, catalog_with, doc, fake_chat

from rag.elite import EliteConfig, elite_retrieve, explorer_for
from rag.retrieval.callers import Caller

STAFF = Caller(frozenset({"staff"}))
DOCS = [doc("cache", "The offline cache holds 7 days of telemetry. Eviction starts at 90 percent."),
        doc("rotation", "Logs rotate at 64 MB. Eight rotated files are kept, compressed with zstd."),
        doc("heartbeat", "A heartbeat is sent every 60 seconds. Three missed heartbeats mark a gateway offline.")]


@pytest.fixture
def catalog(tmp_path):
    return catalog_with(tmp_path / "catalog.duckdb", DOCS)


def scripted(plan: dict, judge: dict, answer: str = "7 days"):
    """Replies by step, recognised from the system prompt each step sends."""
    def reply(messages):
        system = messages[0]["content"]
        if "plan a keyword search" in system:
            return json.dumps(plan)
        if "check whether passages" in system:
            return "Sure! " + json.dumps(judge)        # small models wrap JSON in prose
        return answer
    return reply


def ask(catalog, model, question, **config):
    return elite_retrieve(catalog, STAFF, question, 4000,
                          explorer_for(model=model, embedder=HashEncoder(), config=EliteConfig(**config)))


def test_generated_terms_are_searched_and_every_call_is_logged_with_tokens(catalog):
    plan = {"count": False, "terms": ["telemetry retention", "eviction"]}
    with fake_chat(scripted(plan, {"sufficient": True, "irrelevant": []})) as (model, requests):
        result = ask(catalog, model, "How long is data kept when offline?", min_coverage=0, min_focus=0,
                     min_importance=0)
    trace = result.trace
    assert trace["policy"] == "llm:fake"
    generated = {t["term"] for t in trace["rounds"][0]["terms"] if t["kind"] == "generated"}
    assert generated == {"telemetry", "retention", "eviction"}
    assert result.items[0].doc_id == "cache"
    steps = [c["step"] for c in trace["llm_calls"]]
    chunks = len(trace["rounds"][0]["chunks"])
    assert steps == ["plan"] + ["answer"] * 4 * chunks + ["judge"]          # each chunk: clean + 3 noisy copies
    assert trace["llm_totals"] == {"calls": len(steps), "input_tokens": 100 * len(steps),
                                   "output_tokens": 10 * len(steps), "fallbacks": 0}
    assert requests[0]["response_format"] == {"type": "json_object"}


def test_an_eager_yes_does_not_end_the_search_when_the_signals_disagree(catalog):
    judge = {"sufficient": True, "irrelevant": [], "breadth": ["retention"], "depth": ["telemetry"]}
    with fake_chat(scripted({"count": False, "terms": []}, judge)) as (model, _):
        result = ask(catalog, model, "How long is data kept when offline?", max_rounds=2)
    first = result.trace["rounds"][0]["judge"]
    assert first["llm"] is True and first["sufficient"] is False and "LLM said yes" in first["rule"]
    assert len(result.trace["rounds"]) == 2
    new = [t for t in result.trace["rounds"][1]["terms"] if t["new"]]
    assert {(t["term"], t["kind"]) for t in new} == {("retention", "breadth"), ("telemetry", "depth")}


def test_chunks_the_judge_calls_irrelevant_are_pruned(catalog):
    judge = {"sufficient": True, "irrelevant": [2]}
    with fake_chat(scripted({"count": False, "terms": ["heartbeat"]}, judge)) as (model, _):
        result = ask(catalog, model, "How often is a heartbeat sent and when does the cache evict?", max_rounds=1)
    assert result.trace["organise"]["pruned_by_judge"] == 1
    assert len(result.items) == 1


def test_the_llm_counting_branch_counts_the_forms_it_names(catalog):
    plan = {"count": True, "phrase": "heartbeat", "forms": ["heartbeats", "heart-beat"]}
    with fake_chat(scripted(plan, {})) as (model, _):
        result = ask(catalog, model, "How often do the documents talk about heartbeats?")
    answer = result.trace["direct_answer"]
    assert result.trace["branch"] == "count" and answer["count"] == 2 and "heart-beat" in answer["forms"]
    assert [c["step"] for c in result.trace["llm_calls"]] == ["plan"]


def test_a_failing_endpoint_falls_back_to_the_offline_rules_and_says_so(catalog):
    with fake_chat(lambda messages: 500) as (model, _):
        result = ask(catalog, model, "How many MB before logs rotate?", max_rounds=1)
    assert result.items[0].doc_id == "rotation"
    assert result.trace["llm_totals"]["fallbacks"] == result.trace["llm_totals"]["calls"] > 0
    assert "HTTP 500" in result.trace["llm_calls"][0]["fallback"]


def test_a_reply_without_json_falls_back_for_that_step(catalog):
    with fake_chat(lambda messages: "I think you should search for logs.") as (model, _):
        result = ask(catalog, model, "How many MB before logs rotate?", max_rounds=1)
    assert result.trace["llm_calls"][0] == {"step": "plan", "input_tokens": 100, "output_tokens": 10,
                                            "seconds": result.trace["llm_calls"][0]["seconds"],
                                            "fallback": "no JSON object in the reply"}
    assert result.items[0].doc_id == "rotation"


def test_a_judge_that_does_not_see_importance_costs_no_answer_calls_in_rounds_it_cannot_end(catalog):
    judge = {"sufficient": True, "irrelevant": [], "breadth": ["retention"], "depth": ["telemetry"]}
    with fake_chat(scripted({"count": False, "terms": []}, judge)) as (model, _):
        seen = ask(catalog, model, "How long is data kept when offline?", max_rounds=2, min_coverage=1.01)
        unseen = ask(catalog, model, "How long is data kept when offline?", max_rounds=2, min_coverage=1.01,
                     judge_sees_importance=False)
    assert "answer" in [c["step"] for c in seen.trace["llm_calls"]]
    assert [c["step"] for c in unseen.trace["llm_calls"]] == ["plan", "judge", "judge"]
    assert [i.doc_id for i in unseen.items] == [i.doc_id for i in seen.items]
