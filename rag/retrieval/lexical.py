"""Lexical channel: BM25 over the current documents' titles and text (rag.text.analysis's tokens), exact across partitions.

bm25s scores every (document, term) pair when it indexes, so each publish cost a full rebuild: 47 s for 80K
documents, during which the first query on the new snapshot waited. Here each partition keeps a sparse matrix
of term counts, reused while its documents are unchanged, and its texts' token ids by content hash, which its next
build reuses; a query reads only the postings of its terms that can still reach its top k (rag.retrieval.lexical_top).
N, document frequencies, the mean length, the candidates and the best score that scales them are taken over the
documents the caller may read, across every partition: the scores are bm25s's (method "lucene", k1 = 1.5, b = 0.75)
for an index of those documents alone, so a document the caller may not read moves nothing the caller gets
(docs/serving-rules.md).

The next snapshot keeps a partition's parts as they are (their files linked, not written: rag.retrieval.state_files),
counts their rows of versions no longer current for nobody, and adds the versions they lack as one more part; once
a partition has MAX_PARTS parts or a fifth of its rows dead, it is counted again as one part. Statistics and scores
do not depend on how the documents are split into parts, so the results are those of one index of the current
documents.
"""
from __future__ import annotations

import hashlib
import threading
from collections import ChainMap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from rag.retrieval.lexical_top import Question, set_counts
from rag.retrieval.row_mask import RowMask, readable_sets, remember
from rag.retrieval.state_files import Arrays
from rag.retrieval.strings import Column, Strings, as_column, encoded, strings_of
from rag.store.catalog import Catalog
from rag.text.analysis import check_question, lexical_tokens
from rag.text.structure import without_markers

# Token ids, a posting's document and its count in 4 bytes each: the postings and every text's token ids are the
# read state's largest arrays (a vocabulary and a partition's documents stay far below 2^31; a count in float32 is
# exact below 2^24 and promotes to float64 in scoring, so scores are unchanged)
TOKEN, COUNT = np.int32, np.float32
# Texts read and tokenised at a time: all of them at once (80K texts at 110K sub-chunks) left the process ~5 times
# their size resident after they were freed (the allocators keep what the strings and token lists held)
TEXTS_AT_ONCE = 8192
MAX_PARTS = 8         # a partition's parts before it is counted again as one (each part is one more pass a query)
MAX_DEAD_SHARE = 0.2  # or its share of rows of versions no longer current (read by every query, then thrown away)


class Vocabulary:
    """Token → id, growing as texts are encoded."""

    def __init__(self, ids: dict[str, int] | None = None):
        self.ids: dict[str, int] = {} if ids is None else ids

    def __len__(self) -> int:
        return len(self.ids)

    def encode(self, tokens: list[str]) -> np.ndarray:
        return np.fromiter((self.ids.setdefault(t, len(self.ids)) for t in tokens), TOKEN, len(tokens))

    def known(self, tokens: list[str]) -> np.ndarray:
        return np.array([self.ids[t] for t in tokens if t in self.ids], TOKEN)

    def growable(self) -> "Vocabulary":
        return self


@dataclass(frozen=True)
class TermTable:
    """A vocabulary as arrays (mapped from a read-state file): the sorted terms and each one's id."""

    terms: Strings
    term_ids: np.ndarray

    def __len__(self) -> int:
        return len(self.terms)

    def known(self, tokens: list[str]) -> np.ndarray:
        codes = self.terms.codes(tokens)
        return self.term_ids[codes[codes >= 0]].astype(TOKEN)

    def growable(self) -> Vocabulary:
        """A vocabulary holding these ids, to encode more texts with (a past state's, the next snapshot's)."""
        return Vocabulary(dict(zip(self.terms[:], self.term_ids.tolist())))


def term_table(vocab: Vocabulary | TermTable) -> TermTable:
    if isinstance(vocab, TermTable):
        return vocab
    column = strings_of(list(vocab.ids))
    ids = np.empty(len(column.strings), dtype=TOKEN)
    ids[column.codes] = np.fromiter(vocab.ids.values(), TOKEN, len(vocab.ids))
    return TermTable(column.strings, ids)


@dataclass(frozen=True)
class TokenTexts(Mapping):
    """Content hash → the token ids of its text, as arrays (mapped from a read-state file)."""

    hashes: Strings
    offsets: np.ndarray
    tokens: np.ndarray

    def __getitem__(self, key: str) -> np.ndarray:
        code = self.hashes.code(key) if isinstance(key, str) else -1
        if code < 0:
            raise KeyError(key)
        return self.tokens[self.offsets[code]:self.offsets[code + 1]]

    def __iter__(self):
        return iter(self.hashes)

    def __len__(self) -> int:
        return len(self.hashes)


