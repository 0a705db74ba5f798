"""BM25 over partitions: the same scores bm25s gives one index of all the documents, rebuilt per partition."""
import bm25s
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from rag.retrieval.lexical import (
    MAX_PARTS,
    LexicalIndex,
    Vocabulary,
    index_of_parts,
    lexical_arrays,
    lexical_index,
    lexical_of,
    postings,
)
from rag.retrieval.row_mask import RowMask
from rag.text.analysis import lexical_tokens

WORDS = ["gateway", "firmware", "modbus", "cache", "offline", "heartbeat", "tunnel", "rotation", "secure", "boot"]
texts = st.lists(st.sampled_from(WORDS), min_size=1, max_size=25).map(" ".join)


def index_of(parts: list[dict[str, str]], acls: dict[str, tuple[str, ...]] | None = None) -> LexicalIndex:
    vocab = Vocabulary()
    built = []
    for i, docs in enumerate(parts):
        pairs = sorted((d, f"h-{i}-{d}") for d in docs)
        text_of = {f"h-{i}-{d}": t for d, t in docs.items()}
        built.append(postings(str(i), pairs, lambda hs, m=text_of: {h: m[h] for h in hs}, vocab))
    return index_of_parts(built, vocab, acls)


@given(st.lists(texts, min_size=2, max_size=30), st.integers(1, 4), texts)
@settings(max_examples=80, deadline=None)
def test_partitioned_scores_equal_one_bm25s_index_of_every_document(corpus, n_parts, question):
    ids = [f"d{i:03d}" for i in range(len(corpus))]
    parts = [{d: t for j, (d, t) in enumerate(zip(ids, corpus)) if j % n_parts == p} for p in range(n_parts)]
    ours = index_of([p for p in parts if p]).search(question, len(ids))

    reference = bm25s.BM25()
    reference.index([lexical_tokens(t) for t in corpus], show_progress=False)
    got, scores = reference.retrieve([lexical_tokens(question)], k=len(ids), show_progress=False)
    raw = {ids[i]: float(s) for i, s in zip(got[0], scores[0]) if s > 0}
    best = max(raw.values(), default=0.0)
    want = {d: s / best for d, s in raw.items()} if best > 0 else {}
    assert set(ours) == set(want)
    assert np.allclose([ours[d] for d in sorted(want)], [want[d] for d in sorted(want)], rtol=1e-5)


@given(st.lists(texts, min_size=40, max_size=300), st.integers(1, 3), texts, st.integers(1, 30))
@settings(max_examples=40, deadline=None)
def test_the_best_few_documents_are_the_whole_rankings_first_ties_by_doc_id(corpus, n_parts, question, limit):
    """Ten words make many equal scores: the cut keeps the documents a ranking of all would put first."""
    ids = [f"d{i:03d}" for i in range(len(corpus))]
    parts = [{d: t for j, (d, t) in enumerate(zip(ids, corpus)) if j % n_parts == p} for p in range(n_parts)]
    index = index_of([p for p in parts if p])
    whole = sorted(index.search(question, len(ids)).items(), key=lambda kv: (-kv[1], kv[0]))
    assert list(index.search(question, limit).items()) == whole[:limit]


@given(st.dictionaries(st.sampled_from([f"d{i:02d}" for i in range(40)]),
                       st.tuples(texts, st.sampled_from([("pub",), ("secret",), ("pub", "ops"), ("ops",)])),
                       min_size=1, max_size=40),
       st.integers(1, 3), texts, st.integers(1, 40))
@settings(max_examples=150, deadline=None)
def test_a_caller_gets_the_scores_of_an_index_of_the_documents_it_may_read_alone(corpus, n_parts, question, limit):
    """N, document frequencies, the mean length, the candidates and the best score that scales them are the
    readable documents' only: what "pub" may not read neither moves a score nor takes a place among the best."""
    acls = {d: acl for d, (_, acl) in corpus.items()}
    ids = sorted(corpus)
    parts = [{d: corpus[d][0] for j, d in enumerate(ids) if j % n_parts == p} for p in range(n_parts)]
    readable = {d: corpus[d][0] for d in ids if "pub" in acls[d]}
    alone = index_of([readable]).search(question, limit) if readable else {}
    index = index_of([p for p in parts if p], acls)
    assert index.search(question, limit, frozenset({"pub"})) == alone
    # a caller's group set keeps its readable ACL sets, nothing as long as the documents
    assert all(isinstance(m, RowMask) for m in index.counted(frozenset({"pub"})).masks)


@given(st.lists(st.tuples(texts, st.sampled_from([("pub",), ("ops",), ("pub", "ops")])), min_size=1, max_size=30),
       st.integers(1, 3), texts)
@settings(max_examples=60, deadline=None)
def test_a_caller_who_may_read_everything_gets_the_whole_index_scores(corpus, n_parts, question):
    """The evaluation's callers read every document: their scores are those of the whole index, as they were."""
    ids = [f"d{i:02d}" for i in range(len(corpus))]
    parts = [{d: t for j, (d, (t, _)) in enumerate(zip(ids, corpus)) if j % n_parts == p} for p in range(n_parts)]
    index = index_of([p for p in parts if p], {d: acl for d, (_, acl) in zip(ids, corpus)})
    assert index.search(question, 100, frozenset({"pub", "ops"})) == index_of([p for p in parts if p]).search(
        question, 100)


