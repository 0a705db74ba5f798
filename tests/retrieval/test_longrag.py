"""LongRAG retrieval: MaxP, read-time assembly from the catalog, permissions, versions and budgets."""
import dataclasses
import weakref

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rag.models.tokens import default_counter
from rag.query.methods import method as registered
from rag.query.workspace import Workspace
from rag.retrieval.callers import Caller
from rag.retrieval.context import ContextItem
from rag.retrieval.dense import Hit, maxp
from rag.retrieval.longrag import LongRAGConfig
from rag.retrieval.read_state import SharedCache, Snapshot
from rag.retrieval.request import Request, Tools
from rag.store.catalog import Catalog
from rag.store.index import SubchunkIndex
from rag.store.publish import publish_documents, publish_index, publish_units
from rag.store.settings import IngestSettings
from rag.store.snapshot_files import read_pointer

GROUPS = ["field-engineering", "support", "partners", "security-team", "everyone"]


def publish(workspace, sources, embedder, **kw):
    catalog, index = Catalog(workspace / "catalog.duckdb"), SubchunkIndex(workspace / "lancedb")
    settings = IngestSettings(sources=[str(s) for s in sources], **kw)
    publish_documents(catalog, settings)
    publish_units(catalog, default_counter(), settings)
    publish_index(catalog, index, embedder.encode, default_counter(), settings)
    return catalog, index


@pytest.fixture(scope="module")
def sample(published_sample):
    return published_sample


# One SharedCache per writer catalog, kept across snapshots as a server keeps it: what it holds is keyed by what never
# changes (texts by content hash, a unit version's rows, vectors by table version), while each snapshot reads the
# catalog's current members and ACLs afresh, so a change made inside an open transaction is still seen. Without it
# every example of the properties below re-read the index and the texts (~0.03 s of each retrieval).
_SHARED: "weakref.WeakKeyDictionary[Catalog, SharedCache]" = weakref.WeakKeyDictionary()


def uncommitted(catalog: Catalog, index: SubchunkIndex) -> Snapshot:
    """A snapshot over the writer's own connection: it sees changes of an open transaction, then rolls back."""
    return Snapshot(read_pointer(catalog.path.rsplit("/", 1)[0]), catalog, index,
                    _SHARED.setdefault(catalog, SharedCache()))


def retrieve(sample, embedder, question, groups, budget=2000, method="longrag", config=None):
    """A registered method as the groups, over the sample's writer connection; `config` replaces LongRAG's."""
    return registered(method).run(uncommitted(*sample), Request(Caller(frozenset(groups)), question, budget),
                                  Tools(embedder, default_counter(), longrag=config))


def test_unit_score_is_its_best_subchunk_and_ties_break_by_unit_key():
    hits = [Hit("u-b@1", "d1", 0, 0, 5, 0.5), Hit("u-a@1", "d2", 0, 0, 5, 0.7), Hit("u-b@1", "d3", 0, 0, 5, 0.7),
            Hit("u-c@2", "d4", 0, 0, 5, 0.2)]
    assert list(maxp(hits).items()) == [("u-a@1", 0.7), ("u-b@1", 0.7), ("u-c@2", 0.2)]


@pytest.mark.parametrize("setting", ["hop_merge", "hop_query", "hop_bridges", "link_rule"])
def test_a_misspelt_rule_is_refused_by_name_rather_than_replaced_by_another(setting):
    with pytest.raises(ValueError, match=f"{setting}='rrf': expected one of"):
        LongRAGConfig(**{setting: "rrf"})
    assert dataclasses.replace(LongRAGConfig(), hop_merge="max").hop_merge == "max"


def test_answer_document_ranks_first_with_its_header_and_current_version(sample, embedder):
    result = retrieve(sample, embedder, "Which error code means the gateway cache is full?", ["support"])
    top = result.items[0]
    assert top.doc_id == "error-codes-reference"
    assert top.text.startswith("## ") and f"[{top.doc_id} · version {top.doc_version}]" in top.text
    assert "E-217" in top.text


