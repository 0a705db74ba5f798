"""A caller's pre-filter kept as its readable ACL sets: read like the boolean row mask it stands for."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from rag.retrieval.members import member_table
from rag.retrieval.row_mask import RowMask, readable_sets
from rag.store.rows import MemberRow

GROUPS = ["ops", "hr", "eng", "all"]
acl = st.frozensets(st.sampled_from(GROUPS), max_size=3)


@settings(max_examples=150, deadline=None)
@given(acl_sets=st.lists(acl, min_size=1, max_size=6), rows=st.integers(0, 60), groups=acl, seed=st.integers(0, 99))
def test_a_row_is_readable_exactly_when_its_acl_admits_one_of_the_callers_groups(acl_sets, rows, groups, seed):
    rng = np.random.default_rng(seed)
    acl_ids = np.sort(rng.integers(0, len(acl_sets), rows)).astype(np.int32)
    mask = RowMask(readable_sets(acl_sets, groups), acl_ids)
    expected = np.array([not groups.isdisjoint(acl_sets[i]) for i in acl_ids], dtype=bool)
    picked = rng.integers(0, max(rows, 1), 20) if rows else np.zeros(0, dtype=np.int64)
    lo, hi = sorted(rng.integers(0, rows + 1, 2))
    assert np.array_equal(np.asarray(mask), expected) and len(mask) == rows
    assert np.array_equal(mask[picked], expected[picked]) and np.array_equal(mask[lo:hi], expected[lo:hi])


@settings(max_examples=60, deadline=None)
@given(acls=st.lists(st.lists(acl.map(sorted).map(tuple), min_size=1, max_size=4), min_size=1, max_size=6),
       groups=acl)
def test_a_member_is_readable_exactly_when_its_acl_admits_a_group_and_nothing_member_long_is_kept(acls, groups):
    units = {f"u{u}": [MemberRow(f"u{u}", p, f"d{u}-{p}", "1", 0, 0, 1, 1, "t", a, "h") for p, a in enumerate(unit)]
             for u, unit in enumerate(acls)}
    table = member_table(units)
    readable = table.readable(groups)
    by_key = {(m.unit_key, m.doc_id): not groups.isdisjoint(m.acl) for unit in units.values() for m in unit}
    expected = [by_key[(table.units[int(table.unit_rank[r])], table.doc_ids[r])] for r in range(len(table.acl_ids))]
    assert isinstance(readable, RowMask) and np.asarray(readable).tolist() == expected
