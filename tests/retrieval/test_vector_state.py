"""The in-memory serving copy of a LanceDB sub-chunk table: the same nearest readable rows as an exact search of
the stored vectors, rebuilt incrementally per table version, the ACL pre-filter as a mask; rows placed in their units
by the snapshot's unit membership."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rag.retrieval.int8_rows import quantize, quantize_query
from rag.retrieval.segments import Segments, segment_bounds
from rag.retrieval.vectors import MAX_DEAD_SHARE, MAX_SEGMENTS, VectorState, load_state
from rag.store.index import SubchunkIndex, SubchunkRow
from rag.store.row_units import Membership

GROUPS = ["a", "b", "c", "d"]


def rows_for(unit: str, n: int, rng: np.random.Generator) -> tuple[list[SubchunkRow], np.ndarray]:
    """n rows of a unit, each a member of its own (so each row has an ACL of its own)."""
    rows = [SubchunkRow(f"{unit}-doc{i % 2}", "1", i % 2, i * 10, i * 10 + 9,
                        tuple(sorted(rng.choice(GROUPS, size=int(rng.integers(0, 3)), replace=False).tolist())),
                        "c", i * 10, i * 10 + 9, 3, f"h-{unit}-{i}") for i in range(n)]
    vectors = rng.normal(size=(n, 384)).astype(np.float32)
    return rows, vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def members(unit_key: str, rows: list[SubchunkRow], publish_id: int = 1) -> list[tuple]:
    """`Catalog.unit_membership` rows placing these rows in this unit version."""
    return [(unit_key, i, publish_id, r.doc_id, r.doc_version, r.part, r.member_start, r.member_end, list(r.acl),
             r.collection) for i, r in enumerate(rows)]


class Built:
    """An index and the unit membership that places its rows."""

    def __init__(self, folder):
        self.index, rng, self.units = SubchunkIndex(folder / "lancedb"), np.random.default_rng(7), {}
        for u in range(12):
            self.add(f"u{u}@1", *rows_for(f"u{u}", 25, rng))

    def add(self, unit_key: str, rows: list[SubchunkRow], vectors: np.ndarray) -> None:
        self.index.add(rows, vectors)
        self.units[unit_key] = members(unit_key, rows)

    @property
    def membership(self) -> Membership:
        return Membership.of([m for rows in self.units.values() for m in rows])

    def state(self, previous=None):
        return load_state(self.index, previous, self.membership)


def live_rows(state: VectorState) -> np.ndarray:
    return np.flatnonzero(state.live) if state.live is not None else np.arange(len(state))


def build(folder) -> Built:
    return Built(folder)


@pytest.fixture(scope="module")
def searched(tmp_path_factory):
    """Read only by the tests that use it."""
    return build(tmp_path_factory.mktemp("vectors"))


@pytest.fixture
def index(tmp_path):
    return build(tmp_path)


def exact_search(built: Built, q: np.ndarray, groups: list[str], limit: int) -> list[str]:
    """Cosine in float64 of the query with every stored vector (int8, read straight from the table) whose row the
    groups may read, best first."""
    data, vectors = built.index.rows(["doc_id", "char_start", "acl"])
    stored = np.stack(vectors.to_numpy(zero_copy_only=False)).astype(np.float64)
    cosine = stored @ q / np.linalg.norm(stored, axis=1) / np.linalg.norm(q)
    readable = [i for i, acl in enumerate(data.column("acl").to_pylist()) if set(acl) & set(groups)]
    keys = [f"{d}/{s}" for d, s in zip(*(data.column(c).to_pylist() for c in ("doc_id", "char_start")))]
    return [keys[i] for i in sorted(readable, key=lambda i: -cosine[i])[:limit]]


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), groups=st.sets(st.sampled_from(GROUPS), min_size=1), limit=st.integers(1, 60))
def test_nearest_readable_rows_are_an_exact_searchs_of_the_stored_vectors(searched, seed, groups, limit):
    """The same rows as an exact search, except where two rows' cosines differ by less than the matrix's half
    precision resolves (its order there is its own exact one)."""
    state = searched.state()
    q = np.random.default_rng(seed).normal(size=384).astype(np.float32)
    scores = state.scores(q)
    rows = state.nearest(scores, state.mask(frozenset(groups)), limit)
    position = {f"{state.doc_ids[i]}/{state.starts[i]}": i for i in range(len(state))}
    theirs = [position[k] for k in exact_search(searched, q, sorted(groups), limit)]
    assert len(rows) == len(theirs)
    assert np.allclose(np.sort(scores[rows]), np.sort(scores[theirs]), atol=2e-3)
    assert all(set(groups) & state.acl_sets[state.acl_ids[i]] for i in rows)  # never a row the groups may not read
    readable = [i for i in range(len(state)) if set(groups) & state.acl_sets[state.acl_ids[i]]]
    exact = sorted(readable, key=lambda i: (-scores[i], i))[:limit]
    assert rows.tolist() == exact


def test_rows_without_an_acl_are_readable_by_nobody(searched):
    state = searched.state()
    empty = [i for i in range(len(state)) if not state.acl_sets[state.acl_ids[i]]]
    assert empty and not state.mask(frozenset(GROUPS))[empty].any()


def test_a_new_table_version_reuses_kept_units_and_reads_only_new_ones(index, monkeypatch):
    before = index.state()
    del index.units["u0@1"], index.units["u1@1"]
    index.add("u99@1", *rows_for("u99", 30, np.random.default_rng(3)))
    index.index.remove_stale({(d, v, p, s, e, tuple(acl), c) for rows in index.units.values()
                              for _, _, _, d, v, p, s, e, acl, c in rows})
    import rag.retrieval.vectors as vs

    read, original = [], vs._read
    monkeypatch.setattr(vs, "_read", lambda idx, ds, rows, keys: read.append(sorted(set(keys)))
                        or original(idx, ds, rows, keys))
    incremental = index.state(before)
    assert read == [["u99@1"]]  # the kept units' rows come from the previous state
    monkeypatch.setattr(vs, "_read", original)
    fresh = index.state()
    alive = live_rows(incremental)
    key = lambda s, rows: sorted((s.unit_keys[i], s.doc_ids[i], s.starts[i], s.acl_sets[s.acl_ids[i]]) for i in rows)  # noqa
    assert key(incremental, alive) == key(fresh, range(len(fresh)))
    order = {k: i for i, k in enumerate(zip(fresh.unit_keys, fresh.starts))}
    perm = [order[(incremental.unit_keys[i], incremental.starts[i])] for i in alive]
    assert np.array_equal(np.asarray(incremental.matrix)[alive], fresh.matrix[perm])
    for field in ("codes", "scales", "errors", "norms"):  # the int8 copy of each row comes with it
        assert np.array_equal(np.asarray(getattr(incremental.quantized, field))[alive],
                              getattr(fresh.quantized, field)[perm])
    assert not incremental.live[incremental.rows_of_unit["u0@1"]].any()  # kept where they lie, read by nobody
    assert len(incremental.rows_of_unit["u99@1"]) == 30


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), groups=st.sets(st.sampled_from(GROUPS + ["nobody"]), min_size=1))
def test_a_callers_scores_are_computed_on_exactly_the_rows_it_may_read(searched, seed, groups):
    """Rows lie grouped by ACL set, so the readable rows are whole ranges: each is scored, no other row is."""
    state = searched.state()
    q = np.random.default_rng(seed).normal(size=384).astype(np.float32)
    groups = frozenset(groups)
    scores, mask = state.scores(q, groups), state.mask(groups)
    assert np.all(np.diff(state.acl_ids) >= 0)
    assert np.array_equal(np.isfinite(scores), mask)
    reference = state.matrix.astype(np.float32) @ (q / np.linalg.norm(q))
    assert np.allclose(scores[mask], reference[mask], atol=2e-3)
    assert np.array_equal(state.nearest(scores, mask, 40), state.nearest(state.scores(q), mask, 40))


def test_scoring_does_not_wear_out_a_reference_to_none(searched):
    """A server scores millions of queries: a kernel that drops a reference it does not own (simsimd's cdist with
    `out=` does, to None) would abort the process once the count reached zero."""
    import sys

    state, q = searched.state(), np.random.default_rng(3).normal(size=384).astype(np.float32)
    groups = frozenset({"a", "c"})
    state.scores(q, groups)
    before = sys.getrefcount(None)
    for _ in range(1000):
        state.scores(q, groups)
    assert sys.getrefcount(None) >= before - 50


def test_an_incremental_state_appends_a_segment_grouped_by_acl_set(index):
    before = index.state()
    index.add("u77@1", *rows_for("u77", 40, np.random.default_rng(11)))
    after = index.state(before)
    assert isinstance(after.matrix, Segments) and after.matrix.arrays[0] is before.matrix  # nothing copied
    assert len(after) == len(before) + 40 and list(after.matrix.bounds) == [0, len(before), len(after)]
    for lo, hi in zip(after.matrix.bounds[:-1], after.matrix.bounds[1:]):
        assert np.all(np.diff(after.acl_ids[lo:hi]) >= 0)
    for groups in (frozenset({"a"}), frozenset({"b", "d"}), frozenset(GROUPS)):
        covered = np.zeros(len(after), dtype=bool)
        for lo, hi in after.ranges(groups):
            covered[lo:hi] = True
        assert np.array_equal(covered, after.mask(groups))


def test_callers_readable_in_many_scattered_ranges_get_one_pass_over_every_row(tmp_path, monkeypatch):
    import rag.retrieval.vectors as vs

    monkeypatch.setattr(vs, "MAX_RANGES", 2)
    state = build(tmp_path).state()
    scattered = next(g for g in (frozenset({x}) for x in GROUPS)
                     if len([s for s in state.acl_sets if g & s]) > 2)
    assert state.ranges(scattered) == [(0, len(state))]
    q = np.random.default_rng(5).normal(size=384).astype(np.float32)
    assert np.isfinite(state.scores(q, scattered)).all()


def test_a_unit_regrouped_around_unchanged_members_is_served_from_the_same_rows(index):
    """A new unit version holding u0's members and one new member: only the new member's rows are written; the
    snapshot that makes it current serves the unchanged rows under its key, the one before under u0@1."""
    before = index.state()
    rows_before = index.index.count()
    new_rows, vectors = rows_for("u0-extra", 2, np.random.default_rng(5))
    index.index.add(new_rows, vectors)
    kept = index.units.pop("u0@1")
    index.units["u0@2"] = [("u0@2", *m[1:]) for m in kept] + [
        ("u0@2", len(kept) + i, 2, *m[3:]) for i, m in enumerate(members("u0@2", new_rows))]
    assert index.index.count() == rows_before + 2                       # the unchanged members wrote nothing
    after = index.state(before)
    assert not after.live[after.rows_of_unit["u0@1"]].any() and len(after.rows_of_unit["u0@2"]) == 27
    assert len(before.rows_of_unit["u0@1"]) == 25 and np.count_nonzero(after.live) == len(before) + 2
    placed = {(k, d, s) for k, d, s in zip(after.unit_keys, after.doc_ids, after.starts)}
    assert {("u0@2", d, s) for k, d, s in zip(before.unit_keys, before.doc_ids, before.starts) if k == "u0@1"} <= placed


def test_rows_no_unit_of_the_snapshot_holds_are_not_served_and_rows_need_a_membership(index):
    gone = index.units.pop("u3@1")
    state = index.state()
    assert "u3@1" not in state.rows_of_unit and len(state) == 11 * 25
    assert not {r[3] for r in gone} & set(state.doc_ids)
    with pytest.raises(LookupError):
        load_state(index.index)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000), groups=st.sets(st.sampled_from(GROUPS + ["nobody"]), min_size=1),
       limit=st.integers(1, 320))
def test_the_int8_first_pass_finds_the_rows_and_scores_of_a_float16_pass(searched, seed, groups, limit):
    """search() reads int8 rows first, then scores in float16 only the rows it cannot rule out: the nearest rows
    and their scores are a full float16 pass's, bit for bit, for every caller and depth."""
    state = searched.state()
    q = np.random.default_rng(seed).normal(size=384).astype(np.float32)
    groups = frozenset(groups)
    full, mask = state.scores(q, groups), state.mask(groups)
    scores, near = state.search(state.query16(q), groups, limit)
    assert near.tolist() == state.nearest(full, mask, limit).tolist()
    assert np.array_equal(scores[near], full[near])
    scored = scores.rows
    assert mask[scored].all() and np.array_equal(scores[scored], full[scored])  # never a row it may not read