def test_a_results_json_holds_every_field_of_every_item_as_asdict_gives_them(sample, embedder):
    result = retrieve(sample, embedder, "Which error code means the gateway cache is full?", ["support"])
    out = result.to_json()
    assert len(out["items"]) == len(result.items) > 0
    assert out["items"] == [dataclasses.asdict(i) for i in result.items]
    names = [f.name for f in dataclasses.fields(ContextItem)]
    assert all(list(item) == names for item in out["items"])  # the fields in their order, as the API documents
    assert out["tokens"] == sum(i.tokens for i in result.items) and out["method"] == "longrag"


def test_each_document_appears_once_and_whole(sample, embedder):
    catalog, _ = sample
    result = retrieve(sample, embedder, "offline cache eviction and re-sync after reconnect", ["support"], 8000)
    keys = [(i.doc_id, i.ranges) for i in result.items]
    assert len(keys) == len(set(keys))
    texts = {d.doc_id: d.text for d in catalog.current_documents()}
    for item in result.items:
        (start, end), = item.ranges
        assert item.text.endswith(texts[item.doc_id][start:end] + "\n")


def test_superseded_version_text_never_returned(sample, embedder):
    result = retrieve(sample, embedder, "How many hours does the offline cache hold telemetry?", GROUPS, 8000)
    context = result.context()
    assert "7 days" in context
    assert "72 hours" not in context and all(i.doc_version != "2025" for i in result.items)


def test_deletion_recorded_in_catalog_hides_document_before_any_republish(tmp_path, corpus, embedder):
    catalog, index = publish(tmp_path / "ws", [corpus], embedder)
    reader = Workspace(tmp_path / "ws", embedder=embedder)
    question, support = "Which error code means the gateway cache is full?", Caller(frozenset({"support"}))
    before = reader.retrieve("longrag", support, question, 2000)
    assert "error-codes-reference" in {i.doc_id for i in before.items}
    (corpus / "operations" / "error-codes.md").unlink()
    publish_documents(catalog, IngestSettings(sources=[str(corpus)]))  # catalog only: index untouched
    assert index.table.count_rows("doc_id = 'error-codes-reference'") > 0
    for method in ("longrag", "shortchunk", "elite"):
        after = reader.retrieve(method, support, question, 2000)
        assert after.items and "error-codes-reference" not in {i.doc_id for i in after.items}


def test_acl_revoked_in_catalog_hides_member_even_though_its_unit_is_still_indexed(tmp_path, corpus, embedder):
    catalog, index = publish(tmp_path / "ws", [corpus], embedder)
    catalog.con.execute("UPDATE documents SET acl = ['security-team'] WHERE doc_id = 'edge-offline-cache'")
    catalog.publish_snapshot(catalog.latest_publish())
    result = Workspace(tmp_path / "ws", embedder=embedder).retrieve(
        "longrag", Caller(frozenset({"support"})), "offline cache size and eviction", 8000)
    assert "edge-offline-cache" not in {i.doc_id for i in result.items}
    assert result.items  # its unit's other members are still served


WORDS = ["cache", "firmware", "certificate", "rotation", "log", "reconnect", "antenna", "grounding", "incident",
         "modbus", "error", "ssh", "boot", "commissioning", "partition", "eviction", "batch", "alarm"]


# Titles of sample documents with narrow or revocable ACLs (one of them also has a superseded version).
NAMED = ["Certificate rotation on gateways", "Offline telemetry cache on edge gateways", "Gateway error code reference",
         "Grounding and surge protection", "SSH hardening and service port access", "Support escalation matrix"]


