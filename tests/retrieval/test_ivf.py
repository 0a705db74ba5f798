"""The IVF path of dense search: the exact top 50 found (recall), the ACL pre-filter inside the search (a rare group's
caller still gets its top k, and only rows it may read), exact float16 scores, lists kept across snapshots, files
mapped by a second worker, and nothing changed below RAG_ANN_MIN_ROWS."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_state_files import mapped
from test_vector_state import build, rows_for

from pipelines.ingest_run import run_ingest
from rag.query.workspace import Workspace
from rag.retrieval import ivf
from rag.retrieval.callers import Caller
from rag.retrieval.dense import dense_hits
from rag.retrieval.vectors import VectorState, union, vector_arrays, vector_state
from rag.store.settings import IngestSettings

COMMON, RARE = frozenset({"common"}), frozenset({"rare"})


def mixture(n: int, seed: int, spread: float = 0.5, dimension: int = 384) -> tuple[np.ndarray, np.ndarray]:
    """Unit rows of a two-level Gaussian mixture (topics, then subtopics, rows `spread` around a subtopic per
    dimension), as embeddings of a corpus cluster; and the subtopics."""
    rng = np.random.default_rng(seed)
    topics = rng.normal(size=(max(4, n // 5000), dimension))
    subtopics = topics[np.arange(len(topics) * 50) // 50] + rng.normal(size=(len(topics) * 50, dimension)) * 0.7
    rows = subtopics[rng.integers(0, len(subtopics), n)] + rng.normal(size=(n, dimension)) * spread
    return (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float16), subtopics


def clustered(n: int, seed: int) -> np.ndarray:
    return mixture(n, seed)[0]


def state_of(matrix: np.ndarray, rare_share: float, seed: int, sets=(COMMON, RARE)) -> VectorState:
    """One row per unit; a `rare_share` of the rows (drawn at random) readable by the rare group only, the rest by
    the common group; rows grouped by ACL set as a snapshot's are."""
    n = len(matrix)
    acl = (np.random.default_rng(seed).random(n) < rare_share).astype(np.int32)
    order = np.argsort(acl, kind="stable")
    ids = np.arange(n)
    return VectorState(matrix[order], np.array([f"u{i}@1" for i in ids], dtype=object),
                       np.array([f"d{i}" for i in ids], dtype=object), np.zeros(n, np.int32), ids.astype(np.int32),
                       ids.astype(np.int32) + 1, acl[order], list(sets))


@pytest.fixture(scope="module")
def indexed():
    state = state_of(clustered(20_000, 3), 0.01, 3)
    ivf.ready(state)
    return state


def near_query(state: VectorState, rng: np.random.Generator) -> np.ndarray:
    """A query near a stored row, as a question lies near the passages that answer it."""
    return state.matrix[rng.integers(len(state))].astype(np.float32) + rng.normal(size=384).astype(np.float32) * 0.03


def test_the_ivf_finds_99_percent_of_the_exact_top_50_probing_a_tenth_of_its_lists():
    """Rows spread wide around their subtopics (neighbours barely closer than the rest), queries drawn like them."""
    matrix, subtopics = mixture(20_000, 8, spread=1.5)
    state, rng, found = state_of(matrix, 0.01, 8), np.random.default_rng(0), []
    lists, mask = len(ivf.ready(state).centroids), state.mask(COMMON)
    for _ in range(40):
        q = (subtopics[rng.integers(len(subtopics))] + rng.normal(size=384) * 1.5).astype(np.float32)
        exact = state.nearest(state.scores(q, COMMON), mask, 50)
        _, near = ivf.search(state.ann, state, state.query16(q), mask, 200, nprobe=lists // 10)
        found.append(len(set(exact.tolist()) & set(near[:50].tolist())) / 50)
    assert np.mean(found) >= 0.99


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10_000), limit=st.integers(1, 120), groups=st.sampled_from([COMMON, RARE, COMMON | RARE]))
def test_a_caller_gets_limit_rows_it_may_read_with_their_exact_scores(indexed, seed, limit, groups):
    """The pre-filter is inside the walk: a caller of the group owning 1% of the rows probes on until it holds its
    candidates, so it gets `limit` rows (all it may read when fewer), never a row outside its mask, and each with
    the score one float16 pass gives it: the exact answer among the rows its probe held (all its rows when it
    holds fewer candidates than asked for)."""
    q = near_query(indexed, np.random.default_rng(seed))
    mask, full, q16 = indexed.mask(groups), indexed.scores(q, groups), indexed.query16(q)
    scores, near = ivf.search(indexed.ann, indexed, q16, mask, limit)
    assert len(near) == min(limit, int(np.count_nonzero(mask))) and mask[near].all()
    assert np.array_equal(scores[near], full[near]) and np.all(np.diff(scores[near]) <= 0)
    scored = scores.rows
    assert mask[scored].all() and np.array_equal(scores[scored], full[scored])
    ranked = np.argsort(-(indexed.ann.centroids @ q16[0].astype(np.float32)))
    held = np.zeros(len(indexed), dtype=bool)
    held[indexed.ann.order[ivf.probe(indexed.ann, ranked, mask, ivf.NPROBE, limit * ivf.REFINE)]] = True
    assert near.tolist() == indexed.nearest(full, held, limit).tolist()
    if limit * ivf.REFINE >= np.count_nonzero(mask):
        assert held.sum() == np.count_nonzero(mask)


