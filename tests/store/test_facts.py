"""Stored planning facts: the incremental plan equals a full re-plan, and unchanged versions cost nothing."""
import tempfile
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rag.models.tokens import default_counter
from rag.sources.documents import Document
from rag.store.catalog import Catalog
from rag.store.facts import CONTAINS_JOIN_TITLES, FactStore, plan_from_facts
from rag.store.publish import publish_units
from rag.store.settings import IngestSettings
from rag.store.source_log import sync_documents
from rag.text.analysis import mention_spans
from rag.units.linking import MAX_TITLE_TOKENS, mentioned_titles, title_candidates
from rag.units.long_units import plan_units

SRC = "/data/src"
TITLES = ["Gateway Connectivity", "Log Rotation Policy", "North Star", "北京大学", "长江", "Alpha Beta Gamma",
          "北京", "Star", "Delta Force One"]
WORDS = ["the", "uplink", "restarts", "after", "a", "timeout", "并且", "我们", "去过", "logs", "rotate", "nightly"]


@pytest.fixture(scope="module")
def counter():
    return default_counter()


def sync(catalog, docs):
    pid = catalog.begin_publish([SRC])
    sync_documents(catalog, pid, list(docs), [], [SRC])


def doc(doc_id, title, text, version=1, acl=("a",), collection="c1", links=()):
    return Document(doc_id=doc_id, title=title, text=text, version=str(version), acl=acl, links=tuple(links),
                    collection=collection, source=SRC, source_path=f"{SRC}/{doc_id}.md")


texts = st.lists(st.sampled_from(WORDS + TITLES), min_size=1, max_size=30).map(
    lambda ws: " ".join(ws) + ".")
long_texts = st.integers(min_value=1, max_value=4).map(
    lambda n: " ".join(f"Sentence {i} tells the North Star story again." for i in range(n * 12)))


@st.composite
def documents(draw, doc_id, version=1):
    # a title may be another document's id: a link to that id resolves to the title's documents once it has gone
    title = draw(st.sampled_from(TITLES + [doc_id, "d0", "d1"]))
    return doc(doc_id, title, draw(st.one_of(texts, texts, texts, long_texts)), version,
               draw(st.sampled_from([("a",), ("b",)])), draw(st.sampled_from(["c1", "c2"])),
               draw(st.lists(st.sampled_from([f"d{i}" for i in range(8)] + TITLES + ["nowhere"]), max_size=3)))


@st.composite
def histories(draw):
    """An initial corpus and a sequence of edits, deletions, re-versions, ACL and link changes."""
    ids = [f"d{i}" for i in range(draw(st.integers(min_value=1, max_value=8)))]
    corpus = {i: draw(documents(i)) for i in ids}
    states = [dict(corpus)]
    for _ in range(draw(st.integers(min_value=1, max_value=5))):
        corpus = dict(corpus)
        for _ in range(draw(st.integers(min_value=1, max_value=3))):
            op = draw(st.sampled_from(["edit", "delete", "add", "acl", "links", "title"]))
            target = draw(st.sampled_from(sorted(corpus) + [i for i in ids if i not in corpus] if op == "add"
                                          else sorted(corpus) or ["d0"]))
            old = corpus.get(target)
            if op == "add" or old is None:
                corpus[target] = draw(documents(target, int(old.version) + 1 if old else 1))
            elif op == "delete":
                del corpus[target]
            elif op == "edit":
                corpus[target] = replace(old, version=str(int(old.version) + 1), text=draw(texts))
            elif op == "title":
                corpus[target] = replace(old, version=str(int(old.version) + 1), title=draw(st.sampled_from(TITLES)))
            elif op == "acl":
                corpus[target] = replace(old, acl=draw(st.sampled_from([("a",), ("b",), ("a", "b")])))
            else:
                corpus[target] = replace(old, links=tuple(draw(st.lists(st.sampled_from(ids + TITLES), max_size=3))))
        states.append(corpus)
    return states, draw(st.sampled_from([60, 120, 400])), draw(st.booleans())


@pytest.mark.slow   # 60 histories, each re-planned in full after every change: ~28 s
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(histories())
def test_incremental_plan_equals_a_full_replan_after_every_change(counter, history):
    states, cap, derive = history
    with tempfile.TemporaryDirectory() as tmp:
        catalog = Catalog(Path(tmp) / "c.duckdb")
        try:
            for corpus in states:
                sync(catalog, corpus.values())
                full = plan_units(catalog.current_documents(), counter, cap, derive)
                incremental = plan_from_facts(catalog, counter, cap, derive)
                assert incremental.units == full.units
                assert incremental.missing_links == full.missing_links
        finally:
            catalog.close()


