"""As-of reads rank with the BM25 channel over the texts current then: as good as a current read was at that time."""
from datetime import datetime, timezone
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipelines.ingest_run import run_ingest
from rag.query.methods import METHODS
from rag.query.workspace import Workspace
from rag.retrieval.callers import Caller
from rag.retrieval.lexical import LexicalIndex, Vocabulary, index_of_parts, postings
from rag.retrieval.lexical_past import past_lexical, past_view
from rag.retrieval.longrag import LongRAGConfig, _lexical
from rag.sources.benchmarks import load_questions
from rag.store.settings import IngestSettings
from tests.conftest import SAMPLES

WORDS = ["gateway", "firmware", "modbus", "cache", "offline", "heartbeat", "tunnel", "rotation", "secure", "boot"]
texts = st.lists(st.sampled_from(WORDS), min_size=1, max_size=20).map(" ".join)
GROUPS = ["field-engineering", "support", "partners", "security-team", "everyone"]
USERS = yaml.safe_load((SAMPLES / "users.yaml").read_text())
QUESTIONS = load_questions(SAMPLES / "questions.jsonl")
AS_OF_METHODS = sorted(name for name, m in METHODS.items() if m.as_of)
ANTENNAS = "installation/antennas.md"
OLD_WORD, NEW_WORD = "zorbulite", "quandrex"  # in no other text, so BM25 alone finds them


def index_of(parts: list[dict[str, str]], vocab: Vocabulary) -> LexicalIndex:
    """BM25 over these partitions (doc_id → text), each text's content hash the text itself."""
    return index_of_parts([postings(str(i), sorted((d, t) for d, t in docs.items()), lambda hs: {h: h for h in hs},
                                    vocab) for i, docs in enumerate(parts) if docs], vocab, None)


@given(st.dictionaries(st.sampled_from([f"d{i:02d}" for i in range(30)]), texts, min_size=1, max_size=30),
       st.dictionaries(st.sampled_from([f"d{i:02d}" for i in range(30)]), st.one_of(st.none(), texts), max_size=30),
       st.integers(1, 3), texts, st.integers(1, 30))
@settings(max_examples=150, deadline=None)
def test_a_past_view_of_the_current_index_scores_exactly_as_an_index_of_the_texts_of_then(then, edits, n_parts,
                                                                                          question, limit):
    """Edits (None deletes) turn the texts of then into the current ones; the view of the current index with the
    changed documents left out and their texts of then added gives an index of then's N, idf, lengths and scores."""
    now = {d: t for d, t in {**then, **edits}.items() if t is not None}
    current = index_of([{d: t for j, (d, t) in enumerate(sorted(now.items())) if j % n_parts == p}
                        for p in range(n_parts)], Vocabulary())
    newer = [(d, t) for d, t in sorted(now.items()) if then.get(d) != t]
    older = [(d, t, ("g",)) for d, t in sorted(then.items()) if now.get(d) != t]
    view = past_view(current, newer, older, lambda hs: {h: h for h in hs})
    fresh = index_of([then], Vocabulary())
    assert view.documents() == fresh.documents() == len(then)
    assert view.search(question, limit) == fresh.search(question, limit)
    if not newer and not older:
        assert view is current  # nothing changed: the current index, at no cost


def test_a_past_view_reads_only_the_texts_of_then_and_the_current_index_is_left_as_it_was():
    vocab, read = Vocabulary(), []
    current = index_of([{"a": "gateway cache", "b": "modbus tunnel", "c": "secure boot"}], vocab)

    def text_of(hashes):
        read.extend(hashes)
        return {h: h for h in hashes}

    view = past_view(current, [("b", "modbus tunnel")], [("b", "heartbeat rotation", ("g",))], text_of)
    assert read == ["heartbeat rotation"]  # the current text's tokens were kept by hash
    assert set(view.search("modbus heartbeat", 10)) == {"b"} and set(current.search("modbus", 10)) == {"b"}
    assert current.search("heartbeat", 10) == {}


def publish_antennas(corpus: Path, ws: Path, word: str, version: str, acl: str) -> None:
    """Give the antennas document this version, ACL and one sentence with `word`, then ingest the corpus."""
    path = corpus / ANTENNAS
    head, body = path.read_text().split("\n---\n", 1)
    head = "\n".join("version: " + f'"{version}"' if line.startswith("version:") else
                     f"acl: [{acl}]" if line.startswith("acl:") else line for line in head.splitlines())
    body = body.split("\n\nThe spare antenna kit")[0]
    path.write_text(f"{head}\n---\n{body}\n\nThe spare antenna kit is called the {word} pack.\n")
    run_ingest(IngestSettings(workspace=str(ws), sources=[str(corpus)]))


