"""One question's BM25 top k over a lexical index's parts, reading only the postings that can still reach it (MaxScore).

A term adds less than its idf to a document's score (tf / (tf + K1 · (…)) < 1). A term in many documents ("long") is
read last: once the k-th best score of the documents found so far exceeds the summed idf of the long terms not read,
no other document can reach the top k, and those terms are only looked up for the documents found (a term's postings
are sorted by document). A long term's document frequency comes from its counts per ACL set, kept per snapshot, so a
common term is read once per snapshot rather than once per question. Every score is summed term by term in the
question's order, as one pass over all the postings sums it: the results are exactly that pass's.
"""
from __future__ import annotations

import numpy as np

from rag.retrieval.vectors import top_positions

K1, B = 1.5, 0.75
LONG_MIN = 4096  # postings from which a term is long: its statistics are kept, its postings read only when needed
LONG_SHARE = 64  # ... or a 64th of the part's documents: a part has at most 64 × (mean distinct terms) long terms


def long_from(documents: int) -> int:
    return max(LONG_MIN, documents // LONG_SHARE)


def set_counts(postings, acl_ids: np.ndarray, sets: int) -> np.ndarray:
    """The documents per ACL set (index 0: counted for nobody) of a term's postings."""
    return np.bincount(acl_ids[postings] + 1, minlength=sets + 1)


class Question:
    """One question's terms over the parts: each part's short terms read (their readable postings), the document
    frequencies of all, and the best documents per part once the statistics are known."""

    def __init__(self, index, terms: np.ndarray, counted):  # a LexicalIndex, its Counted for the caller
        self.index, self.terms, self.counted = index, terms, counted
        self.df = np.zeros(len(terms), dtype=np.int64)
        self.read: list[dict[int, tuple[np.ndarray, np.ndarray]]] = []
        self.long: list[np.ndarray] = []
        for i, (part, mask) in enumerate(zip(index.parts, counted.masks)):
            counts = part.counts
            at = np.flatnonzero(terms < counts.shape[1])
            lo, hi = counts.indptr[terms[at]], counts.indptr[terms[at] + 1]
            long = hi - lo >= long_from(len(part.doc_ids))
            read = {}
            for j, a, b in zip(at[~long].tolist(), lo[~long].tolist(), hi[~long].tolist()):
                rows = counts.indices[a:b]
                kept = mask[rows]
                read[j] = rows[kept], counts.data[a:b][kept]
                self.df[j] += len(read[j][0])
            for j, t in zip(at[long].tolist(), terms[at[long]].tolist()):
                self.df[j] += int(index.term_sets(i, t)[1:] @ counted.sets)
            self.read.append(read)
            self.long.append(at[long])
        self.idf = np.log(1 + (counted.documents - self.df + 0.5) / (self.df + 0.5))
        self.avgdl = counted.length / counted.documents

    def best(self, limit: int) -> list[tuple[float, str]]:
        """(−score, doc_id) of each part's best `limit` documents, ties at the cut kept."""
        top: list[tuple[float, str]] = []
        for i, part in enumerate(self.index.parts):
            docs, scores = self._part_scores(i, limit)
            hit = top_positions(scores, limit, 0.0)
            top += zip((-scores[hit]).tolist(), map(part.doc_ids.__getitem__, docs[hit].tolist()))
        return top

    def _part_scores(self, i: int, limit: int) -> tuple[np.ndarray, np.ndarray]:
        """The documents of part i that can enter its top `limit` (ascending), with their scores."""
        part, read, mask = self.index.parts[i], self.read[i], self.counted.masks[i]
        partial = np.zeros(len(part.doc_ids))
        for j, (rows, tf) in read.items():
            partial[rows] += self._weights(part, j, rows, tf)  # a term's rows are distinct
        # the k-th best partial score among one term's documents: at most the k-th best of all
        floor = max((_kth(partial[rows], limit) for rows, _ in read.values()), default=0.0)
        pending = sorted(self.long[i].tolist(), key=lambda j: (self.idf[j], j))  # lowest bound first
        while pending and _bound(self.idf[pending]) >= floor:
            j = pending.pop()
            rows, tf = self._postings(part, j)
            kept = mask[rows]
            read[j] = rows[kept], tf[kept]
            partial[read[j][0]] += self._weights(part, j, *read[j])
            floor = max(floor, _kth(partial[read[j][0]], limit))
        docs = np.flatnonzero(partial >= _margin(floor - _bound(self.idf[pending])))
        docs = self._narrowed(part, docs, partial[docs], pending, limit)
        scores = np.zeros(len(docs))
        for j in sorted([*read, *pending]):  # the question's order: every sum is the one pass's, to the bit
            rows, tf = read[j] if j in read else self._postings(part, j)
            at, hit = _found(rows, docs)
            scores[hit] += self._weights(part, j, docs[hit], tf[at[hit]])
        return docs, scores

    def _narrowed(self, part, docs: np.ndarray, partial: np.ndarray, pending: list[int],
                  limit: int) -> np.ndarray:
        """The documents still able to reach the k-th best once the pending terms are looked up, rarest first."""
        floor = _kth(partial, limit)
        for n in range(len(pending) - 1, -1, -1):
            rows, tf = self._postings(part, pending[n])
            at, hit = _found(rows, docs)
            partial[hit] += self._weights(part, pending[n], docs[hit], tf[at[hit]])
            kept = partial >= _margin(floor - _bound(self.idf[pending[:n]]))
            docs, partial = docs[kept], partial[kept]
            floor = max(floor, _kth(partial, limit))
        return docs

    def _weights(self, part, j: int, rows: np.ndarray, tf: np.ndarray) -> np.ndarray:
        weights = self.idf[j] * tf
        weights /= tf + K1 * (1 - B + B * part.lengths[rows] / self.avgdl)
        return weights

    def _postings(self, part, j: int) -> tuple[np.ndarray, np.ndarray]:
        counts, t = part.counts, self.terms[j]
        lo, hi = int(counts.indptr[t]), int(counts.indptr[t + 1])
        return counts.indices[lo:hi], counts.data[lo:hi]


def _kth(values: np.ndarray, k: int) -> float:
    """The k-th largest value, 0 when there are fewer."""
    if len(values) < k:
        return 0.0
    return float(np.partition(values, len(values) - k)[len(values) - k])


def _bound(idf: np.ndarray) -> float:
    """What these terms can add to a score, at most (each less than its idf), rounding allowed for."""
    return float(idf.sum()) * (1 + 1e-9)


def _margin(floor: float) -> float:
    """A floor lowered by what summing in another order can change."""
    return floor - abs(floor) * 1e-9 if floor > 0 else np.finfo(float).tiny


def _found(rows: np.ndarray, docs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Where each document lies in the (ascending) rows, and whether it is there."""
    if not len(rows):
        return np.zeros(len(docs), np.int64), np.zeros(len(docs), bool)
    at = np.minimum(np.searchsorted(rows, docs), len(rows) - 1)
    return at, rows[at] == docs