def near_ties(n: int, rng: np.random.Generator) -> VectorState:
    """n unit rows that all lie within int8's rounding of each other, some of them equal: the first pass cannot
    order them, so the float16 pass must."""
    base = rng.normal(size=384)
    rows = base + rng.normal(size=(n, 384)) * 1e-3
    rows[::7] = rows[0]
    rows = (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float16)
    ids = np.arange(n)
    return VectorState(rows, np.array([f"u{i // 10}@1" for i in ids], dtype=object),
                       np.array([f"d{i}" for i in ids], dtype=object), np.zeros(n, np.int32), ids.astype(np.int32),
                       ids.astype(np.int32) + 1, (ids >= n // 2).astype(np.int32), [frozenset({"a"}), frozenset({"b"})])


def test_rows_the_int8_pass_cannot_tell_apart_are_ordered_by_their_float16_scores_ties_by_row():
    rng = np.random.default_rng(11)
    state = near_ties(500, rng)
    for query in (state.matrix[0].astype(np.float32), rng.normal(size=384).astype(np.float32)):
        for groups in (frozenset({"a"}), frozenset({"a", "b"})):
            full, mask = state.scores(query, groups), state.mask(groups)
            for limit in (1, 10, 37, 249, 250, 600):
                scores, near = state.search(state.query16(query), groups, limit)
                assert near.tolist() == state.nearest(full, mask, limit).tolist()
                assert np.array_equal(scores[near], full[near])


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10_000))
def test_an_int8_score_lies_within_its_bound_of_the_float16_score(seed):
    rng = np.random.default_rng(seed)
    rows = rng.normal(size=(200, 384)) * rng.uniform(0.01, 3, size=(200, 1))
    rows[rng.integers(0, 200, 20), rng.integers(0, 384, 20)] *= 50  # a few spikes: coarse steps for their rows
    matrix = (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float16)
    int8, q16 = quantize(matrix), matrix[:1] if seed % 2 else rng.normal(size=(1, 384)).astype(np.float16)
    query = quantize_query(q16[0])
    exact = matrix.astype(np.float64) @ q16[0].astype(np.float64)
    assert np.abs(int8.scores(query, 0, 200) - exact).max() <= int8.bound(query)


