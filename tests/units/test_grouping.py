"""LongRAG grouping of linked ids under a cap, and the unit plan built on it."""
import random
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rag.models.tokens import default_counter
from rag.sources.documents import Document, version_key
from rag.sources.loaders import load_sources
from rag.units.grouping import group
from rag.units.long_units import plan_units, render_member

CORPUS = Path(__file__).resolve().parents[2] / "samples" / "corpus"


@st.composite
def graphs(draw):
    """Ids, sizes within the cap, a symmetric neighbour map, and the cap."""
    cap = draw(st.integers(min_value=1, max_value=100))
    ids = draw(st.lists(st.from_regex(r"[a-z]{1,3}", fullmatch=True), min_size=1, max_size=25, unique=True))
    sizes = {i: draw(st.integers(min_value=1, max_value=cap)) for i in ids}
    pairs = [(a, b) for a in ids for b in ids if a < b]
    edges = draw(st.lists(st.sampled_from(pairs), unique=True)) if pairs else []
    neighbours = {}
    for a, b in edges:
        neighbours.setdefault(a, set()).add(b)
        neighbours.setdefault(b, set()).add(a)
    return ids, sizes, neighbours, cap


@settings(max_examples=300, deadline=None)
@given(graphs())
def test_every_id_lands_in_exactly_one_group(g):
    ids, sizes, neighbours, cap = g
    members = [i for grp in group(ids, sizes, neighbours, cap) for i in grp]
    assert sorted(members) == sorted(ids)


@settings(max_examples=300, deadline=None)
@given(graphs())
def test_no_group_exceeds_the_cap(g):
    ids, sizes, neighbours, cap = g
    assert all(sum(sizes[i] for i in grp) <= cap for grp in group(ids, sizes, neighbours, cap))


@settings(max_examples=200, deadline=None)
@given(graphs(), st.randoms(use_true_random=False))
def test_grouping_is_deterministic_whatever_the_input_order(g, rnd):
    ids, sizes, neighbours, cap = g
    shuffled = ids[:]
    rnd.shuffle(shuffled)
    first = group(ids, sizes, neighbours, cap)
    assert group(ids, sizes, neighbours, cap) == first
    assert group(shuffled, sizes, neighbours, cap) == first


@settings(max_examples=200, deadline=None)
@given(graphs())
def test_ids_without_links_stay_alone(g):
    ids, sizes, neighbours, cap = g
    for grp in group(ids, sizes, neighbours, cap):
        if len(grp) > 1:
            assert all(neighbours.get(i) for i in grp)


@settings(max_examples=200, deadline=None)
@given(graphs())
def test_a_multi_member_group_is_connected_by_links(g):
    ids, sizes, neighbours, cap = g
    for grp in group(ids, sizes, neighbours, cap):
        reached, frontier = {grp[0]}, [grp[0]]
        while frontier:
            nxt = [n for i in frontier for n in neighbours.get(i, ()) if n in grp and n not in reached]
            reached.update(nxt)
            frontier = nxt
        assert reached == set(grp)


def test_linked_ids_merge_when_they_fit_and_link_less_ids_are_kept():
    neighbours = {"a": {"b"}, "b": {"a"}}
    assert group(["c", "b", "a"], {"a": 3, "b": 4, "c": 1}, neighbours, cap=10) == [["a", "b"], ["c"]]


def test_linked_ids_stay_apart_when_together_they_exceed_the_cap():
    neighbours = {"a": {"b"}, "b": {"a"}}
    assert group(["a", "b"], {"a": 6, "b": 6}, neighbours, cap=10) == [["a"], ["b"]]


def test_links_to_ids_outside_the_input_are_ignored():
    assert group(["a"], {"a": 1}, {"a": {"elsewhere"}}, cap=10) == [["a"]]


# plan_units -----------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def counter():
    return default_counter()


@pytest.fixture(scope="module")
def current_docs():
    """The sample corpus with only the newest version of each id, as the catalog would hold it."""
    newest = {}
    for d in load_sources([CORPUS]).documents:
        if d.doc_id not in newest or version_key(d.version) > version_key(newest[d.doc_id].version):
            newest[d.doc_id] = d
    return sorted(newest.values(), key=lambda d: d.doc_id)


@pytest.fixture(scope="module")
def plan(current_docs, counter):
    return plan_units(current_docs, counter)


def doc(doc_id, text, acl=("support",), links=(), collection="ops", version="1", title=None):
    return Document(doc_id=doc_id, title=title or doc_id.replace("-", " ").title(), text=text, version=version,
                    acl=acl, links=links, collection=collection)


def test_every_current_document_is_in_exactly_one_unit(plan, current_docs):
    ids = [m.doc_id for u in plan.units for m in u.members if m.part <= 1]
    assert sorted(ids) == sorted(d.doc_id for d in current_docs)