def assert_only_readable_bytes(sample, embedder, groups, words, budget, revoked, method):
    """Run one retrieval with some ACLs revoked in the catalog after indexing; every byte must be readable."""
    catalog, index = sample
    catalog.con.execute("BEGIN")
    try:
        if revoked:
            catalog.con.execute("UPDATE documents SET acl = ['revoked'] WHERE list_contains(?, doc_id)", [sorted(revoked)])
        readable = {d.doc_id: d.text for d in catalog.current_documents() if not set(d.acl).isdisjoint(groups)}
        result = method(sample, groups, " ".join(words), budget)
    finally:
        catalog.con.execute("ROLLBACK")
    assert result.tokens <= budget
    for item in result.items:
        assert item.doc_id in readable
        assert all(readable[item.doc_id][start:end] in item.text for start, end in item.ranges)
        if item.unit_id is not None:  # LongRAG and short chunks: ranges rendered after the header, the last one last
            start, end = item.ranges[-1]
            assert item.text.endswith(readable[item.doc_id][start:end] + "\n")
        assert item.tokens == default_counter().count_one(item.text)
    return result


def _via(method: str, config: LongRAGConfig | None):
    return lambda embedder: lambda sample, groups, question, budget: retrieve(sample, embedder, question, groups,
                                                                             budget, method, config)


# 300 retrievals here; the same oracle (assert_only_readable_bytes) runs 120 more through the hostile corpus below, 150
# through the hybrid (tests/query/test_hybrid.py) and others over HTTP: each retrieval is a real query embedding,
# LanceDB search and catalog read (~0.13 s), so 1,000 here cost two minutes for little more coverage.
@pytest.mark.slow
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(groups=st.sets(st.sampled_from(GROUPS + ["nobody-else"]), min_size=1, max_size=3),
       words=st.lists(st.sampled_from(WORDS), min_size=1, max_size=4),
       budget=st.integers(min_value=50, max_value=9000),
       revoked=st.sets(st.sampled_from(["edge-offline-cache", "error-codes-reference", "install-grounding",
                                        "ssh-hardening", "quick-start-guide", "edge-log-rotation"]), max_size=3),
       method=st.sampled_from([("longrag", None), ("shortchunk", None), ("longrag", LongRAGConfig(hops=1)),
                               ("longrag-extract", None)]),
       named=st.lists(st.sampled_from(NAMED), max_size=2))
def test_no_returned_byte_comes_from_a_document_the_caller_may_not_read(sample, embedder, groups, words, budget,
                                                                        revoked, method, named):
    """Property (rule 1): also when the catalog revoked a member's ACL after its unit was indexed, and when the
    question names a document by its title (rag.retrieval.named)."""
    assert_only_readable_bytes(sample, embedder, groups, named + words, budget, revoked, _via(*method)(embedder))


@pytest.fixture(scope="module")
def hostile_sample(tmp_path_factory, embedder):
    """The sample corpus plus hostile front matter and links out of the folder, ingested with a default ACL."""
    import shutil

    from conftest import SAMPLES
    from hardening.hardening_helpers import HOSTILE_FILES, hostile_corpus

    tmp = tmp_path_factory.mktemp("hostile")
    shutil.copytree(SAMPLES / "corpus", tmp / "corpus")
    hostile_corpus(tmp / "corpus", tmp / "outside")
    catalog, index = publish(tmp / "ws", [tmp / "corpus"], embedder, default_acl=("everyone",))
    quarantined = {p for _, p, _, _ in catalog.quarantine()}
    assert {str(tmp / "corpus" / "hostile" / n) for n in [*HOSTILE_FILES, "escape.md", "escape-dir"]} <= quarantined
    return catalog, index


