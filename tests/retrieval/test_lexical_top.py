"""BM25's top k read past the common terms: exactly the scores and the order of one pass over every posting."""
from unittest import mock

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from rag.retrieval import lexical_top
from rag.retrieval.lexical import LexicalIndex, Vocabulary, index_of_parts, postings
from rag.retrieval.lexical_top import K1, B, Question
from rag.text.analysis import check_question, lexical_tokens

# a few words in most documents, many in few: the shape of a real vocabulary
COMMON, RARE = ["gateway", "firmware", "modbus"], [f"w{i}" for i in range(30)]
texts = st.lists(st.one_of(st.sampled_from(COMMON), st.sampled_from(RARE)), min_size=1, max_size=25).map(" ".join)
ACLS = [("pub",), ("ops",), ("pub", "ops"), ("secret",)]


def index_of(parts: list[dict[str, str]], acls: dict[str, tuple[str, ...]]) -> LexicalIndex:
    vocab, built = Vocabulary(), []
    for i, docs in enumerate(parts):
        text_of = {f"h-{i}-{d}": t for d, t in docs.items()}
        built.append(postings(str(i), sorted((d, f"h-{i}-{d}") for d in docs),
                              lambda hs, m=text_of: {h: m[h] for h in hs}, vocab))
    return index_of_parts(built, vocab, acls)


def one_pass(index: LexicalIndex, question: str, limit: int, groups: frozenset[str]) -> dict[str, float]:
    """The specification: every posting of the question's terms scored into an array per part, then the top."""
    terms = index.vocab.known(lexical_tokens(check_question(question)))
    counted = index.counted(groups)
    if not counted.documents or not len(terms):
        return {}
    found, df = [], np.zeros(len(terms), dtype=np.int64)
    for part, mask in zip(index.parts, counted.masks):
        at = np.flatnonzero(terms < part.counts.shape[1])
        spans = [(part.counts.indptr[t], part.counts.indptr[t + 1]) for t in terms[at]]
        rows = np.concatenate([part.counts.indices[a:b] for a, b in spans] or [np.zeros(0, np.int32)])
        tf = np.concatenate([part.counts.data[a:b] for a, b in spans] or [np.zeros(0, np.float32)])
        which = np.repeat(at, [b - a for a, b in spans])
        kept = mask[rows]
        rows, tf, which = rows[kept], tf[kept], which[kept]
        df += np.bincount(which, minlength=len(terms))
        found.append((rows, tf, which))
    idf = np.log(1 + (counted.documents - df + 0.5) / (df + 0.5))
    avgdl = counted.length / counted.documents
    ranked = []
    for part, (rows, tf, which) in zip(index.parts, found):
        weights = idf[which] * tf
        weights /= tf + K1 * (1 - B + B * part.lengths[rows] / avgdl)
        scores = np.bincount(rows, weights=weights, minlength=len(part.doc_ids))
        ranked += [(-float(s), part.doc_ids[d]) for d, s in enumerate(scores.tolist()) if s > 0]
    top = sorted(ranked)[:limit]
    return {d: -s / -top[0][0] for s, d in top}


@given(st.dictionaries(st.sampled_from([f"d{i:03d}" for i in range(120)]),
                       st.tuples(texts, st.sampled_from(ACLS)), min_size=1, max_size=120),
       st.integers(1, 3), texts, st.integers(1, 30), st.sampled_from([frozenset({"pub"}), frozenset({"pub", "ops"})]),
       st.integers(1, 12))
@settings(max_examples=150, deadline=None)
def test_reading_past_the_long_terms_gives_every_score_and_place_of_one_pass(corpus, n_parts, question, limit, groups,
                                                                            long_from):
    """Bit for bit: the same documents, in the same order, with the same floats, whichever terms are long."""
    ids = sorted(corpus)
    parts = [p for p in ({d: corpus[d][0] for j, d in enumerate(ids) if j % n_parts == n} for n in range(n_parts)) if p]
    index = index_of(parts, {d: acl for d, (_, acl) in corpus.items()})
    with mock.patch.object(lexical_top, "LONG_MIN", long_from):
        got = index.search(question, limit, groups)
    assert list(got.items()) == list(one_pass(index, question, limit, groups).items())


def test_a_term_in_most_documents_is_looked_up_for_the_few_found_not_read_whole():
    docs = {f"d{i:03d}": "gateway firmware" + (" modbus" if i < 3 else "") for i in range(200)}
    index = index_of([docs], {d: ("pub",) for d in docs})
    with mock.patch.object(lexical_top, "LONG_MIN", 50):
        question = Question(index, index.vocab.known(["modbus", "gateway"]), index.counted(frozenset({"pub"})))
        best = question.best(2)
    assert [d for _, d in sorted(best)] == ["d000", "d001", "d002"]  # the three with both words, ties kept
    assert 1 not in question.read[0]  # "gateway": its counts per ACL set gave its idf, the three found their tf
    assert (0, int(index.vocab.known(["gateway"])[0])) in index._term_sets


def test_a_document_of_common_words_alone_still_wins_when_it_scores_best():
    """The found documents' best is below what two common words can add: they are read, and their document wins."""
    filler = " ".join(RARE[:8])
    docs = {f"d{i:03d}": (f"gateway firmware {filler}" if i % 2 else filler) for i in range(160)}
    docs["long"] = "modbus " + " ".join(RARE * 3)
    docs["short"] = "gateway " * 4 + "firmware " * 4
    index = index_of([docs], {d: ("pub",) for d in docs})
    with mock.patch.object(lexical_top, "LONG_MIN", 50):
        got = index.search("modbus gateway firmware", 1, frozenset({"pub"}))
    assert got == one_pass(index, "modbus gateway firmware", 1, frozenset({"pub"})) == {"short": 1.0}
