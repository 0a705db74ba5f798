"""The sentence store: every current document split into sentences and tokenised once, as numpy CSR arrays.

ELITE promises no embedding index, not re-tokenising the corpus per query: the store is built from the
catalog once, reused while the catalog's current documents are unchanged, and rebuilt (re-parsing only
new versions) when a fingerprint of them changes. Permissions are never cached: every query masks the
store with the caller's groups against the ACLs read at that moment.
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

import numpy as np

from rag.retrieval.callers import Caller
from rag.store.catalog import Catalog
from rag.store.rows import CurrentText
from rag.text.analysis import is_stop, sentence_spans, term, words


class Vocabulary:
    """Terms ↔ ids; a surface word maps to its term's id, or -1 for a stop word. Ids are never reused."""

    def __init__(self):
        self.ids: dict[str, int] = {}
        self.stems: list[str] = []
        self._surface: dict[str, int] = {}

    def surface_id(self, word: str) -> int:
        tid = self._surface.get(word)
        if tid is None:
            tid = -1 if is_stop(word) else self.add(term(word))
            self._surface[word] = tid
        return tid

    def add(self, term: str) -> int:
        tid = self.ids.get(term)
        if tid is None:
            tid = self.ids[term] = len(self.stems)
            self.stems.append(term)
        return tid


@dataclass(frozen=True)
class ParsedDoc:
    """One document version's sentences (character offsets) and the term id of each content word."""

    starts: np.ndarray
    ends: np.ndarray
    sentence_of: np.ndarray      # local sentence index of each word below
    term_ids: np.ndarray
    title_ids: np.ndarray


def parse_document(title: str, text: str, vocab: Vocabulary) -> ParsedDoc:
    """Split into sentences (offsets kept) and map each content word to its term id (rag.text.analysis's analysis)."""
    offsets = sentence_spans(text)
    sentence_of, term_ids = [], []
    for i, (s, e) in enumerate(offsets):
        ids = [t for t in map(vocab.surface_id, words(text[s:e], search=True)) if t >= 0]
        term_ids += ids
        sentence_of += [i] * len(ids)
    title_ids = sorted({t for t in map(vocab.surface_id, words(title, search=True)) if t >= 0})
    arr = np.array(offsets, dtype=np.int64).reshape(-1, 2)
    return ParsedDoc(arr[:, 0].copy(), arr[:, 1].copy(), np.array(sentence_of, dtype=np.int64),
                     np.array(term_ids, dtype=np.int64), np.array(title_ids, dtype=np.int64))


@dataclass
class SentenceStore:
    """Sentences of the current documents with term → sentence postings (CSR) and sentence → terms (CSR)."""

    keys: list[tuple[str, str]]                 # (doc_id, version) per document
    titles: list[str]
    texts: list[str]
    acls: list[tuple[str, ...]]
    vocab: Vocabulary
    doc_ptr: np.ndarray                         # sentences of document d: doc_ptr[d]:doc_ptr[d+1]
    sent_doc: np.ndarray
    starts: np.ndarray
    ends: np.ndarray
    term_ptr: np.ndarray                        # postings of term t: term_sents[term_ptr[t]:term_ptr[t+1]]
    term_sents: np.ndarray
    sent_ptr: np.ndarray                        # distinct terms of sentence s: sent_terms[sent_ptr[s]:...]
    sent_terms: np.ndarray
    title_ptr: np.ndarray                       # documents whose title holds term t
    title_docs: np.ndarray
    build_seconds: float = 0.0
    fingerprint: tuple = ()
    _groups: dict[str, np.ndarray] = field(default_factory=dict, repr=False)

    @property
    def n_sentences(self) -> int:
        return len(self.starts)

    def postings(self, term_id: int) -> np.ndarray:
        return self.term_sents[self.term_ptr[term_id]:self.term_ptr[term_id + 1]]

    def title_postings(self, term_id: int) -> np.ndarray:
        return self.title_docs[self.title_ptr[term_id]:self.title_ptr[term_id + 1]]

    def sentence_text(self, s: int) -> str:
        return self.texts[self.sent_doc[s]][self.starts[s]:self.ends[s]]

    def readable(self, caller: Caller) -> np.ndarray:
        """Boolean mask over documents: the ACL (as of this store's fingerprint) admits one of the groups."""
        if not self._groups:
            by_group: dict[str, list[int]] = {}
            for d, acl in enumerate(self.acls):
                for g in acl:
                    by_group.setdefault(g, []).append(d)
            self._groups = {g: np.array(ds, dtype=np.int64) for g, ds in by_group.items()}
        mask = np.zeros(len(self.keys), dtype=bool)
        for g in caller.groups:
            if g in self._groups:
                mask[self._groups[g]] = True
        return mask


