"""Lexical channel: BM25 (bm25s) over the current documents' titles and text (rag.text's tokens), built once per
catalog state."""
from __future__ import annotations

from dataclasses import dataclass

import bm25s

from rag.catalog import Catalog
from rag.text import check_question, lexical_tokens


@dataclass
class LexicalIndex:
    fingerprint: tuple
    doc_ids: list[str]
    retriever: bm25s.BM25

    def search(self, question: str, limit: int) -> dict[str, float]:
        """doc_id → BM25 score scaled to [0, 1] by the best score for this question."""
        tokens = [lexical_tokens(check_question(question))]
        if not self.doc_ids or not tokens[0]:
            return {}
        ids, scores = self.retriever.retrieve(tokens, k=min(limit, len(self.doc_ids)), show_progress=False)
        top = float(scores[0][0]) if len(scores[0]) else 0.0
        if top <= 0:
            return {}
        return {self.doc_ids[i]: float(s) / top for i, s in zip(ids[0], scores[0]) if s > 0}


_CACHE: dict[str, LexicalIndex] = {}


def lexical_index(catalog: Catalog) -> LexicalIndex:
    """The BM25 index of the catalog's current documents, rebuilt exactly when the catalog changed."""
    fingerprint = catalog.documents_fingerprint()
    cached = _CACHE.get(catalog.path)
    if cached and cached.fingerprint == fingerprint:
        return cached
    rows = catalog.rows("SELECT doc_id, title || '\n' || text FROM documents WHERE status = 'current' ORDER BY doc_id")
    retriever = bm25s.BM25()
    if rows:
        retriever.index([lexical_tokens(t) for _, t in rows], show_progress=False)
    _CACHE[catalog.path] = LexicalIndex(fingerprint, [d for d, _ in rows], retriever)
    return _CACHE[catalog.path]