def units_held(catalog):
    """The catalog's current units, each as its id, content hash, tokens and members."""
    current = catalog.current_units()
    members = catalog.live_units(statuses=("current",))
    return {u: (h, [m for _, _, m in members[f"{u}@{v}"]]) for u, (v, h) in current.items()}


@pytest.mark.slow   # ~60 histories, each published and re-planned in full after every run: ~40 s
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(histories(), st.lists(st.sampled_from(["commit", "again", "abandon"]), min_size=12, max_size=12))
def test_after_every_publish_the_current_units_are_those_a_full_replan_makes(counter, history, runs):
    """Runs that change nothing keep their units unplanned; a run whose units were never committed is redone."""
    states, cap, derive = history
    settings_ = IngestSettings(unit_cap=cap, derive_links=derive)
    with tempfile.TemporaryDirectory() as tmp:
        catalog = Catalog(Path(tmp) / "c.duckdb")
        try:
            committed = None
            for corpus, run in zip(states, runs):
                for again in range(2 if run == "again" else 1):
                    sync(catalog, corpus.values())
                    pid = catalog.running_publish()
                    plan, changes = publish_units(catalog, counter, settings_)
                    current = sorted(catalog.current_documents(), key=lambda d: d.doc_id)
                    full = plan_units(current, counter, cap, derive)
                    assert (plan.missing_links, plan.components) == (full.missing_links, full.components)
                    assert sorted(plan.sizes()) == sorted((u.tokens, len(u.members)) for u in full.units)
                    assert (plan.kept is not None) == (committed == current)
                    if run == "abandon":
                        continue
                    catalog.commit_units(pid, 0, 0)
                    committed = current
                    assert units_held(catalog) == {u.unit_id: (u.content_hash, list(u.members)) for u in full.units}
        finally:
            catalog.close()


def test_an_unchanged_corpus_is_neither_tokenised_nor_regrouped(tmp_path, counter):
    docs = [doc(f"d{i}", f"Title number {i}", f"Text {i} mentions Title number {i + 1}.") for i in range(20)]
    catalog = Catalog(tmp_path / "c.duckdb")
    sync(catalog, docs)
    first = plan_from_facts(catalog, counter, 400, True)
    again = plan_from_facts(catalog, counter, 400, True)
    assert (first.facts_computed, first.replanned) == (20, first.components)
    assert (again.facts_computed, again.replanned) == (0, 0)
    assert again.units == first.units

    sync(catalog, [replace(docs[0], version="2", text="Text 0 now stands alone."), *docs[1:]])
    edited = plan_from_facts(catalog, counter, 400, True)
    assert edited.facts_computed == 1
    assert 1 <= edited.replanned <= 2   # the component that held d0, split in two
    assert edited.units == plan_units(catalog.current_documents(), counter, 400, True).units


def test_groups_kept_after_edits_equal_the_groups_a_new_catalog_keeps(tmp_path, counter):
    """Each document's place in its groups is kept, with its component's signature on the smallest id's row, and
    an edit rewrites only the rows that changed: after edits that change, split and join components, what is kept is
    what a new catalog planning the same documents keeps."""
    docs = [doc(f"d{i:02}", f"Title number {i}", f"Text {i} mentions Title number {i + 1}. " + "word " * (i % 7))
            for i in range(24)] + [doc("e0", "Echo zero", "Echo zero mentions Echo one."), doc("e1", "Echo one", "One.")]
    catalog = Catalog(tmp_path / "a" / "c.duckdb")
    sync(catalog, docs)
    plan_from_facts(catalog, counter, 400, True)
    docs[0] = replace(docs[0], version="2", text="Text 0 now stands alone.")
    docs[9] = replace(docs[9], version="2", text=docs[9].text + " More words here, " * 9)
    docs[17] = replace(docs[17], version="2", text="Text 17 mentions Title number 3 and Title number 18.")
    kept = docs[:12] + docs[13:-2] + docs[-1:]   # d12 and e0 (the smallest id of its component) deleted
    sync(catalog, kept)
    edited = plan_from_facts(catalog, counter, 400, True)
    fresh = Catalog(tmp_path / "b" / "c.duckdb")
    sync(fresh, kept)
    assert edited.units == plan_from_facts(fresh, counter, 400, True).units
    held = "SELECT * FROM group_members ORDER BY ALL"
    assert catalog.rows(held) == fresh.rows(held)
    catalog.close()
    fresh.close()


