"""Lexical channel: BM25 over the current documents' titles and text (rag.text.analysis's tokens), exact across partitions.

bm25s scores every (document, term) pair when it indexes, so each publish cost a full rebuild: 47 s for 80K
documents, during which the first query on the new snapshot waited. Here each partition keeps a sparse matrix
of term counts, reused while its documents are unchanged, and its texts' token ids by content hash, which its next
build reuses; a query scores only the postings of its terms, with N, document frequencies and the mean length taken
over every partition, so the scores are bm25s's (method "lucene", k1 = 1.5, b = 0.75) for the whole workspace.
"""
from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from rag.retrieval.vectors import top_positions
from rag.store.catalog import Catalog
from rag.text.analysis import check_question, lexical_tokens

K1, B = 1.5, 0.75
# Token ids, a posting's document and its count in 4 bytes each: the postings and every text's token ids are the
# read state's largest arrays (a vocabulary and a partition's documents stay far below 2^31; a count in float32 is
# exact below 2^24 and promotes to float64 in scoring, so scores are unchanged)
TOKEN, COUNT = np.int32, np.float32
# Texts read and tokenised at a time: all of them at once (80K texts at 110K sub-chunks) left the process ~5 times
# their size resident after they were freed (the allocators keep what the strings and token lists held)
TEXTS_AT_ONCE = 8192


class Vocabulary:
    """Token → id for this process."""

    def __init__(self):
        self.ids: dict[str, int] = {}

    def encode(self, tokens: list[str]) -> np.ndarray:
        return np.fromiter((self.ids.setdefault(t, len(self.ids)) for t in tokens), TOKEN, len(tokens))

    def known(self, tokens: list[str]) -> np.ndarray:
        return np.array([self.ids[t] for t in tokens if t in self.ids], TOKEN)


@dataclass(frozen=True)
class TermColumns:
    """Term counts by term (compressed sparse columns): term t's documents are indices[indptr[t]:indptr[t + 1]],
    in document order, with their counts in data. numpy alone: importing scipy.sparse cost a cold query ~0.5 s."""

    indptr: np.ndarray
    indices: np.ndarray
    data: np.ndarray
    shape: tuple[int, int]


