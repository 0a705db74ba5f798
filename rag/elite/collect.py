"""Collect: rank readable sentences by weighted word overlap with the terms, keep the top K, expand to chunks."""
from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from rag.elite.sentences import SentenceStore
from rag.text.analysis import content_terms, is_stop, mostly_han, term, words

# A capitalised word not at the start of a sentence: a name, a place, an organisation.
_ENTITY = re.compile(r"(?<![.!?:]\s)(?<![.!?:]\n)\b(?<!^)[A-Z][\w'-]*")


@dataclass(frozen=True)
class Term:
    """A search term (a stem) with where it came from: the question, breadth or depth expansion."""

    stem: str
    kind: str        # question | breadth | depth
    round: int
    weight: float = 1.0


@dataclass(frozen=True)
class Chunk:
    """Consecutive sentences first..last (global ids, inclusive) of one document around one or more hits."""

    doc: int
    first: int
    last: int
    hits: tuple[int, ...]
    score: float


def terms_from(texts: list[str], kind: str, round_: int, weight: float, known: set[str]) -> list[Term]:
    """New terms from words or short phrases (a phrase contributes its content words)."""
    out: dict[str, Term] = {}
    for text in texts:
        for s in content_terms(text):
            if s not in known and s not in out:
                out[s] = Term(s, kind, round_, weight)
    return list(out.values())


def term_weights(store: SentenceStore, sent_mask: np.ndarray, terms: list[Term], idf: bool = True) -> dict[int, float]:
    """Term id → policy weight × BM25 idf over the caller's readable sentences (never over hidden ones)."""
    ids = [(store.vocab.ids[t.stem], t.weight) for t in terms if t.stem in store.vocab.ids]
    if not ids:
        return {}
    n = int(sent_mask.sum())
    df = np.array([np.count_nonzero(sent_mask[store.postings(t)]) for t, _ in ids], dtype=float)
    rarity = np.log1p((n - df + 0.5) / (df + 0.5)) if idf else np.ones(len(df))
    return {t: w * f for (t, w), f, d in zip(ids, rarity, df) if d > 0}


def score_sentences(store: SentenceStore, sent_mask: np.ndarray, weights: dict[int, float],
                    title_weight: float = 0.0) -> np.ndarray:
    """Sum of the weights of the distinct terms each sentence holds (0 for sentences the caller may not read)."""
    scores = np.zeros(store.n_sentences)
    if not weights:
        return scores
    ids = np.fromiter(weights, dtype=np.int64)
    w = np.fromiter(weights.values(), dtype=float)
    lists = [store.postings(t) for t in ids]
    scores = np.bincount(np.concatenate(lists), weights=np.repeat(w, [len(p) for p in lists]),
                         minlength=store.n_sentences)
    if title_weight:
        # A sentence that already matches gains from its document's title ("He was born…" under "Dai Jitao").
        titles = [store.title_postings(t) for t in ids]
        per_doc = np.bincount(np.concatenate(titles), weights=np.repeat(w, [len(p) for p in titles]),
                              minlength=len(store.keys))
        scores += title_weight * per_doc[store.sent_doc] * (scores > 0)
    scores[~sent_mask] = 0.0
    return scores


def top_k(scores: np.ndarray, k: int) -> np.ndarray:
    """Ids of the k best positive scores, best first; ties go to the earlier sentence, so runs repeat exactly."""
    cand = np.flatnonzero(scores > 0)
    if len(cand) > k:
        part = cand[np.argpartition(-scores[cand], k - 1)[:k]]
        cut = scores[part].min()
        above = cand[scores[cand] > cut]
        cand = np.concatenate([above, cand[scores[cand] == cut][: k - len(above)]])
    return cand[np.lexsort((cand, -scores[cand]))]


