import json

import pytest
from elite_helpers import HashEncoder, catalog_with, doc

from rag.elite import EliteConfig, elite_explore, elite_retrieve, explorer_for, format_trace, pack_exploration
from rag.elite.explore import Explorer, explore
from rag.elite.policy import OfflinePolicy
from rag.models.tokens import default_counter
from rag.retrieval.callers import Caller
from rag.store.source_log import sync_documents

STAFF = Caller(frozenset({"staff"}))
# Two hops: the film's document names the place; only a document about that place says when it was taken.
# Many places were taken by the British, so the question's own words cannot single out the second hop.
FILLER = [doc(f"filler-{i}", f"{place} was taken by the British in {1790 + i}. {place} has a harbour.")
          for i, place in enumerate(["Malta", "Ceylon", "Gibraltar", "Minorca", "Trinidad", "Mauritius"])]
HOPS = [
    doc("film", "Fist Power is an action film. It was produced in Hong Kong by Golden Harvest."),
    doc("colony", "Kowloon ferries run daily. The British took Kowloon in 1860. Victoria Harbour lies between."),
    doc("taken", "Hong Kong Island was taken by the British in 1841, and the Star Ferry followed."),
]
QUESTION = "When was the country that produced Fist Power taken by the British?"


@pytest.fixture
def catalog(tmp_path):
    return catalog_with(tmp_path / "catalog.duckdb", HOPS + FILLER)


def run(catalog, question=QUESTION, budget=4000, **config):
    return elite_retrieve(catalog, STAFF, question, budget,
                          explorer_for(embedder=HashEncoder(), config=EliteConfig(**config)))


def test_a_second_round_searches_with_new_terms_and_finds_what_the_first_missed(catalog):
    result = run(catalog, top_k=2, neighbours=0, max_rounds=2)
    first, second = result.trace["rounds"]
    assert {h["doc_id"] for h in first["hits"]} == {"film"}
    new = {t["term"] for t in second["terms"] if t["new"]}
    assert {"hong", "kong"} <= new and all(t["kind"] in ("breadth", "depth") for t in second["terms"] if t["new"])
    assert "taken" in [h["doc_id"] for h in second["hits"]]
    assert {"film", "taken"} <= {i.doc_id for i in result.items}


def test_the_loop_stops_at_the_iteration_cap(catalog):
    for cap in (1, 2, 3):
        result = run(catalog, max_rounds=cap, expansion_terms=1)
        assert len(result.trace["rounds"]) == cap
        assert result.trace["stopped"] == "iteration cap"


def test_sufficient_evidence_ends_the_search_after_one_round(catalog):
    result = run(catalog, "Which studio produced the action film Fist Power?", min_coverage=0.5, min_focus=0.5,
                 min_importance=0.0)
    assert len(result.trace["rounds"]) == 1 and result.trace["stopped"] == "sufficient"
    assert result.items[0].doc_id == "film"


def test_the_budget_is_never_exceeded_and_items_keep_their_headers(catalog):
    counter = default_counter()
    for budget in (0, 10, 40, 80, 150, 4000):
        result = run(catalog, budget=budget)
        assert result.tokens <= budget
        for item in result.items:
            assert item.text.startswith(f"## {item.title}\n[{item.doc_id} · version {item.doc_version}]\n")
            assert item.tokens == counter.count_one(item.text) and item.unit_id is None
    assert run(catalog, budget=40).items                # a small budget still gets the chunks that fit


def test_one_exploration_packed_at_a_budget_equals_a_direct_retrieve(catalog):
    found = elite_explore(catalog, STAFF, QUESTION, explorer_for(embedder=HashEncoder()))
    for budget in (60, 200):
        assert pack_exploration(found, budget).items == run(catalog, budget=budget).items


def test_irrelevant_chunks_are_pruned(catalog):
    result = run(catalog, "Which harbour lies between Kowloon and Victoria?", prune_ratio=0.5, max_rounds=1)
    assert result.trace["organise"]["pruned_low_score"] > 0
    assert all(i.score >= 0.5 * result.items[0].score for i in result.items)


def test_the_trace_is_json_and_reads_as_text(catalog):
    result = run(catalog, min_coverage=0.0, min_focus=0.0, min_importance=1.0)
    trace = json.loads(json.dumps(result.to_json()))["trace"]
    assert trace["policy"] == "offline" and trace["branch"] == "explore" and trace["direct_answer"] is None
    assert set(trace["seconds"]) >= {"scope", "plan", "collect", "importance", "judge", "organise", "pack", "total"}
    assert trace["llm_totals"]["calls"] == 0
    chunk = trace["rounds"][0]["chunks"][0]
    assert 0.0 <= chunk["importance"] and len(chunk["noise_levels"]) == 3
    assert "rule" in trace["rounds"][0]["judge"]
    text = format_trace(trace)
    assert "policy offline" in text and "round 1:" in text and "judge:" in text and "packed:" in text


def test_the_store_is_built_once_and_rebuilt_when_the_catalog_changes(catalog):
    assert run(catalog).trace["scope"]["store"] in ("built", "cached")
    assert run(catalog).trace["scope"]["store"] == "cached"
    sync_documents(catalog, catalog.begin_publish([FILLER[0].source]), HOPS, [], [FILLER[0].source])
    after = run(catalog)
    assert after.trace["scope"]["store"] == "built" and after.trace["scope"]["documents"] == len(HOPS)


def test_counting_questions_are_answered_directly_with_no_further_stage(catalog):
    result = run(catalog, "How many times does the word 'ferry' appear?", budget=200)
    answer = result.trace["direct_answer"]
    assert result.trace["branch"] == "count" and result.trace["rounds"] == []
    assert answer["count"] == 2 and "ferries" in answer["forms"]
    assert {d["doc_id"] for d in answer["documents"]} == {"colony", "taken"}
    assert {i.doc_id for i in result.items} == {"colony", "taken"} and result.tokens <= 200


class EagerOfflinePolicy(OfflinePolicy):
    reads_importance = True


def test_offline_importance_is_computed_only_when_it_decides_and_never_changes_the_outcome(catalog):
    for question in (QUESTION, "Which studio produced the action film Fist Power?"):
        for config in (EliteConfig(), EliteConfig(min_coverage=0.5, min_focus=0.5),
                       EliteConfig(min_coverage=0.0, min_focus=0.0, min_importance=0.3)):
            lazy = explore(catalog, STAFF, question,
                           Explorer(OfflinePolicy(), HashEncoder(), default_counter(), config))
            eager = explore(catalog, STAFF, question,
                            Explorer(EagerOfflinePolicy(), HashEncoder(), default_counter(), config))
            assert lazy.candidates == eager.candidates
            assert lazy.trace["stopped"] == eager.trace["stopped"]
            for lazy_round, eager_round in zip(lazy.trace["rounds"], eager.trace["rounds"], strict=True):
                needed = lazy_round["coverage"] >= config.min_coverage and lazy_round["focus"] >= config.min_focus
                lazy_scores = [c["importance"] for c in lazy_round["chunks"] if c["importance"] is not None]
                eager_scores = [c["importance"] for c in eager_round["chunks"]]
                assert needed or not lazy_scores
                # scored in rank order, stopping at the first that decides: a prefix of the eager scores
                assert lazy_scores == eager_scores[: len(lazy_scores)]
                assert not lazy_scores or max(lazy_scores) >= config.min_importance \
                    or len(lazy_scores) == min(len(eager_scores), EliteConfig().importance_chunks)
