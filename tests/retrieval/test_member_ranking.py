"""A hop's unit and member ranking in numpy gives exactly the order and scores of the per-member Python loops it replaced."""
from datetime import datetime, timezone

import numpy as np
import pytest
from test_longrag import GROUPS, uncommitted

from rag.retrieval.callers import Caller
from rag.retrieval.dense import Hit, best_hit_per_member, dense_hits, state_search
from rag.retrieval.longrag import LongRAGConfig, _best_others, _candidates, _floor, _lexical, link_boost
from rag.retrieval.unit_ranking import rank_units, unit_codes
from rag.retrieval.vectors import VectorState
from rag.sources.benchmarks import load_questions
from tests.conftest import SAMPLES

CONFIG = LongRAGConfig()
CALLERS = [frozenset({g}) for g in GROUPS] + [frozenset(GROUPS)]


@pytest.fixture(scope="module")
def sample(published_sample):
    return published_sample


def reference_units(snap, hits, lexical, config) -> dict[str, float]:
    """The dictionaries as they were before pair numbers: units by their best (unit, document) pair, a pair's score
    its best hit plus the lexical share, a BM25 document without a hit of its unit at the weakest hit's score."""
    dense: dict[tuple[str, str], float] = {}
    for h in hits:
        dense[(h.unit_key, h.doc_id)] = max(dense.get((h.unit_key, h.doc_id), -2.0), h.score)
    floor, best = _floor(hits), {}
    for (unit_key, doc_id), score in dense.items():
        best[unit_key] = max(best.get(unit_key, -1.0), score + config.lexical_weight * lexical.get(doc_id, 0.0))
    for doc_id, unit_key in snap.units_of(list(lexical)).items():
        score = dense.get((unit_key, doc_id), floor) + config.lexical_weight * lexical[doc_id]
        best[unit_key] = max(best.get(unit_key, -1.0), score)
    return dict(sorted(best.items(), key=lambda kv: (-kv[1], kv[0]))[: config.max_units])


def reference_candidates(snap, caller, own, floor, lexical, units, config):
    """The loops as they were before the member table: readable members, own MaxP plus the lexical channel, plus a
    share of the best other member of the unit; sorted by score, unit key, position."""
    members: dict[str, list] = {}
    for m in snap.members(list(units)):
        if caller.may_read(m.acl):
            hit = own.get((m.unit_key, m.doc_id, m.part))
            score = (hit.score if hit else floor) + config.lexical_weight * lexical.get(m.doc_id, 0.0)
            members.setdefault(m.unit_key, []).append((score, m))
    scored, boost = [], link_boost(snap, config, caller.groups)
    for unit_key, entries in members.items():
        ranked = sorted((e[0] for e in entries), reverse=True)
        for own_score, m in entries:
            other = 0.0 if len(ranked) < 2 else ranked[1] if own_score == ranked[0] else ranked[0]
            scored.append((-(own_score + boost * other), unit_key, m.position, m))
    scored.sort(key=lambda s: s[:3])
    return [(m.doc_id, m.doc_version, m.unit_key, m.part, round(-negative, 6)) for negative, _, _, m in scored]


def test_member_order_and_scores_equal_the_reference_loops_for_every_sample_question_and_caller(sample, embedder):
    snap = uncommitted(*sample)
    compared = 0
    for q in load_questions(SAMPLES / "questions.jsonl"):
        vector = embedder.encode_query(q.question)
        for groups in CALLERS:
            caller = Caller(groups)
            hits, dense = dense_hits(snap, vector, caller, CONFIG.overfetch)
            lexical = _lexical(snap, caller, q.question, CONFIG)
            units = reference_units(snap, hits, lexical, CONFIG)
            by_pairs = rank_units(snap.unit_codes, dense.near, dense.scores, lexical, CONFIG.lexical_weight,
                                  CONFIG.max_units)  # as a hop ranks them: pair numbers, no hit or string key
            assert list(by_pairs.items()) == list(units.items())
            dense_only = rank_units(snap.unit_codes, dense.near, dense.scores, {}, CONFIG.lexical_weight,
                                    CONFIG.max_units)  # the lexical channel off (lexical_weight 0)
            assert list(dense_only.items()) == list(reference_units(snap, hits, {}, CONFIG).items())
            rows = np.concatenate([dense.near, dense.unit_rows(list(units))])
            all_hits = dense.hits(rows)
            own = best_hit_per_member(all_hits)
            assert _as_dict(dense.best_per_member(rows), own) == own
            floor = min(h.score for h in all_hits)
            got = _candidates(snap.state_units, caller, dense.best_per_member(rows), floor, lexical, units, CONFIG)
            assert [(c.doc_id, c.doc_version, c.unit_id, c.part, c.score) for c in got] == \
                reference_candidates(snap, caller, own, floor, lexical, units, CONFIG)
            compared += len(got)
    assert compared > 500  # members were ranked, not empty lists compared