def expand(store: SentenceStore, hits: np.ndarray, scores: np.ndarray, n: int) -> list[Chunk]:
    """±n sentences around each hit within its document, overlapping or touching windows merged; best first."""
    if len(hits) == 0:
        return []
    doc = store.sent_doc[hits]
    lo = np.maximum(store.doc_ptr[doc], hits - n)
    hi = np.minimum(store.doc_ptr[doc + 1] - 1, hits + n)
    chunks: list[list] = []
    for i in np.lexsort((lo, doc)):
        if chunks and chunks[-1][0] == doc[i] and lo[i] <= chunks[-1][2] + 1:
            chunks[-1][2] = max(chunks[-1][2], hi[i])
            chunks[-1][3].append(hits[i])
        else:
            chunks.append([doc[i], lo[i], hi[i], [hits[i]]])
    out = [Chunk(int(d), int(a), int(b), tuple(sorted(int(h) for h in hs)), float(scores[hs].max()))
           for d, a, b, hs in chunks]
    return sorted(out, key=lambda c: (-c.score, c.first))


def chunk_terms(store: SentenceStore, chunks: list[Chunk]) -> list[set[int]]:
    """Distinct term ids of each chunk's sentences."""
    return [set(store.sent_terms[store.sent_ptr[c.first]:store.sent_ptr[c.last + 1]].tolist()) for c in chunks]


def coverage(store: SentenceStore, weights: dict[int, float], chunks: list[Chunk]) -> tuple[float, float]:
    """Share of the question terms' weight present in all chunks together, and in the best single chunk."""
    total = sum(weights.values())
    if not total or not chunks:
        return 0.0, 0.0
    sets = chunk_terms(store, chunks)
    union = set().union(*sets)
    together = sum(w for t, w in weights.items() if t in union) / total
    best = max(sum(w for t, w in weights.items() if t in s) for s in sets) / total
    return float(together), float(best)


def expansion_candidates(store: SentenceStore, sent_mask: np.ndarray, chunks: list[Chunk],
                         known: set[str], limit: int) -> tuple[list[str], list[str]]:
    """Offline breadth and depth terms from what was found.

    Breadth: lower-case content words that co-occur with the terms in two or more hit sentences (related
    vocabulary), rarest first. Depth: names, entities and numbers written inside the retrieved chunks
    (things to follow), from the best chunk down, rarest first within a chunk.

    Both rules read Latin script (names are what is capitalised), so chunks mostly in Chinese offer none: there a
    capitalised word is an abbreviation or a brand, not a bridge, and following such words and co-occurring
    words cut C@1K on CMRC 2018's tuning half from 0.99 to 0.78 (bench/chinese.py reports the other half).
    """
    hit_counts: dict[str, int] = {}
    entities: dict[str, int] = {}
    for rank, c in enumerate(chunks):
        text = store.texts[c.doc][store.starts[c.first]:store.ends[c.last]]
        if mostly_han(text):
            continue
        for h in c.hits:
            for w in {w for w in words(store.sentence_text(h), search=True) if not is_stop(w)}:
                hit_counts[term(w)] = hit_counts.get(term(w), 0) + 1
        for m in _ENTITY.finditer(text):
            for s in content_terms(m.group(0)):
                entities.setdefault(s, rank)
    breadth = _linking(store, sent_mask, {s: 0 for s, n in hit_counts.items() if n >= 2 and s not in entities}, known)
    return breadth[:limit], _linking(store, sent_mask, entities, known)[:limit]


def _linking(store: SentenceStore, sent_mask: np.ndarray, stems: dict[str, int], known: set[str]) -> list[str]:
    """New stems that occur in at least two readable sentences (one alone links to nothing), by rank then rarity."""
    ranked = []
    for s, rank in stems.items():
        if s in known or s not in store.vocab.ids or len(s) < 2 or s.isdigit():
            continue
        df = np.count_nonzero(sent_mask[store.postings(store.vocab.ids[s])])
        if df >= 2:
            ranked.append((rank, df, s))
    return [s for _, _, s in sorted(ranked)]