# 120 retrievals, 40 per method: what only this corpus can show is that a quarantined file, a link out of the folder
# or hostile front matter never reaches a reader (the fixture asserts each is quarantined; the words here aim queries
# at the hostile files). That no byte escapes a caller's groups is the oracle's, run 300 times above and 150 through
# the hybrid; each retrieval here costs ~0.13 s, so 300 spent 40 s of every `make test-fast` on the same evidence.
@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(groups=st.sets(st.sampled_from(GROUPS + ["nobody-else", "x"]), min_size=1, max_size=3),
       words=st.lists(st.sampled_from(WORDS + ["hostile", "marker", "outside", "secret"]), min_size=1, max_size=4),
       budget=st.integers(min_value=50, max_value=9000),
       revoked=st.sets(st.sampled_from(["edge-offline-cache", "error-codes-reference", "ssh-hardening"]), max_size=2),
       method=st.sampled_from(["longrag", "shortchunk", "elite"]))
def test_hostile_front_matter_and_links_never_widen_what_a_caller_reads(hostile_sample, embedder, groups, words,
                                                                        budget, revoked, method):
    """Property (rule 1 with the hostile corpora): nothing quarantined or outside the folder is ever served."""
    from hardening.hardening_helpers import MARKER

    def run(sample, groups_, question, budget_):
        return registered(method).run(uncommitted(*sample), Request(Caller(frozenset(groups_)), question, budget_),
                                      Tools(embedder, default_counter()))

    result = assert_only_readable_bytes(hostile_sample, embedder, groups, words, budget, revoked, run)
    assert MARKER not in result.context()


def test_interleave_takes_the_hops_rank_by_rank_and_keeps_the_first_occurrence():
    from rag.retrieval.context import ContextItem
    from rag.retrieval.longrag import interleave

    def item(doc_id):
        return ContextItem(doc_id, "1", doc_id, "", 1, ((0, 1),), 0.0, "u@1")

    first, second = [item("a"), item("b"), item("c")], [item("x"), item("a"), item("y"), item("z")]
    assert [i.doc_id for i in interleave([first, second])] == ["a", "x", "b", "c", "y", "z"]
    assert [i.doc_id for i in interleave([first])] == ["a", "b", "c"]


BRIDGE = [
    ("dai", "Dai Jitao", "Dai Jitao was a journalist and an early member of the Kuomintang. He was born in "
                         "Guanghan, in Sichuan, and worked in Shanghai for most of his life."),
    ("sichuan", "Sichuan Province", "Sichuan lies in southwest China. Its food is known for bold flavours, garlic, "
                                    "chili and the Sichuan pepper."),
] + [(f"d{i}", name, f"{name} was a journalist famous for his books on the cuisine of the province where he was "
                     f"born, {place}.")
     for i, (name, place) in enumerate([("Arne Olsen", "Telemark"), ("Pedro Ruiz", "Cusco"), ("Jan Novak", "Moravia"),
                                        ("Tom Price", "Gwynedd"), ("Luca Bruni", "Tuscany")])]


@pytest.mark.parametrize("hop_query", ["novel", "names", "residual"])
def test_the_second_hop_brings_in_the_document_the_first_hop_names(tmp_path, embedder, hop_query):
    """The bridge (Sichuan) is in Dai Jitao's document, not in the question: only a second query can find it."""
    import json

    (tmp_path / "docs.jsonl").write_text("\n".join(json.dumps({"doc_id": d, "title": t, "text": x})
                                                   for d, t, x in BRIDGE) + "\n")
    sample = publish(tmp_path / "ws", [tmp_path / "docs.jsonl"], embedder, default_acl=("bench",))
    question = "What is the cuisine of the province where the journalist Dai Jitao was born famous for?"
    budget = 2 * max(default_counter().count([f"## {t}\n[{d} · version 1]\n{x}\n" for d, t, x in BRIDGE])) + 10
    one = retrieve(sample, embedder, question, ["bench"], budget, config=LongRAGConfig(hops=1))
    two = retrieve(sample, embedder, question, ["bench"], budget,
                   config=LongRAGConfig(hops=2, hop_query=hop_query, hop_seeds=1))
    assert [i.doc_id for i in one.items][0] == "dai" and "sichuan" not in {i.doc_id for i in one.items}
    assert {i.doc_id for i in two.items} == {"dai", "sichuan"} and two.trace["queries"] == 2
    branched = retrieve(sample, embedder, question, ["bench"], budget,
                        config=LongRAGConfig(hops=2, hop_query=hop_query, hop_seeds=2))
    assert [i.doc_id for i in branched.items] == ["dai", "sichuan"] and branched.trace["queries"] == 3


