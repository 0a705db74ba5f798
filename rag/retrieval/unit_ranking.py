"""A hop's units by their best member (MaxP plus the lexical channel), over numbers built once per snapshot.

A hop ranks a few hundred (unit, document) pairs, from its nearest sub-chunks and its BM25 documents; as Python
dictionaries keyed by strings that was a fifth of the hop. Here a pair is one integer: unit code × documents +
document code, where unit codes follow the keys' sorted order, so a tie on the code is a tie on the key.
"""
from __future__ import annotations

from dataclasses import dataclass
from itertools import repeat

import numpy as np

from rag.retrieval.vectors import VectorState, first_seen_codes, run_starts


@dataclass(frozen=True)
class UnitCodes:
    """Per row of the serving vectors its (unit, document) pair; per document its code and its current unit's pair."""

    unit_keys: list[str]                # sorted: a unit's code is its position
    row_pairs: np.ndarray               # per vector row, unit code × documents + document code
    doc_code: dict[str, int]            # doc_id → its code
    doc_pair: dict[str, int]            # doc_id → the pair of the unit holding its current version (when one does)
    documents: int


def unit_codes(state: VectorState, unit_of: dict[str, str]) -> UnitCodes:
    """The codes of the vector rows' units and documents and of the current documents' units."""
    keys, inverse = np.unique(np.concatenate([state.unit_keys, np.asarray(list(unit_of.values()), dtype=object)]),
                              return_inverse=True)
    inverse = inverse.reshape(-1)
    doc_code: dict[str, int] = {}
    row_docs = first_seen_codes(doc_code, state.doc_ids.tolist(), len(state))
    lexical_docs = first_seen_codes(doc_code, unit_of, len(unit_of))
    documents = max(len(doc_code), 1)
    row_units = inverse[: len(state)].astype(np.int64)
    pairs = dict(zip(unit_of, (inverse[len(state):].astype(np.int64) * documents + lexical_docs).tolist()))
    return UnitCodes(keys.tolist(), row_units * documents + row_docs, doc_code, pairs, documents)


def rank_units(codes: UnitCodes, near: np.ndarray, scores: np.ndarray, lexical: dict[str, float], weight: float,
               limit: int) -> dict[str, float]:
    """The `limit` best units (key → score) by their best pair: the best score of its nearest rows plus `weight`
    × its document's BM25 share; a BM25 document without a near row of its unit counts the weakest near row's."""
    pair_of = codes.row_pairs[near]
    found = scores[near].astype(np.float64)
    floor = float(found.min()) if len(found) else 0.0
    by_pair = np.lexsort((-found, pair_of))  # per pair, its best row first
    first = by_pair[run_starts(pair_of[by_pair])]
    pairs, best = pair_of[first], found[first]
    docs, held, lex = _lexical_codes(codes, lexical)
    dense = best + weight * at_keys(docs, lex, pairs % codes.documents, 0.0)
    extra = held[held >= 0]
    boosted = at_keys(pairs, best, extra, floor) + weight * lex[held >= 0]
    units = np.concatenate([pairs // codes.documents, extra // codes.documents])
    score = np.concatenate([dense, boosted])
    order = np.lexsort((-score, units))  # per unit, its best first
    first = order[run_starts(units[order])]
    top = first[np.lexsort((units[first], -score[first]))][:limit]
    keys = codes.unit_keys
    return {keys[u]: s for u, s in zip(units[top].tolist(), score[top].tolist())}


def _lexical_codes(codes: UnitCodes, lexical: dict[str, float]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The BM25 documents that have a code (every other has no row and no unit): their codes, their units' pairs
    (-1 without one) and their scores."""
    n = len(lexical)
    docs = np.fromiter(map(codes.doc_code.get, lexical, repeat(-1)), dtype=np.int64, count=n)
    pairs = np.fromiter(map(codes.doc_pair.get, lexical, repeat(-1)), dtype=np.int64, count=n)
    known = docs >= 0
    return docs[known], pairs[known], np.fromiter(lexical.values(), dtype=np.float64, count=n)[known]


def at_keys(keys: np.ndarray, values: np.ndarray, wanted: np.ndarray, missing: float) -> np.ndarray:
    """values[k] for each wanted key k of `keys` (distinct), `missing` for the others."""
    if not len(keys):
        return np.full(len(wanted), missing)
    order = np.argsort(keys)
    keys, values = keys[order], values[order]
    at = np.minimum(np.searchsorted(keys, wanted), len(keys) - 1)
    return np.where(keys[at] == wanted, values[at], missing)