def test_signatures_of_another_width_kept_by_an_older_catalog_regroup_each_component_once(tmp_path, counter):
    """Signatures were 128 bits; they are 64 now (a group row per component is the catalog's widest group column)."""
    docs = [doc(f"d{i}", f"Title number {i}", f"Text {i} mentions Title number {i + 2}.") for i in range(12)]
    catalog = Catalog(tmp_path / "c.duckdb")
    sync(catalog, docs)
    first = plan_from_facts(catalog, counter, 400, True)
    held = catalog.rows("SELECT * FROM group_members ORDER BY ALL")
    assert {len(s) for (s,) in catalog.rows("SELECT signature FROM group_members WHERE signature IS NOT NULL")} == {16}
    catalog.con.execute("UPDATE group_members SET signature = signature || repeat('0', 16)")   # as kept before
    upgraded = plan_from_facts(catalog, counter, 400, True)
    assert (upgraded.replanned, upgraded.units) == (first.components, first.units)
    assert catalog.rows("SELECT * FROM group_members ORDER BY ALL") == held
    assert plan_from_facts(catalog, counter, 400, True).replanned == 0
    catalog.close()


def test_a_new_title_links_the_documents_that_already_mention_it(tmp_path, counter):
    catalog = Catalog(tmp_path / "c.duckdb")
    older = [doc("a", "Apples", "A report on Cellular modem provisioning."), doc("b", "Pears", "Nothing here.")]
    sync(catalog, older)
    plan_from_facts(catalog, counter, 4000, True)
    sync(catalog, [*older, doc("c", "Cellular modem provisioning", "How to provision.")])
    plan = plan_from_facts(catalog, counter, 4000, True)
    assert plan.facts_computed == 1   # only the new document's text was read
    assert sorted(sorted(m.doc_id for m in u.members) for u in plan.units) == [["a", "c"], ["b"]]


def test_chinese_titles_are_found_inside_chinese_text():
    text = "我们去过北京大学，也去过长江边。"
    assert mentioned_titles(text, {"北京大学", "长江", "上海"}) == {"北京大学", "长江"}
    assert mentioned_titles("He studied at 北京大学 in 1990.", {"北京大学"}) == {"北京大学"}
    assert mentioned_titles("New Yorker magazine", {"New York"}) == set()


pieces = st.sampled_from(["North", "Star", "North Star", "Star-", "北京", "大学", "1", "12", "x", " ", ".", "·",
                          "-"])


@settings(max_examples=300, deadline=None)
@given(st.lists(pieces, max_size=40).map("".join),
       st.sets(st.lists(pieces, min_size=1, max_size=6).map("".join), max_size=8))
def test_a_mention_is_a_title_spanning_whole_tokens_of_the_text(text, titles):
    """Exactly the titles equal to some run of at most MAX_TITLE_TOKENS whole tokens of the text are mentioned: the
    text's title candidates."""
    spans = mention_spans(text)
    runs = {text[spans[i][0]:spans[j][1]] for i in range(len(spans))
            for j in range(i, min(i + MAX_TITLE_TOKENS, len(spans)))}
    assert title_candidates(text) == runs
    assert mentioned_titles(text, titles) == titles & runs


def test_a_title_longer_than_max_title_tokens_is_never_looked_for():
    words = [f"w{i}" for i in range(MAX_TITLE_TOKENS + 1)]
    short, long = " ".join(words[:-1]), " ".join(words)
    assert mentioned_titles(f"Say {long} twice.", {short, long}) == {short}


def test_an_old_catalog_without_facts_computes_them_once(tmp_path, counter):
    path = tmp_path / "c.duckdb"
    catalog = Catalog(path)
    docs = [doc("a", "Alpha", "Alpha mentions Beta.", links=("b",)), doc("b", "Beta", "Beta text.")]
    sync(catalog, docs)
    for table in ("doc_facts", "doc_parts", "doc_mentions", "mention_titles", "group_members"):
        catalog.con.execute(f"DROP TABLE {table}")
    catalog.close()
    catalog = Catalog(path)
    first = plan_from_facts(catalog, counter, 4000, True)
    assert first.facts_computed == 2 and first.units == plan_units(docs, counter, 4000, True).units
    assert plan_from_facts(catalog, counter, 4000, True).facts_computed == 0
    catalog.close()


