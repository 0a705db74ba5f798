"""A publish re-plans only the documents a change reaches; the rest keep their units untouched."""
from dataclasses import replace

import pytest
from test_facts import doc, sync

from rag.models.tokens import default_counter
from rag.store.catalog import Catalog
from rag.store.plan_change import PlanDocs
from rag.store.publish import publish_units
from rag.store.settings import IngestSettings
from rag.units.long_units import plan_units

SETTINGS = IngestSettings(unit_cap=400, derive_links=True)


@pytest.fixture(scope="module")
def counter():
    return default_counter()


def publish(catalog, counter, docs):
    sync(catalog, docs)
    pid = catalog.running_publish()
    plan, changes = publish_units(catalog, counter, SETTINGS)
    catalog.commit_units(pid, 0, 0)
    return plan, changes


def pairs(n):
    """n pairs of documents, each pair linked by a title mention and no pair linked to another."""
    return [d for i in range(n) for d in (doc(f"p{i:03}a", f"Pair {i} first", f"About Pair {i} second."),
                                          doc(f"p{i:03}b", f"Pair {i} second", f"Second of pair {i}."))]


def test_an_edit_re_plans_the_component_of_the_edited_document_only(tmp_path, counter):
    docs = pairs(100)
    catalog = Catalog(tmp_path / "c.duckdb")
    first, _ = publish(catalog, counter, docs)
    assert len(first.units) == 100 and first.replanned == 100
    edited = [*docs[:20], replace(docs[20], version="2", text="About Pair 5 second now."), *docs[21:]]
    plan, changes = publish(catalog, counter, edited)
    # p010a now mentions p005b: pair 5 and pair 10 are re-planned, into two units; the other 98 pairs are untouched
    assert [[m.doc_id for m in u.members] for u in plan.units] == [["p010a", "p005a", "p005b"], ["p010b"]]
    assert (len(plan.untouched), plan.components, plan.facts_computed, plan.replanned) == (98, 100, 1, 2)
    assert (len(changes.published), len(changes.retired), changes.unchanged) == (2, 2, 98)
    assert sorted(plan.sizes()) == sorted((u.tokens, len(u.members)) for u in plan_units(
        catalog.current_documents(), counter, 400, True).units)


def test_a_record_of_units_never_committed_is_not_trusted(tmp_path, counter):
    docs = pairs(3)
    catalog = Catalog(tmp_path / "c.duckdb")
    publish(catalog, counter, docs)
    assert PlanDocs(catalog).hold(catalog.planned_from(catalog.begin_publish([])))
    sync(catalog, docs[1:])
    publish_units(catalog, counter, SETTINGS)   # staged, never committed: the record is of units no reader has
    assert not PlanDocs(catalog).hold(catalog.planned_from(catalog.begin_publish([])))