def test_a_question_sharing_no_word_with_the_documents_finds_nothing():
    index = index_of([{"a": "gateway firmware", "b": "modbus cache"}])
    assert index.search("tunnel rotation", 10) == {}


def test_an_unchanged_text_is_tokenised_once_however_often_its_partition_is_rebuilt():
    vocab, calls = Vocabulary(), []

    def text_of(hashes):
        calls.append(list(hashes))
        return {h: "gateway firmware rotation" for h in hashes}

    first = postings("1", [("a", "h1")], text_of, vocab)
    second = postings("2", [("a", "h1"), ("b", "h2")], text_of, vocab, first.texts)
    postings("3", [("b", "h2")], text_of, vocab, second.texts)
    assert calls == [["h1"], ["h2"]]


@given(st.lists(st.tuples(st.integers(0, 6), st.integers(0, 9)), max_size=60))
@settings(max_examples=80, deadline=None)
def test_term_columns_list_each_terms_documents_in_order_with_their_counts(pairs):
    from collections import Counter

    from rag.retrieval.lexical import term_columns

    docs = np.array([d for d, _ in pairs], dtype=np.int64)
    terms = np.array([t for _, t in pairs], dtype=np.int64)
    cols = term_columns(docs, terms, (7, 12))
    counted = Counter(pairs)
    for term in range(12):
        lo, hi = cols.indptr[term], cols.indptr[term + 1]
        expected = sorted((d, n) for (d, t), n in counted.items() if t == term)
        assert list(zip(cols.indices[lo:hi].tolist(), cols.data[lo:hi].tolist())) == expected


def test_a_posting_holds_its_document_and_count_in_eight_bytes_and_a_text_its_token_ids_in_four_each():
    """The postings and the texts' token ids are the read state's largest arrays at 1M sub-chunks."""
    vocab = Vocabulary()
    corpus = {f"h{i}": " ".join(WORDS[: 1 + i % len(WORDS)] * 3) for i in range(50)}
    built = postings("p", [(f"d{i}", f"h{i}") for i in range(50)], lambda hs: {h: corpus[h] for h in hs}, vocab)
    assert built.counts.indices.nbytes + built.counts.data.nbytes == 8 * len(built.counts.indices)
    assert built.counts.data.sum() == sum(len(lexical_tokens(t)) for t in corpus.values())
    assert all(ids.nbytes == 4 * len(ids) for ids in built.texts.values())


class History:
    """The two reads lexical_index makes of a catalog, over documents that change between snapshots."""

    def __init__(self):
        self.docs: dict[str, tuple[str, tuple[str, ...]]] = {}  # doc_id → (text, ACL)

    def current_hashes(self) -> dict[str, list[tuple[str, str]]]:
        return {"": sorted((d, f"h-{text}") for d, (text, _) in self.docs.items())}

    def texts_by_hash(self, hashes: list[str]) -> dict[str, str]:
        return {h: h[2:] for h in hashes}

    def acls(self) -> dict[str, tuple[str, ...]]:
        return {d: acl for d, (_, acl) in self.docs.items()}


changes = st.lists(st.tuples(st.integers(0, 11), st.one_of(st.none(), texts), st.sampled_from([("a",), ("b",),
                                                                                              ("a", "b")])),
                   min_size=1, max_size=8)


@given(st.lists(changes, min_size=1, max_size=14), texts, st.integers(1, 12), st.booleans())
@settings(max_examples=40, deadline=None)
def test_an_index_built_snapshot_by_snapshot_scores_as_one_built_at_once(history, question, limit, mapped):
    """Documents added, edited, deleted and re-added, ACLs changed, publish after publish: each snapshot's index keeps
    the last one's parts (its versions no longer current counted for nobody) and adds a part of what they lack, and
    every caller gets exactly the scores an index of the current documents built at once gives."""
    catalog, index = History(), None
    for step in history:
        for doc, text, acl in step:
            if text is None:
                catalog.docs.pop(f"d{doc}", None)
            else:
                catalog.docs[f"d{doc}"] = (text, acl)
        index = lexical_index(catalog, catalog.acls(), index)
        if mapped:  # as a worker gets it from the read-state files: the arrays, not the objects
            index = lexical_of(lexical_arrays(index))
        assert len(index.parts) <= MAX_PARTS
        whole = lexical_index(catalog, catalog.acls())
        for groups in (frozenset({"a"}), frozenset({"b"}), frozenset({"a", "b"})):
            assert index.search(question, limit, groups) == whole.search(question, limit, groups)
            assert index.documents(groups) == whole.documents(groups)


def test_an_edit_keeps_the_parts_and_adds_one_of_the_new_version_until_dead_rows_or_parts_pile_up():
    catalog = History()
    catalog.docs = {f"d{i}": (f"gateway firmware {WORDS[i]}", ("a",)) for i in range(10)}
    first = lexical_index(catalog, catalog.acls())
    catalog.docs["d3"] = ("modbus tunnel", ("a",))
    second = lexical_index(catalog, catalog.acls(), first)
    assert second.parts[0] is first.parts[0] and list(second.parts[1].doc_ids) == ["d3"]
    assert second.acl_ids[0][list(first.parts[0].doc_ids).index("d3")] == -1  # the old version counts for nobody
    index = second
    for n in range(MAX_PARTS):
        catalog.docs[f"d{n}"] = (f"secure boot {n}", ("a",))
        index = lexical_index(catalog, catalog.acls(), index)
    assert len(index.parts) == 1 and (index.acl_ids[0] >= 0).all()  # counted again as one