def caller_of(question) -> Caller:
    asked = question.asked_as
    return Caller(frozenset(USERS[asked] if isinstance(asked, str) else asked))


def ranking(result) -> list[tuple]:
    return [(i.doc_id, i.doc_version, i.ranges) for i in result.items]


def every_ranking(reader: Workspace, as_of: datetime | None, methods: list[str]) -> dict[tuple, list]:
    """Each sample question as its user through each method at 2K: packed members and their scores."""
    out = {}
    for q in QUESTIONS:
        for name in methods:
            result = reader.retrieve(name, caller_of(q), q.question, 2000, as_of=as_of)
            out[(q.qid, name)] = [*zip(ranking(result), (i.score for i in result.items))]
    return out


def assert_same(got: dict, want: dict) -> None:
    """The same members, ranges and scores in the same order (both reads score the same in-memory rows)."""
    assert got.keys() == want.keys()
    for key in want:
        assert got[key] == want[key], key


@pytest.fixture(scope="module")
def history(tmp_path_factory, embedder):
    """A workspace published twice: the antennas document held OLD_WORD and admitted partners, then NEW_WORD and
    field engineering only. What a current read gave after the first publish, and the time of each publish."""
    root = tmp_path_factory.mktemp("asof")
    corpus, ws = root / "corpus", root / "ws"
    corpus.mkdir()
    for path in (SAMPLES / "corpus").rglob("*.md"):
        (corpus / path.relative_to(SAMPLES / "corpus")).parent.mkdir(parents=True, exist_ok=True)
        (corpus / path.relative_to(SAMPLES / "corpus")).write_text(path.read_text())
    publish_antennas(corpus, ws, OLD_WORD, "2026", "field-engineering, partners")
    reader = Workspace(ws, embedder=embedder)
    first = every_ranking(reader, None, ["longrag", "longrag-1hop"])
    first_at = reader.resolve_as_of("publish:1")
    reader.close()
    publish_antennas(corpus, ws, NEW_WORD, "2099", "field-engineering")
    reader = Workspace(ws, embedder=embedder)
    yield reader, first, first_at
    reader.close()


def test_an_as_of_read_after_the_newest_publish_ranks_exactly_as_a_current_read_in_every_as_of_method(history):
    reader, _, _ = history
    now = datetime.now(timezone.utc).replace(tzinfo=None)
    assert_same(every_ranking(reader, now, AS_OF_METHODS), every_ranking(reader, None, AS_OF_METHODS))


def test_an_as_of_read_of_a_past_publish_ranks_as_a_current_read_did_then(history):
    reader, first, first_at = history
    assert_same(every_ranking(reader, first_at, ["longrag", "longrag-1hop"]), first)


def lexical_channel(reader: Workspace, groups: frozenset[str], question: str, as_of: datetime | None) -> dict:
    snap = reader.snapshot()
    config = LongRAGConfig()
    if as_of is None:
        return _lexical(snap, Caller(groups), question, config)
    return _lexical(snap, Caller(groups), question, config, snap.lexical_at(as_of, snap.vectors_at(as_of)))


def test_a_word_only_the_old_version_held_ranks_it_as_of_then_and_not_now_and_the_new_words_the_other_way(history):
    reader, _, first_at = history
    field = Caller(frozenset({"field-engineering"}))
    for word, as_of, version in ((OLD_WORD, first_at, "2026"), (NEW_WORD, None, "2099")):
        question = f"What is the {word} pack?"
        top = reader.retrieve("longrag", field, question, 1000, as_of=as_of).items[0]
        assert (top.doc_id, top.doc_version) == ("install-antennas", version) and word in top.text
        assert lexical_channel(reader, field.groups, question, as_of)["install-antennas"] == 1.0  # the best
    for word, as_of in ((OLD_WORD, None), (NEW_WORD, first_at)):
        question = f"What is the {word} pack?"
        assert lexical_channel(reader, field.groups, word, as_of) == {}  # no text of that time holds it
        result = reader.retrieve("longrag", field, question, 4000, as_of=as_of)
        assert word not in result.context()