@settings(max_examples=8, deadline=None)
@given(seed=st.integers(0, 10_000),
       changes=st.lists(st.tuples(st.integers(0, 3), st.integers(0, 30)), min_size=1, max_size=12))
def test_a_state_built_publish_by_publish_answers_as_one_built_at_once(tmp_path_factory, seed, changes):
    """Units retired and added publish after publish: the kept rows stay where they lie, dead or alive, and the new
    ones come as segments until they are copied into one; every search returns what a state built at once returns
    (equal scores in either order), and never a row of a retired unit."""
    built, rng = build(tmp_path_factory.mktemp("history")), np.random.default_rng(seed)
    state = built.state()
    for n, (retired, added) in enumerate(changes):
        for key in sorted(built.units)[:retired]:
            del built.units[key]
        if added:
            built.add(f"n{n}@1", *rows_for(f"n{n}", added, rng))
        state, fresh = built.state(state), built.state()
        assert len(segment_bounds(state.matrix)) - 1 <= MAX_SEGMENTS
        assert state.live is None or np.count_nonzero(~state.live) <= MAX_DEAD_SHARE * len(state) + 30
        for groups in (frozenset({"a"}), frozenset({"b", "c"}), frozenset(GROUPS)):
            q = rng.normal(size=384).astype(np.float32)
            scores, near = state.search(state.query16(q), groups, 20)
            theirs, their_near = fresh.search(fresh.query16(q), groups, 20)
            assert np.array_equal(scores[near], theirs[their_near])
            cut = float(scores[near][-1]) if len(near) else np.inf
            key = lambda s, rows, score: {(s.unit_keys[i], s.doc_ids[i], int(s.starts[i]), float(v))  # noqa
                                          for i, v in zip(rows.tolist(), score[rows].tolist()) if v > cut}
            assert key(state, near, scores) == key(fresh, their_near, theirs)  # rows tied at the cut: either
            assert state.live is None or state.live[near].all()
            with pytest.MonkeyPatch.context() as env:  # the IVF walks the same mask
                env.setenv("RAG_ANN_MIN_ROWS", "0")
                _, ann_near = state.search(state.query16(q), groups, 20)
                assert state.live is None or state.live[ann_near].all()