def test_best_others_equal_the_reference_with_ties_and_units_of_one():
    rng = np.random.default_rng(7)
    for _ in range(200):
        unit = np.sort(rng.integers(0, 6, size=rng.integers(1, 30)))
        score = rng.choice([0.1, 0.2, 0.3, 0.35], size=len(unit))  # few values: many ties
        expected = []
        for u, s in zip(unit, score):
            ranked = sorted(score[unit == u], reverse=True)
            expected.append(0.0 if len(ranked) < 2 else ranked[1] if s == ranked[0] else ranked[0])
        assert _best_others(unit, score).tolist() == expected


def test_a_members_best_hit_is_its_first_among_equal_scores_as_the_loop_keeps_it():
    vectors = np.array([[1, 0], [1, 0], [0.6, 0.8], [1, 0]], dtype=np.float16)  # rows 0, 1 and 3 score alike
    state = VectorState(vectors, np.array(["u@1"] * 4, dtype=object), np.array(["a", "a", "a", "b"], dtype=object),
                        np.zeros(4, np.int32), np.array([0, 10, 20, 0], np.int32), np.array([10, 20, 30, 5], np.int32),
                        np.zeros(4, np.int32), [frozenset({"g"})])
    from rag.retrieval.dense import Dense

    scores = state.scores(np.array([1, 0], dtype=np.float32))
    dense = Dense(state, scores, state.mask(frozenset({"g"})), np.array([2, 3], dtype=np.int64))
    for rows in ([1, 0, 2, 3], [2, 0, 1], [3, 2, 1, 0], [0]):
        rows = np.array(rows, dtype=np.int64)
        expected = best_hit_per_member(dense.hits(rows))
        assert _as_dict(dense.best_per_member(rows), expected) == expected
    assert dense.best_per_member(np.array([1, 0], dtype=np.int64)).get(("u@1", "a", 0)) == Hit("u@1", "a", 0, 10, 20,
                                                                                                1.0)
    found, keys = dense.best_per_member(np.array([3, 0], dtype=np.int64)), [("u@1", "b", 0), ("u@1", "x", 0),
                                                                          ("u@1", "a", 0), ("v@1", "a", 0)]
    assert found.get_many(keys) == [found.get(k) for k in keys] == [Hit("u@1", "b", 0, 0, 5, 1.0), None,
                                                                    Hit("u@1", "a", 0, 0, 10, 1.0), None]
    assert dense.best_per_member(np.zeros(0, dtype=np.int64)).get_many(keys) == [None] * 4


def _as_dict(found, expected: dict) -> dict:
    """The member hits looked up at the expected keys, once the counts agree (no member more or fewer)."""
    assert len(found) == len(expected)
    return {key: found.get(key) for key in expected}


def test_units_rank_by_their_best_pair_with_the_floor_for_a_bm25_document_without_a_near_row():
    rows = [("u-b@1", "d1"), ("u-a@1", "d2"), ("u-b@1", "d3"), ("u-c@1", "d4")]
    state = VectorState(np.zeros((4, 2), dtype=np.float16), np.array([u for u, _ in rows], dtype=object),
                        np.array([d for _, d in rows], dtype=object), *[np.zeros(4, np.int32)] * 4, [frozenset({"g"})])
    codes = unit_codes(state, {d: u for u, d in rows})
    scores, near = np.array([0.5, 0.7, 0.7, 0.2], dtype=np.float32), np.array([1, 2, 0])  # row 3 is not near
    weakest, strong = float(np.float32(0.5)), float(np.float32(0.7))
    assert list(rank_units(codes, near, scores, {}, 0.45, 3).items()) == [("u-a@1", strong), ("u-b@1", strong)]
    lexical = {"d1": 1.0, "d4": 0.5, "d9": 1.0}  # d4's unit has no near row: the floor; d9 has no unit at all
    ranked = rank_units(codes, near, scores, lexical, 0.45, 3)
    assert list(ranked.items()) == [("u-b@1", weakest + 0.45 * 1.0), ("u-c@1", weakest + 0.45 * 0.5),
                                    ("u-a@1", strong)]
    assert list(rank_units(codes, near, scores, lexical, 0.45, 1)) == ["u-b@1"]


def test_an_as_of_hop_ranks_the_past_rows_units_as_the_dictionaries_would(sample, embedder):
    """As of now, with the BM25 channel over the texts then (here the current ones: nothing changed since)."""
    snap = uncommitted(*sample)
    as_of = datetime.now(timezone.utc).replace(tzinfo=None)
    state, past = snap.past_units_at(as_of)
    assert snap.past_units_at(as_of)[1] is past  # built once per past state
    codes = past.codes
    ranked = 0
    for q in load_questions(SAMPLES / "questions.jsonl"):
        vector = embedder.encode_query(q.question)
        for groups in CALLERS:
            dense = state_search(state, vector, Caller(groups), CONFIG.overfetch)
            lexical = _lexical(snap, Caller(groups), q.question, CONFIG, snap.lexical_at(as_of, state))
            units = rank_units(codes, dense.near, dense.scores, lexical, CONFIG.lexical_weight, CONFIG.max_units)
            assert list(units.items()) == list(reference_units(snap, dense.hits(dense.near), lexical, CONFIG).items())
            ranked += len(units)
    assert ranked > 500