def test_units_never_mix_acls_or_collections(plan, current_docs):
    by_id = {d.doc_id: d for d in current_docs}
    for unit in plan.units:
        assert {by_id[m.doc_id].acl for m in unit.members} == {unit.acl}
        assert {by_id[m.doc_id].collection for m in unit.members} == {unit.collection}


def test_every_unit_fits_the_cap_when_its_members_are_rendered(plan, current_docs, counter):
    by_id = {d.doc_id: d for d in current_docs}
    for unit in plan.units:
        rendered = [render_member(by_id[m.doc_id].title, m.doc_id, m.doc_version,
                                  by_id[m.doc_id].text[m.start:m.end], m.part) for m in unit.members]
        assert unit.tokens <= 4000
        assert sum(counter.count(rendered)) <= 4000


def test_linked_runbooks_of_one_acl_share_a_unit(plan):
    [unit] = [u for u in plan.units if "edge-offline-cache" in {m.doc_id for m in u.members}]
    assert {"resync-after-reconnect", "edge-log-rotation"} <= {m.doc_id for m in unit.members}


def test_sample_corpus_has_no_missing_links(plan):
    assert plan.missing_links == []


def test_oversized_handbook_is_split_into_consecutive_parts_within_the_cap(current_docs, counter):
    [handbook] = [d for d in current_docs if d.doc_id == "field-service-handbook"]
    plan = plan_units([handbook], counter, cap=1000)
    parts = sorted((m for u in plan.units for m in u.members), key=lambda m: m.part)
    assert len(parts) >= 7
    assert [m.part for m in parts] == list(range(1, len(parts) + 1))
    assert all(len(u.members) == 1 and u.tokens <= 1000 for u in plan.units)
    assert not handbook.text[:parts[0].start].strip() and not handbook.text[parts[-1].end:].strip()
    for a, b in zip(parts, parts[1:]):
        assert a.end <= b.start
        assert not handbook.text[a.end:b.start].strip()
    rendered = [render_member(handbook.title, handbook.doc_id, handbook.version, handbook.text[m.start:m.end], m.part)
                for m in parts]
    assert max(counter.count(rendered)) <= 1000


def test_handbook_above_the_default_cap_is_split_and_not_grouped(plan):
    parts = [u for u in plan.units if any(m.doc_id == "field-service-handbook" for m in u.members)]
    assert len(parts) >= 2
    assert all(len(u.members) == 1 and u.members[0].part >= 1 for u in parts)


def test_plan_is_the_same_whatever_the_document_order(current_docs, counter, plan):
    shuffled = current_docs[:]
    random.Random(7).shuffle(shuffled)
    assert plan_units(shuffled, counter).units == plan.units


def test_unit_ids_survive_a_new_version_but_content_hash_changes(counter):
    docs = [doc("a", "Alpha text about caches.", links=("b",), version="2025"), doc("b", "Beta text about logs.")]
    before = plan_units(docs, counter)
    after = plan_units([replace(docs[0], version="2026", text="Alpha text about caches, revised."), docs[1]], counter)
    assert [u.unit_id for u in after.units] == [u.unit_id for u in before.units]
    assert [u.content_hash for u in after.units] != [u.content_hash for u in before.units]


def test_same_ids_with_other_acl_split_into_units_per_acl(counter):
    docs = [doc("a", "Alpha.", acl=("support",), links=("b",)), doc("b", "Beta.", acl=("partners",))]
    units = plan_units(docs, counter).units
    assert sorted(u.acl for u in units) == [("partners",), ("support",)]


def test_missing_links_are_reported_with_their_source(counter):
    plan = plan_units([doc("a", "Alpha.", links=("no-such-document", "b")), doc("b", "Beta.")], counter)
    assert plan.missing_links == [("a", "no-such-document")]


def test_link_by_exact_title_groups_like_a_link_by_id(counter):
    docs = [doc("a", "Alpha.", links=("Cellular modem and SIM provisioning",)),
            doc("b", "Beta.", title="Cellular modem and SIM provisioning")]
    [unit] = plan_units(docs, counter).units
    assert {m.doc_id for m in unit.members} == {"a", "b"}


def test_derived_links_join_a_document_that_mentions_another_title(counter):
    docs = [doc("a", "Before rotating logs, read Troubleshooting gateway connectivity first."),
            doc("b", "Check the uplink.", title="Troubleshooting gateway connectivity")]
    assert len(plan_units(docs, counter).units) == 2
    [unit] = plan_units(docs, counter, derive_links=True).units
    assert {m.doc_id for m in unit.members} == {"a", "b"}


def test_document_without_links_gets_a_unit_of_its_own(counter):
    docs = [doc("a", "Alpha.", links=("b",)), doc("b", "Beta."), doc("lonely", "Nobody links here.")]
    units = plan_units(docs, counter).units
    assert sorted(tuple(sorted(m.doc_id for m in u.members)) for u in units) == [("a", "b"), ("lonely",)]