def test_a_residual_hop_asks_what_the_seed_leaves_open_with_the_names_it_adds_best_sentence_first():
    from rag.retrieval.hop_queries import bridge_query

    title = "Novair International Airways"
    text = ("Novair International Airways was a British charter airline based at London Gatwick. It was part of "
            "the Rank Organisation from 1988.")
    question = "What year did the company Novair International Airways is part of dissolve?"
    assert bridge_query(question, title, text, residual=True, limit=1) == "year company dissolve\nRank Organisation"
    assert bridge_query(question, title, text, residual=False, limit=3) == \
        f"{question}\nRank Organisation British London Gatwick"
    assert bridge_query(question, title, "It was sold.", residual=True, limit=3) is None


def test_a_later_hop_follows_only_documents_the_caller_may_read(tmp_path, embedder):
    """Names from a document the caller may not read never reach a query: its bridge stays out of reach."""
    import json

    acl = {"dai": ["historians"]}
    (tmp_path / "docs.jsonl").write_text("\n".join(json.dumps({"doc_id": d, "title": t, "text": x,
                                                               "acl": acl.get(d, ["bench", "historians"])})
                                                   for d, t, x in BRIDGE) + "\n")
    sample = publish(tmp_path / "ws", [tmp_path / "docs.jsonl"], embedder)
    question = "What is the cuisine of the province where the journalist Dai Jitao was born famous for?"
    historian = retrieve(sample, embedder, question, ["historians"], 4000)
    outsider = retrieve(sample, embedder, question, ["bench"], 4000)
    assert historian.trace["seeds"][0] == "dai"
    assert "dai" not in outsider.trace["seeds"] and "dai" not in {i.doc_id for i in outsider.items}


def test_seeds_copying_one_text_make_one_later_query_embedded_and_searched_once(tmp_path, embedder, monkeypatch):
    """A copy of a document (the same text under another id) makes the same next query as its original: the hop it
    would repeat runs once, and both seeds are still placed."""
    import json

    from rag.retrieval.lexical import LexicalIndex

    copied = [*BRIDGE, ("dai-copy", *BRIDGE[0][1:])]
    (tmp_path / "docs.jsonl").write_text("\n".join(json.dumps({"doc_id": d, "title": t, "text": x})
                                                   for d, t, x in copied) + "\n")
    sample = publish(tmp_path / "ws", [tmp_path / "docs.jsonl"], embedder, default_acl=("bench",))
    embedded, searched = [], []
    search = LexicalIndex.search
    monkeypatch.setattr(LexicalIndex, "search", lambda self, text, *a: searched.append(text) or search(self, text, *a))

    class Counting:
        def __init__(self, inner):
            self.inner = inner

        def encode_query(self, text):
            embedded.append(text)
            return self.inner.encode_query(text)

        def encode_queries(self, texts):
            embedded.extend(texts)
            return self.inner.encode_queries(texts)

        def __getattr__(self, name):
            return getattr(self.inner, name)

    question = "What is the cuisine of the province where the journalist Dai Jitao was born famous for?"
    got = retrieve(sample, Counting(embedder), question, ["bench"], 4000, config=LongRAGConfig(hops=2, hop_seeds=2))
    assert got.trace["seeds"][:2] in (["dai", "dai-copy"], ["dai-copy", "dai"]) and got.trace["queries"] == 3
    assert len(embedded) == len(searched) == 2 and embedded[0] == question and embedded[1] != question
    assert {"dai", "dai-copy", "sichuan"} <= {i.doc_id for i in got.items}