def test_the_setting_turns_the_ivf_on_and_a_caller_of_few_rows_gets_the_exact_pass(monkeypatch):
    state = state_of(clustered(5_000, 4), 0.01, 4)
    q = near_query(state, np.random.default_rng(1))
    exact = {g: state.search(state.query16(q), g, 30)[1].tolist() for g in (COMMON, RARE)}
    assert state.ann is None and not any(k.startswith("ivf_") for k in vector_arrays(state).arrays)
    monkeypatch.setenv("RAG_ANN_MIN_ROWS", "0")
    assert state.search(state.query16(q), RARE, 30)[1].tolist() == exact[RARE]  # 50 rows: fewer than a probe's
    assert state.ann is not None and state.ann.order is not None
    monkeypatch.setattr(ivf, "search", lambda *a, **k: (None, "the ivf"))
    assert state.search(state.query16(q), COMMON, 30)[1] == "the ivf"
    monkeypatch.setenv("RAG_ANN_MIN_ROWS", "many")
    with pytest.raises(ValueError, match="RAG_ANN_MIN_ROWS='many': expected a whole number of rows"):
        state.search(state.query16(q), COMMON, 30)


def test_the_next_snapshot_assigns_only_its_new_rows_and_keeps_the_centroids(tmp_path, monkeypatch):
    monkeypatch.setenv("RAG_ANN_MIN_ROWS", "0")
    built = build(tmp_path)
    before = built.state()
    ivf.ready(before)
    lists = {(u, d, p, s): x for u, d, p, s, x in zip(before.unit_keys, before.doc_ids, before.parts.tolist(),
                                                      before.starts.tolist(), before.ann.lists.tolist())}
    built.add("u99@1", *rows_for("u99", 30, np.random.default_rng(5)))
    assigned = []
    real = ivf.assign
    monkeypatch.setattr(ivf, "assign", lambda c, m, rows: assigned.append(len(rows)) or real(c, m, rows))
    state = built.state(before)  # the kept rows carry their lists, the new ones have none yet
    assert (state.ann.lists >= 0).sum() == len(before) and (state.ann.lists < 0).sum() == 30
    after = vector_state(vector_arrays(state))  # completed as the read-state files are written
    assert sum(assigned) == 30
    assert np.array_equal(after.ann.centroids, before.ann.centroids)
    kept = [(k, x) for k, x in zip(zip(after.unit_keys, after.doc_ids, after.parts.tolist(), after.starts.tolist()),
                                   after.ann.lists.tolist()) if k in lists]
    assert len(kept) == len(before) and all(lists[k] == x for k, x in kept)
    offsets, order = after.ann.offsets, after.ann.order
    assert np.array_equal(after.ann.lists[order], np.repeat(np.arange(len(offsets) - 1), np.diff(offsets)))


def test_partitions_keep_the_lists_their_rows_have_in_the_union_and_the_next_union_assigns_only_new_rows(
        monkeypatch):
    parts = [state_of(clustered(3_000, 5), 0.3, 5), state_of(clustered(2_000, 6), 0.4, 6, (RARE, COMMON))]
    joined = union(parts, 384)
    ivf.ready(joined)
    ivf.share_lists(joined, parts)
    for part in parts:  # each row's list is its nearest centroid: the rows were mapped back to their partitions
        assert np.array_equal(part.ann.lists, ivf.assign(joined.ann.centroids, part.matrix, np.arange(len(part))))
    assert np.array_equal(union(parts, 384).ann.lists, joined.ann.lists)
    assigned = []
    real = ivf.assign
    monkeypatch.setattr(ivf, "assign", lambda c, m, rows: assigned.append(len(rows)) or real(c, m, rows))
    again = union([*parts, state_of(clustered(500, 7), 0.5, 7)], 384)
    ivf.ready(again)
    assert sum(assigned) == 500 and np.array_equal(again.ann.centroids, joined.ann.centroids)


@pytest.mark.slow
def test_the_forced_ivf_of_a_workspace_is_mapped_by_a_second_worker_and_serves_readable_rows(corpus, workspace,
                                                                                             embedder, monkeypatch):
    monkeypatch.setenv("RAG_ANN_MIN_ROWS", "0")
    monkeypatch.setattr(ivf, "NPROBE", 1)  # a probe visits a few rows: every caller of this small corpus takes the IVF
    run_ingest(IngestSettings(workspace=str(workspace), sources=[str(corpus)]))
    Workspace(workspace, embedder=embedder).snapshot().warm()
    snap = Workspace(workspace, embedder=embedder).snapshot()
    state = snap.vectors
    assert mapped(state.ann.codes) and mapped(state.ann.order) and len(state.ann.lists) == len(state)
    used = []
    real = ivf.search
    monkeypatch.setattr(ivf, "search", lambda *a, **k: used.append(1) or real(*a, **k))
    query = embedder.encode_queries(["How are certificates rotated?"])[0]
    for groups in ({"support"}, {"partners"}, {"field-engineering", "security-team"}):
        caller = Caller(frozenset(groups))
        hits, dense = dense_hits(snap, query, caller, 10)
        assert hits and dense.mask[dense.near].all()
        assert all(h.score == pytest.approx(float(s), abs=0) for h, s in zip(hits, dense.scores[dense.near]))
        exact = state.scores(query, caller.groups)[dense.near]
        assert np.array_equal(dense.scores[dense.near], exact)
    assert used