@given(st.sets(st.sampled_from(GROUPS), min_size=1),
       st.lists(st.sampled_from([OLD_WORD, NEW_WORD, "antenna", "cache", "certificate", "firmware", "gateway",
                                 "rotation", "audit", "partner"]), min_size=1, max_size=4))
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_an_as_of_read_scores_and_returns_only_what_the_caller_could_read_then(history, groups, words):
    """The reference is each document's ACL then, as the catalog's members current then carry it."""
    reader, _, first_at = history
    groups, question = frozenset(groups), "Which " + " ".join(words) + "?"
    acl_then = {m.doc_id: m.acl for m in reader.snapshot().catalog.current_members(None, first_at)}
    scored = lexical_channel(reader, groups, question, first_at)
    assert all(not groups.isdisjoint(acl_then[d]) for d in scored)
    everything = lexical_channel(reader, frozenset(GROUPS), question, first_at)
    assert set(scored) == {d for d in everything if not groups.isdisjoint(acl_then[d])}
    for item in reader.retrieve("longrag", Caller(groups), question, 4000, as_of=first_at).items:
        assert not groups.isdisjoint(acl_then[item.doc_id])
        assert item.doc_id != "install-antennas" or item.doc_version == "2026"


def test_partners_find_the_antennas_document_as_of_when_it_admitted_them_and_not_since(history):
    reader, _, first_at = history
    partners = Caller(frozenset({"partners"}))
    question = f"What is the {OLD_WORD} pack?"
    assert lexical_channel(reader, partners.groups, question, first_at)["install-antennas"] == 1.0
    assert "install-antennas" in {i.doc_id for i in reader.retrieve("longrag", partners, question, 1000,
                                                                      as_of=first_at).items}
    for word in (OLD_WORD, NEW_WORD):
        question = f"What is the {word} pack?"
        assert lexical_channel(reader, partners.groups, word, None) == {}
        assert "install-antennas" not in {i.doc_id for i in reader.retrieve("longrag", partners, question, 4000).items}


def test_a_time_inside_one_publish_interval_is_read_as_the_catalog_had_it_whatever_was_asked_before(history, embedder):
    """The second publish's documents step replaced the antennas document before its index step finished: a time
    between the two has the first publish's index (one past state) with the new version current. Each time is read
    as a fresh reader reads it, whichever of the two was asked first."""
    reader, _, first_at = history
    versions, _ = reader.snapshot().catalog.history("install-antennas")
    replaced = next(v.valid_from for v in versions if v.version == "2099")
    assert first_at < replaced < reader.resolve_as_of("publish:2")
    field = Caller(frozenset({"field-engineering"}))
    question = OLD_WORD

    def read(ws: Workspace, as_of: datetime) -> tuple:
        return (ranking(ws.retrieve("longrag", field, question, 2000, as_of=as_of)),
                lexical_channel(ws, field.groups, question, as_of))

    fresh = {}
    for when in (first_at, replaced):
        ws = Workspace(reader.root, embedder=embedder)
        fresh[when] = read(ws, when)
        ws.close()
    assert "install-antennas" in fresh[first_at][1] and fresh[replaced][1] == {}  # the old text, then the new one
    for order in ((first_at, replaced), (replaced, first_at)):
        ws = Workspace(reader.root, embedder=embedder)
        assert {when: read(ws, when) for when in order} == fresh
        ws.close()


class TextsDropped:
    """The workspace's catalog with the texts of some content hashes dropped, as past the as-of retention."""

    def __init__(self, catalog, dropped: set[str]):
        self.catalog, self.dropped = catalog, dropped

    def versions_changed_since(self, as_of):
        return self.catalog.versions_changed_since(as_of)

    def texts_by_hash(self, hashes):
        return {h: t for h, t in self.catalog.texts_by_hash(hashes).items() if h not in self.dropped}


def test_a_text_of_then_past_the_retention_fails_the_read_in_one_line_naming_the_time_and_the_setting(history):
    reader, _, first_at = history
    snap = reader.snapshot()
    _, older = snap.catalog.versions_changed_since(first_at)
    assert [d for d, _, _ in older] == ["install-antennas"]
    with pytest.raises(LookupError) as err:
        past_lexical(snap.lexical, TextsDropped(snap.catalog, {older[0][1]}), first_at)
    message = str(err.value)
    assert "\n" not in message and message.startswith(f"as of {first_at:%Y-%m-%d %H:%M:%S}: the text of a version")
    assert "RAG_INDEX_RETENTION_DAYS" in message
