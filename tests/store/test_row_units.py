"""The unit membership that places index rows in their units is the same whether made from the catalog's rows or
from its Arrow columns: the same member keys, in the same rank, naming the same units."""
from datetime import datetime, timezone

import pytest

from rag.store.row_units import Membership


@pytest.fixture(scope="module")
def sample(published_sample):
    return published_sample


def assert_same(rows: list[tuple], columns) -> None:
    expected, found = Membership.of(rows), Membership.of_columns(columns)
    assert len(expected.keys) > 20
    assert found.keys.equals(expected.keys)
    assert found.unit_keys.dtype == expected.unit_keys.dtype and found.unit_keys.tolist() == expected.unit_keys.tolist()


def test_the_current_membership_from_columns_is_the_one_from_rows(sample):
    catalog, _ = sample
    assert_same(catalog.unit_membership(), catalog.membership_columns())


def test_a_past_membership_and_units_of_several_publishes_rank_alike(sample):
    catalog, _ = sample
    now = datetime.now(timezone.utc).replace(tzinfo=None)
    catalog.con.execute("BEGIN")
    try:  # units made by different publishes, one by none: ranked by publish (none first), then key and position
        catalog.con.execute("UPDATE units SET publish_id = CASE WHEN unit_id < 'm' THEN NULL ELSE publish_id + 3 END "
                            "WHERE status = 'current' AND hash(unit_id) % 3 = 0")
        assert_same(catalog.unit_membership(), catalog.membership_columns())
        assert_same(catalog.unit_membership(None, now), catalog.membership_columns(now))
    finally:
        catalog.con.execute("ROLLBACK")