def token_texts(texts: Mapping[str, np.ndarray]) -> TokenTexts:
    if isinstance(texts, TokenTexts):
        return texts
    column = strings_of(list(texts))
    rows = list(texts.values())
    order = np.argsort(column.codes, kind="stable")
    lengths = np.array([len(rows[i]) for i in order.tolist()], dtype=np.int64)
    offsets = np.zeros(len(rows) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    tokens = np.concatenate([rows[i] for i in order.tolist()]) if rows else np.zeros(0, TOKEN)
    return TokenTexts(column.strings, offsets, tokens.astype(TOKEN))


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
    doc_ids: Sequence[str]
    counts: TermColumns
    lengths: np.ndarray
    texts: Mapping[str, np.ndarray]
    hashes: Sequence[str]  # per document, its text's content hash

    def matches(self, terms: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Every term's postings at once: their documents, counts and the term's position in `terms`."""
        at = np.flatnonzero(terms < self.counts.shape[1])
        spans = list(zip(self.counts.indptr[terms[at]].tolist(), self.counts.indptr[terms[at] + 1].tolist()))
        # a term's postings are one slice: joining the slices copies them once, where a gather through an index
        # array of every posting read them twice (the postings grow with the corpus, the terms do not)
        rows = np.concatenate([self.counts.indices[lo:hi] for lo, hi in spans] or [np.zeros(0, TOKEN)])
        tf = np.concatenate([self.counts.data[lo:hi] for lo, hi in spans] or [np.zeros(0, COUNT)])
        return rows, tf, np.repeat(at, [hi - lo for lo, hi in spans])


def postings(fingerprint: str, docs: list[tuple[str, str]], text_of, vocab: Vocabulary,
             known: Mapping[str, np.ndarray] | None = None) -> Postings:
    """Postings of (doc_id, content hash) pairs, the token ids of texts in `known` reused; `text_of(hashes)` gives
    the others' texts."""
    # Only these documents' token ids are kept: a cache of every text ever tokenised grew with each version
    # published while the process lived (the versions it replaced and their token ids stayed)
    texts = _known_texts([h for _, h in docs], known or {})
    missing = list(dict.fromkeys(h for _, h in docs if h not in texts))
    for lo in range(0, len(missing), TEXTS_AT_ONCE):
        for h, text in text_of(missing[lo:lo + TEXTS_AT_ONCE]).items():
            texts[h] = vocab.encode(lexical_tokens(without_markers(text)))   # a page marker is not a word
    rows = [texts[h] for _, h in docs]
    lengths = np.array([len(r) for r in rows], dtype=np.float64)
    cols = np.concatenate(rows) if rows else np.zeros(0, TOKEN)
    which = np.repeat(np.arange(len(rows), dtype=TOKEN), lengths.astype(np.int64))
    counts = term_columns(which, cols, (len(rows), len(vocab)))
    return Postings(fingerprint, [d for d, _ in docs], counts, lengths, texts, [h for _, h in docs])


def _known_texts(hashes: list[str], known: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The token ids `known` holds of these texts (one search for all in each mapped table of a chain)."""
    found: dict[str, np.ndarray] = {}
    for table in known.maps if isinstance(known, ChainMap) else [known]:
        if not isinstance(table, TokenTexts):
            found |= {h: table[h] for h in hashes if h in table and h not in found}
            continue
        codes = table.hashes.codes(hashes)
        at = np.flatnonzero(codes >= 0)
        lo, hi = table.offsets[codes[at]].tolist(), table.offsets[codes[at] + 1].tolist()
        found = {hashes[i]: table.tokens[a:b] for i, a, b in zip(at.tolist(), lo, hi)} | found
    return found


@dataclass(frozen=True)
class Counted:
    """Which documents of each part a caller's statistics count (kept as its readable ACL sets, nothing as long as
    the documents), how many, and their summed length."""

    masks: list[RowMask]
    documents: int
    length: float
    sets: np.ndarray  # per ACL set, whether it is counted


@dataclass
class LexicalIndex:
    """BM25 over the parts' documents; each document counts for the groups its ACL admits (acl_sets[acl_ids]), and
    for nobody with id -1 (a past state's view leaves out the versions that were not current then)."""

    parts: list[Postings]
    vocab: Vocabulary | TermTable
    acl_ids: list[np.ndarray]  # per part, per document
    acl_sets: list[frozenset[str]]
    keys: tuple[str, ...] = ()  # per part, its partition ("" in a whole workspace): what the next build reuses by
    _counted: dict = field(default_factory=dict, repr=False)
    _term_sets: dict = field(default_factory=dict, repr=False)  # a long term's documents per ACL set, per part
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def search(self, question: str, limit: int, groups: frozenset[str] | None = None) -> dict[str, float]:
        """doc_id → BM25 score scaled to [0, 1] by the best score for this question, over the documents these groups
        may read (every counted document without groups: the index's own tests and benches)."""
        terms = self.vocab.known(lexical_tokens(check_question(question)))
        counted = self.counted(groups)
        if not counted.documents or not len(terms):
            return {}
        top = sorted(Question(self, terms, counted).best(limit))[:limit]  # ties at a part's cut settled by doc id
        if not top:
            return {}
        best = -top[0][0]
        return {doc_id: -s / best for s, doc_id in top}

    def term_sets(self, part: int, term: int) -> np.ndarray:
        """The documents per ACL set holding a term of a part (lexical_top.set_counts), kept for the snapshot."""
        found = self._term_sets.get((part, term))
        if found is None:
            counts = self.parts[part].counts
            postings = counts.indices[counts.indptr[term]:counts.indptr[term + 1]]
            found = self._term_sets.setdefault((part, term), set_counts(postings, self.acl_ids[part],
                                                                        len(self.acl_sets)))
        return found

    def documents(self, groups: frozenset[str] | None = None) -> int:
        return self.counted(groups).documents

    def counted(self, groups: frozenset[str] | None) -> Counted:
        """The documents these groups may read (all counted ones for None), kept per group set."""
        found = self._counted.get(groups)
        if found is None:
            sets = np.ones(len(self.acl_sets), dtype=bool) if groups is None else readable_sets(self.acl_sets, groups)
            masks = [RowMask(np.append(sets, False), ids) for ids in self.acl_ids]  # id -1: the appended False
            whole = [np.asarray(m) for m in masks]
            # lengths are whole token counts, so their sum is exact in any order
            found = remember(self._counted, self._lock, groups, Counted(
                masks, sum(int(m.sum()) for m in whole),
                sum(float(p.lengths[m].sum()) for p, m in zip(self.parts, whole)), sets))
        return found


def acl_codes(doc_ids: list[str], acl_of: Mapping[str, tuple[str, ...]],
              sets: dict[frozenset[str], int]) -> np.ndarray:
    """Per document its ACL's number in `sets` (added when new), -1 for one without an ACL here (not current)."""
    if hasattr(acl_of, "acl_codes"):  # a read state's arrays: all at once
        return acl_of.acl_codes(doc_ids, sets)
    return np.fromiter((-1 if (acl := acl_of.get(d)) is None else sets.setdefault(frozenset(acl), len(sets))
                        for d in doc_ids), dtype=np.int32, count=len(doc_ids))


DocPairs = tuple[np.ndarray, np.ndarray]  # current documents' ids and content hashes, encoded, sorted by id


def lexical_index(catalog: Catalog, acl_of: Mapping[str, tuple[str, ...]] | None = None,
                  previous: LexicalIndex | None = None, pairs: Mapping[str, DocPairs] | None = None) -> LexicalIndex:
    """The BM25 index of the catalog's current documents (`pairs` per partition, when the caller holds them already),
    each readable under `acl_of` (doc_id → ACL; None: counted for no group, only for a search without groups); of
    `previous` (the last snapshot's), each partition's parts are kept, its versions no longer current counted for
    nobody, and the current ones they lack added as a part."""
    vocab = previous.vocab if previous is not None else Vocabulary()
    kept: dict[str, list[Postings]] = {}
    for key, part in zip(previous.keys, previous.parts) if previous is not None else ():
        kept.setdefault(key, []).append(part)
    parts, keys, live = [], [], []
    for key, (ids, hashes) in (pairs if pairs is not None else catalog_pairs(catalog)).items():
        found, alive, missing = kept_rows(kept.get(key, []), ids, hashes)
        dead = sum(int(np.count_nonzero(~a)) for a in alive)
        if len(found) + bool(len(missing)) > MAX_PARTS or dead > MAX_DEAD_SHARE * sum(map(len, alive)):
            found, alive, missing = [], [], np.arange(len(ids))
        if len(missing):
            vocab = vocab.growable()  # a mapped vocabulary is read-only: its ids, and the new texts' after them
            known = ChainMap(*(p.texts for p in kept.get(key, [])))
            docs = list(zip(Strings(ids).decode(missing), Strings(hashes).decode(missing)))
            found.append(postings(_fingerprint(docs), docs, catalog.texts_by_hash, vocab, known))
            alive.append(np.ones(len(docs), dtype=bool))
        parts += found
        keys += [key] * len(found)
        live += alive
    return index_of_parts(parts, vocab, acl_of, tuple(keys), live)


def catalog_pairs(catalog: Catalog) -> dict[str, DocPairs]:
    """The catalog's current documents' ids and content hashes per partition, encoded."""
    return {key: (encoded([d for d, _ in docs]), encoded([h for _, h in docs]))
            for key, docs in catalog.current_hashes().items()}


def kept_rows(parts: list[Postings], ids: np.ndarray, hashes: np.ndarray
              ) -> tuple[list[Postings], list[np.ndarray], np.ndarray]:
    """The parts that hold a current (doc_id, content hash) pair (`ids`, `hashes`), each with its rows that are one
    (no pair is alive twice), and the positions of the pairs none holds."""
    held, found, alive = np.zeros(len(ids), dtype=bool), [], []
    for part in parts:
        part_ids, part_hashes = as_column(part.doc_ids), as_column(part.hashes)
        width = len(part_hashes.strings) + 1
        doc, text = part_ids.strings.codes_of(ids), part_hashes.strings.codes_of(hashes)
        wanted = np.where((doc >= 0) & (text >= 0) & ~held, doc * width + text, -1)
        rows = part_ids.codes.astype(np.int64) * width + part_hashes.codes
        live = np.isin(rows, wanted)
        if live.any():
            held |= np.isin(wanted, rows[live]) & (wanted >= 0)
            found.append(part)
            alive.append(live)
    return found, alive, np.flatnonzero(~held)


def _fingerprint(docs: list[tuple[str, str]]) -> str:
    return hashlib.sha256(repr(docs).encode()).hexdigest()


def index_of_parts(parts: list[Postings], vocab: Vocabulary | TermTable,
                   acl_of: Mapping[str, tuple[str, ...]] | None, keys: tuple[str, ...] = (),
                   live: list[np.ndarray] | None = None) -> LexicalIndex:
    """An index of these parts, each document readable under its ACL in `acl_of` (None: an empty ACL for all), and
    by nobody where `live` (per part, per document) is False."""
    sets: dict[frozenset[str], int] = {}
    codes = [acl_codes(p.doc_ids, acl_of, sets) if acl_of is not None else np.zeros(len(p.doc_ids), np.int32)
             for p in parts]
    for ids, alive in zip(codes, live or ()):
        ids[~alive] = -1
    return LexicalIndex(parts, vocab, codes, list(sets) if acl_of is not None else [frozenset()], keys)


def lexical_arrays(index: LexicalIndex) -> Arrays:
    """The index as arrays for a read-state file."""
    vocab, arrays = term_table(index.vocab), {}
    arrays |= {"terms": vocab.terms.table, "term_ids": vocab.term_ids}
    for i, (part, acl_ids) in enumerate(zip(index.parts, index.acl_ids)):
        texts, ids = token_texts(part.texts), as_column(part.doc_ids)
        arrays |= {f"{i}.indptr": part.counts.indptr, f"{i}.indices": part.counts.indices,
                   f"{i}.data": part.counts.data, f"{i}.lengths": part.lengths, f"{i}.doc_codes": ids.codes,
                   f"{i}.doc_ids": ids.strings.table, f"{i}.hashes": texts.hashes.table,
                   f"{i}.offsets": texts.offsets, f"{i}.tokens": texts.tokens, f"{i}.acl_ids": acl_ids,
                   f"{i}.hash_codes": _codes_in(part.hashes, texts.hashes)}
    return Arrays(arrays, {"fingerprints": [p.fingerprint for p in index.parts], "keys": list(index.keys),
                           "shapes": [list(p.counts.shape) for p in index.parts],
                           "acl_sets": [sorted(a) for a in index.acl_sets]})


def lexical_of(found: Arrays) -> LexicalIndex:
    """The index of lexical_arrays' arrays (mapped from a file: no copy is made)."""
    parts = []
    for i, (fingerprint, shape) in enumerate(zip(found.meta["fingerprints"], found.meta["shapes"])):
        counts = TermColumns(found[f"{i}.indptr"], found[f"{i}.indices"], found[f"{i}.data"], tuple(shape))
        texts = TokenTexts(Strings(found[f"{i}.hashes"]), found[f"{i}.offsets"], found[f"{i}.tokens"])
        parts.append(Postings(fingerprint, Column(found[f"{i}.doc_codes"], Strings(found[f"{i}.doc_ids"])), counts,
                              found[f"{i}.lengths"], texts, Column(found[f"{i}.hash_codes"], texts.hashes)))
    return LexicalIndex(parts, TermTable(Strings(found["terms"]), found["term_ids"]),
                        [found[f"{i}.acl_ids"] for i in range(len(parts))],
                        [frozenset(a) for a in found.meta["acl_sets"]], tuple(found.meta["keys"]))


def _codes_in(values: Sequence[str], table: Strings) -> np.ndarray:
    """The values' codes in the table (the same array when they are a column of it: a mapped part's, kept)."""
    if isinstance(values, Column) and values.strings.table is table.table:
        return values.codes
    return table.codes(list(values)).astype(np.int32)