def test_an_old_catalog_keeps_its_facts_with_its_fact_ids_made_four_byte_integers(tmp_path, counter):
    """Fact ids were BIGINT, which DuckDB stores uncompressed in the catalog's 16 KiB blocks: 8 bytes a row twice."""
    path = tmp_path / "c.duckdb"
    catalog = Catalog(path)
    docs = [doc("a", "Alpha", "Alpha mentions Beta.", links=("b",)), doc("b", "Beta", "Beta text mentions Alpha.")]
    sync(catalog, docs)
    plan_from_facts(catalog, counter, 4000, True)
    for table in ("doc_facts", "doc_mentions"):
        catalog.con.execute(f"ALTER TABLE {table} ALTER fact_id TYPE BIGINT")
    stored = [catalog.rows(f"SELECT * FROM {t} ORDER BY ALL") for t in ("doc_facts", "doc_mentions")]
    catalog.close()
    catalog = Catalog(path)
    assert catalog.rows("SELECT DISTINCT data_type FROM duckdb_columns() WHERE column_name = 'fact_id'") == [
        ("INTEGER",)]
    assert [catalog.rows(f"SELECT * FROM {t} ORDER BY ALL") for t in ("doc_facts", "doc_mentions")] == stored
    again = plan_from_facts(catalog, counter, 4000, True)
    assert again.facts_computed == 0 and again.units == plan_units(docs, counter, 4000, True).units
    sync(catalog, [docs[0], doc("c", "Gamma", "Gamma mentions Alpha.")])
    assert plan_from_facts(catalog, counter, 4000, True).facts_computed == 1
    catalog.close()


def test_a_link_to_another_acls_document_changes_no_group(tmp_path, counter):
    """Groups follow link counts inside their own (acl, collection) group, so a collection planned alone (a
    partition) gets the same units; the incremental plan still equals the full one."""
    chain = [doc("x", "Xerxes", "Short.", links=("y",)), doc("y", "Yarrow", "Short.", links=("z",)),
             doc("z", "Zinnia", "Short."), doc("w", "Walrus", "Short.", acl=("b",))]
    cap = 2 * max(u.tokens for u in plan_units(chain, counter, 10_000).units[0].members) + 1
    catalog = Catalog(tmp_path / "c.duckdb")
    sync(catalog, chain)
    before = plan_from_facts(catalog, counter, cap, False)
    sync(catalog, [replace(chain[0], links=("y", "w")), *chain[1:]])
    after = plan_from_facts(catalog, counter, cap, False)
    assert after.units == before.units
    assert after.units == plan_units(catalog.current_documents(), counter, cap, False).units


@pytest.mark.parametrize("count", [CONTAINS_JOIN_TITLES // 2, 3 * CONTAINS_JOIN_TITLES])  # both ways of looking
def test_titles_new_to_a_big_stored_corpus_are_found_in_exactly_the_texts_that_mention_them(tmp_path, counter, count):
    """Titles arrive at once into a corpus already planned: each stored version gets exactly the titles its text
    mentions on token boundaries, near misses (a longer number or word, another case or spacing) get none, and two
    versions sharing one text both get its mentions."""
    new = [f"Relay station {i}" for i in range(count - 1)] + ["北京大学"]
    planted = {f"s{i:04}": new[(i * 7) % len(new)] for i in range(0, 2400, 3)}
    misses = ["Relay station 3000 closed.", "Relay stationary 12.", "relay station 12.", "Relay station12.",
              "Relay  station 12.", "北京 大学", "北京大 学", "Relay station", "XRelay station 5."]

    def text(i: int, doc_id: str) -> str:
        mention = f"It names {planted[doc_id]} once." if doc_id in planted else misses[i % len(misses)]
        return f"Log {i % 50} of the uplink restarts after a timeout. {mention}"

    stored = [doc(f"s{i:04}", f"Stored {i}", text(i, f"s{i:04}")) for i in range(2400)]
    stored.append(doc("twin", "Twin of s0003", stored[3].text))
    planted["twin"] = planted["s0003"]
    catalog = Catalog(tmp_path / "c.duckdb")
    sync(catalog, stored)
    assert not any(FactStore(catalog, counter).plan_facts().mentions.values())
    sync(catalog, stored + [doc(f"n{i:03}", title, "A station log.") for i, title in enumerate(new)])
    facts = FactStore(catalog, counter).plan_facts()
    assert (facts.computed, facts.titles_checked) == (len(new), len(new))
    assert {d: ts for d, ts in facts.mentions.items() if ts} == {d: {t} for d, t in planted.items()}
    catalog.close()