def _csr(rows: np.ndarray, cols: np.ndarray, n_rows: int) -> tuple[np.ndarray, np.ndarray]:
    """Distinct (row, col) pairs as CSR: indptr over rows and sorted column ids."""
    if len(rows) == 0:
        return np.zeros(n_rows + 1, dtype=np.int64), np.zeros(0, dtype=np.int64)
    width = int(cols.max()) + 1
    pairs = np.unique(rows * width + cols)
    r, c = np.divmod(pairs, width)
    return np.concatenate([[0], np.cumsum(np.bincount(r, minlength=n_rows))]), c


def assemble(docs: list[CurrentText], parsed: list[ParsedDoc], vocab: Vocabulary) -> SentenceStore:
    """Concatenate per-document parses into one store, in the order of `docs`."""
    counts = np.array([len(p.starts) for p in parsed], dtype=np.int64)
    doc_ptr = np.concatenate([[0], np.cumsum(counts)])
    sent_doc = np.repeat(np.arange(len(parsed)), counts)
    cat = (lambda xs: np.concatenate(xs) if xs else np.zeros(0, dtype=np.int64))
    word_sent = cat([p.sentence_of + doc_ptr[d] for d, p in enumerate(parsed)])
    word_term = cat([p.term_ids for p in parsed])
    title_doc = cat([np.full(len(p.title_ids), d, dtype=np.int64) for d, p in enumerate(parsed)])
    title_term = cat([p.title_ids for p in parsed])
    n_terms, n_sent = len(vocab.stems), int(doc_ptr[-1])
    term_ptr, term_sents = _csr(word_term, word_sent, n_terms)
    sent_ptr, sent_terms = _csr(word_sent, word_term, n_sent)
    title_ptr, title_docs = _csr(title_term, title_doc, n_terms)
    return SentenceStore(
        keys=[(d.doc_id, d.version) for d in docs], titles=[d.title for d in docs], texts=[d.text for d in docs],
        acls=[d.acl for d in docs], vocab=vocab, doc_ptr=doc_ptr, sent_doc=sent_doc,
        starts=cat([p.starts for p in parsed]), ends=cat([p.ends for p in parsed]),
        term_ptr=term_ptr, term_sents=term_sents, sent_ptr=sent_ptr, sent_terms=sent_terms,
        title_ptr=title_ptr, title_docs=title_docs)


class StoreCache:
    """One store per catalog file, rebuilt when the current documents (versions, text or ACLs) change."""

    def __init__(self):
        self._lock = threading.Lock()
        self._stores: dict[str, SentenceStore] = {}
        self._parsed: dict[str, dict[tuple, ParsedDoc]] = {}
        self._vocabs: dict[str, Vocabulary] = {}

    def get(self, catalog: Catalog) -> tuple[SentenceStore, bool]:
        """The store for the catalog's current documents, and whether this call had to (re)build it."""
        fingerprint = catalog.current_fingerprint()
        with self._lock:
            store = self._stores.get(catalog.path)
            if store is not None and store.fingerprint == fingerprint:
                return store, False
            store = self._build(catalog, fingerprint)
            self._stores[catalog.path] = store
            return store, True

    def clear(self) -> None:
        with self._lock:
            self._stores.clear()
            self._parsed.clear()
            self._vocabs.clear()

    def _build(self, catalog: Catalog, fingerprint: tuple) -> SentenceStore:
        start = time.perf_counter()
        vocab = self._vocabs.setdefault(catalog.path, Vocabulary())
        old = self._parsed.get(catalog.path, {})
        rows = catalog.current_texts()
        parsed = {}
        for r in rows:
            key = (r.doc_id, r.version, r.content_hash)
            parsed[key] = old.get(key) or parse_document(r.title or "", r.text or "", vocab)
        self._parsed[catalog.path] = parsed     # superseded and deleted versions drop out here
        store = assemble(rows, [parsed[(r.doc_id, r.version, r.content_hash)] for r in rows], vocab)
        store.fingerprint = fingerprint
        store.build_seconds = time.perf_counter() - start
        return store


STORES = StoreCache()