def term_columns(docs: np.ndarray, terms: np.ndarray, shape: tuple[int, int]) -> TermColumns:
    """(document, term) occurrences counted per pair, grouped by term, documents ascending within a term."""
    # one int64 key per occurrence, sorted in place: a lexsort of both columns held three more copies of them
    keys = terms.astype(np.int64) * shape[0]
    keys += docs
    keys.sort()
    first = np.ones(len(keys), dtype=bool)
    np.not_equal(keys[1:], keys[:-1], out=first[1:])
    starts = np.flatnonzero(first)
    del first
    pairs = keys[starts]
    counts = np.diff(np.append(starts, len(keys))).astype(COUNT)
    del keys, starts
    indptr = np.zeros(shape[1] + 1, dtype=np.int64)
    np.cumsum(np.bincount(pairs // shape[0], minlength=shape[1]), out=indptr[1:])
    return TermColumns(indptr, (pairs % shape[0]).astype(TOKEN), counts, shape)


@dataclass(frozen=True)
class Postings:
    """One partition's current documents: term counts (documents × vocabulary, by column), lengths, and their texts'
    token ids by content hash (a version's text never changes)."""

    fingerprint: str
    doc_ids: list[str]
    counts: TermColumns
    lengths: np.ndarray
    texts: dict[str, np.ndarray]

    def scores(self, terms: np.ndarray, idf: np.ndarray, norm: np.ndarray) -> np.ndarray:
        """Each document's BM25 score: every term's postings at once, summed per document in term order."""
        inside = terms < self.counts.shape[1]
        terms, idf = terms[inside], idf[inside]
        spans = list(zip(self.counts.indptr[terms].tolist(), self.counts.indptr[terms + 1].tolist()))
        # a term's postings are one slice: joining the slices copies them once, where a gather through an index
        # array of every posting read them twice (the postings grow with the corpus, the terms do not)
        rows = np.concatenate([self.counts.indices[lo:hi] for lo, hi in spans] or [np.zeros(0, TOKEN)])
        tf = np.concatenate([self.counts.data[lo:hi] for lo, hi in spans] or [np.zeros(0, COUNT)])
        weights = np.repeat(idf, [hi - lo for lo, hi in spans])
        weights *= tf
        weights /= tf + norm[rows]
        return np.bincount(rows, weights=weights, minlength=len(self.doc_ids))

    def df(self, terms: np.ndarray) -> np.ndarray:
        inside = terms < self.counts.shape[1]
        out = np.zeros(len(terms))
        terms, indptr = terms[inside], self.counts.indptr  # not a diff of the whole vocabulary's pointers
        out[inside] = indptr[terms + 1] - indptr[terms]
        return out


def postings(fingerprint: str, docs: list[tuple[str, str]], text_of, vocab: Vocabulary,
             known: Mapping[str, np.ndarray] | None = None) -> Postings:
    """Postings of (doc_id, content hash) pairs, the token ids of texts in `known` reused; `text_of(hashes)` gives
    the others' texts."""
    # Only these documents' token ids are kept: a cache of every text ever tokenised grew with each version
    # published while the process lived (the versions it replaced and their token ids stayed)
    known = known or {}
    texts = {h: known[h] for _, h in docs if h in known}
    missing = list(dict.fromkeys(h for _, h in docs if h not in texts))
    for lo in range(0, len(missing), TEXTS_AT_ONCE):
        for h, text in text_of(missing[lo:lo + TEXTS_AT_ONCE]).items():
            texts[h] = vocab.encode(lexical_tokens(text))
    rows = [texts[h] for _, h in docs]
    lengths = np.array([len(r) for r in rows], dtype=np.float64)
    cols = np.concatenate(rows) if rows else np.zeros(0, TOKEN)
    which = np.repeat(np.arange(len(rows), dtype=TOKEN), lengths.astype(np.int64))
    counts = term_columns(which, cols, (len(rows), len(vocab.ids)))
    return Postings(fingerprint, [d for d, _ in docs], counts, lengths, texts)


@dataclass
class LexicalIndex:
    """BM25 over the parts' documents. A past state's view (rag.retrieval.lexical_past) also names documents the
    parts hold that it does not count: their postings (`left_out`, out of N, df and lengths) and rows (`hidden`)."""

    parts: list[Postings]
    vocab: Vocabulary
    left_out: Postings | None = None
    hidden: list[np.ndarray] | None = None  # per part, the rows of the documents left out

    def search(self, question: str, limit: int) -> dict[str, float]:
        """doc_id → BM25 score scaled to [0, 1] by the best score for this question."""
        terms = self.vocab.known(lexical_tokens(check_question(question)))
        if not self.documents or not len(terms):
            return {}
        df = sum(p.df(terms) for p in self.parts)
        if self.left_out is not None:
            df = df - self.left_out.df(terms)
        idf = np.log(1 + (self.documents - df + 0.5) / (df + 0.5))
        top: list[tuple[float, str]] = []
        for i, (part, norm) in enumerate(zip(self.parts, self.norms)):
            scores = part.scores(terms, idf, norm)
            if self.hidden is not None:
                scores[self.hidden[i]] = 0.0  # at the floor of the cut: never returned
            hit = top_positions(scores, limit, 0.0)  # ties at the cut are settled by doc id below, whatever the parts
            top += zip((-scores[hit]).tolist(), map(part.doc_ids.__getitem__, hit.tolist()))
        top = sorted(top)[:limit]
        if not top:
            return {}
        best = -top[0][0]
        return {doc_id: -s / best for s, doc_id in top}

    @cached_property
    def documents(self) -> int:
        return sum(len(p.doc_ids) for p in self.parts) - (len(self.left_out.doc_ids) if self.left_out else 0)

    @cached_property
    def norms(self) -> list[np.ndarray]:
        """Per partition, each document's length normalisation (k1 (1 - b + b len / avgdl), avgdl over all)."""
        length = sum(float(p.lengths.sum()) for p in self.parts)
        if self.left_out is not None:
            length -= float(self.left_out.lengths.sum())
        avgdl = length / max(self.documents, 1)
        return [K1 * (1 - B + B * p.lengths / avgdl) for p in self.parts]


_VOCAB = Vocabulary()
_PARTS: dict[tuple[str, str], Postings] = {}


def lexical_index(catalog: Catalog) -> LexicalIndex:
    """The BM25 index of the catalog's current documents; a partition is re-read only when its documents changed."""
    parts = []
    for key, docs in catalog.current_hashes().items():
        fingerprint = hashlib.sha256(repr(docs).encode()).hexdigest()
        cached = _PARTS.get((catalog.path, key))
        if cached is None or cached.fingerprint != fingerprint:
            cached = postings(fingerprint, docs, catalog.texts_by_hash, _VOCAB, cached.texts if cached else None)
            _PARTS[(catalog.path, key)] = cached
        parts.append(cached)
    return LexicalIndex(parts, _VOCAB)
